#include "core/calibration.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

namespace ot::core {
namespace {

constexpr int kVars = 2 * kCostClasses;  // fixed and per-row weight of each class
constexpr double kFloorMs = 0.05;        // below the clock's useful resolution: read as 50 µs

// Variable v < kCostClasses is class v's fixed weight, the rest per-row weights.
void quantities(const PlanFeatures& f, double* a) {
    for (int c = 0; c < kCostClasses; c++) {
        a[c] = f.calls[c];
        a[kCostClasses + c] = f.rows[c];
    }
}
double& weight_of(CostModel& m, int v) {
    const int c = v % kCostClasses;
    return v < kCostClasses ? m.weights[c].fixed : m.weights[c].per_row;
}

std::vector<double> ranks(const double* x, std::size_t n) {
    std::vector<std::size_t> idx(n);
    std::iota(idx.begin(), idx.end(), 0);
    std::sort(idx.begin(), idx.end(), [x](std::size_t a, std::size_t b) { return x[a] < x[b]; });
    std::vector<double> r(n);
    for (std::size_t i = 0; i < n;) {
        std::size_t j = i;
        while (j + 1 < n && x[idx[j + 1]] == x[idx[i]]) j++;
        const double avg = (static_cast<double>(i) + static_cast<double>(j)) / 2.0 + 1.0;
        for (std::size_t k = i; k <= j; k++) r[idx[k]] = avg;
        i = j + 1;
    }
    return r;
}

}  // namespace

double spearman(const double* x, const double* y, std::size_t n) {
    if (n < 3) return std::numeric_limits<double>::quiet_NaN();
    const std::vector<double> rx = ranks(x, n), ry = ranks(y, n);
    const double mean = (static_cast<double>(n) + 1.0) / 2.0;
    double sxy = 0, sxx = 0, syy = 0;
    for (std::size_t i = 0; i < n; i++) {
        sxy += (rx[i] - mean) * (ry[i] - mean);
        sxx += (rx[i] - mean) * (rx[i] - mean);
        syy += (ry[i] - mean) * (ry[i] - mean);
    }
    if (sxx == 0 || syy == 0) return std::numeric_limits<double>::quiet_NaN();
    return sxy / std::sqrt(sxx * syy);
}

Calibration calibrate(const CostModel& m, const Sample* samples, std::size_t n, std::int64_t min_samples) {
    Calibration out{};
    out.fitted = m;
    out.spearman_before = out.spearman_after = out.median_ratio_after = std::numeric_limits<double>::quiet_NaN();
    std::vector<const Sample*> use;
    use.reserve(n);
    for (std::size_t i = 0; i < n; i++) {
        const Sample& s = samples[i];
        if (!(s.measured_ms >= 0) || !std::isfinite(s.measured_ms) || s.features.unpriced > 0) continue;
        bool finite = true, any = false;
        double q[kVars];
        quantities(s.features, q);
        for (int v = 0; v < kVars; v++) {
            finite &= std::isfinite(q[v]) && q[v] >= 0;
            any |= q[v] > 0;
        }
        if (finite && any) use.push_back(&s);
    }
    out.samples_used = static_cast<std::int64_t>(use.size());
    if (out.samples_used < std::max<std::int64_t>(min_samples, 1)) {
        out.problem = "too few usable samples";
        return out;
    }
    for (const Sample* s : use)
        for (int c = 0; c < kCostClasses; c++)
            if (s->features.calls[c] > 0 || s->features.rows[c] > 0) out.samples_of[c]++;
    for (int c = 0; c < kCostClasses; c++) out.fitted_class[c] = out.samples_of[c] >= min_samples;

    // Weighted normal equations G w = h, each sample weighted 1/y: between
    // absolute error (a few slow statements decide) and relative error (1/y²,
    // which pulls every estimate low, and under-pricing is the costly
    // mistake). Variables scaled to unit diagonal so that calls (~1) and rows
    // (~10⁵) converge alike.
    double G[kVars][kVars] = {}, h[kVars] = {};
    for (const Sample* s : use) {
        const double y = std::max(s->measured_ms, kFloorMs), wt = 1.0 / y;
        double a[kVars];
        quantities(s->features, a);
        for (int i = 0; i < kVars; i++) {
            if (a[i] == 0) continue;
            h[i] += wt * a[i] * y;
            for (int j = 0; j < kVars; j++) G[i][j] += wt * a[i] * a[j];
        }
    }
    bool free_var[kVars];
    double w[kVars], scale[kVars];
    for (int v = 0; v < kVars; v++) {
        const int c = v % kCostClasses;
        free_var[v] = out.fitted_class[c] && G[v][v] > 0;
        scale[v] = G[v][v] > 0 ? 1.0 / std::sqrt(G[v][v]) : 1.0;
        w[v] = weight_of(out.fitted, v) / scale[v];  // start from the input model
    }
    // Classes not fitted contribute their fixed weights: move them to the right-hand side.
    double rhs[kVars];
    for (int i = 0; i < kVars; i++) {
        rhs[i] = h[i] * scale[i];
        for (int j = 0; j < kVars; j++)
            if (!free_var[j]) rhs[i] -= G[i][j] * scale[i] * scale[j] * w[j];
    }
    // Projected coordinate descent on the scaled, convex problem.
    for (int sweep = 0; sweep < 500; sweep++) {
        double moved = 0;
        for (int i = 0; i < kVars; i++) {
            if (!free_var[i]) continue;
            double g = -rhs[i];
            for (int j = 0; j < kVars; j++)
                if (free_var[j]) g += G[i][j] * scale[i] * scale[j] * w[j];
            const double next = std::max(0.0, w[i] - g);  // diagonal is 1 after scaling
            moved = std::max(moved, std::fabs(next - w[i]));
            w[i] = next;
        }
        if (moved < 1e-12) break;
    }
    for (int v = 0; v < kVars; v++)
        if (free_var[v]) weight_of(out.fitted, v) = w[v] * scale[v];

    std::vector<double> measured(use.size()), before(use.size()), after(use.size()), ratio(use.size());
    for (std::size_t i = 0; i < use.size(); i++) {
        measured[i] = use[i]->measured_ms;
        before[i] = price_of(m, use[i]->features);
        after[i] = price_of(out.fitted, use[i]->features);
        ratio[i] = std::max(measured[i], kFloorMs) / std::max(after[i], 1e-9);
    }
    out.spearman_before = spearman(before.data(), measured.data(), use.size());
    out.spearman_after = spearman(after.data(), measured.data(), use.size());
    std::nth_element(ratio.begin(), ratio.begin() + ratio.size() / 2, ratio.end());
    out.median_ratio_after = ratio[ratio.size() / 2];
    return out;
}

}  // namespace ot::core
