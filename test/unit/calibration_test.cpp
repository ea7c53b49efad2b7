// Calibration: weights fitted from (features, measured time) samples recover
// the weights that produced them, never go negative, and leave alone what the
// samples do not show.
#include <gtest/gtest.h>

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
