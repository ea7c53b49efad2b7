// Calibration: weights fitted from (features, measured time) samples recover
// the weights that produced them, never go negative, and leave alone what the
// samples do not show.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "core/calibration.hpp"

using namespace ot::core;

namespace {

int idx(CostClass c) { return static_cast<int>(c); }

Sample make(CostClass c, double calls, double rows, double ms) {
    Sample s{};
    s.features.calls[idx(c)] = calls;
    s.features.rows[idx(c)] = rows;
    s.measured_ms = ms;
    return s;
}

// Radius searches cost 0.4 + 0.01/row, tiles 2 + 0.003/row, with ±10 % noise.
std::vector<Sample> synthetic(int n, unsigned seed) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<double> rows(0, 50000), noise(0.9, 1.1);
    std::vector<Sample> out;
    for (int i = 0; i < n; i++) {
        const double r = rows(rng);
        if (i % 2 == 0)
            out.push_back(make(CostClass::Radius, 1, r, (0.4 + 0.01 * r) * noise(rng)));
        else
            out.push_back(make(CostClass::Tile, 1, r, (2 + 0.003 * r) * noise(rng)));
    }
    return out;
}

}  // namespace

TEST(Calibration, RecoversTheWeightsThatMadeTheSamples) {
    CostModel m = default_cost_model();
    m.of(CostClass::Radius) = {5, 0.1, 0};  // far off
    m.of(CostClass::Tile) = {0, 0.0001, 0};
    const std::vector<Sample> s = synthetic(400, 7);
    const Calibration c = calibrate(m, s.data(), s.size());
    ASSERT_EQ(c.problem, nullptr);
    EXPECT_EQ(c.samples_used, 400);
    EXPECT_EQ(c.samples_of[idx(CostClass::Radius)], 200);
    EXPECT_TRUE(c.fitted_class[idx(CostClass::Tile)]);
    EXPECT_NEAR(c.fitted.of(CostClass::Radius).per_row, 0.01, 0.0015);
    EXPECT_NEAR(c.fitted.of(CostClass::Tile).per_row, 0.003, 0.0005);
    EXPECT_NEAR(c.fitted.of(CostClass::Tile).fixed, 2, 0.6);
    EXPECT_GT(c.spearman_after, 0.95);
    EXPECT_NEAR(c.median_ratio_after, 1.0, 0.1);
}

TEST(Calibration, WeightsNeverGoNegativeAndUnseenClassesKeepTheirs) {
    CostModel m = default_cost_model();
    m.of(CostClass::Bbox) = {0.7, 0.07, 0};
    std::vector<Sample> s;
    // Time falls as rows grow: least squares would want a negative per-row weight.
    for (int i = 0; i < 50; i++) s.push_back(make(CostClass::Radius, 1, i * 100.0, 10.0 - i * 0.1));
    const Calibration c = calibrate(m, s.data(), s.size());
    ASSERT_EQ(c.problem, nullptr);
    EXPECT_GE(c.fitted.of(CostClass::Radius).per_row, 0);
    EXPECT_GE(c.fitted.of(CostClass::Radius).fixed, 0);
    EXPECT_FALSE(c.fitted_class[idx(CostClass::Bbox)]);
    EXPECT_EQ(c.fitted.of(CostClass::Bbox).fixed, 0.7);
    EXPECT_EQ(c.fitted.of(CostClass::Bbox).per_row, 0.07);
}

TEST(Calibration, TooFewOrUnusableSamplesFitNothing) {
    const CostModel m = default_cost_model();
    EXPECT_NE(calibrate(m, nullptr, 0).problem, nullptr);
    std::vector<Sample> s;
    for (int i = 0; i < 100; i++) {
        Sample x = make(CostClass::Radius, 1, 10, 1);
        if (i % 3 == 0) x.features.unpriced = 1;       // a cost_max term: says nothing
        if (i % 3 == 1) x.measured_ms = std::nan("");  // garbage
        if (i % 3 == 2) x.features.rows[0] = -1;       // garbage
        s.push_back(x);
    }
    const Calibration c = calibrate(m, s.data(), s.size());
    EXPECT_NE(c.problem, nullptr);
    EXPECT_EQ(c.samples_used, 0);
    EXPECT_EQ(c.fitted.of(CostClass::Radius).per_row, m.of(CostClass::Radius).per_row);
}

