// The self-calibration's fit (core/calibration.cpp) checked out of sample,
// from runs kept by run.sh (KEEP=dir, TOPLEVEL=1: results_top.tsv holds each
// query's features and its top-level time): fit on each run, price every
// other run with the fitted weights, print under-pricing and rank figures as
// analyze.py does. The same C++ the extension runs, so a change to the fit
// can be judged on many train/test pairs in a second instead of one run.
//
// build: make bench/fidelity/fitcheck
// usage: fitcheck RUN.tsv ... [-- TEST.tsv ...]: fit on each, price the others (or each TEST)
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "core/calibration.hpp"

using namespace ot::core;

namespace {

struct Query {
    std::string cls, sql;
    PlanFeatures f{};
    double ms;
};

double number(const nlohmann::json& x) { return x.is_number() ? x.get<double>() : std::nan(""); }

// Two shapes: run.sh's results_top.tsv (id, class, estimate, planner, ms, charged, features, sql)
// and throttle_samples()'s measured and features (run.sh keeps them as train_samples.tsv).
std::vector<Query> load(const char* path) {
    std::vector<Query> out;
    std::ifstream in(path);
    std::string line;
    while (std::getline(in, line)) {
        std::vector<std::string> col;
        std::stringstream ss(line);
        std::string c;
        while (col.size() < 8 && std::getline(ss, c, '\t')) col.push_back(c);
        const bool sample = col.size() == 2;
        if (!sample && col.size() < 7) continue;
        const std::string& features = sample ? col[1] : col[6];
        if (features.empty()) continue;
        Query q;
        q.cls = sample ? "sample" : col[1];
        if (col.size() > 7) q.sql = col[7].substr(0, 100);
        char* end = nullptr;
        const std::string& ms = sample ? col[0] : col[4];
        q.ms = std::strtod(ms.c_str(), &end);
        if (end == ms.c_str()) continue;  // not a number (a header, a damaged line): skipped
        const auto j = nlohmann::json::parse(features, nullptr, false);
        if (j.is_discarded() || !j.is_object()) continue;
        for (int k = 0; k < kCostClasses; k++) {
            const auto it = j.find(cost_class_name(static_cast<CostClass>(k)));
            if (it == j.end() || !it->is_array() || it->size() < 2) continue;
            q.f.calls[k] = number((*it)[0]);
            q.f.rows[k] = number((*it)[1]);
        }
        if (const auto it = j.find("unpriced"); it != j.end() && it->is_array() && !it->empty()) q.f.unpriced = number((*it)[0]);
        out.push_back(q);
    }
    return out;
}

double quantile(std::vector<double> x, double q) {
    std::sort(x.begin(), x.end());
    const double pos = q * static_cast<double>(x.size() - 1);
    const std::size_t lo = static_cast<std::size_t>(pos);
    const std::size_t hi = std::min(lo + 1, x.size() - 1);
    return x[lo] + (x[hi] - x[lo]) * (pos - static_cast<double>(lo));
}

struct Figures {
    double p95, max, rho, worst_rho;
    std::string worst_cls, worst_query;
};

Figures judge(const CostModel& m, const std::vector<Query>& qs) {
    std::vector<double> price, ms, r;
    for (const Query& q : qs) {
        price.push_back(price_of(m, q.f));
        ms.push_back(q.ms);
        r.push_back(q.ms / std::max(price.back(), 1e-9));
    }
    const double med = quantile(r, 0.5);
    for (double& x : r) x /= med;
    const std::size_t top = static_cast<std::size_t>(std::max_element(r.begin(), r.end()) - r.begin());
    Figures f{quantile(r, 0.95), r[top], spearman(price.data(), ms.data(), qs.size()), 2, "", ""};
    char what[256];
    std::snprintf(what, sizeof what, "%.2f ms for %.3f: %s", ms[top], price[top], qs[top].sql.c_str());
    f.worst_query = what;
    std::map<std::string, std::pair<std::vector<double>, std::vector<double>>> by;
    for (std::size_t i = 0; i < qs.size(); i++) by[qs[i].cls].first.push_back(price[i]), by[qs[i].cls].second.push_back(ms[i]);
    for (auto& [cls, pm] : by) {
        const double rho = spearman(pm.first.data(), pm.second.data(), pm.first.size());
        if (rho < f.worst_rho) f.worst_rho = rho, f.worst_cls = cls;
    }
    return f;
}

}  // namespace

