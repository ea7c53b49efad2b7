// The density grid (core/density_grid.hpp).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <utility>
#include <cstring>
#include <random>
#include <set>
#include <vector>

#include "core/density_grid.hpp"
#include "core/density_grid_format.hpp"

using namespace ot::core;

namespace {

struct Layer {
    std::vector<double> x, y;
};

// A dense city (10 000 points within ~0.01 of (10, 50)) and 1 000 uniform points.
Layer city_and_background() {
    Layer l;
    std::mt19937 g(3);
    std::normal_distribution<double> n(0, 0.01);
    std::uniform_real_distribution<double> u(-180, 180), v(-90, 90);
    for (int i = 0; i < 10000; i++) l.x.push_back(10 + n(g)), l.y.push_back(50 + n(g));
    for (int i = 0; i < 1000; i++) l.x.push_back(u(g)), l.y.push_back(v(g));
    return l;
}

// Heap blocks of 40 rows each, in the order the rows were loaded.
std::vector<std::uint32_t> blocks_of_forty(std::size_t n) {
    std::vector<std::uint32_t> blocks(n);
    for (std::size_t i = 0; i < n; i++) blocks[i] = static_cast<std::uint32_t>(i / 40);
    return blocks;
}

double exact(const Layer& l, double x0, double y0, double x1, double y1) {
    double n = 0;
    for (size_t i = 0; i < l.x.size(); i++) n += l.x[i] >= x0 && l.x[i] <= x1 && l.y[i] >= y0 && l.y[i] <= y1;
    return n;
}

}  // namespace

// The queries' powers of two are std::ldexp's, to the bit, over the whole range of exponents.
TEST(DensityGrid, PowersOfTwoAreLdexps) {
    for (int n = -1022; n <= 1023; n++) {
        const double a = grid::pow2(n), b = std::ldexp(1.0, n);
        EXPECT_EQ(std::memcmp(&a, &b, sizeof a), 0) << n;
    }
}

TEST(DensityGrid, WholeExtentIsEveryRow) {
    Layer l = city_and_background();
    auto g = build_density_grid(l.x.data(), l.y.data(), l.x.size(), {-180, -90, 180, 90});
    EXPECT_DOUBLE_EQ(density_total(g.data(), g.size()), 11000);
    EXPECT_NEAR(density_rows(g.data(), g.size(), -180, -90, 180, 90), 11000, 1e-6);
    EXPECT_GT(density_cells(g.data(), g.size()), 10);
}

TEST(DensityGrid, ResolvesSmallDenseAreas) {
    Layer l = city_and_background();
    auto g = build_density_grid(l.x.data(), l.y.data(), l.x.size(), {-180, -90, 180, 90});
    // Boxes from ~20 m to ~50 km in the city, and the same far away from it.
    for (double half : {0.0002, 0.001, 0.005, 0.02, 0.2}) {
        const double want = exact(l, 10 - half, 50 - half, 10 + half, 50 + half);
        const double got = density_rows(g.data(), g.size(), 10 - half, 50 - half, 10 + half, 50 + half);
        EXPECT_NEAR(got, want, std::max(5.0, 0.35 * want)) << "half side " << half;
        const double far = density_rows(g.data(), g.size(), 100 - half, -20 - half, 100 + half, -20 + half);
        EXPECT_LT(far, 5.0) << "half side " << half;
    }
}

TEST(DensityGrid, RejectsWhatIsNotAGrid) {
    unsigned char junk[300] = {1, 2, 3};
    EXPECT_LT(density_rows(junk, sizeof junk, 0, 0, 1, 1), 0);
    EXPECT_LT(density_rows(nullptr, 0, 0, 0, 1, 1), 0);
    Layer l = city_and_background();
    auto g = build_density_grid(l.x.data(), l.y.data(), l.x.size(), {-180, -90, 180, 90});
    EXPECT_LT(density_rows(g.data(), g.size() - 1, 0, 0, 1, 1), 0);  // truncated
}