TEST(Spearman, RanksWithTies) {
    const double x[] = {1, 2, 3, 4, 5}, y[] = {10, 20, 30, 40, 50}, z[] = {5, 4, 3, 2, 1}, t[] = {1, 1, 1, 1, 1};
    EXPECT_DOUBLE_EQ(spearman(x, y, 5), 1.0);
    EXPECT_DOUBLE_EQ(spearman(x, z, 5), -1.0);
    EXPECT_TRUE(std::isnan(spearman(x, t, 5)));
    EXPECT_TRUE(std::isnan(spearman(x, y, 2)));
}

// The statement class: a start-up every statement pays once and a cost per plan node. Samples of
// small scans (few rows, a fixed 0.08 ms start-up, 0.01 ms a node) fit it beside the scan class.
TEST(Calibration, FitsTheStatementStartUpAndPerNodeCost) {
    CostModel m = default_cost_model();
    m.of(CostClass::Statement) = {0, 0, 0};
    std::mt19937 rng(3);
    std::uniform_real_distribution<double> rows(0, 2000), noise(0.95, 1.05);
    std::uniform_int_distribution<int> nodes(1, 8);
    std::vector<Sample> s;
    for (int i = 0; i < 300; i++) {
        Sample x{};
        const double r = rows(rng);
        const int k = nodes(rng);
        x.features.calls[idx(CostClass::Scan)] = 1;
        x.features.rows[idx(CostClass::Scan)] = r;
        x.features.calls[idx(CostClass::Statement)] = 1;
        x.features.rows[idx(CostClass::Statement)] = k;
        x.measured_ms = (0.08 + 0.01 * k + 0.0002 * r) * noise(rng);
        s.push_back(x);
    }
    // Statement and scan fixed terms are both once a statement: only their sum is determined.
    m.of(CostClass::Scan).fixed = 0;
    const Calibration c = calibrate(m, s.data(), s.size());
    ASSERT_EQ(c.problem, nullptr);
    EXPECT_TRUE(c.fitted_class[idx(CostClass::Statement)]);
    EXPECT_EQ(c.samples_of[idx(CostClass::Statement)], 300);
    EXPECT_NEAR(c.fitted.of(CostClass::Statement).fixed + c.fitted.of(CostClass::Scan).fixed, 0.08, 0.012);
    EXPECT_NEAR(c.fitted.of(CostClass::Statement).per_row, 0.01, 0.002);
    EXPECT_NEAR(c.fitted.of(CostClass::Scan).per_row, 0.0002, 0.00003);
    EXPECT_NEAR(c.median_ratio_after, 1.0, 0.05);
}

// Where the linear form cannot fit every statement (here a scan's time grows as rows^0.7, and a
// third of the statements also compute a distance per row), least squares lets the mid-sized
// statements sit 1.5-2x under their median measured / price; the tail stage trades that for a
// little accuracy elsewhere. Least squares alone: p95 1.53, max 1.9 on this data.
TEST(Calibration, TheTailStageBoundsTheUnderPricedStatements) {
    std::mt19937 rng(5);
    std::uniform_real_distribution<double> log_rows(std::log(10.0), std::log(200000.0)), noise(0.9, 1.1);
    std::uniform_int_distribution<int> nodes(1, 6);
    std::vector<Sample> s;
    for (int i = 0; i < 300; i++) {
        Sample x{};
        const double r = std::exp(log_rows(rng));
        const int k = nodes(rng);
        x.features.calls[idx(CostClass::Statement)] = 1;
        x.features.rows[idx(CostClass::Statement)] = k;
        x.features.calls[idx(CostClass::Scan)] = 1;
        x.features.rows[idx(CostClass::Scan)] = r;
        if (i % 3 == 0) x.features.rows[idx(CostClass::Distance)] = r;
        x.measured_ms = (0.05 + 0.01 * k + 0.0004 * std::pow(r, 0.7) * (i % 3 == 0 ? 2.5 : 1)) * noise(rng);
        s.push_back(x);
    }
    const Calibration c = calibrate(default_cost_model(), s.data(), s.size());
    ASSERT_EQ(c.problem, nullptr);
    std::vector<double> u;
    for (const Sample& x : s) u.push_back(x.measured_ms / price_of(c.fitted, x.features));
    std::sort(u.begin(), u.end());
    const double median = u[u.size() / 2];
    EXPECT_LE(u[static_cast<std::size_t>(0.95 * static_cast<double>(u.size() - 1))] / median, 1.3);
    EXPECT_LE(u.back() / median, 1.4);
    EXPECT_GT(c.spearman_after, 0.98);
    EXPECT_NEAR(c.median_ratio_after, 1.0, 0.15);  // the level is least squares'
}

