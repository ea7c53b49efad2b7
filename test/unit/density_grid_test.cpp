// The density grid (core/density_grid.hpp).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "core/density_grid.hpp"

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

double exact(const Layer& l, double x0, double y0, double x1, double y1) {
    double n = 0;
    for (size_t i = 0; i < l.x.size(); i++) n += l.x[i] >= x0 && l.x[i] <= x1 && l.y[i] >= y0 && l.y[i] <= y1;
    return n;
}

}  // namespace

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

TEST(DensityGrid, ReadsFormatTwoBlobs) {
    // Format 2 ended after the per-level cell counts, without the probe size: drop those 16 bytes
    // (the header's last two doubles) and the version, and it still answers, probing by the mean size.
    Layer l = city_and_background();
    auto g = build_density_grid(l.x.data(), l.y.data(), l.x.size(), {-180, -90, 180, 90}, 20, 32, 0.02, 0.02, 0.5,
                                0.5);
    const double rows = density_rows(g.data(), g.size(), 9.9, 49.9, 10.1, 50.1);
    const std::size_t header = 4 * 4 + 7 * 8 + 4 * (kDensityMaxLevels + 1);  // 172, padded to 176 in v2
    const std::size_t v2_header = (header + 7) / 8 * 8;
    std::vector<unsigned char> v2(g.begin(), g.begin() + v2_header);
    v2.insert(v2.end(), g.begin() + v2_header + 16, g.end());
    const std::uint32_t two = 2;
    std::memcpy(&v2[4], &two, 4);
    EXPECT_DOUBLE_EQ(density_rows(v2.data(), v2.size(), 9.9, 49.9, 10.1, 50.1), rows);
    double pw, ph;
    ASSERT_TRUE(density_probe_size(v2.data(), v2.size(), &pw, &ph));
    EXPECT_DOUBLE_EQ(pw, 0.02);
    // An unknown version is not a grid.
    const std::uint32_t nine = 9;
    std::memcpy(&v2[4], &nine, 4);
    EXPECT_LT(density_rows(v2.data(), v2.size(), 9.9, 49.9, 10.1, 50.1), 0);
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