TEST(DensityGrid, EmptyLayerAndOutsideBoxes) {
    auto g = build_density_grid(nullptr, nullptr, 0, {0, 0, 1, 1});
    EXPECT_EQ(density_rows(g.data(), g.size(), 0, 0, 1, 1), 0);
    Layer l = city_and_background();
    auto h = build_density_grid(l.x.data(), l.y.data(), l.x.size(), {-180, -90, 180, 90});
    EXPECT_EQ(density_rows(h.data(), h.size(), 200, 0, 210, 10), 0);
    EXPECT_EQ(density_rows(h.data(), h.size(), 10, 10, 5, 5), 0);  // inverted
}

TEST(DensityGrid, AroundItsOwnRowsSeesTheCrowd) {
    Layer l = city_and_background();
    auto g = build_density_grid(l.x.data(), l.y.data(), l.x.size(), {-180, -90, 180, 90});
    // A 0.002-wide box around a random row: ~10/11 of rows are in the city,
    // where such a box holds roughly 10000 * (0.002 / (2.5 * 0.01))^2 ≈ 64 rows.
    const double around = density_rows_around(g.data(), g.size(), 0.002, 0.002);
    EXPECT_GT(around, 15);
    EXPECT_LT(around, 200);
    // The layer's average density would say ~0.
    EXPECT_LT(11000 * 0.002 * 0.002 / (360 * 180), 0.01);
}

TEST(DensityGrid, DenseQuantileIsAtLeastTheMean) {
    Layer l = city_and_background();
    auto g = build_density_grid(l.x.data(), l.y.data(), l.x.size(), {-180, -90, 180, 90});
    const double mean = density_rows_around(g.data(), g.size(), 0.002, 0.002);
    const double dense = density_rows_around_dense(g.data(), g.size(), 0.002, 0.002, 0.9);
    EXPECT_GE(dense, mean * 0.9);
    EXPECT_LT(dense, 10000);
    EXPECT_LE(density_rows_around_dense(g.data(), g.size(), 0.002, 0.002, 0.5), dense);
}

TEST(DensityGrid, ProbeSizeIsAreaWeightedAndAtLeastTheMean) {
    Layer l = city_and_background();
    // 99 small boxes of 0.01 and one of 1.0: mean 0.0199, area-weighted sqrt(E[w·h]) ≈ 0.1.
    auto g = build_density_grid(l.x.data(), l.y.data(), l.x.size(), {-180, -90, 180, 90}, 20, 32, 0.0199, 0.0199,
                                0.1, 0.1);
    double mw, mh, pw, ph;
    ASSERT_TRUE(density_mean_size(g.data(), g.size(), &mw, &mh));
    ASSERT_TRUE(density_probe_size(g.data(), g.size(), &pw, &ph));
    EXPECT_DOUBLE_EQ(mw, 0.0199);
    EXPECT_DOUBLE_EQ(pw, 0.1);
    EXPECT_DOUBLE_EQ(ph, 0.1);
    // Not given (or below the mean, or not finite): the mean.
    auto h = build_density_grid(l.x.data(), l.y.data(), l.x.size(), {-180, -90, 180, 90}, 20, 32, 0.02, 0.03, 0.01,
                                std::nan(""));
    ASSERT_TRUE(density_probe_size(h.data(), h.size(), &pw, &ph));
    EXPECT_DOUBLE_EQ(pw, 0.02);
    EXPECT_DOUBLE_EQ(ph, 0.03);
    EXPECT_FALSE(density_probe_size(nullptr, 0, &pw, &ph));
}