// Samples of test/pg/calibration.t.sh (radius searches over 200 000 points, kept from one run: scan
// rows, pages, plan nodes, measured ms; join and distance rows are 0.8 and 0.2 of the scan's). Every
// statement is large, so the fixed terms hardly matter, and the tail's search, blind to the level,
// once let them drift to 1e-9 and left the fit 2-25x above what statements take.
struct Kept {
    double rows, pages, nodes, ms;
};
const Kept kKept[] = {
    {1618,1035,3,3.11}, {6031,1622,3,8.299}, {9361,1661,3,7.434}, {9273,1661,3,6.464}, {1.423e+04,1667,3,9.807}, {2.332e+04,1667,2,110.2},
    {1.82e+04,1667,3,11.74}, {2.295e+04,1667,2,65.96}, {1556,1012,3,1.25}, {2035,1175,3,1.746}, {6074,1623,3,5.727}, {8191,1655,3,6.218},
    {1.283e+04,1666,3,9.094}, {1.43e+04,1667,3,9.902}, {1.908e+04,1667,3,10.22}, {1.776e+04,1667,3,9.949}, {2.521e+04,1667,2,61.82}, {598,502.5,3,0.6045},
    {2397,1271,3,1.54}, {4065,1521,3,5.468}, {4842,1576,3,5.313}, {9933,1663,3,7.515}, {1.626e+04,1667,3,9.877}, {2.21e+04,1667,2,58.94},
    {2.727e+04,1667,2,63}, {2.682e+04,1667,2,62.63}, {736,595,3,0.5803}, {2286,1244,3,1.371}, {4153,1529,3,5.243}, {5841,1617,3,5.264},
    {8927,1659,3,6.457}, {1.576e+04,1667,3,8.841}, {1.357e+04,1667,3,8.256}, {2.166e+04,1667,2,74.9}, {2.96e+04,1667,2,75.75}, {529,453.3,3,0.4512},
    {2920,1378,3,1.929}, {4455,1552,3,5.436}, {7394,1647,3,7.181}, {1.28e+04,1666,3,8.326}, {1.924e+04,1667,3,10.24}, {2.472e+04,1667,2,75.77},
    {1.776e+04,1667,3,9.799}, {2.275e+04,1667,2,71.36}, {615,514.3,3,0.6708}, {3519,1465,3,2.106}, {4426,1550,3,6.639}, {8713,1658,3,10.62},
    {8511,1657,3,7.748}, {1.365e+04,1667,3,9.049}, {1.406e+04,1667,3,9.201}, {2.057e+04,1667,2,88}, {2.109e+04,1667,2,86.53}, {1469,976.4,3,1.853},
    {3206,1423,3,3.524}, {4538,1557,3,8.996}, {7180,1645,3,9.387}, {1.271e+04,1666,3,13.4}, {1.194e+04,1666,3,9.832}, {2.209e+04,1667,2,74.5},
    {1.901e+04,1667,3,15.15}, {2.041e+04,1667,2,90.01}, {433,381.3,3,0.8828}, {2106,1196,3,2.809}, {2485,1292,3,3.087}, {6411,1631,3,9.728},
    {1.048e+04,1664,3,12.15}, {1.936e+04,1667,3,16.38}, {1.52e+04,1667,3,14.73}, {1.734e+04,1667,3,15.66}, {2.61e+04,1667,2,96.74}, {844,662.3,3,1.229},
    {1942,1147,3,2.229}, {3384,1448,3,3.126}, {7362,1647,3,10.08}, {1.298e+04,1666,3,11.8}, {1.396e+04,1667,3,12.12}, {1.979e+04,1667,3,14.45},
    {2.376e+04,1667,2,88.29}, {3.095e+04,1667,2,102.7}, {420,371.3,3,0.7972}, {3206,1423,3,3.961}, {4428,1550,3,8.393}, {5907,1619,3,10.25},
    {1.269e+04,1666,3,13.12}, {1.4e+04,1667,3,13.64}, {1.827e+04,1667,3,16.62}, {1.855e+04,1667,3,16.18}, {2.422e+04,1667,2,70.97}, {454,397.4,3,0.4392},
    {2053,1181,3,2.498}, {3264,1432,3,3.843}, {8612,1657,3,11.1}, {1.422e+04,1667,3,13.8}, {1.239e+04,1666,3,9.173}, {2.144e+04,1667,2,88.19},
    {1.652e+04,1667,3,15.02}, {2.834e+04,1667,2,78.42}, {1146,828.7,3,1.532}, {1981,1159,3,2.327}, {4330,1543,3,8.052}, {5628,1610,3,8.856},
    {1.133e+04,1665,3,12.16}, {1.01e+04,1663,3,9.628}, {1.717e+04,1667,3,12.95}, {2.242e+04,1667,2,92.01}, {2.928e+04,1667,2,101.6}, {618,516.4,3,0.9456},
    {1884,1129,3,2.69}, {4288,1540,3,9.14}, {5286,1597,3,9.19}, {9068,1660,3,10.84}, {1.107e+04,1665,3,11.77}, {1.827e+04,1667,3,16.86},
    {2.269e+04,1667,2,100.2}, {2.892e+04,1667,2,101.5}, {979,740.4,3,1.498}, {2430,1279,3,3.021}, {4330,1543,3,8.508}, {6495,1633,3,10.15},
    {9030,1660,3,11.63}, {8954,1659,3,10.35}, {2.413e+04,1667,2,88.72}, {1.817e+04,1667,3,16.77}, {2.783e+04,1667,2,90.74}, {545,464.9,3,0.848},
    {2967,1386,3,3.164}, {6346,1630,3,7.764}, {7801,1652,3,8.776}, {1.211e+04,1666,3,13.46}, {1.688e+04,1667,3,15.81}, {1.789e+04,1667,3,15.95},
    {1.499e+04,1667,3,14.52}, {3.632e+04,1667,2,127.7}, {580,489.9,3,0.5544}, {2489,1292,3,1.72}, {2795,1355,3,1.892}, {5040,1586,3,5.741},
    {1.041e+04,1664,3,7.373}, {1.198e+04,1666,3,9.379}, {1.626e+04,1667,3,14.94}, {2.644e+04,1667,2,89.17}, {3.651e+04,1667,2,85.62}, {1235,872.3,3,1.479},
    {3123,1411,3,3.708}, {3968,1513,3,7.774}, {6830,1639,3,9.963}, {1.046e+04,1664,3,11.88}, {1.519e+04,1667,3,17.4}, {1.406e+04,1667,3,12.88},
};

