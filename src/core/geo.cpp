#include "core/geo.hpp"

#include <algorithm>
#include <cmath>

namespace ot::core {
namespace {
constexpr double kEarthRadiusKm = 6371.0088;  // IUGG mean radius
constexpr double kPi = 3.14159265358979323846;
constexpr double kMercatorSideKm = 40075.016685578488;  // 2π × 6378137 m
}  // namespace

const char* bbox_problem(double xmin, double ymin, double xmax, double ymax) noexcept {
    if (!std::isfinite(xmin) || !std::isfinite(ymin) || !std::isfinite(xmax) || !std::isfinite(ymax))
        return "bbox coordinates must be finite numbers";
    if (xmax < xmin || ymax < ymin) return "bbox has a negative size (max below min)";
    return nullptr;
}

double bbox_area_km2(Srs srs, double xmin, double ymin, double xmax, double ymax) noexcept {
    if (srs.units == Units::Linear) {
        const double m = srs.metres_per_unit;
        return (xmax - xmin) * m * (ymax - ymin) * m / 1e6;
    }
    const double dlon = std::min(xmax - xmin, 360.0) * kPi / 180.0;
    const double lat1 = std::clamp(ymin, -90.0, 90.0) * kPi / 180.0;
    const double lat2 = std::clamp(ymax, -90.0, 90.0) * kPi / 180.0;
    return kEarthRadiusKm * kEarthRadiusKm * dlon * (std::sin(lat2) - std::sin(lat1));
}

double radius_metres(Srs srs, double radius) noexcept {
    if (!std::isfinite(radius) || radius < 0) return -1.0;
    return srs.units == Units::Degrees ? radius * kMetresPerDegree : radius * srs.metres_per_unit;
}

Srs guess_unknown_srs(double xmin, double ymin, double xmax, double ymax) noexcept {
    const bool lonlat = xmin >= -180.0 && xmax <= 180.0 && ymin >= -90.0 && ymax <= 90.0;
    return lonlat ? kDegrees : kMetres;
}

double tile_area_km2(int zoom) noexcept {
    const double side = kMercatorSideKm / std::ldexp(1.0, zoom);
    return side * side;
}

}  // namespace ot::core