namespace {

// The format-4 blob of a format-5 one: per level, the keys, counts, first children and blocks each in an
// array of its own, 20 bytes a cell; "reserved" (now has_self_sum) 0.
std::vector<unsigned char> as_format_four(const std::vector<unsigned char>& g) {
    grid::View v;
    EXPECT_TRUE(grid::open(g.data(), g.size(), &v));
    grid::Header h = v.h;
    h.version = 4;
    h.has_self_sum = 0;
    std::vector<unsigned char> out(sizeof h);
    std::memcpy(out.data(), &h, sizeof h);
    auto put = [&out](const void* p, std::size_t n) {
        out.insert(out.end(), static_cast<const unsigned char*>(p), static_cast<const unsigned char*>(p) + n);
    };
    for (std::uint32_t l = 0; l <= h.levels; l++) {
        for (std::size_t i = 0; i < h.ncells[l]; i++) {
            const std::uint64_t k = grid::key_of(v, l, i);
            put(&k, 8);
        }
        for (auto field : {&grid::Cell::count, &grid::Cell::first_child, &grid::Cell::blocks})
            for (std::size_t i = 0; i < h.ncells[l]; i++) {
                const grid::Cell c = grid::cell_at(v.cells[l], i);
                put(&(c.*field), 4);
            }
    }
    return out;
}

// The format-3 blob of a format-4 one: the header up to the self sums, 12 bytes a cell.
std::vector<unsigned char> as_format_three(const std::vector<unsigned char>& g) {
    const std::size_t v3_header = 4 * 4 + 7 * 8 + 4 * (kDensityMaxLevels + 1) + 4 + 16;  // 176 + 16
    const std::size_t v4_header = v3_header + 8 * (kDensityMaxLevels + 1) + 8;
    std::uint32_t levels, ncells[kDensityMaxLevels + 1];
    std::memcpy(&levels, &g[8], 4);
    std::memcpy(ncells, &g[4 * 4 + 7 * 8], sizeof ncells);
    std::vector<unsigned char> v3(g.begin(), g.begin() + v3_header);
    std::size_t off = v4_header;
    for (std::uint32_t l = 0; l <= levels; l++) {
        v3.insert(v3.end(), g.begin() + off, g.begin() + off + 12 * ncells[l]);
        off += 20 * ncells[l];
    }
    const std::uint32_t three = 3;
    std::memcpy(&v3[4], &three, 4);
    return v3;
}

std::vector<unsigned char> upgraded(const std::vector<unsigned char>& old) {
    std::vector<unsigned char> out(density_grid_upgraded_bytes(old.data(), old.size()));
    EXPECT_FALSE(out.empty());
    EXPECT_TRUE(upgrade_density_grid(old.data(), old.size(), out.data(), out.size()));
    return out;
}

// A layer whose densest cells reach below level 16, where a cell's key no longer fits its 32 bits.
Layer deep_city() {
    Layer l;
    std::mt19937 g(5);
    std::normal_distribution<double> n(0, 0.0005);
    for (int i = 0; i < 20000; i++) l.x.push_back(10 + n(g)), l.y.push_back(50 + n(g));
    return l;
}

}  // namespace

TEST(DensityGrid, FormatFourIsRewrittenByteForByte) {
    // A format-4 blob (what tables hold from before format 5) upgraded is the format-5 build itself,
    // keys below level 16 (rebuilt from their parents) included.
    for (Layer l : {city_and_background(), deep_city()}) {
        const std::vector<std::uint32_t> blocks = blocks_of_forty(l.x.size());
        auto g = build_density_grid(l.x.data(), l.y.data(), l.x.size(), {-180, -90, 180, 90}, 20, 32, 0.01, 0.01,
                                    0.02, 0.02, blocks.data());
        grid::View v;
        ASSERT_TRUE(grid::open(g.data(), g.size(), &v));
        EXPECT_GT(v.h.ncells[18], 0u);
        auto v4 = as_format_four(g);
        EXPECT_LT(density_rows(v4.data(), v4.size(), 0, 0, 1, 1), 0);  // not read as it is
        EXPECT_EQ(upgraded(v4), g);
        // Format 5 itself, or junk, is no older grid.
        EXPECT_EQ(density_grid_upgraded_bytes(g.data(), g.size()), 0u);
        EXPECT_EQ(density_grid_upgraded_bytes(v4.data(), v4.size() - 1), 0u);
    }
}

