#include "core/gserialized.hpp"

#include <cmath>
#include <cstring>

namespace ot::core {
namespace {

// gserialized2.h / liblwgeom.h
constexpr unsigned char kFlagZ = 0x01, kFlagM = 0x02, kFlagBbox = 0x04, kFlagGeodetic = 0x08, kFlagExtended = 0x10,
                        kFlagVersion = 0x40;
constexpr std::uint32_t kPointType = 1, kLineType = 2, kPolygonType = 3;

std::uint32_t u32_at(const unsigned char* p) noexcept {
    std::uint32_t v;
    std::memcpy(&v, p, 4);
    return v;
}
double f64_at(const unsigned char* p) noexcept {
    double v;
    std::memcpy(&v, p, 8);
    return v;
}

}  // namespace

GserializedBox gserialized_box(const unsigned char* p, std::size_t len, double* xmin, double* ymin, double* xmax,
                               double* ymax, std::int32_t* srid) noexcept {
    constexpr std::size_t kHeader = 8;  // varlena size, 3 bytes of SRID, flags
    if (len < kHeader + 8) return GserializedBox::Unknown;
    const unsigned char flags = p[7];
    if ((flags & kFlagVersion) == 0 || (flags & (kFlagZ | kFlagM | kFlagGeodetic | kFlagExtended)) != 0)
        return GserializedBox::Unknown;
    // A 2-D cartesian box cached in the header: four floats.
    const std::size_t start = kHeader + ((flags & kFlagBbox) != 0 ? 16 : 0);
    if (len < start + 8) return GserializedBox::Unknown;
    const unsigned char* g = p + start;
    const std::uint32_t type = u32_at(g), n = u32_at(g + 4);
    const unsigned char* pts;
    std::uint32_t npoints;
    if (type == kPointType) {
        if (n != 1) return GserializedBox::Unknown;  // an empty point has no box
        npoints = 1;
        pts = g + 8;
    } else if (type == kLineType) {
        if (n == 0) return GserializedBox::Unknown;  // empty
        npoints = n;
        pts = g + 8;
    } else if (type == kPolygonType) {
        if (n != 1) return GserializedBox::Unknown;  // holes, or empty
        if (len < start + 16) return GserializedBox::Unknown;
        npoints = u32_at(g + 8);
        pts = g + 16;  // type, ring count, the ring's point count, padding to 8 bytes
    } else {
        return GserializedBox::Unknown;
    }
    if (npoints == 0 || static_cast<std::size_t>(pts - p) + std::size_t{16} * npoints > len)
        return GserializedBox::Unknown;
    double x0 = f64_at(pts), y0 = f64_at(pts + 8), x1 = x0, y1 = y0;
    for (std::uint32_t i = 0; i < npoints; i++) {
        const double x = f64_at(pts + 16 * i), y = f64_at(pts + 16 * i + 8);
        if (std::isnan(x) || std::isnan(y)) return GserializedBox::Unknown;
        x0 = x < x0 ? x : x0, x1 = x > x1 ? x : x1;
        y0 = y < y0 ? y : y0, y1 = y > y1 ? y : y1;
    }
    // 21 bits, sign-extended; 0 is "unknown" either way.
    std::int32_t s = (static_cast<std::int32_t>(p[4]) << 16) | (static_cast<std::int32_t>(p[5]) << 8) | p[6];
    s = static_cast<std::int32_t>(static_cast<std::uint32_t>(s) << 11) >> 11;
    *xmin = x0, *ymin = y0, *xmax = x1, *ymax = y1, *srid = s;
    return GserializedBox::Box;
}

}  // namespace ot::core
