#include <gtest/gtest.h>

#include "gate/bodies.hpp"
#include "gate/kvp.hpp"
#include "gate/request.hpp"
#include "gate/text.hpp"

using namespace ot::gate;

static OgcRequest get(const std::string& target) { return parse_request({"GET", target, "", ""}); }

TEST(PercentDecode, DecodesAndRejectsMalformed) {
    EXPECT_EQ(percent_decode("a%20b+c", true).value(), "a b c");
    EXPECT_EQ(percent_decode("a+b", false).value(), "a+b");
    EXPECT_EQ(percent_decode("%41%6a", false).value(), "Aj");
    EXPECT_FALSE(percent_decode("%", false));
    EXPECT_FALSE(percent_decode("%4", false));
    EXPECT_FALSE(percent_decode("%zz", false));
    EXPECT_EQ(percent_decode("%00", false).value(), std::string(1, '\0'));
}

TEST(ParseInt, StrictAndOverflowSafe) {
    EXPECT_EQ(parse_int("123").value(), 123);
    EXPECT_EQ(parse_int("-5").value(), -5);
    EXPECT_FALSE(parse_int("12a"));
    EXPECT_FALSE(parse_int(""));
    EXPECT_FALSE(parse_int("99999999999999999999"));
    EXPECT_EQ(parse_int("-9223372036854775808").value(), INT64_MIN);
    EXPECT_FALSE(parse_int("9223372036854775808"));
    EXPECT_FALSE(parse_double("nan"));
    EXPECT_FALSE(parse_double("1e999"));
    EXPECT_DOUBLE_EQ(parse_double("-1.5e2").value(), -150.0);
}

TEST(Kvp, KeysCaseInsensitiveAndDecoded) {
    auto r = get("/wms?service=wms&Request=GetMap&version=1.3.0&width=256&HEIGHT=%32%35%36&bbox=0,0,1,1&crs=EPSG:4326");
    EXPECT_TRUE(r.problem.empty()) << r.problem;
    EXPECT_EQ(r.service, Service::Wms);
    EXPECT_EQ(r.op, Op::GetMap);
    EXPECT_EQ(r.dialect, Dialect::Wms130);
    EXPECT_EQ(*r.width, "256");
    EXPECT_EQ(*r.height, "256");
    ASSERT_TRUE(r.bbox);
    EXPECT_TRUE(r.bbox_axis_latlon);
}

TEST(Kvp, DuplicateKeyIsAProblem) {
    auto r = get("/?SERVICE=WMS&REQUEST=GetMap&WIDTH=10&width=10000");
    EXPECT_FALSE(r.problem.empty());
}

TEST(Kvp, MalformedEscapeIsAProblem) {
    EXPECT_FALSE(get("/?SERVICE=WMS&REQUEST=GetMap&WIDTH=%G0").problem.empty());
}

TEST(Kvp, ServiceInferredFromRequest) {
    auto r = get("/?REQUEST=GetFeature&VERSION=1.1.0&TYPENAME=x");
    EXPECT_EQ(r.service, Service::Wfs);
    EXPECT_EQ(r.dialect, Dialect::Wfs110);
    EXPECT_EQ(r.count_key, "MAXFEATURES");
}

TEST(Kvp, WmsVersions) {
    EXPECT_EQ(get("/?SERVICE=WMS&REQUEST=GetMap&VERSION=1.1.1").dialect, Dialect::Wms111);
    EXPECT_EQ(get("/?SERVICE=WMS&REQUEST=GetMap&WMTVER=1.0.0").dialect, Dialect::Wms111);
    EXPECT_EQ(get("/?SERVICE=WMS&REQUEST=GetMap").dialect, Dialect::Wms130);
}

TEST(Kvp, WfsCountKeysPerVersion) {
    auto v2 = get("/?SERVICE=WFS&REQUEST=GetFeature&VERSION=2.0.0&COUNT=7");
    EXPECT_EQ(v2.count_key, "COUNT");
    EXPECT_EQ(*v2.count, "7");
    auto v1 = get("/?SERVICE=WFS&REQUEST=GetFeature&VERSION=1.0.0&MAXFEATURES=9");
    EXPECT_EQ(v1.dialect, Dialect::Wfs100);
    EXPECT_EQ(*v1.count, "9");
    auto mixed = get("/?SERVICE=WFS&REQUEST=GetFeature&VERSION=2.0.0&maxfeatures=9");
    EXPECT_EQ(mixed.count_key, "MAXFEATURES");
    EXPECT_FALSE(get("/?SERVICE=WFS&REQUEST=GetFeature&VERSION=2.0.0&COUNT=1&MAXFEATURES=9").problem.empty());
}