TEST(DensityGrid, DeepKeysAreTheirParentsShifted) {
    Layer l = deep_city();
    auto g = build_density_grid(l.x.data(), l.y.data(), l.x.size(), {-180, -90, 180, 90});
    grid::View v;
    ASSERT_TRUE(grid::open(g.data(), g.size(), &v));
    // Every stored cell's key is its position: the cell holds rows whose finest cell it contains.
    const double side = std::ldexp(1.0, 20);
    std::set<std::uint64_t> finest;
    for (std::size_t i = 0; i < l.x.size(); i++) {
        const auto cx = static_cast<std::uint32_t>((l.x[i] + 180) / 360 * side);
        const auto cy = static_cast<std::uint32_t>((l.y[i] + 90) / 180 * side);
        finest.insert(grid::morton(cx, cy));
    }
    for (std::uint32_t lv = 17; lv <= v.h.levels; lv++)
        for (std::size_t i = 0; i < v.h.ncells[lv]; i++) {
            const std::uint64_t k = grid::key_of(v, lv, i);
            const int shift = 2 * (20 - static_cast<int>(lv));
            auto it = finest.lower_bound(k << shift);
            ASSERT_TRUE(it != finest.end() && (*it >> shift) == k) << "level " << lv << " cell " << i;
        }
}

TEST(DensityGrid, ReadsFormatTwoAndThreeBlobs) {
    // Format 3 had no first-child index nor block counts; format 2 also ended before the probe size.
    // Both still answer once upgraded (children found by search), the same rows; without blocks, no pages.
    Layer l = city_and_background();
    auto g = build_density_grid(l.x.data(), l.y.data(), l.x.size(), {-180, -90, 180, 90}, 20, 32, 0.02, 0.02, 0.5,
                                0.5);
    const double rows = density_rows(g.data(), g.size(), 9.9, 49.9, 10.1, 50.1);
    const auto raw3 = as_format_three(as_format_four(g));
    EXPECT_LT(density_rows(raw3.data(), raw3.size(), 9.9, 49.9, 10.1, 50.1), 0);  // upgraded first
    auto v3 = upgraded(raw3);
    EXPECT_DOUBLE_EQ(density_rows(v3.data(), v3.size(), 9.9, 49.9, 10.1, 50.1), rows);
    EXPECT_DOUBLE_EQ(density_rows_around(v3.data(), v3.size(), 0.002, 0.003),
                     density_rows_around(g.data(), g.size(), 0.002, 0.003));
    EXPECT_DOUBLE_EQ(density_rows_around_dense(v3.data(), v3.size(), 0.002, 0.003, 0.9),
                     density_rows_around_dense(g.data(), g.size(), 0.002, 0.003, 0.9));
    double pages;
    EXPECT_DOUBLE_EQ(density_rows_pages(v3.data(), v3.size(), 9.9, 49.9, 10.1, 50.1, &pages), rows);
    EXPECT_LT(pages, 0);
    const std::size_t v2_header = 4 * 4 + 7 * 8 + 4 * (kDensityMaxLevels + 1) + 4;  // 172, padded to 176
    std::vector<unsigned char> raw2(raw3.begin(), raw3.begin() + v2_header);
    raw2.insert(raw2.end(), raw3.begin() + v2_header + 16, raw3.end());
    const std::uint32_t two = 2;
    std::memcpy(&raw2[4], &two, 4);
    auto v2 = upgraded(raw2);
    EXPECT_DOUBLE_EQ(density_rows(v2.data(), v2.size(), 9.9, 49.9, 10.1, 50.1), rows);
    double pw, ph;
    ASSERT_TRUE(density_probe_size(v2.data(), v2.size(), &pw, &ph));
    EXPECT_DOUBLE_EQ(pw, 0.02);
    // An unknown version is not a grid, nor an older one.
    const std::uint32_t nine = 9;
    std::memcpy(&raw2[4], &nine, 4);
    EXPECT_EQ(density_grid_upgraded_bytes(raw2.data(), raw2.size()), 0u);
    std::memcpy(&g[4], &nine, 4);
    EXPECT_LT(density_rows(g.data(), g.size(), 9.9, 49.9, 10.1, 50.1), 0);
}

