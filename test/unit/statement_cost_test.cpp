// The rule that combines a statement's priced calls (core/statement_cost.hpp).
#include <gtest/gtest.h>

#include <vector>

#include "core/statement_cost.hpp"

using namespace ot::core;

namespace {

PricedCall radius(double m, Box box = {0, 0, 0, 0, 0}, bool has_box = false) {
    PricedCall c{};
    c.kind = CallKind::Radius;
    c.function = "ST_DWithin";
    c.known = true;
    c.radius_m = m;
    c.zoom = -1;
    c.rows = -1;
    c.box = box;
    c.has_box = has_box;
    return c;
}

PricedCall bbox(double km2, Box box, double rows = -1) {
    PricedCall c{};
    c.kind = CallKind::Bbox;
    c.function = "&&";
    c.known = true;
    c.area_km2 = km2;
    c.zoom = -1;
    c.rows = rows;
    c.box = box;
    c.has_box = true;
    return c;
}

PricedCall tile_zoom(int z, Box box) {
    PricedCall c{};
    c.kind = CallKind::Tile;
    c.function = "ST_TileEnvelope";
    c.known = true;
    c.zoom = z;
    c.rows = -1;
    c.box = box;
    c.has_box = true;
    return c;
}

PricedCall unknown(CallKind k) {
    PricedCall c{};
    c.kind = k;
    c.function = "?";
    c.known = false;
    c.zoom = -1;
    c.rows = -1;
    return c;
}

const StatementFacts kPlain{false, kNoLimit};

}  // namespace

TEST(StatementCost, NoCallsCostNothing) {
    const CostModel m = default_cost_model();
    StatementPrice p = price_statement(m, nullptr, 0, kPlain);
    EXPECT_EQ(p.total, 0.0);
    EXPECT_EQ(p.charged_calls, 0);
}

TEST(StatementCost, OneCallCostsItsEstimate) {
    const CostModel m = default_cost_model();
    std::vector<PricedCall> c{radius(5000)};
    StatementPrice p = price_statement(m, c.data(), c.size(), kPlain);
    EXPECT_DOUBLE_EQ(p.total, estimate_radius(m, 5000).cost);
}

TEST(StatementCost, SameBoxIsChargedOnceAtTheHigherPrice) {
    const CostModel m = default_cost_model();
    const Box b{0, 0, 1000, 1000, 3857};
    std::vector<PricedCall> c{bbox(1.0, b), radius(400, b, true), bbox(1.0, b)};
    StatementPrice p = price_statement(m, c.data(), c.size(), kPlain);
    const double dearer = std::max(estimate_bbox(m, 1.0).cost, estimate_radius(m, 400).cost);
    EXPECT_DOUBLE_EQ(p.total, dearer);
    EXPECT_EQ(p.charged_calls, 1);
    EXPECT_EQ(c[1].same_as, 0);
    EXPECT_EQ(c[2].same_as, 0);
}

TEST(StatementCost, DifferentBoxesAddUp) {
    const CostModel m = default_cost_model();
    std::vector<PricedCall> c{bbox(1.0, {0, 0, 1000, 1000, 3857}), bbox(4.0, {5000, 0, 7000, 2000, 3857})};
    StatementPrice p = price_statement(m, c.data(), c.size(), kPlain);
    EXPECT_DOUBLE_EQ(p.total, estimate_bbox(m, 1.0).cost + estimate_bbox(m, 4.0).cost);
}

TEST(StatementCost, UnknownArgumentsCostCostMax) {
    const CostModel m = default_cost_model();
    for (CallKind k : {CallKind::Radius, CallKind::Bbox, CallKind::Tile}) {
        std::vector<PricedCall> c{unknown(k)};
        StatementPrice p = price_statement(m, c.data(), c.size(), kPlain);
        EXPECT_EQ(p.total, m.cost_max);
        EXPECT_GT(p.total, 0.0);
    }
}

TEST(StatementCost, TotalIsClampedAtCostMax) {
    const CostModel m = default_cost_model();
    std::vector<PricedCall> c{unknown(CallKind::Radius), radius(10)};
    StatementPrice p = price_statement(m, c.data(), c.size(), kPlain);
    EXPECT_EQ(p.total, m.cost_max);
    EXPECT_TRUE(p.clamped);
}

TEST(StatementCost, LimitCapsRows) {
    const CostModel m = default_cost_model();
    std::vector<PricedCall> c{bbox(1e6, {0, 0, 1e6, 1e6, 3857})};
    StatementPrice capped = price_statement(m, c.data(), c.size(), {false, 100});
    EXPECT_DOUBLE_EQ(capped.total, estimate_bbox(m, 1e6, 100).cost);
    StatementPrice uncapped = price_statement(m, c.data(), c.size(), kPlain);
    EXPECT_GT(uncapped.total, capped.total);
}

