#include <gtest/gtest.h>

#include "gate/caps.hpp"
#include "gate/pricing.hpp"

using namespace ot::gate;

namespace {
struct Run {
    HttpIn in;
    OgcRequest req;
    CapOutcome out;
};
Run run(const std::string& target, const Caps& caps = Caps{}, const std::string& method = "GET",
        const std::string& body = "") {
    Run r;
    r.in = {method, target, method == "POST" ? "text/xml" : "", body};
    r.req = parse_request(r.in);
    r.out = apply_caps(r.req, r.in, caps);
    return r;
}
const std::string kMap = "/?SERVICE=WMS&REQUEST=GetMap&VERSION=1.1.1&SRS=EPSG:4326&BBOX=0,0,1,1&";
}  // namespace

TEST(Pixels, WithinCapPasses) {
    auto r = run(kMap + "WIDTH=256&HEIGHT=256");
    EXPECT_FALSE(r.out.error);
    EXPECT_EQ(r.out.width, 256);
}

TEST(Pixels, OverCapRefusedWithNumbers) {
    auto r = run(kMap + "WIDTH=5000&HEIGHT=5000");
    ASSERT_TRUE(r.out.error);
    EXPECT_EQ(r.out.error->kind, ErrorKind::OverCap);
    EXPECT_NE(r.out.error->text.find("25000000"), std::string::npos);
    EXPECT_NE(r.out.error->text.find("16777216"), std::string::npos);
}

TEST(Pixels, ProductOverflowIsCaught) {
    auto r = run(kMap + "WIDTH=9223372036854775807&HEIGHT=9223372036854775807");
    ASSERT_TRUE(r.out.error);
    EXPECT_EQ(r.out.error->kind, ErrorKind::OverCap);
    auto r2 = run(kMap + "WIDTH=4294967296&HEIGHT=4294967296");
    ASSERT_TRUE(r2.out.error);
    EXPECT_EQ(r2.out.error->kind, ErrorKind::OverCap);
}

TEST(Pixels, InvalidSizes) {
    for (const char* q : {"WIDTH=0&HEIGHT=10", "WIDTH=-5&HEIGHT=10", "WIDTH=abc&HEIGHT=10", "WIDTH=1.5&HEIGHT=10",
                          "WIDTH=10"}) {
        auto r = run(kMap + q);
        ASSERT_TRUE(r.out.error) << q;
        EXPECT_EQ(r.out.error->kind, ErrorKind::BadRequest) << q;
    }
}

TEST(Pixels, PerSideMaximum) {
    Caps c;
    c.max_side = 2048;
    auto r = run(kMap + "WIDTH=4096&HEIGHT=10", c);
    ASSERT_TRUE(r.out.error);
    EXPECT_EQ(r.out.error->locator, "WIDTH");
}

TEST(Pixels, GetFeatureInfoToo) {
    auto r = run("/?SERVICE=WMS&REQUEST=GetFeatureInfo&VERSION=1.3.0&WIDTH=99999&HEIGHT=99999&I=1&J=1");
    ASSERT_TRUE(r.out.error);
    EXPECT_EQ(r.out.error->kind, ErrorKind::OverCap);
}

TEST(Features, UnboundedGetsCapInjectedPerVersion) {
    auto v2 = run("/wfs?SERVICE=WFS&REQUEST=GetFeature&VERSION=2.0.0&TYPENAMES=pts");
    ASSERT_TRUE(v2.out.new_target);
    EXPECT_EQ(*v2.out.new_target, "/wfs?SERVICE=WFS&REQUEST=GetFeature&VERSION=2.0.0&TYPENAMES=pts&COUNT=1000");
    auto v1 = run("/wfs?SERVICE=WFS&REQUEST=GetFeature&VERSION=1.1.0&TYPENAME=pts");
    ASSERT_TRUE(v1.out.new_target);
    EXPECT_NE(v1.out.new_target->find("&MAXFEATURES=1000"), std::string::npos);
    auto hits = run("/wfs?SERVICE=WFS&REQUEST=GetFeature&VERSION=2.0.0&TYPENAMES=pts&RESULTTYPE=hits");
    EXPECT_FALSE(hits.out.new_target);
}