TEST(DensityGrid, BoxesAreTheSumOfTheirParts) {
    // Two halves of a box hold the box's rows, at every scale (the descent adds whole cells and
    // splits only the edge ones).
    Layer l = city_and_background();
    auto g = build_density_grid(l.x.data(), l.y.data(), l.x.size(), {-180, -90, 180, 90});
    for (double half : {0.0003, 0.004, 0.03, 0.5, 20.0}) {
        const double x0 = 10 - half, x1 = 10 + half * 0.7, y0 = 50 - half * 0.4, y1 = 50 + half;
        const double whole = density_rows(g.data(), g.size(), x0, y0, x1, y1);
        const double xm = (x0 + x1) / 2;
        EXPECT_NEAR(density_rows(g.data(), g.size(), x0, y0, xm, y1) + density_rows(g.data(), g.size(), xm, y0, x1, y1),
                    whole, std::max(1.0, 0.1 * whole))
            << half;
        EXPECT_NEAR(whole, exact(l, x0, y0, x1, y1), std::max(5.0, 0.35 * exact(l, x0, y0, x1, y1))) << half;
    }
}

TEST(DensityGrid, CountsHeapBlocksPerCell) {
    // The same rows stored two ways: in space order, 50 to a block (a table loaded city by city),
    // and each on a random one of n/2 blocks. A box in the city reads far fewer blocks in the
    // first, about one per row in the second; the whole extent reads every block.
    Layer l = city_and_background();
    const std::size_t n = l.x.size();
    std::vector<std::size_t> order(n);
    for (std::size_t i = 0; i < n; i++) order[i] = i;
    std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
        return std::make_pair(std::floor(l.x[a] * 200), l.y[a]) < std::make_pair(std::floor(l.x[b] * 200), l.y[b]);
    });
    std::vector<std::uint32_t> clustered(n), scattered(n);
    std::mt19937 r(5);
    for (std::size_t k = 0; k < n; k++) clustered[order[k]] = static_cast<std::uint32_t>(k / 50);
    for (std::size_t i = 0; i < n; i++) scattered[i] = static_cast<std::uint32_t>(r() % (n / 2));
    auto c = build_density_grid(l.x.data(), l.y.data(), n, {-180, -90, 180, 90}, 20, 32, 0, 0, 0, 0, clustered.data());
    auto s = build_density_grid(l.x.data(), l.y.data(), n, {-180, -90, 180, 90}, 20, 32, 0, 0, 0, 0, scattered.data());
    double pc, ps;
    EXPECT_NEAR(density_rows_pages(c.data(), c.size(), -180, -90, 180, 90, &pc), n, 1e-6);
    EXPECT_DOUBLE_EQ(pc, n / 50 + (n % 50 != 0));
    const double rows = density_rows_pages(c.data(), c.size(), 9.99, 49.99, 10.01, 50.01, &pc);
    density_rows_pages(s.data(), s.size(), 9.99, 49.99, 10.01, 50.01, &ps);
    ASSERT_GT(rows, 1000);
    EXPECT_LT(pc, rows / 10);
    // At random: about what Cardenas' formula says over all the blocks (edge cells share blocks;
    // their sum is capped at it), not the sum over the cells.
    const double B = static_cast<double>(std::set<std::uint32_t>(scattered.begin(), scattered.end()).size());
    const double random = B * -std::expm1(n / B * std::log1p(-rows / n));
    EXPECT_GT(ps, 0.9 * random);
    EXPECT_LE(ps, 1.01 * random);
    // Without blocks: unknown.
    auto u = build_density_grid(l.x.data(), l.y.data(), n, {-180, -90, 180, 90});
    EXPECT_DOUBLE_EQ(density_rows_pages(u.data(), u.size(), 9.99, 49.99, 10.01, 50.01, &pc), rows);
    EXPECT_LT(pc, 0);
}

TEST(DensityGrid, PagesOfRowsReadSoFar) {
    EXPECT_DOUBLE_EQ(pages_of_rows(1000, 1000, 40), 40);  // all rows: all blocks
    EXPECT_NEAR(pages_of_rows(5, 1000, 40), 5, 0.3);      // the first few: a block each
    EXPECT_DOUBLE_EQ(pages_of_rows(2000, 1000, 40), 80);  // beyond the box: in proportion
    EXPECT_EQ(pages_of_rows(0, 1000, 40), 0);
    EXPECT_EQ(pages_of_rows(10, 1000, 0), 0);
    EXPECT_LT(pages_of_rows(500, 1000, 40), 40);
}