TEST(StatementCost, StatisticsRowsReplaceAreaTimesDensity) {
    const CostModel m = default_cost_model();
    std::vector<PricedCall> c{bbox(1e4, {0, 0, 1e5, 1e5, 3857}, 37)};
    StatementPrice p = price_statement(m, c.data(), c.size(), kPlain);
    EXPECT_DOUBLE_EQ(p.total, estimate_known_rows(m, CostClass::Bbox, 37).cost);
}

TEST(StatementCost, TileStatementsFoldTheirBoxFilters) {
    const CostModel m = default_cost_model();
    const Box tile{0, 0, 9784, 9784, 3857};
    std::vector<PricedCall> c{tile_zoom(12, tile), bbox(95.0, {0, 0, 0.09, 0.09, 4326})};
    StatementPrice p = price_statement(m, c.data(), c.size(), {true, kNoLimit});
    EXPECT_DOUBLE_EQ(p.total, estimate_tile(m, 12).cost);
    EXPECT_TRUE(c[1].folded_into_tile);
    EXPECT_EQ(c[1].cost, 0.0);
}

TEST(StatementCost, TileUsesItsFilterStatistics) {
    const CostModel m = default_cost_model();
    std::vector<PricedCall> c{tile_zoom(2, {0, 0, 1e7, 1e7, 3857}), bbox(1e8, {0, 0, 90, 80, 4326}, 1234)};
    StatementPrice p = price_statement(m, c.data(), c.size(), {true, kNoLimit});
    EXPECT_DOUBLE_EQ(p.total, estimate_known_rows(m, CostClass::Tile, 1234).cost);
    EXPECT_LT(p.total, estimate_tile(m, 2).cost);
}

TEST(StatementCost, EnvelopesOfOneTileAreOneTile) {
    const CostModel m = default_cost_model();
    // Without and with a margin: one contains the other's centre.
    std::vector<PricedCall> c{tile_zoom(12, {0, 0, 9784, 9784, 3857}), tile_zoom(12, {-150, -150, 9934, 9934, 3857})};
    StatementPrice p = price_statement(m, c.data(), c.size(), {true, kNoLimit});
    EXPECT_DOUBLE_EQ(p.total, estimate_tile(m, 12).cost);
    // Two different tiles are two tiles.
    std::vector<PricedCall> d{tile_zoom(12, {0, 0, 9784, 9784, 3857}), tile_zoom(12, {20000, 0, 29784, 9784, 3857})};
    StatementPrice q = price_statement(m, d.data(), d.size(), {true, kNoLimit});
    EXPECT_DOUBLE_EQ(q.total, 2 * estimate_tile(m, 12).cost);
}

TEST(StatementCost, SameBoxPrefersTheStatisticsPrice) {
    const CostModel m = default_cost_model();
    const Box b{0, 0, 5000, 5000, 3857};
    // ST_DWithin priced by area x density, its index condition by the planner's rows.
    std::vector<PricedCall> c{radius(2500, b, true), bbox(25.0, b, 40)};
    StatementPrice p = price_statement(m, c.data(), c.size(), kPlain);
    EXPECT_DOUBLE_EQ(p.total, estimate_known_rows(m, CostClass::Bbox, 40).cost);
    EXPECT_LT(p.total, estimate_radius(m, 2500).cost);
}

namespace {

double dot(const CostModel& m, const PlanFeatures& f) {
    double t = m.cost_max * f.unpriced;
    for (int i = 0; i < kCostClasses; i++) t += m.weights[i].fixed * f.calls[i] + m.weights[i].per_row * f.rows[i];
    return t;
}

// Weights unlike the defaults, so that a term counted in the wrong class shows.
CostModel odd_weights() {
    CostModel m = default_cost_model();
    for (int i = 0; i < kCostClasses; i++) m.weights[i] = {1.0 + i * 0.37, 0.001 * (i + 2), 0.0};
    m.cost_max = 1e9;
    return m;
}

}  // namespace

