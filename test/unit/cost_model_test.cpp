// The price list: bigger requests never cost less, nothing unusable is priced,
// and the clamp holds against infinities.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "core/cost_model.hpp"

using namespace ot::core;

namespace {
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

void expect_usable(const Estimate& e) {
    EXPECT_EQ(e.problem, nullptr);
    EXPECT_TRUE(std::isfinite(e.cost));
    EXPECT_GE(e.cost, 0.0);
}
}  // namespace

TEST(CostModel, DefaultModelIsValid) {
    const CostModel m = default_cost_model();
    EXPECT_EQ(cost_model_problem(m), nullptr);
    EXPECT_STREQ(cost_class_name(CostClass::Tile), "tile");
}

TEST(CostModel, ClassListNamesEveryClass) {
    // The gate's "unknown cost class" error lists these: all of them, in order.
    EXPECT_STREQ(cost_class_list(), "bbox, radius, features, tile, map, coverage, scan, join, encode, distance, worker, function, statement, page, output");
}

TEST(CostModel, InvalidModelsAreNamed) {
    CostModel m = default_cost_model();
    m.of(CostClass::Bbox).per_row = -1;
    EXPECT_NE(cost_model_problem(m), nullptr);
    m = default_cost_model();
    m.of(CostClass::Tile).fixed = kNaN;
    EXPECT_NE(cost_model_problem(m), nullptr);
    m = default_cost_model();
    m.cost_max = 0;
    EXPECT_NE(cost_model_problem(m), nullptr);
    m = default_cost_model();
    m.density_per_km2 = kInf;
    EXPECT_NE(cost_model_problem(m), nullptr);
}

TEST(CostModel, BboxMonotonicInArea) {
    const CostModel m = default_cost_model();
    double prev = -1;
    for (double a = 0; a < 1e7; a = a * 1.7 + 0.01) {
        Estimate e = estimate_bbox(m, a);
        expect_usable(e);
        ASSERT_GE(e.cost, prev) << "area " << a;
        prev = e.cost;
    }
    EXPECT_DOUBLE_EQ(estimate_bbox(m, 0).cost, m.of(CostClass::Bbox).fixed);
}

TEST(CostModel, RadiusMonotonicInRadius) {
    const CostModel m = default_cost_model();
    double prev = -1;
    for (double r = 0; r < 1e7; r = r * 1.5 + 1) {
        Estimate e = estimate_radius(m, r);
        expect_usable(e);
        ASSERT_GE(e.cost, prev) << "radius " << r;
        prev = e.cost;
    }
    // Work grows with the searched area: doubling a small radius quadruples the rows.
    EXPECT_NEAR(estimate_radius(m, 2000).rows, 4 * estimate_radius(m, 1000).rows, 1e-9);
}

TEST(CostModel, FeaturesMonotonicInCount) {
    const CostModel m = default_cost_model();
    double prev = -1;
    for (double n = 0; n < 1e9; n = n * 2 + 1) {
        Estimate e = estimate_features(m, n);
        expect_usable(e);
        ASSERT_GE(e.cost, prev);
        prev = e.cost;
    }
}

TEST(CostModel, LowerZoomNeverCostsLess) {
    const CostModel m = default_cost_model();
    for (int z = kMaxZoom; z > 0; z--) {
        Estimate hi = estimate_tile(m, z), lo = estimate_tile(m, z - 1);
        expect_usable(hi);
        expect_usable(lo);
        EXPECT_GE(lo.cost, hi.cost) << "zoom " << z - 1 << " vs " << z;
        EXPECT_GE(lo.rows, hi.rows);
    }
    // Strictly more at the zooms where the tile is not yet capped.
    EXPECT_GT(estimate_tile(m, 14).cost, estimate_tile(m, 15).cost);
}

TEST(CostModel, ClampedAtCostMax) {
    CostModel m = default_cost_model();
    m.cost_max = 25;
    Estimate e = estimate_bbox(m, 1e9);
    EXPECT_DOUBLE_EQ(e.cost, 25);
    EXPECT_TRUE(e.clamped);
    e = estimate_bbox(m, 1);
    EXPECT_FALSE(e.clamped);
    EXPECT_LT(e.cost, 25);
    for (double r : {1e5, 1e6, 1e9}) EXPECT_LE(estimate_radius(m, r).cost, 25);
    EXPECT_DOUBLE_EQ(estimate_features(m, 1e12).cost, 25);
    EXPECT_LE(estimate_map(m, 1e5, 1e5, 1e9).cost, 25);
    EXPECT_LE(estimate_coverage(m, 1e6, 1e6).cost, 25);
    EXPECT_DOUBLE_EQ(estimate_bbox(m, kInf).cost, 25);
    EXPECT_TRUE(estimate_bbox(m, kInf).clamped);
}

