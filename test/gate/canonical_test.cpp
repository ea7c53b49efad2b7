// The canonicaliser: what goes upstream is the gate's own serialisation of
// what it read, and anything MapServer could read differently is refused.
#include <gtest/gtest.h>

#include "gate/canonical.hpp"
#include "gate/caps.hpp"
#include "gate/coalescer.hpp"
#include "gate/config.hpp"
#include "gate/decision.hpp"
#include "gate/kvp.hpp"
#include "gate/path.hpp"
#include "gate/request.hpp"

using namespace ot::gate;

namespace {

OgcRequest req(const std::string& target, const std::string& method = "GET", const std::string& ct = "",
               const std::string& body = "", const std::string& cookie = "") {
    return parse_request({method, target, ct, body, cookie});
}

std::string refused(const OgcRequest& r) { return r.problem; }

const std::string kMap =
    "/?SERVICE=WMS&VERSION=1.3.0&REQUEST=GetMap&LAYERS=pts&STYLES=&CRS=EPSG:4326&BBOX=35,-10,45,30&FORMAT=image/png";

CapOutcome caps_of(const std::string& target, const Caps& c = {}) {
    const HttpIn in{"GET", target, "", ""};
    return apply_caps(parse_request(in), in, c);
}

}  // namespace

TEST(Canonical, NamesUpperCasedValuesReEncoded) {
    auto r = req("/?service=wms&version=1.3.0&request=GetMap&layers=pts&styles=&crs=EPSG:4326&bbox=35%2C-10%2C45%2C30"
                 "&format=image%2Fpng&Width=64&height=32&vendor=a+b&x%7E=%41");
    ASSERT_EQ(r.problem, "");
    EXPECT_EQ(canonical_target(r),
              "/?SERVICE=wms&VERSION=1.3.0&REQUEST=GetMap&LAYERS=pts&STYLES=&CRS=EPSG:4326&BBOX=35,-10,45,30"
              "&FORMAT=image/png&WIDTH=64&HEIGHT=32&vendor=a%20b&x~=A");
}

TEST(Canonical, IsAFixedPoint) {
    const auto r = req(kMap + "&WIDTH=64&HEIGHT=64&name=%C3%A9%20%2B%26%3D");
    ASSERT_EQ(r.problem, "");
    const auto again = req(canonical_target(r));
    EXPECT_EQ(canonical_target(again), canonical_target(r));
    EXPECT_EQ(again.query.find("NAME")->value, "\xC3\xA9 +&=");
}

TEST(Canonical, EncodedDelimitersInNamesRefused) {
    EXPECT_NE(refused(req(kMap + "&WIDTH=10&HEIGHT=10&WIDTH%3D8192=")), "");
    EXPECT_NE(refused(req("/?SERVICE=WFS&REQUEST=GetFeature&COUNT%3D5000=")), "");
    EXPECT_NE(refused(req(kMap + "&A%26WIDTH=1")), "");
    EXPECT_NE(refused(req(kMap + "&A%3BB=1")), "");
    // In a value they are data.
    EXPECT_EQ(refused(req(kMap + "&WIDTH=1&HEIGHT=1&X=a%3Db%26c")), "");
}

TEST(Canonical, BlanksControlAndEncodedNamesRefused) {
    for (const char* q : {"&LAYERS%20=x", "&+WIDTH=1", "&WIDTH%09=1", "&W%00=1", "&%C3%A9=1", "&%2557IDTH=1", "&=x"})
        EXPECT_NE(refused(req(kMap + "&WIDTH=1&HEIGHT=1" + q)), "") << q;
    EXPECT_NE(refused(req(kMap + "&WIDTH=64%00&HEIGHT=1")), "");  // NUL ends a C string early
}

TEST(Canonical, RepeatedNames) {
    EXPECT_NE(refused(req(kMap + "&WIDTH=64&HEIGHT=64&width=8192")), "");
    const auto same = req(kMap + "&WIDTH=64&HEIGHT=64&width=64");
    ASSERT_EQ(same.problem, "");
    EXPECT_EQ(canonical_target(same).find("WIDTH"), canonical_target(same).rfind("WIDTH"));
    const auto subset = req("/?SERVICE=WCS&VERSION=2.0.1&REQUEST=GetCoverage&COVERAGEID=c&SUBSET=x(0,1)&subset=y(0,1)");
    ASSERT_EQ(subset.problem, "");
    EXPECT_NE(canonical_target(subset).find("SUBSET=x%280,1%29&SUBSET=y%280,1%29"), std::string::npos);
}