TEST(StatementFeatures, PriceIsLinearInTheWeights) {
    for (const CostModel& m : {default_cost_model(), odd_weights()}) {
        const Box b{0, 0, 1000, 1000, 3857};
        std::vector<std::vector<PricedCall>> statements{
            {radius(5000)},
            {bbox(1.0, b), radius(400, b, true), bbox(1.0, b)},
            {bbox(1.0, {0, 0, 1000, 1000, 3857}), bbox(4.0, {5000, 0, 7000, 2000, 3857}, 77)},
            {tile_zoom(12, {0, 0, 9784, 9784, 3857}), bbox(95.0, {0, 0, 0.09, 0.09, 4326}, 300)},
            {tile_zoom(3, {0, 0, 1e7, 1e7, 3857}), tile_zoom(3, {-10, -10, 1e7, 1e7, 3857})},
        };
        for (auto& s : statements) {
            for (StatementFacts f : {kPlain, StatementFacts{false, 10}, StatementFacts{true, kNoLimit}}) {
                StatementPrice p = price_statement(m, s.data(), s.size(), f);
                ASSERT_FALSE(p.clamped);
                EXPECT_NEAR(p.total, dot(m, p.features), 1e-9 * std::max(1.0, p.total));
                EXPECT_NEAR(p.total, price_of(m, p.features), 1e-9 * std::max(1.0, p.total));
            }
        }
    }
}

TEST(StatementFeatures, CountsTheChargedTerms) {
    const CostModel m = default_cost_model();
    const Box b{0, 0, 1000, 1000, 3857};
    std::vector<PricedCall> c{bbox(1.0, b, 40), radius(400, b, true)};
    StatementPrice p = price_statement(m, c.data(), c.size(), kPlain);
    EXPECT_EQ(p.features.calls[static_cast<int>(CostClass::Bbox)], 1);
    EXPECT_EQ(p.features.rows[static_cast<int>(CostClass::Bbox)], 40);
    EXPECT_EQ(p.features.calls[static_cast<int>(CostClass::Radius)], 0);
    EXPECT_EQ(p.features.unpriced, 0);
}

TEST(StatementFeatures, PlanTermsAddToTheCalls) {
    const CostModel m = odd_weights();
    StatementFacts f{false, kNoLimit};
    f.plan.calls[static_cast<int>(CostClass::Scan)] = 2;
    f.plan.rows[static_cast<int>(CostClass::Scan)] = 5000;
    f.plan.rows[static_cast<int>(CostClass::Distance)] = 700;
    std::vector<PricedCall> c{radius(5000)};
    StatementPrice p = price_statement(m, c.data(), c.size(), f);
    EXPECT_DOUBLE_EQ(p.features.rows[static_cast<int>(CostClass::Scan)], 5000);
    EXPECT_NEAR(p.total, dot(m, p.features), 1e-9 * p.total);
    EXPECT_NEAR(p.total, estimate_radius(m, 5000).cost + 2 * m.of(CostClass::Scan).fixed +
                             5000 * m.of(CostClass::Scan).per_row + 700 * m.of(CostClass::Distance).per_row,
                1e-9 * p.total);
}

TEST(StatementFeatures, UnknownTermsAreCountedApart) {
    const CostModel m = odd_weights();
    std::vector<PricedCall> c{unknown(CallKind::Radius), radius(10)};
    StatementPrice p = price_statement(m, c.data(), c.size(), kPlain);
    EXPECT_EQ(p.features.unpriced, 1);
    EXPECT_EQ(p.features.calls[static_cast<int>(CostClass::Radius)], 1);
}

TEST(StatementFeatures, NewClassesHaveNames) {
    EXPECT_STREQ(cost_class_name(CostClass::Scan), "scan");
    EXPECT_STREQ(cost_class_name(CostClass::Distance), "distance");
}

TEST(StatementFeatures, PlanWideTermsCarryTheRows) {
    const CostModel m = default_cost_model();
    PricedCall plan{};
    plan.kind = CallKind::Plan;
    plan.function = "plan";
    plan.known = true;
    plan.zoom = -1;
    plan.rows = -1;
    StatementFacts f{false, kNoLimit};
    f.plan.calls[static_cast<int>(CostClass::Scan)] = 1;
    f.plan.rows[static_cast<int>(CostClass::Scan)] = 20000;
    std::vector<PricedCall> c{bbox(1e4, {0, 0, 1e5, 1e5, 3857}, 20000), plan};
    StatementPrice p = price_statement(m, c.data(), c.size(), f);
    // The box keeps its fixed term only; the rows are the scan's.
    EXPECT_EQ(p.features.rows[static_cast<int>(CostClass::Bbox)], 0);
    EXPECT_EQ(p.features.calls[static_cast<int>(CostClass::Bbox)], 1);
    EXPECT_NEAR(p.total,
                m.of(CostClass::Bbox).fixed + m.of(CostClass::Scan).fixed + 20000 * m.of(CostClass::Scan).per_row,
                1e-9);
    EXPECT_NEAR(c[1].cost, price_of(m, f.plan), 1e-12);
}
