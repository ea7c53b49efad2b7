#include "gate/cells.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>

namespace ot::gate {
namespace {

constexpr double kPi = 3.14159265358979323846;
constexpr double kMercatorMaxLat = 85.05112877980659;
constexpr double kEarthRadius = 6378137.0;
constexpr int kMaxZoom = 30;
constexpr int kMaxDoublings = 16;  // 0.001° × 2^16 is the whole world already
// A box exactly one cell wide (a view the size of a cell) stays at the finest
// level despite rounding in its corners.
constexpr double kSlack = 1.000001;

double wrap_lon(double lon) {
    lon = std::fmod(lon + 180.0, 360.0);
    if (lon < 0) lon += 360.0;
    return lon - 180.0;  // [-180, 180)
}

// floor(v) within [0, n): a NaN or a value far outside lands on an edge,
// never in undefined behaviour.
std::int64_t index_in(double v, std::int64_t n) {
    if (!(v >= 0)) return 0;
    if (v >= static_cast<double>(n)) return n - 1;
    return std::min<std::int64_t>(static_cast<std::int64_t>(std::floor(v)), n - 1);
}

void append_int(std::string& s, std::int64_t v) {
    char b[24];
    s.append(b, std::to_chars(b, b + sizeof b, v).ptr);
}

// "<tag>[<level_tag><level>:]<x>/<y>", mostly short enough for the string's own buffer: this is on
// every keyed request's path.
std::string key3(char tag, char level_tag, int level, bool with_level, std::int64_t x, std::int64_t y) {
    std::string s;
    s += tag;
    if (level_tag) s += level_tag;
    if (with_level) {
        append_int(s, level);
        s += level_tag == '+' ? ':' : '/';
    }
    append_int(s, x);
    s += '/';
    append_int(s, y);
    return s;
}

// The cell holding (lon, lat) at the finest level whose cells are at least
// `span` degrees wide.
std::string cell_at(double lon, double lat, double span, const CellGrid& g) {
    lon = wrap_lon(lon);
    if (g.zoom >= 0) {
        int z = std::min(g.zoom, kMaxZoom);
        while (z > 0 && 360.0 / std::ldexp(1.0, z) * kSlack < span) --z;
        const auto n = static_cast<std::int64_t>(1) << z;
        lat = std::clamp(lat, -kMercatorMaxLat, kMercatorMaxLat);
        const double r = lat * kPi / 180.0;
        const double nf = static_cast<double>(n);
        const std::int64_t x = index_in((lon + 180.0) / 360.0 * nf, n);
        const std::int64_t y = index_in((1.0 - std::log(std::tan(r) + 1.0 / std::cos(r)) / kPi) / 2.0 * nf, n);
        return key3('z', 0, z, true, x, y);
    }
    int k = 0;
    double d = g.degrees > 0 ? g.degrees : 0.1;
    // Past the size of the world a larger cell is the same cell under another name.
    while (d * kSlack < span && d < 360.0 && k < kMaxDoublings) d *= 2, ++k;
    lat = std::clamp(lat, -90.0, 90.0);
    const auto cols = static_cast<std::int64_t>(std::ceil(360.0 / d));
    const auto rows = static_cast<std::int64_t>(std::ceil(180.0 / d));
    return key3('d', k == 0 ? 0 : '+', k, k != 0, index_in((lon + 180.0) / d, cols), index_in((lat + 90.0) / d, rows));
}

double lon_of_metres(double x) { return x / kEarthRadius * 180.0 / kPi; }
double lat_of_metres(double y) { return (2.0 * std::atan(std::exp(y / kEarthRadius)) - kPi / 2.0) * 180.0 / kPi; }

}  // namespace

std::string grid_name(const CellGrid& g) {
    char buf[40];
    char* p = buf;
    if (g.zoom >= 0) {
        *p++ = 'z';
        p = std::to_chars(p, buf + sizeof buf, g.zoom).ptr;
    } else {
        p = std::to_chars(p, buf + sizeof buf, g.degrees).ptr;  // shortest form: 0.1, 0.25
    }
    return std::string(buf, p);
}

std::optional<std::string> cell_of_point(double lon, double lat, const CellGrid& g) {
    if (!std::isfinite(lon) || !std::isfinite(lat)) return std::nullopt;
    return cell_at(lon, lat, 0, g);
}

std::optional<std::string> cell_of_box(double minx, double miny, double maxx, double maxy, bool metres,
                                       const CellGrid& g) {
    if (!std::isfinite(minx) || !std::isfinite(miny) || !std::isfinite(maxx) || !std::isfinite(maxy))
        return std::nullopt;
    if (metres) {
        minx = lon_of_metres(minx), maxx = lon_of_metres(maxx);
        miny = lat_of_metres(miny), maxy = lat_of_metres(maxy);
    }
    // A box whose west edge is east of its east edge crosses the antimeridian.
    if (minx > maxx) maxx += 360.0;
    if (miny > maxy) std::swap(miny, maxy);
    const double span = std::max(maxx - minx, maxy - miny);  // may be +inf: the coarsest cell
    return cell_at(minx / 2.0 + maxx / 2.0, miny / 2.0 + maxy / 2.0, span, g);
}

std::optional<std::string> cell_of_tile(int z, std::int64_t x, std::int64_t y, const CellGrid& g) {
    if (z < 0 || z > kMaxZoom) return std::nullopt;
    const double n = std::ldexp(1.0, z);
    if (x < 0 || y < 0 || x >= n || y >= n) return std::nullopt;
    const double lon = (static_cast<double>(x) + 0.5) / n * 360.0 - 180.0;
    const double lat = std::atan(std::sinh(kPi * (1.0 - 2.0 * (static_cast<double>(y) + 0.5) / n))) * 180.0 / kPi;
    return cell_at(lon, lat, 360.0 / n, g);
}

std::optional<std::string> cell_of_geo_tile(int z, std::int64_t x, std::int64_t y, const CellGrid& g) {
    if (z < 0 || z > kMaxZoom) return std::nullopt;
    const double n = std::ldexp(1.0, z);
    if (x < 0 || y < 0 || x >= 2 * n || y >= n) return std::nullopt;
    const double size = 180.0 / n;
    return cell_at(-180.0 + (static_cast<double>(x) + 0.5) * size, 90.0 - (static_cast<double>(y) + 0.5) * size,
                   size, g);
}

std::string cell_of_unplaced_box(std::int64_t epsg, double minx, double miny, double maxx, double maxy) {
    const std::string code = "e" + std::to_string(epsg);
    if (!std::isfinite(minx) || !std::isfinite(miny) || !std::isfinite(maxx) || !std::isfinite(maxy))
        return code + ":nan";
    const double span = std::max(std::fabs(maxx - minx), std::fabs(maxy - miny));
    double s = 1e4;
    int k = 0;
    while (s < span && k < 64) s *= 2, ++k;
    const auto idx = [s](double v) {
        return static_cast<std::int64_t>(std::clamp(std::floor(v / s), -1e15, 1e15));
    };
    return code + "+" + std::to_string(k) + ":" + std::to_string(idx(minx / 2 + maxx / 2)) + "/" +
           std::to_string(idx(miny / 2 + maxy / 2));
}

}  // namespace ot::gate
