#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <string>

#include "gate/cells.hpp"

using ot::gate::cell_of_box;
using ot::gate::cell_of_point;
using ot::gate::cell_of_tile;
using ot::gate::CellGrid;

namespace {
const CellGrid kDeg{0.1, -1};
const CellGrid kZ10{0.1, 10};
}  // namespace

TEST(Cells, PointsInOneTenthDegreeCells) {
    EXPECT_EQ(*cell_of_point(10.05, 50.05, kDeg), *cell_of_point(10.01, 50.09, kDeg));
    EXPECT_NE(*cell_of_point(10.05, 50.05, kDeg), *cell_of_point(10.15, 50.05, kDeg));
    EXPECT_NE(*cell_of_point(10.05, 50.05, kDeg), *cell_of_point(10.05, 50.15, kDeg));
    EXPECT_FALSE(cell_of_point(NAN, 0, kDeg));
    EXPECT_FALSE(cell_of_point(0, INFINITY, kDeg));
}

TEST(Cells, LongitudesWrap) {
    EXPECT_EQ(*cell_of_point(190.05, 10, kDeg), *cell_of_point(-169.95, 10, kDeg));
    EXPECT_EQ(*cell_of_point(180.0, 10, kDeg), *cell_of_point(-180.0, 10, kDeg));
    EXPECT_EQ(*cell_of_point(-720.0 + 10.05, 10, kDeg), *cell_of_point(10.05, 10, kDeg));
}

TEST(Cells, PolesClampToTheEdgeRow) {
    EXPECT_EQ(*cell_of_point(0, 90, kDeg), *cell_of_point(0, 89.95, kDeg));
    EXPECT_EQ(*cell_of_point(0, 95, kDeg), *cell_of_point(0, 90, kDeg));
    EXPECT_EQ(*cell_of_point(0, -90, kDeg), *cell_of_point(0, -89.95, kDeg));
    // Web Mercator stops at ±85.0511°: beyond it, the edge tile row.
    EXPECT_EQ(*cell_of_point(0, 89, kZ10), *cell_of_point(0, 85.05, kZ10));
    EXPECT_EQ(*cell_of_point(0, 89, kZ10), "z10/512/0");
    EXPECT_EQ(*cell_of_point(0, -89, kZ10), "z10/512/1023");
}

TEST(Cells, BoxesAcrossTheAntimeridianCentreOnIt) {
    // 179.95..-179.95 crosses the antimeridian: the centre is at 180, not at 0.
    const auto c = cell_of_box(179.95, 10.05, -179.95, 10.15, false, kDeg);
    ASSERT_TRUE(c);
    EXPECT_EQ(*c, *cell_of_point(180.0, 10.1, kDeg));
    EXPECT_NE(*c, *cell_of_point(0.0, 10.1, kDeg));
    // A 2° box there gets the coarser cell that holds it (3.2°), still at the antimeridian.
    EXPECT_EQ(*cell_of_box(179.0, 10.0, -179.0, 10.2, false, kDeg), "d+5:0/31");
    EXPECT_EQ(*cell_of_box(179.0, 10.0, 181.0, 10.2, false, kDeg), "d+5:0/31");
}

TEST(Cells, MetreBoxesAreWebMercator) {
    // 10.05 E 50.05 N in EPSG:3857, a small box around it.
    const double x = 10.05 * 20037508.342789244 / 180.0;
    const double y = 6455958.0;  // about 50.05 N
    EXPECT_EQ(*cell_of_box(x - 100, y - 100, x + 100, y + 100, true, kDeg), *cell_of_point(10.05, 50.05, kDeg));
}

TEST(Cells, TilesAndBoxesOfOneAreaShareACell) {
    // z14 tile over Frankfurt (8.68 E, 50.11 N) and a WMS box there: one cell.
    const int z = 14;
    const double n = 1 << z;
    const auto x = static_cast<std::int64_t>((8.68 + 180.0) / 360.0 * n);
    const double r = 50.11 * 3.14159265358979323846 / 180.0;
    const auto y = static_cast<std::int64_t>((1.0 - std::log(std::tan(r) + 1.0 / std::cos(r)) / 3.14159265358979323846) / 2.0 * n);
    for (const CellGrid& g : {kDeg, kZ10}) {
        const auto tile = cell_of_tile(z, x, y, g);
        ASSERT_TRUE(tile);
        EXPECT_EQ(*tile, *cell_of_box(8.675, 50.105, 8.685, 50.115, false, g));
    }
    // A 10x10 block of z14 tiles falls in very few z10 cells (a scraper fills them).
    std::set<std::string> cells;
    for (int i = 0; i < 10; ++i)
        for (int j = 0; j < 10; ++j) cells.insert(*cell_of_tile(z, x + i, y + j, kZ10));
    EXPECT_LE(cells.size(), 4u);
}

TEST(Cells, TilesOutsideTheirMatrixHaveNoCell) {
    EXPECT_FALSE(cell_of_tile(-1, 0, 0, kDeg));
    EXPECT_FALSE(cell_of_tile(31, 0, 0, kDeg));
    EXPECT_FALSE(cell_of_tile(2, 4, 0, kDeg));
    EXPECT_FALSE(cell_of_tile(2, 0, -1, kDeg));
    // A tile larger than a cell is its own (coarser) cell: the whole world at z0.
    EXPECT_EQ(*cell_of_tile(0, 0, 0, kZ10), "z0/0/0");
    EXPECT_EQ(*cell_of_tile(3, 4, 4, kZ10), "z3/4/4");
}