TEST(Canonical, CookiesNamedLikeParametersRefused) {
    EXPECT_NE(refused(req(kMap + "&WIDTH=64&HEIGHT=64", "GET", "", "", "WIDTH=8192; HEIGHT=8192")), "");
    EXPECT_NE(refused(req(kMap + "&WIDTH=64&HEIGHT=64", "GET", "", "", "a=1;  mode=map")), "");
    EXPECT_NE(refused(req(kMap + "&WIDTH=64&HEIGHT=64&v=1", "GET", "", "", "V=2")), "");
    EXPECT_NE(refused(req(kMap + "&WIDTH=64&HEIGHT=64", "GET", "", "", "%57IDTH=8192")), "");
    EXPECT_EQ(refused(req(kMap + "&WIDTH=64&HEIGHT=64", "GET", "", "", "session=abc; theme=dark")), "");
}

TEST(Canonical, FormAndQueryTogether) {
    const std::string form = "SERVICE=WMS&VERSION=1.3.0&REQUEST=GetMap&LAYERS=pts&WIDTH=64&HEIGHT=64&CRS=EPSG:4326";
    const std::string ct = "application/x-www-form-urlencoded";
    EXPECT_NE(refused(req("/?WIDTH=8192&HEIGHT=8192", "POST", ct, form)), "");
    EXPECT_NE(refused(req("/?foo=1", "POST", ct, form + "&foo=2")), "");
    const auto ok = req("/?map=/srv/a.map", "POST", ct, form + "&STYLES=&BBOX=0,0,1,1&FORMAT=image%2Fpng\r\n");
    ASSERT_EQ(ok.problem, "");
    EXPECT_EQ(canonical_target(ok), "/?MAP=/srv/a.map");
    EXPECT_EQ(canonical_form(ok), form + "&STYLES=&BBOX=0,0,1,1&FORMAT=image/png");
}

TEST(Canonical, BodiesTheGateCannotRead) {
    EXPECT_NE(refused(req(kMap + "&WIDTH=1&HEIGHT=1", "POST", "text/plain", "WIDTH=8192")), "");
    EXPECT_NE(refused(req("/?COUNT=5000", "POST", "text/xml",
                          "<GetFeature service=\"WFS\" version=\"2.0.0\"><Query typeNames=\"p\"/></GetFeature>")),
              "");
    EXPECT_NE(refused(req("/?SERVICE=WMS&REQUEST=GetMap&WIDTH=8192&HEIGHT=8192", "POST", "application/json",
                          "{\"limit\": 1}")),
              "");
    // UTF-16 is not sniffed as XML: refused, not forwarded unchecked.
    EXPECT_NE(refused(req("/", "POST", "text/xml", std::string("\xFF\xFE<\0G\0", 6))), "");
}

TEST(Canonical, MapServerCgiAndPrefixNames) {
    EXPECT_EQ(req("/?mode=map&mapsize=8192+8192").cgi_param, "mode");
    EXPECT_EQ(req(kMap + "&WIDTH=1&HEIGHT=1&map.size=8192+8192").cgi_param, "map.size");
    EXPECT_EQ(req(kMap + "&WIDTH=1&HEIGHT=1&MAP_RESOLUTION=96").cgi_param, "");
    EXPECT_TRUE(caps_of("/?mode=map&mapsize=8192+8192").error);
    Caps allow;
    allow.mapserver_cgi = true;
    EXPECT_FALSE(caps_of("/?mode=browse", allow).error);
    EXPECT_NE(refused(req("/?SERVICE=WCS&VERSION=2.0.1&REQUEST=GetCoverage&COVERAGEID=c&SIZEX=x(9000)")), "");
    EXPECT_NE(refused(req("/?SERVICE=WCS&VERSION=2.0.1&REQUEST=GetCoverage&COVERAGEID=c&SUBSETX=x(0,1)")), "");
}