TEST(Kvp, WfsBboxWithCrsSuffix) {
    auto r = get("/?SERVICE=WFS&REQUEST=GetFeature&VERSION=2.0.0&BBOX=40,-5,50,5,urn:ogc:def:crs:EPSG::4326");
    ASSERT_TRUE(r.bbox);
    EXPECT_EQ(r.bbox->crs, "urn:ogc:def:crs:EPSG::4326");
    EXPECT_TRUE(r.bbox_axis_latlon);
    EXPECT_FALSE(get("/?SERVICE=WFS&REQUEST=GetFeature&BBOX=1,2,3").problem.empty());
}

TEST(Kvp, WmtsTileMatrixZoom) {
    auto r = get("/?SERVICE=WMTS&REQUEST=GetTile&TILEMATRIX=EPSG:3857:12&TILEROW=1&TILECOL=2");
    EXPECT_EQ(r.op, Op::GetTile);
    EXPECT_EQ(*r.zoom, 12);
    EXPECT_EQ(r.dialect, Dialect::Ows11);
}

// A TileMatrix without a trailing number was priced as zoom 0 (the cheapest).
TEST(Kvp, WmtsTileMatrixWithoutZoomIsRefused) {
    for (const char* tm : {"EPSG:3857:z", "top", "12a", ""}) {
        auto r = get(std::string("/?SERVICE=WMTS&REQUEST=GetTile&TILEMATRIX=") + tm + "&TILEROW=1&TILECOL=2");
        EXPECT_FALSE(r.zoom) << tm;
        EXPECT_FALSE(r.problem.empty()) << tm;
    }
}

TEST(Kvp, WcsVersions) {
    EXPECT_EQ(get("/?SERVICE=WCS&REQUEST=GetCoverage&VERSION=1.0.0").dialect, Dialect::Wfs100);
    EXPECT_EQ(get("/?SERVICE=WCS&REQUEST=GetCoverage&VERSION=2.0.1").dialect, Dialect::Ows11);
}

TEST(Paths, XyzAndWmtsRestTiles) {
    auto xyz = get("/tiles/5/10/12.png");
    EXPECT_EQ(xyz.service, Service::Tiles);
    EXPECT_EQ(*xyz.zoom, 5);
    EXPECT_EQ(xyz.dialect, Dialect::Plain);
    auto rest = get("/wmts/1.0.0/layer/default/WebMercatorQuad/7/40/50.png");
    EXPECT_EQ(rest.service, Service::Wmts);
    EXPECT_EQ(*rest.zoom, 7);
    EXPECT_EQ(rest.dialect, Dialect::Ows11);  // as WMTS KVP
    EXPECT_EQ(get("/static/5/10/12.png").op, Op::Other);
}

TEST(Kvp, WmtsGetFeatureInfoHasALevelNotASize) {
    auto r = get("/?SERVICE=WMTS&REQUEST=GetFeatureInfo&VERSION=1.0.0&LAYER=pts&TILEMATRIX=EPSG:3857:9&TILEROW=1&TILECOL=2"
                 "&I=3&J=4&INFOFORMAT=text/html");
    EXPECT_TRUE(r.problem.empty()) << r.problem;
    EXPECT_EQ(r.service, Service::Wmts);
    EXPECT_EQ(r.op, Op::GetFeatureInfo);
    EXPECT_EQ(r.dialect, Dialect::Ows11);
    EXPECT_EQ(*r.zoom, 9);
    EXPECT_FALSE(r.width);
    auto missing = get("/?SERVICE=WMTS&REQUEST=GetFeatureInfo&TILEROW=1&TILECOL=2&I=3&J=4");
    EXPECT_EQ(missing.problem_code, "MissingParameterValue");
    EXPECT_EQ(missing.problem_locator, "TILEMATRIX");
}

TEST(Paths, WmtsRestFeatureInfo) {
    // .../{TileMatrix}/{TileRow}/{TileCol}/{J}/{I}.{ext}: the level is fifth from the end.
    auto r = get("/wmts/pts/default/WebMercatorQuad/7/40/50/3/4.xml");
    EXPECT_TRUE(r.problem.empty()) << r.problem;
    EXPECT_EQ(r.service, Service::Wmts);
    EXPECT_EQ(r.op, Op::GetFeatureInfo);
    EXPECT_EQ(r.dialect, Dialect::Ows11);
    EXPECT_EQ(*r.zoom, 7);
    EXPECT_EQ(*get("/wmts/pts/default/EPSG:3857/EPSG:3857:12/40/500/255/0.html").zoom, 12);
    // GeoWebCache puts the format in the query.
    auto gwc = get("/gwc/rest/wmts/pts/default/EPSG:900913/EPSG:900913:5/1/2/3/4?format=text/plain");
    EXPECT_EQ(gwc.op, Op::GetFeatureInfo);
    EXPECT_EQ(*gwc.zoom, 5);
    EXPECT_EQ(get("/wmts/pts/default/WebMercatorQuad/7/40/50/3/4").op, Op::GetFeatureInfo);
}

