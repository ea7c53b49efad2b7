// What the caps and the price make of the tile-shaped paths: WMTS feature
// info is judged and priced as feature info, at its own TileMatrix.
#include <gtest/gtest.h>

#include "gate/caps.hpp"
#include "gate/pricing.hpp"

using namespace ot::gate;

namespace {
struct Judged {
    OgcRequest req;
    CapOutcome out;
    Price price;
};
Judged judge(const std::string& target) {
    Judged r;
    const HttpIn in{"GET", target, "", ""};
    r.req = parse_request(in);
    r.out = apply_caps(r.req, in, Caps{});
    r.price = price(r.req, r.out, Pricing{});
    return r;
}
}  // namespace

TEST(WmtsFeatureInfo, RestIsPricedAsFeatureInfoNotATileAtTileCol) {
    // TileCol 50 used to be read as zoom 50: refused as beyond max_zoom.
    const Judged rest = judge("/wmts/pts/default/WebMercatorQuad/7/40/50/3/4.xml");
    EXPECT_FALSE(rest.out.error) << rest.out.error->text;
    EXPECT_EQ(rest.price.cost_class, "features");
    const Judged wms = judge("/?SERVICE=WMS&REQUEST=GetFeatureInfo&VERSION=1.3.0&WIDTH=256&HEIGHT=256&I=1&J=1");
    EXPECT_EQ(rest.price.cost, wms.price.cost);
    const Judged tile = judge("/wmts/pts/default/WebMercatorQuad/7/40/50.png");
    EXPECT_EQ(tile.price.cost_class, "tile");
}

TEST(WmtsFeatureInfo, KvpNeedsNoWidthOrHeight) {
    const Judged kvp = judge("/?SERVICE=WMTS&REQUEST=GetFeatureInfo&VERSION=1.0.0&LAYER=pts&TILEMATRIXSET=g&TILEMATRIX=7"
                        "&TILEROW=1&TILECOL=2&I=3&J=4&INFOFORMAT=text/html");
    EXPECT_FALSE(kvp.out.error) << kvp.out.error->text;
    EXPECT_EQ(kvp.price.cost_class, "features");
    EXPECT_EQ(kvp.price.cost, judge("/wmts/pts/default/g/7/1/2/4/3.html").price.cost);
}

TEST(WmtsFeatureInfo, BeyondTheLevelsIsACap) {
    const Judged deep = judge("/wmts/pts/default/WebMercatorQuad/30/40/50/3/4.xml");
    ASSERT_TRUE(deep.out.error);
    EXPECT_EQ(deep.out.error->kind, ErrorKind::OverCap);
    EXPECT_EQ(deep.out.error->locator, "TILEMATRIX");
    const Judged kvp = judge("/?SERVICE=WMTS&REQUEST=GetFeatureInfo&TILEMATRIX=30&TILEROW=1&TILECOL=2&I=3&J=4");
    ASSERT_TRUE(kvp.out.error);
    EXPECT_EQ(kvp.out.error->locator, "TILEMATRIX");
}

TEST(OgcApiTiles, PricedAndCappedAsTiles) {
    const Judged api = judge("/collections/roads/tiles/WebMercatorQuad/7/40/50");
    EXPECT_FALSE(api.out.error);
    EXPECT_EQ(api.price.cost_class, "tile");
    EXPECT_EQ(api.price.cost, judge("/tiles/7/50/40.png").price.cost);
    const Judged deep = judge("/collections/roads/tiles/WebMercatorQuad/30/40/50");
    ASSERT_TRUE(deep.out.error);
    EXPECT_EQ(deep.out.error->locator, "tileMatrix");
}