TEST(CostModel, LimitCapsRows) {
    const CostModel m = default_cost_model();
    Estimate open = estimate_bbox(m, 1e4);       // 1e5 rows at the default density
    Estimate paged = estimate_bbox(m, 1e4, 100);
    EXPECT_DOUBLE_EQ(paged.rows, 100);
    EXPECT_LT(paged.cost, open.cost);
    EXPECT_DOUBLE_EQ(estimate_bbox(m, 1, 1e6).rows, estimate_bbox(m, 1).rows);  // a limit never adds rows
    EXPECT_DOUBLE_EQ(estimate_bbox(m, 1e4, 0).rows, 0);
    EXPECT_DOUBLE_EQ(estimate_radius(m, 1e5, 50).rows, 50);
    EXPECT_DOUBLE_EQ(estimate_tile(m, 0, 10).rows, 10);
    EXPECT_DOUBLE_EQ(estimate_tile(m, 0).rows, m.tile_max_rows);  // no LIMIT: the tile cap
    EXPECT_DOUBLE_EQ(estimate_bbox(m, kInf, 100).rows, 100);
}

TEST(CostModel, RejectsUnusableInput) {
    const CostModel m = default_cost_model();
    EXPECT_NE(estimate_bbox(m, kNaN).problem, nullptr);
    EXPECT_NE(estimate_bbox(m, -1).problem, nullptr);
    EXPECT_NE(estimate_bbox(m, 10, kNaN).problem, nullptr);
    EXPECT_NE(estimate_radius(m, kNaN).problem, nullptr);
    EXPECT_NE(estimate_radius(m, kInf).problem, nullptr);
    EXPECT_NE(estimate_radius(m, -kInf).problem, nullptr);
    EXPECT_NE(estimate_radius(m, -0.5).problem, nullptr);
    EXPECT_NE(estimate_radius(m, 10, kNaN).problem, nullptr);
    EXPECT_NE(estimate_features(m, kNaN).problem, nullptr);
    EXPECT_NE(estimate_features(m, kInf).problem, nullptr);
    EXPECT_NE(estimate_features(m, -1).problem, nullptr);
    EXPECT_NE(estimate_tile(m, 32).problem, nullptr);
    EXPECT_NE(estimate_tile(m, -1).problem, nullptr);
    EXPECT_NE(estimate_tile(m, 5, kNaN).problem, nullptr);
    EXPECT_EQ(estimate_tile(m, kMaxZoom).problem, nullptr);
    EXPECT_NE(estimate_map(m, 0, 256, 1).problem, nullptr);
    EXPECT_NE(estimate_map(m, kInf, 256, 1).problem, nullptr);
    EXPECT_NE(estimate_map(m, 256, 256, kNaN).problem, nullptr);
    EXPECT_NE(estimate_coverage(m, 256, -1).problem, nullptr);
    EXPECT_NE(estimate_coverage(m, kNaN, 256).problem, nullptr);
    // A failed estimate carries no price that could be mistaken for a real one.
    EXPECT_EQ(estimate_tile(m, 32).cost, 0.0);
}

TEST(CostModel, ZeroWeightsAgainstInfinityGiveNoNaN) {
    CostModel m = default_cost_model();
    for (ClassWeights& w : m.weights) w = {0, 0, 0};
    for (Estimate e : {estimate_bbox(m, kInf), estimate_map(m, 256, 256, kInf), estimate_features(m, 1e308)}) {
        EXPECT_EQ(e.problem, nullptr);
        EXPECT_FALSE(std::isnan(e.cost));
        EXPECT_DOUBLE_EQ(e.cost, 0.0);
    }
    m = default_cost_model();
    m.density_per_km2 = 0;
    Estimate e = estimate_bbox(m, kInf);
    EXPECT_FALSE(std::isnan(e.cost));
    EXPECT_FALSE(std::isnan(e.rows));
    EXPECT_DOUBLE_EQ(e.cost, m.of(CostClass::Bbox).fixed);
    // Default weights and an infinite area: the clamp, not NaN or infinity.
    e = estimate_bbox(default_cost_model(), kInf);
    EXPECT_DOUBLE_EQ(e.cost, default_cost_model().cost_max);
}

TEST(CostModel, MapAndCoverageGrowWithPixels) {
    const CostModel m = default_cost_model();
    EXPECT_LT(estimate_map(m, 256, 256, 10).cost, estimate_map(m, 1024, 1024, 10).cost);
    EXPECT_LE(estimate_map(m, 256, 256, 10).cost, estimate_map(m, 256, 256, 1000).cost);
    EXPECT_LT(estimate_coverage(m, 256, 256).cost, estimate_coverage(m, 2048, 2048).cost);
}