TEST(Paths, WmtsRestTileWithNumberedStyleIsNotFeatureInfo) {
    // Same shape as feature info; a tile format says it is a tile.
    auto png = get("/wmts/pts/style1/3857/7/40/50.png");
    EXPECT_EQ(png.op, Op::GetTile);
    EXPECT_EQ(*png.zoom, 7);
    auto q = get("/gwc/rest/wmts/pts/style1/3857/7/40/50?format=image/png");
    EXPECT_EQ(q.op, Op::GetTile);
    EXPECT_EQ(*q.zoom, 7);
    EXPECT_EQ(get("/wmts/pts/style1/3857/7/40/50.pbf").op, Op::GetTile);
    EXPECT_EQ(get("/wmts/pts/style1/3857/7/40/50?format=application/vnd.mapbox-vector-tile").op, Op::GetTile);
    // A plain REST tile with TileCol above any zoom is still a tile at its own level.
    auto deep = get("/wmts/pts/default/WebMercatorQuad/7/40/5000.png");
    EXPECT_EQ(deep.op, Op::GetTile);
    EXPECT_EQ(*deep.zoom, 7);
}

TEST(Paths, WmtsIsAPathSegmentInAnyCase) {
    for (const char* p : {"/Wmts/pts/default/WebMercatorQuad/7/40/50.png", "/WMTS/pts/default/g/7/40/50.png",
                          "/geoserver/gwc/service/wmts/rest/pts/default/g/7/40/50.png"}) {
        auto r = get(p);
        EXPECT_EQ(r.service, Service::Wmts) << p;
        EXPECT_EQ(r.dialect, Dialect::Ows11) << p;
    }
    // Substrings are not the segment.
    auto x = get("/wmts_x/tiles/5/10/12.png");
    EXPECT_EQ(x.service, Service::Tiles);
    EXPECT_EQ(x.dialect, Dialect::Plain);
    EXPECT_EQ(get("/mywmts/5/10/12.png").op, Op::Other);
    EXPECT_EQ(get("/data/wmts.old/tiles/5/10/12.png").service, Service::Tiles);
}

TEST(Paths, WmtsRestCapabilities) {
    for (const char* p : {"/wmts/1.0.0/WMTSCapabilities.xml", "/gwc/rest/wmts/WMTSCapabilities.xml",
                          "/service/1.0.0/wmtscapabilities.xml"}) {
        auto r = get(p);
        EXPECT_EQ(r.service, Service::Wmts) << p;
        EXPECT_EQ(r.dialect, Dialect::Ows11) << p;
        EXPECT_EQ(r.op, Op::Other) << p;
        EXPECT_TRUE(r.problem.empty()) << p;
    }
}

TEST(Paths, OgcApiTilesAreOgcApi) {
    for (const char* p : {"/ogc/collections/roads/tiles/WebMercatorQuad/5/10/12",
                          "/collections/roads/tiles/MyGrid/5/10/12.mvt", "/collections/roads/map/tiles/MyGrid/5/10/12.png",
                          "/api/map/tiles/custom/5/10/12.png", "/api/styles/night/map/tiles/custom/5/10/12",
                          "/tiles/WebMercatorQuad/5/10/12", "/ogcapi/tiles/WorldCRS84Quad/5/10/12?f=mvt",
                          "/tiles/UTM31WGS84Quad/5/10/12"}) {
        auto r = get(p);
        EXPECT_EQ(r.service, Service::Tiles) << p;
        EXPECT_EQ(r.op, Op::GetTile) << p;
        EXPECT_EQ(r.dialect, Dialect::OgcApi) << p;
        EXPECT_EQ(*r.zoom, 5) << p;
    }
    auto unnumbered = get("/collections/roads/tiles/MyGrid/top/10/12");
    EXPECT_EQ(unnumbered.dialect, Dialect::OgcApi);
    EXPECT_EQ(unnumbered.problem_locator, "tileMatrix");
}