TEST(Features, OverCapRefusedOrClamped) {
    auto r = run("/?SERVICE=WFS&REQUEST=GetFeature&VERSION=2.0.0&TYPENAMES=pts&COUNT=5000");
    ASSERT_TRUE(r.out.error);
    EXPECT_EQ(r.out.error->locator, "COUNT");
    EXPECT_NE(r.out.error->text.find("STARTINDEX"), std::string::npos);
    Caps c;
    c.clamp_features = true;
    auto k = run("/?SERVICE=WFS&REQUEST=GetFeature&VERSION=2.0.0&TYPENAMES=pts&count=5000", c);
    EXPECT_FALSE(k.out.error);
    ASSERT_TRUE(k.out.new_target);
    EXPECT_EQ(*k.out.new_target, "/?SERVICE=WFS&REQUEST=GetFeature&VERSION=2.0.0&TYPENAMES=pts&COUNT=1000");
    EXPECT_EQ(k.out.count, 1000);
}

TEST(Features, BadCounts) {
    for (const char* v : {"0", "-1", "ten", "1e3"}) {
        auto r = run(std::string("/?SERVICE=WFS&REQUEST=GetFeature&VERSION=2.0.0&COUNT=") + v);
        ASSERT_TRUE(r.out.error) << v;
        EXPECT_EQ(r.out.error->kind, ErrorKind::BadRequest) << v;
    }
}

TEST(Features, XmlBodyInjectedAndRefused) {
    const std::string body = "<GetFeature service=\"WFS\" version=\"1.1.0\"><Query typeName=\"pts\"/></GetFeature>";
    auto r = run("/", Caps{}, "POST", body);
    ASSERT_TRUE(r.out.new_body);
    EXPECT_NE(r.out.new_body->find("maxFeatures=\"1000\""), std::string::npos);
    auto big = run("/", Caps{}, "POST", "<GetFeature service=\"WFS\" version=\"2.0.0\" count=\"99999\"/>");
    ASSERT_TRUE(big.out.error);
    EXPECT_EQ(big.out.error->kind, ErrorKind::OverCap);
}

TEST(OgcApi, LimitClampedNeverRefused) {
    auto r = run("/collections/pts/items?limit=5000&f=json");
    EXPECT_FALSE(r.out.error);
    ASSERT_TRUE(r.out.new_target);
    EXPECT_EQ(*r.out.new_target, "/collections/pts/items?limit=1000&f=json");
    auto ok = run("/collections/pts/items?limit=10");
    EXPECT_FALSE(ok.out.new_target);
    EXPECT_TRUE(run("/collections/pts/items?limit=-3").out.error);
}

TEST(Tiles, ZoomOutOfRange) {
    EXPECT_TRUE(run("/tiles/40/1/1.png").out.error);
    EXPECT_FALSE(run("/tiles/12/1/1.png").out.error);
}

TEST(Pricing, LargerCostsMore) {
    Pricing p;
    auto small = run(kMap + "WIDTH=256&HEIGHT=256");
    auto big = run(kMap + "WIDTH=2048&HEIGHT=2048");
    EXPECT_LT(price(small.req, small.out, p).cost, price(big.req, big.out, p).cost);
    EXPECT_EQ(price(small.req, small.out, p).cost_class, "map");
    auto z2 = run("/tiles/2/1/1.png");
    auto z14 = run("/tiles/14/1/1.png");
    EXPECT_GT(price(z2.req, z2.out, p).cost, price(z14.req, z14.out, p).cost);
    auto f10 = run("/?SERVICE=WFS&REQUEST=GetFeature&VERSION=2.0.0&COUNT=10");
    auto f900 = run("/?SERVICE=WFS&REQUEST=GetFeature&VERSION=2.0.0&COUNT=900");
    EXPECT_LT(price(f10.req, f10.out, p).cost, price(f900.req, f900.out, p).cost);
    auto cov = run("/?SERVICE=WCS&REQUEST=GetCoverage&VERSION=2.0.1&COVERAGEID=x");
    EXPECT_EQ(price(cov.req, cov.out, p).cost_class, "coverage");
    auto cov1 = run("/?SERVICE=WCS&REQUEST=GetCoverage&VERSION=1.0.0&COVERAGE=x&WIDTH=1000&HEIGHT=1000");
    EXPECT_GT(price(cov.req, cov.out, p).cost, price(cov1.req, cov1.out, p).cost);
    auto caps = run("/?SERVICE=WMS&REQUEST=GetCapabilities");
    EXPECT_EQ(price(caps.req, caps.out, p).cost_class, "other");
    EXPECT_GT(price(cov1.req, cov1.out, p).cost, price(caps.req, caps.out, p).cost);
}

TEST(Pricing, AxisOrderDoesNotChangeArea) {
    BboxIn lonlat{{-10, 40, 10, 50}, "CRS:84"};
    BboxIn latlon{{40, -10, 50, 10}, "EPSG:4326"};
    EXPECT_NEAR(request_area_km2(lonlat, false), request_area_km2(latlon, true), 1e-6);
}