TEST(Calibration, TheTailStageKeepsTheLeastSquaresLevel) {
    std::vector<Sample> s;
    for (const Kept& k : kKept) {
        Sample x{};
        x.features.calls[idx(CostClass::Bbox)] = 1;
        x.features.calls[idx(CostClass::Scan)] = 1;
        x.features.rows[idx(CostClass::Scan)] = k.rows;
        x.features.rows[idx(CostClass::Join)] = 0.8 * k.rows;
        x.features.rows[idx(CostClass::Distance)] = 0.2 * k.rows;
        x.features.calls[idx(CostClass::Statement)] = 1;
        x.features.rows[idx(CostClass::Statement)] = k.nodes;
        x.features.rows[idx(CostClass::Page)] = k.pages;
        x.measured_ms = k.ms;
        s.push_back(x);
    }
    const Calibration c = calibrate(default_cost_model(), s.data(), s.size());
    ASSERT_EQ(c.problem, nullptr);
    EXPECT_NEAR(c.median_ratio_after, 1.0, 0.2);
    for (int v = 0; v < kCostClasses; v++) {
        EXPECT_GE(c.fitted.weights[v].fixed, 0);
        EXPECT_GE(c.fitted.weights[v].per_row, 0);
    }
}

// The fit is the mean of fits to resamples of the samples: drawn the same way for the same samples,
// so a refit of an unchanged store gives the same weights.
TEST(Calibration, ResampledFitsAreRepeatable) {
    const std::vector<Sample> s = synthetic(300, 11);
    const Calibration a = calibrate(default_cost_model(), s.data(), s.size());
    const Calibration b = calibrate(default_cost_model(), s.data(), s.size());
    ASSERT_EQ(a.problem, nullptr);
    for (int c = 0; c < kCostClasses; c++) {
        EXPECT_EQ(a.fitted.weights[c].fixed, b.fitted.weights[c].fixed);
        EXPECT_EQ(a.fitted.weights[c].per_row, b.fitted.weights[c].per_row);
    }
    EXPECT_NEAR(a.fitted.of(CostClass::Radius).per_row, 0.01, 0.0015);
}