TEST(Canonical, OperationsKnownOrConfigured) {
    EXPECT_EQ(req(kMap.substr(0, kMap.find("REQUEST")) + "REQUEST=map").op, Op::GetMap);
    EXPECT_EQ(req("/?WMTVER=1.0.0&REQUEST=feature_info").op, Op::GetFeatureInfo);
    EXPECT_TRUE(caps_of("/?SERVICE=WMS&WMTVER=1.0.0&REQUEST=map&WIDTH=99999&HEIGHT=99999").error);
    const auto unknown = caps_of("/?SERVICE=WFS&VERSION=2.0.0&REQUEST=Transaction");
    ASSERT_TRUE(unknown.error);
    EXPECT_EQ(unknown.error->code, "OperationNotSupported");
    EXPECT_TRUE(caps_of("/?SERVICE=SOS&REQUEST=GetObservation").error);
    EXPECT_TRUE(caps_of("/?SERVICE=WMS%20&REQUEST=GetMap").error);  // not "WMS" to MapServer either
    EXPECT_FALSE(caps_of("/?SERVICE=WFS&REQUEST=DescribeFeatureType").error);
    Caps c;
    c.passthrough = {{"WFS", "TRANSACTION", 25}, {"SOS", "*", 3}};
    const auto tx = caps_of("/?SERVICE=WFS&VERSION=2.0.0&REQUEST=Transaction", c);
    EXPECT_FALSE(tx.error);
    EXPECT_EQ(tx.fixed_cost, 25);
    EXPECT_EQ(caps_of("/?SERVICE=SOS&REQUEST=GetObservation", c).fixed_cost, 3);
    EXPECT_TRUE(caps_of("/?SERVICE=WMS&REQUEST=GetLegendGraphic&LAYER=x&WIDTH=5000&HEIGHT=5000").error);
    EXPECT_TRUE(caps_of(kMap.substr(0, kMap.find("REQUEST")) + "REQUEST=GetFeatureInfo&WIDTH=10&HEIGHT=10&I=1&J=1"
                        "&QUERY_LAYERS=pts&FEATURE_COUNT=5000")
                    .error);
}

TEST(Canonical, ResultTypeComparedExactly) {
    EXPECT_TRUE(req("/?SERVICE=WFS&VERSION=2.0.0&REQUEST=GetFeature&RESULTTYPE=HITS").hits_only);
    EXPECT_FALSE(req("/?SERVICE=WFS&VERSION=2.0.0&REQUEST=GetFeature&RESULTTYPE=hits%20").hits_only);
    const auto c = caps_of("/?SERVICE=WFS&VERSION=2.0.0&REQUEST=GetFeature&TYPENAMES=p&RESULTTYPE=hits%20");
    ASSERT_TRUE(c.new_target);
    EXPECT_NE(c.new_target->find("&COUNT=1000"), std::string::npos);
}

TEST(Canonical, OgcApiNamesKeepTheirSpelling) {
    const auto r = req("/collections/p/items?limit=5&f=json&bbox=1,2,3,4");
    ASSERT_EQ(r.problem, "");
    EXPECT_EQ(canonical_target(r), "/collections/p/items?limit=5&f=json&bbox=1,2,3,4");
    EXPECT_NE(refused(req("/collections/p/items?LIMIT=5000")), "");
    EXPECT_NE(refused(req("/collections/p/items?Bbox=1,2,3,4")), "");
}

TEST(Paths, Normalised) {
    std::string why;
    auto n = [&why](const char* p) {
        auto r = normalise_path(p, &why);
        return r ? r->decoded + " | " + r->encoded : "refused: " + why;
    };
    EXPECT_EQ(n("/tiles/3/1/2.png"), "/tiles/3/1/2.png | /tiles/3/1/2.png");
    EXPECT_EQ(n("/tiles/../private/x"), "/private/x | /private/x");
    EXPECT_EQ(n("/tiles/%2e%2E/private/x"), "/private/x | /private/x");
    EXPECT_EQ(n("/a/./b/"), "/a/b/ | /a/b/");
    EXPECT_EQ(n("//a///b"), "/a/b | /a/b");
    EXPECT_EQ(n("/a/b/.."), "/a/ | /a/");
    EXPECT_EQ(n("/a%20b/c%3F"), "/a b/c? | /a%20b/c%3F");
    EXPECT_EQ(n("/"), "/ | /");
    for (const char* bad : {"/a%2Fb", "/a%5cb", "/a\\b", "/../x", "/a/../../x", "/a%00", "/a%zz", "x"})
        EXPECT_EQ(n(bad).rfind("refused", 0), 0u) << bad;
}