TEST(DensityGrid, SizeIsBoundedByMaxCells) {
    Layer l = city_and_background();
    auto g = build_density_grid(l.x.data(), l.y.data(), l.x.size(), {-180, -90, 180, 90});
    auto b = build_density_grid(l.x.data(), l.y.data(), l.x.size(), {-180, -90, 180, 90}, 20, 32, 0, 0, 0, 0,
                                nullptr, 200);
    EXPECT_GT(density_cells(g.data(), g.size()), 200);
    EXPECT_LE(density_cells(b.data(), b.size()), 200);
    EXPECT_EQ(b.size(), density_grid_bytes(static_cast<std::size_t>(density_cells(b.data(), b.size()))));
    EXPECT_DOUBLE_EQ(density_rows(b.data(), b.size(), -180, -90, 180, 90), 11000);
    // Coarser, still about right for a city-sized box.
    EXPECT_NEAR(density_rows(b.data(), b.size(), 9.95, 49.95, 10.05, 50.05), exact(l, 9.95, 49.95, 10.05, 50.05),
                0.35 * exact(l, 9.95, 49.95, 10.05, 50.05));
}

TEST(DensityGrid, DenseSpotIsTheCrowdNotACoarseCellsAverage) {
    // A box the size of the city's core, centred where the densest rows are, holds about what a box
    // centred on the city holds (the coarse cell's average spread the core over a far larger area).
    Layer l = city_and_background();
    auto g = build_density_grid(l.x.data(), l.y.data(), l.x.size(), {-180, -90, 180, 90});
    const double want = exact(l, 9.99, 49.99, 10.01, 50.01);
    const double got = density_rows_around_dense(g.data(), g.size(), 0.02, 0.02, 0.9);
    EXPECT_GT(got, 0.5 * want);
    EXPECT_LT(got, 1.5 * want);
    // The densest spot (q = 1) holds at least as much; an empty layer nothing.
    EXPECT_GE(density_rows_around_dense(g.data(), g.size(), 0.02, 0.02, 1.0), 0.9 * got);
    auto e = build_density_grid(nullptr, nullptr, 0, {0, 0, 1, 1});
    EXPECT_EQ(density_rows_around_dense(e.data(), e.size(), 0.02, 0.02, 0.9), 0);
}

// The extension opens a grid once and asks it box after box: the same rows and pages, to the bit, as
// opening it for every box.
TEST(DensityGrid, OpenedOnceAnswersAsTheBlob) {
    Layer l = city_and_background();
    const std::size_t n = l.x.size();
    const std::vector<std::uint32_t> blocks = blocks_of_forty(n);
    const auto with = build_density_grid(l.x.data(), l.y.data(), n, {-180, -90, 180, 90}, 20, 32, 0.01, 0.01, 0, 0,
                                         blocks.data());
    const auto without = build_density_grid(l.x.data(), l.y.data(), n, {-180, -90, 180, 90});
    std::mt19937 r(11);
    std::uniform_real_distribution<double> u(-1, 1);
    for (const auto* g : {&with, &without}) {
        grid::View v;
        ASSERT_TRUE(grid::open(g->data(), g->size(), &v));
        for (int k = 0; k < 200; k++) {
            const double cx = 10 + u(r) * 0.5, cy = 50 + u(r) * 0.5, w = std::fabs(u(r)) * (k % 2 ? 0.01 : 2);
            double p1 = 7, p2 = 7;
            const double a = density_rows_pages(g->data(), g->size(), cx - w, cy - w, cx + w, cy + w, &p1);
            const double b = density_rows_pages(v, cx - w, cy - w, cx + w, cy + w, &p2);
            EXPECT_EQ(std::memcmp(&a, &b, sizeof a), 0) << k;
            EXPECT_EQ(std::memcmp(&p1, &p2, sizeof p1), 0) << k;
        }
    }
    const unsigned char junk[64] = {1, 2, 3};
    grid::View v;
    EXPECT_FALSE(grid::open(junk, sizeof junk, &v));
}

