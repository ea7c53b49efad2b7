// Ground areas and lengths: the quantities every price is made of.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "core/geo.hpp"

using namespace ot::core;

TEST(Geo, OneDegreeSquareAtEquator) {
    // R² × Δλ × (sin φ2 − sin φ1) with the IUGG mean radius: about 12 364 km².
    EXPECT_NEAR(bbox_area_km2(kDegrees, 0, 0, 1, 1), 12364.0, 12364.0 * 0.001);
}

TEST(Geo, DegreeSquaresShrinkTowardsThePoles) {
    const double eq = bbox_area_km2(kDegrees, 0, 0, 1, 1);
    const double at60 = bbox_area_km2(kDegrees, 0, 60, 1, 61);
    EXPECT_NEAR(at60 / eq, std::cos(60.5 * M_PI / 180), 0.01);
    // Hemispheres are symmetric.
    EXPECT_NEAR(bbox_area_km2(kDegrees, 10, -45, 20, -40), bbox_area_km2(kDegrees, 10, 40, 20, 45), 1e-6);
}

TEST(Geo, WholeSphereAndClamping) {
    const double sphere = 4 * M_PI * 6371.0088 * 6371.0088;
    EXPECT_NEAR(bbox_area_km2(kDegrees, -180, -90, 180, 90), sphere, sphere * 1e-9);
    // Spans past 360° and latitudes past the poles count once, never more.
    EXPECT_NEAR(bbox_area_km2(kDegrees, -500, -120, 500, 120), sphere, sphere * 1e-9);
    EXPECT_DOUBLE_EQ(bbox_area_km2(kDegrees, 0, 0, 0, 10), 0.0);
}

TEST(Geo, LinearUnits) {
    EXPECT_DOUBLE_EQ(bbox_area_km2(kMetres, 0, 0, 1000, 1000), 1.0);
    EXPECT_DOUBLE_EQ(bbox_area_km2(kMetres, -500, -500, 500, 1500), 2.0);
    const Srs feet{Units::Linear, 0.3048};
    EXPECT_NEAR(bbox_area_km2(feet, 0, 0, 1000 / 0.3048, 1000 / 0.3048), 1.0, 1e-9);
}

TEST(Geo, DegreesToMetres) {
    EXPECT_DOUBLE_EQ(radius_metres(kDegrees, 1), kMetresPerDegree);
    EXPECT_NEAR(radius_metres(kDegrees, 0.01), 1113.19, 0.01);
    EXPECT_DOUBLE_EQ(radius_metres(kMetres, 250), 250);
    EXPECT_DOUBLE_EQ(radius_metres({Units::Linear, 0.3048}, 1000), 304.8);
    // A degree along the equator is 2πR_equator / 360 (WGS84 semi-major axis).
    EXPECT_NEAR(kMetresPerDegree, 2 * M_PI * 6378137.0 / 360, 1e-6);
}

TEST(Geo, UnusableRadiusIsNegative) {
    EXPECT_LT(radius_metres(kMetres, -1), 0);
    EXPECT_LT(radius_metres(kDegrees, std::numeric_limits<double>::quiet_NaN()), 0);
    EXPECT_LT(radius_metres(kMetres, std::numeric_limits<double>::infinity()), 0);
}

TEST(Geo, BboxProblems) {
    EXPECT_EQ(bbox_problem(0, 0, 1, 1), nullptr);
    EXPECT_EQ(bbox_problem(0, 0, 0, 0), nullptr);
    EXPECT_NE(bbox_problem(1, 0, 0, 1), nullptr);
    EXPECT_NE(bbox_problem(0, 1, 1, 0), nullptr);
    EXPECT_NE(bbox_problem(0, 0, std::numeric_limits<double>::infinity(), 1), nullptr);
    EXPECT_NE(bbox_problem(std::numeric_limits<double>::quiet_NaN(), 0, 1, 1), nullptr);
}

TEST(Geo, UnknownSrsGuessesTheDearerReading) {
    EXPECT_EQ(guess_unknown_srs(-10, -10, 10, 10).units, Units::Degrees);
    EXPECT_EQ(guess_unknown_srs(0, 0, 500000, 500000).units, Units::Linear);
    EXPECT_EQ(guess_unknown_srs(-181, 0, 0, 1).units, Units::Linear);
}

TEST(Geo, TileAreaQuartersPerZoom) {
    const double side = 2 * M_PI * 6378.137;
    EXPECT_NEAR(tile_area_km2(0), side * side, 1e-3);
    for (int z = 0; z < 31; z++) EXPECT_NEAR(tile_area_km2(z) / tile_area_km2(z + 1), 4.0, 1e-12);
    EXPECT_GT(tile_area_km2(31), 0);
}