int main(int argc, char** argv) {
    std::vector<std::string> train, test;
    bool after = false;
    for (int i = 1; i < argc; i++) {
        if (std::string(argv[i]) == "--") after = true;
        else (after ? test : train).push_back(argv[i]);
    }
    if (!after) test = train;
    if (train.empty() || test.empty()) {
        std::fprintf(stderr, "usage: fitcheck RUN.tsv ... [-- TEST.tsv ...]\n"
                             "  fits on each file before --, prices each file after it (or each other one)\n");
        return 2;
    }
    std::vector<std::vector<Query>> fits, checks;
    for (const auto& p : train) fits.push_back(load(p.c_str()));
    for (const auto& p : test) checks.push_back(load(p.c_str()));
    const CostModel base = default_cost_model();
    std::vector<double> p95s, maxes, rhos, worst;
    std::printf("| fitted on | priced | p95 | max | rho | lowest class rho |\n|---|---|---|---|---|---|\n");
    for (std::size_t a = 0; a < fits.size(); a++) {
        std::vector<Sample> samples;
        for (const Query& q : fits[a]) samples.push_back({q.f, q.ms});
        const Calibration cal = calibrate(base, samples.data(), samples.size());
        if (cal.problem) {
            std::printf("%s: %s\n", train[a].c_str(), cal.problem);
            continue;
        }
        std::printf("<!-- %s weights:", train[a].c_str());
        for (int k = 0; k < kCostClasses; k++)
            if (cal.fitted_class[k])
                std::printf(" %s %.4g/%.3g", cost_class_name(static_cast<CostClass>(k)), cal.fitted.weights[k].fixed,
                            cal.fitted.weights[k].per_row);
        std::printf(" -->\n");
        for (std::size_t b = 0; b < checks.size(); b++) {
            if (!after && a == b) continue;
            if (checks[b].size() < 3) {  // nothing to rank (an empty or unreadable file)
                std::printf("%s: %zu queries read, not priced\n", test[b].c_str(), checks[b].size());
                continue;
            }
            const Figures f = judge(cal.fitted, checks[b]);
            std::printf("| %s | %s | %.2f | %.1f | %.3f | %.3f %s |\n", train[a].c_str(), test[b].c_str(), f.p95, f.max,
                        f.rho, f.worst_rho, f.worst_cls.c_str());
            if (std::getenv("FITCHECK_WORST")) std::printf("<!-- worst: %s -->\n", f.worst_query.c_str());
            p95s.push_back(f.p95), maxes.push_back(f.max), rhos.push_back(f.rho), worst.push_back(f.worst_rho);
        }
    }
    if (p95s.empty()) return 1;
    const auto count = [](const std::vector<double>& x, auto ok) { return std::count_if(x.begin(), x.end(), ok); };
    std::printf("\n%zu pairs: p95 median %.2f, worst %.2f, <= 2 in %ld; max worst %.1f; rho min %.3f; lowest class rho "
                "median %.3f, >= 0.85 in %ld\n",
                p95s.size(), quantile(p95s, 0.5), *std::max_element(p95s.begin(), p95s.end()),
                count(p95s, [](double x) { return x <= 2; }), *std::max_element(maxes.begin(), maxes.end()),
                *std::min_element(rhos.begin(), rhos.end()), quantile(worst, 0.5),
                count(worst, [](double x) { return x >= 0.85; }));
    return 0;
}
