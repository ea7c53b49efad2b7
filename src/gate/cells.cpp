#include "gate/cells.hpp"

#include <algorithm>
#include <cmath>

namespace ot::gate {
namespace {

constexpr double kPi = 3.14159265358979323846;
constexpr double kMercatorMaxLat = 85.05112877980659;
constexpr double kEarthRadius = 6378137.0;

double wrap_lon(double lon) {
    lon = std::fmod(lon + 180.0, 360.0);
    if (lon < 0) lon += 360.0;
    return lon - 180.0;  // [-180, 180)
}

}  // namespace

std::optional<std::string> cell_of_point(double lon, double lat, const CellGrid& g) {
    if (!std::isfinite(lon) || !std::isfinite(lat)) return std::nullopt;
    lon = wrap_lon(lon);
    if (g.zoom >= 0) {
        const int z = std::min(g.zoom, 30);
        const double n = std::ldexp(1.0, z);
        lat = std::clamp(lat, -kMercatorMaxLat, kMercatorMaxLat);
        const double r = lat * kPi / 180.0;
        const auto x = static_cast<std::int64_t>(std::floor((lon + 180.0) / 360.0 * n));
        const double yf = (1.0 - std::log(std::tan(r) + 1.0 / std::cos(r)) / kPi) / 2.0 * n;
        const auto y = std::clamp<std::int64_t>(static_cast<std::int64_t>(std::floor(yf)), 0,
                                                static_cast<std::int64_t>(n) - 1);
        return "z" + std::to_string(z) + "/" + std::to_string(std::min<std::int64_t>(x, static_cast<std::int64_t>(n) - 1)) +
               "/" + std::to_string(y);
    }
    const double d = g.degrees > 0 ? g.degrees : 0.1;
    lat = std::clamp(lat, -90.0, 90.0);
    const auto cols = static_cast<std::int64_t>(std::ceil(360.0 / d));
    const auto rows = static_cast<std::int64_t>(std::ceil(180.0 / d));
    const auto ix = std::clamp<std::int64_t>(static_cast<std::int64_t>(std::floor((lon + 180.0) / d)), 0, cols - 1);
    const auto iy = std::clamp<std::int64_t>(static_cast<std::int64_t>(std::floor((lat + 90.0) / d)), 0, rows - 1);
    return "d" + std::to_string(ix) + "/" + std::to_string(iy);
}

std::optional<std::string> cell_of_box(double minx, double miny, double maxx, double maxy, bool metres,
                                       const CellGrid& g) {
    if (!std::isfinite(minx) || !std::isfinite(miny) || !std::isfinite(maxx) || !std::isfinite(maxy))
        return std::nullopt;
    if (metres) {
        const auto lon = [](double x) { return x / kEarthRadius * 180.0 / kPi; };
        const auto lat = [](double y) { return (2.0 * std::atan(std::exp(y / kEarthRadius)) - kPi / 2.0) * 180.0 / kPi; };
        minx = lon(minx), maxx = lon(maxx), miny = lat(miny), maxy = lat(maxy);
    }
    // A box whose west edge is east of its east edge crosses the antimeridian.
    if (minx > maxx) maxx += 360.0;
    return cell_of_point((minx + maxx) / 2.0, (miny + maxy) / 2.0, g);
}

std::optional<std::string> cell_of_tile(int z, std::int64_t x, std::int64_t y, const CellGrid& g) {
    if (z < 0 || z > 30) return std::nullopt;
    const double n = std::ldexp(1.0, z);
    if (x < 0 || y < 0 || x >= n || y >= n) return std::nullopt;
    const double lon = (static_cast<double>(x) + 0.5) / n * 360.0 - 180.0;
    const double lat = std::atan(std::sinh(kPi * (1.0 - 2.0 * (static_cast<double>(y) + 0.5) / n))) * 180.0 / kPi;
    return cell_of_point(lon, lat, g);
}

}  // namespace ot::gate
