// Boxes read from PostGIS serialisations (core/gserialized.hpp).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "core/gserialized.hpp"

using ot::core::gserialized_box;
using ot::core::GserializedBox;

namespace {

// A version-2 serialisation: header (size left 0: the reader takes the length apart), then type and counts.
struct Bytes {
    std::vector<unsigned char> b;
    explicit Bytes(std::int32_t srid, unsigned char flags) : b(8, 0) {
        b[4] = static_cast<unsigned char>((srid >> 16) & 0x1F);
        b[5] = static_cast<unsigned char>((srid >> 8) & 0xFF);
        b[6] = static_cast<unsigned char>(srid & 0xFF);
        b[7] = flags;
    }
    void u32(std::uint32_t v) { put(&v, 4); }
    void f64(double v) { put(&v, 8); }
    void f32(float v) { put(&v, 4); }
    void put(const void* p, size_t n) {
        const auto* c = static_cast<const unsigned char*>(p);
        b.insert(b.end(), c, c + n);
    }
};

constexpr unsigned char kV2 = 0x40, kBbox = 0x04, kZ = 0x01;

struct Got {
    GserializedBox r;
    double x0, y0, x1, y1;
    std::int32_t srid;
};
Got read(const Bytes& g, size_t len = 0) {
    Got o{};
    o.r = gserialized_box(g.b.data(), len ? len : g.b.size(), &o.x0, &o.y0, &o.x1, &o.y1, &o.srid);
    return o;
}

Bytes point(double x, double y, std::int32_t srid = 3857, unsigned char flags = kV2) {
    Bytes g(srid, flags);
    g.u32(1);
    g.u32(1);
    g.f64(x);
    g.f64(y);
    return g;
}

}  // namespace

TEST(Gserialized, PointIsItsOwnBox) {
    const Got o = read(point(556597.25, -7361866.5));
    ASSERT_EQ(o.r, GserializedBox::Box);
    EXPECT_EQ(o.x0, 556597.25);
    EXPECT_EQ(o.x1, 556597.25);
    EXPECT_EQ(o.y0, -7361866.5);
    EXPECT_EQ(o.y1, -7361866.5);
    EXPECT_EQ(o.srid, 3857);
}

TEST(Gserialized, SridIsSignExtendedAndZeroIsUnknown) {
    EXPECT_EQ(read(point(1, 2, 0)).srid, 0);
    EXPECT_EQ(read(point(1, 2, 4326)).srid, 4326);
    EXPECT_EQ(read(point(1, 2, 999999)).srid, 999999);
    EXPECT_EQ(read(point(1, 2, -2)).srid, -2);
}

TEST(Gserialized, PolygonOfOneRingWithOrWithoutCachedBox) {
    for (unsigned char flags : {kV2, static_cast<unsigned char>(kV2 | kBbox)}) {
        Bytes g(3857, flags);
        if (flags & kBbox)  // a float box that must not be used: it rounds
            for (float f : {0.0f, 9.0f, 0.0f, 9.0f}) g.f32(f);
        g.u32(3);
        g.u32(1);
        g.u32(5);
        g.u32(0);  // padding to 8 bytes
        const double xy[] = {0.1, 0.2, 3.3, 0.2, 3.3, 4.4, 0.1, 4.4, 0.1, 0.2};
        for (double v : xy) g.f64(v);
        const Got o = read(g);
        ASSERT_EQ(o.r, GserializedBox::Box);
        EXPECT_EQ(o.x0, 0.1);
        EXPECT_EQ(o.y0, 0.2);
        EXPECT_EQ(o.x1, 3.3);
        EXPECT_EQ(o.y1, 4.4);
    }
}

TEST(Gserialized, LeavesEverythingElseToPostgis) {
    EXPECT_EQ(read(point(1, 2, 3857, 0)).r, GserializedBox::Unknown);          // version 1
    EXPECT_EQ(read(point(1, 2, 3857, kV2 | kZ)).r, GserializedBox::Unknown);   // Z
    EXPECT_EQ(read(point(std::nan(""), 2)).r, GserializedBox::Unknown);        // NaN
    EXPECT_EQ(read(point(1, 2), 31).r, GserializedBox::Unknown);               // cut short
    Bytes empty(3857, kV2);
    empty.u32(1);
    empty.u32(0);
    EXPECT_EQ(read(empty).r, GserializedBox::Unknown);
    Bytes line(3857, kV2);
    line.u32(2);
    line.u32(2);
    for (double v : {-20037508.342789244, -3.5, 20037508.342789244, 7.25}) line.f64(v);
    const Got l = read(line);  // ST_TileEnvelope's default bounds: read to the last bit, not as floats
    EXPECT_EQ(l.r, GserializedBox::Box);
    EXPECT_EQ(l.x0, -20037508.342789244);
    EXPECT_EQ(l.y0, -3.5);
    EXPECT_EQ(l.x1, 20037508.342789244);
    EXPECT_EQ(l.y1, 7.25);
    EXPECT_EQ(l.srid, 3857);
    Bytes empty_line(3857, kV2);
    empty_line.u32(2);
    empty_line.u32(0);
    EXPECT_EQ(read(empty_line).r, GserializedBox::Unknown);
    Bytes holed(3857, kV2);
    holed.u32(3);
    holed.u32(2);
    holed.u32(4);
    holed.u32(4);
    for (int i = 0; i < 16; i++) holed.f64(i);
    EXPECT_EQ(read(holed).r, GserializedBox::Unknown);
}