TEST(Paths, XyzStaysPlain) {
    // A layer name where OGC API has its TileMatrixSet: XYZ, not OGC API.
    for (const char* p : {"/tiles/5/10/12.png", "/tiles/roads/5/10/12.png", "/tms/1.0.0/roads/5/10/12.png",
                          "/roads/tiles/5/10/12.pbf", "/tiles/UTMxxWGS84Quad/5/10/12.png"}) {
        auto r = get(p);
        EXPECT_EQ(r.service, Service::Tiles) << p;
        EXPECT_EQ(r.dialect, Dialect::Plain) << p;
        EXPECT_EQ(*r.zoom, 5) << p;
    }
    // A WMTS path keeps WMTS whatever follows.
    EXPECT_EQ(get("/wmts/tiles/WebMercatorQuad/5/10/12.png").dialect, Dialect::Ows11);
}

TEST(Paths, OgcApiItems) {
    auto r = get("/ogc/collections/roads/items?limit=50&bbox=1,2,3,4");
    EXPECT_EQ(r.service, Service::Features);
    EXPECT_EQ(r.op, Op::Items);
    EXPECT_EQ(*r.count, "50");
    ASSERT_TRUE(r.bbox);
    EXPECT_EQ(get("/collections/roads/items/17").op, Op::Item);
    EXPECT_FALSE(get("/collections/roads/items?bbox=1,2").problem.empty());
}

TEST(Query, SerialiseReplacesOrAppends) {
    std::string why;
    auto q = parse_query("a=1&count=5&b=2", &why);
    ASSERT_TRUE(q);
    EXPECT_EQ(serialise_query(q->params, "COUNT", "COUNT", "10"), "a=1&count=10&b=2");
    EXPECT_EQ(serialise_query(q->params, "MAXFEATURES", "MAXFEATURES", "10"), "a=1&count=5&b=2&MAXFEATURES=10");
}

TEST(Bodies, WfsXmlGetFeature) {
    const std::string xml20 =
        "<?xml version=\"1.0\"?><wfs:GetFeature service=\"WFS\" version=\"2.0.0\" count=\"5000\" "
        "xmlns:wfs=\"http://www.opengis.net/wfs/2.0\"><wfs:Query typeNames=\"pts\"/></wfs:GetFeature>";
    auto r = parse_request({"POST", "/", "text/xml", xml20});
    EXPECT_EQ(r.op, Op::GetFeature);
    EXPECT_EQ(r.dialect, Dialect::Ows11);
    EXPECT_EQ(*r.count, "5000");
    auto out = rewrite_xml_count(xml20, "count", "100");
    ASSERT_TRUE(out);
    EXPECT_NE(out->find("count=\"100\""), std::string::npos);
    EXPECT_EQ(out->find("5000"), std::string::npos);

    auto r11 = parse_request({"POST", "/", "application/octet-stream",
                              "<GetFeature version=\"1.1.0\" service=\"WFS\"><Query typeName=\"pts\"/></GetFeature>"});
    EXPECT_EQ(r11.dialect, Dialect::Wfs110);
    EXPECT_FALSE(r11.count);
    EXPECT_EQ(r11.count_key, "maxFeatures");
}

TEST(Bodies, XmlDoctypeAndGarbageRejected) {
    EXPECT_FALSE(parse_request({"POST", "/", "text/xml", "<!DOCTYPE x [<!ENTITY a \"1\">]><GetFeature/>"}).problem.empty());
    EXPECT_FALSE(parse_request({"POST", "/", "text/xml", "<GetFeature"}).problem.empty());
}

TEST(Bodies, SearchJson) {
    auto r = parse_request({"POST", "/search", "application/json", "{\"limit\": 20000, \"bbox\": [0,0,1,1]}"});
    EXPECT_EQ(r.op, Op::Search);
    EXPECT_EQ(*r.count, "20000");
    EXPECT_FALSE(parse_request({"POST", "/search", "application/json", "{\"limit\": \"x\"}"}).problem.empty());
    EXPECT_FALSE(parse_request({"POST", "/search", "application/json", "{nope"}).problem.empty());
    auto out = rewrite_json_limit("{\"limit\": 20000}", 100);
    ASSERT_TRUE(out);
    EXPECT_EQ(*out, "{\"limit\":100}");
}

TEST(Bodies, FormEncodedKvp) {
    auto r = parse_request({"POST", "/", "application/x-www-form-urlencoded",
                            "SERVICE=WFS&REQUEST=GetFeature&VERSION=1.0.0&MAXFEATURES=3"});
    EXPECT_EQ(r.op, Op::GetFeature);
    EXPECT_EQ(*r.count, "3");
}