TEST(Paths, PublicPathsMatchTheNormalisedPath) {
    Config c;
    c.coalesce.public_paths = {"/tiles/"};
    const HttpIn in{"GET", "/tiles/../private/tiles/3/1/2.png", "", ""};
    const auto r = parse_request(in);
    EXPECT_EQ(r.path, "/private/tiles/3/1/2.png");
    const HeaderList alice{{"Authorization", "Bearer a"}}, bob{{"Authorization", "Bearer b"}};
    const HttpIn direct{"GET", "/private/tiles/3/1/2.png", "", ""};
    // Not public: two credentials never share a flight.
    EXPECT_NE(coalesce_key(in, r, alice, c), coalesce_key(in, r, bob, c));
    EXPECT_EQ(coalesce_key(in, r, alice, c), coalesce_key(direct, parse_request(direct), alice, c));
}

TEST(Kvp, NameTables) {
    EXPECT_TRUE(known_ogc_name("WIDTH"));
    EXPECT_TRUE(known_ogc_name("FEATURE_COUNT"));
    EXPECT_TRUE(known_ogc_name("SUBSETTINGCRS"));
    EXPECT_FALSE(known_ogc_name("WIDTH "));
    for (const char* n : {"MODE", "MAPSIZE", "IMG.X", "REF.X", "MAP.LAYER[0]", "MAP_SIZE", "ZOOMSIZE", "ICON"})
        EXPECT_TRUE(mapserver_cgi_name(n)) << n;
    EXPECT_FALSE(mapserver_cgi_name("MAP_RESOLUTION"));
    EXPECT_FALSE(mapserver_cgi_name("MAP"));
}

TEST(Coverage, EveryWayToAskForASize) {
    Caps c;
    c.max_pixels = 1000000;
    const std::string v1 = "/?SERVICE=WCS&VERSION=1.0.0&REQUEST=GetCoverage&COVERAGE=d&CRS=EPSG:4326&BBOX=-10,35,30,45";
    const std::string v2 = "/?SERVICE=WCS&VERSION=2.0.1&REQUEST=GetCoverage&COVERAGEID=d";
    EXPECT_TRUE(caps_of(v1 + "&RESX=0.01&RESY=0.01", c).error);
    auto ok = caps_of(v1 + "&RESX=0.1&RESY=0.1", c);
    EXPECT_FALSE(ok.error);
    EXPECT_EQ(ok.width, 400);
    EXPECT_EQ(ok.height, 100);
    EXPECT_TRUE(caps_of(v1, c).error);                                    // 1.0 needs a size
    EXPECT_TRUE(caps_of(v1 + "&WIDTH=10&HEIGHT=10&RESX=1&RESY=1", c).error);  // two ways at once
    EXPECT_TRUE(caps_of(v2 + "&SCALESIZE=x(1500),y(1000)", c).error);
    EXPECT_TRUE(caps_of(v2 + "&SCALESIZE=x(500)", c).error);  // the other axis is unseen
    EXPECT_EQ(caps_of(v2 + "&SCALESIZE=x(500),y(300)", c).width, 500);
    EXPECT_TRUE(caps_of(v2 + "&SCALEEXTENT=x(0:1500),y(0:1000)", c).error);
    EXPECT_TRUE(caps_of(v2 + "&SCALEFACTOR=3", c).error);
    EXPECT_TRUE(caps_of(v2 + "&SCALEAXES=x(2),y(0.5)", c).error);
    EXPECT_FALSE(caps_of(v2 + "&SCALEFACTOR=0.25", c).error);
    EXPECT_FALSE(caps_of(v2 + "&SUBSET=x(0,10)&SUBSET=y(36,40)", c).error);  // native grid: priced, not capped
    EXPECT_EQ(caps_of("/?SERVICE=WCS&VERSION=1.1.1&REQUEST=GetCoverage&IDENTIFIER=d&BOUNDINGBOX=0,0,10,10,"
                      "urn:ogc:def:crs:EPSG::4326&GRIDOFFSETS=0.1,-0.1",
                      c)
                  .width,
              100);
}