// A query started from the direct index of the top levels (View::jump) gives the rows and pages the
// descent from the root gives, to the bit, for boxes of every size and place: inside a dense city (the target
// level below the index), across its edge, over the whole extent (target above it), points, boxes
// outside or straddling the extent's edge, and a grid of fewer levels than the index holds.
TEST(DensityGrid, JumpIndexAnswersAsTheRoot) {
    Layer l = city_and_background();
    const std::size_t n = l.x.size();
    const std::vector<std::uint32_t> blocks = blocks_of_forty(n);
    const auto deep = build_density_grid(l.x.data(), l.y.data(), n, {-180, -90, 180, 90}, 20, 32, 0.001, 0.001, 0, 0,
                                         blocks.data());
    const auto shallow = build_density_grid(l.x.data(), l.y.data(), n, {-180, -90, 180, 90}, 4, 32);
    std::mt19937 r(5);
    std::uniform_real_distribution<double> u(-1, 1), lg(-4, 2.5);
    for (const auto* g : {&deep, &shallow}) {
        grid::View root, jump;
        ASSERT_TRUE(grid::open(g->data(), g->size(), &root));
        ASSERT_TRUE(grid::open(g->data(), g->size(), &jump));
        std::vector<std::uint32_t> table(density_jump_entries(jump), 0);
        ASSERT_EQ(table.size(), grid::jump_offset(std::min(jump.h.levels, grid::kJumpMaxLevels) + 1));
        ASSERT_TRUE(density_jump_fill(jump, table.data()));
        jump.jump = table.data();
        jump.jump_levels = std::min(jump.h.levels, grid::kJumpMaxLevels);
        int started_below_root = 0;
        for (int k = 0; k < 3000; k++) {
            const bool city = k % 3 != 0;
            const double cx = city ? 10 + u(r) * 0.05 : u(r) * 185, cy = city ? 50 + u(r) * 0.05 : u(r) * 95;
            const double w = k % 17 == 0 ? 0 : std::pow(10.0, lg(r)), h = k % 5 == 0 ? w : w * (1.5 + u(r));
            double p1 = 7, p2 = 7;
            const double a = density_rows_pages(root, cx - w, cy - h, cx + w, cy + h, &p1);
            const double b = density_rows_pages(jump, cx - w, cy - h, cx + w, cy + h, &p2);
            EXPECT_EQ(std::memcmp(&a, &b, sizeof a), 0) << k << ": " << a << " against " << b;
            EXPECT_EQ(std::memcmp(&p1, &p2, sizeof p1), 0) << k << ": " << p1 << " against " << p2;
            started_below_root += w < 0.01;
        }
        EXPECT_GT(started_below_root, 100);
    }
    // Every stored cell of the indexed levels is where its key says, and a position no cell holds is
    // either none (no rows) or a leaf above it.
    grid::View v;
    ASSERT_TRUE(grid::open(deep.data(), deep.size(), &v));
    std::vector<std::uint32_t> table(density_jump_entries(v));
    ASSERT_TRUE(density_jump_fill(v, table.data()));
    for (std::uint32_t lv = 0; lv <= grid::kJumpMaxLevels; lv++)
        for (std::uint32_t i = 0; i < v.h.ncells[lv]; i++) {
            const std::uint64_t key = grid::key_of(v, lv, i);
            const std::uint32_t cx = grid::compact(key), cy = grid::compact(key >> 1);
            EXPECT_EQ(table[grid::jump_offset(lv) + (static_cast<std::size_t>(cy) << lv) + cx], (lv << 24) | i);
        }
    // A blob whose level holds more cells than the level has places is not indexed.
    std::vector<unsigned char> bad = deep;
    grid::Header h;
    std::memcpy(&h, bad.data(), sizeof h);
    h.ncells[1] = 5;
    std::memcpy(bad.data(), &h, sizeof h);
    grid::View b;
    if (grid::open(bad.data(), bad.size(), &b)) {
        std::vector<std::uint32_t> t(density_jump_entries(b));
        EXPECT_FALSE(density_jump_fill(b, t.data()));
    }
}
