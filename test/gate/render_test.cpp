// Refusal documents per dialect, read back with an XML parser: root element,
// namespace, version and which attributes the exception carries.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <pugixml.hpp>

#include "gate/decision.hpp"
#include "gate/identity.hpp"
#include "gate/ogc_error.hpp"

using namespace ot::gate;
using ot::core::SpendOutcome;
using ot::core::SpendResult;

namespace {

struct Report {
    bool parsed = false;
    std::string root, ns, version;
    bool has_code = false, has_locator = false;
    std::string code, locator, text;
};

// OWS reports use the ows: prefix; WMS/WFS 1.0 ones a default namespace or none.
Report read(const std::string& body) {
    Report r;
    pugi::xml_document doc;
    if (!doc.load_string(body.c_str())) return r;
    const pugi::xml_node root = doc.document_element();
    const bool ows = std::string(root.name()) == "ows:ExceptionReport";
    const pugi::xml_node ex = root.first_child();
    const pugi::xml_attribute code = ex.attribute(ows ? "exceptionCode" : "code");
    const pugi::xml_attribute loc = ex.attribute("locator");
    r.parsed = true;
    r.root = root.name();
    r.ns = root.attribute(ows ? "xmlns:ows" : "xmlns").value();
    r.version = root.attribute("version").value();
    r.has_code = !code.empty();
    r.code = code.value();
    r.has_locator = !loc.empty();
    r.locator = loc.value();
    r.text = ows ? ex.child_value("ows:ExceptionText") : ex.child_value();
    return r;
}

const std::string kRest = "/wmts/pts/default/WebMercatorQuad/30/40/50.png";
const std::string kKvp =
    "/?SERVICE=WMTS&REQUEST=GetTile&VERSION=1.0.0&LAYER=pts&STYLE=default&TILEMATRIXSET=WebMercatorQuad"
    "&TILEMATRIX=30&TILEROW=40&TILECOL=50&FORMAT=image/png";
const std::string kOws11 = "http://www.opengis.net/ows/1.1";

Response decided(const std::string& target, const Config& c, std::optional<SpendResult> s = std::nullopt) {
    HttpIn in{"GET", target, "", ""};
    const Assessment a = assess(in, c);
    return decide(in, a, c.tiers[0], s, c).response;
}

Rendered upstream_failure(const std::string& target, ErrorKind k, const Config& c) {
    return render_refusal(assess({"GET", target, "", ""}, c), {k, "NoApplicableCode", "", "upstream trouble"}, c);
}

void expect_wmts_report(const Report& r, const std::string& code) {
    ASSERT_TRUE(r.parsed);
    EXPECT_EQ(r.root, "ows:ExceptionReport");
    EXPECT_EQ(r.ns, kOws11);
    EXPECT_EQ(r.version, "1.0.0");
    EXPECT_EQ(r.code, code);
}

}  // namespace

// WMTS clients (GDAL, OWSLib) read non-200 bodies: 07-057r7's statuses,
// whatever exception_status says, and text/xml, the only XML type GDAL prints.
TEST(WmtsRest, OverCapTileMatrixIsTheKvpReport) {
    Config c;
    const Response rest = decided(kRest, c), kvp = decided(kKvp, c);
    EXPECT_EQ(rest.status, 400);
    EXPECT_EQ(rest.content_type, "text/xml");
    const Report r = read(rest.body);
    expect_wmts_report(r, "InvalidParameterValue");
    EXPECT_EQ(r.locator, "TILEMATRIX");
    EXPECT_NE(r.text.find("Tile zoom level 30"), std::string::npos);
    EXPECT_EQ(rest.status, kvp.status);
    EXPECT_EQ(rest.content_type, kvp.content_type);
    EXPECT_EQ(rest.body, kvp.body);

    c.exception_status = 400;
    EXPECT_EQ(decided(kRest, c).status, 400);
    EXPECT_EQ(decided(kKvp, c).status, 400);
}

TEST(WmtsRest, ExceptionStatusStillRulesWfsAndWcs) {
    Config c;  // exception_status 200
    const Response wfs = decided("/?SERVICE=WFS&REQUEST=GetFeature&VERSION=2.0.0&COUNT=x", c);
    EXPECT_EQ(wfs.status, 200);
    EXPECT_EQ(wfs.content_type, "application/xml");
    const Response wcs = decided("/?SERVICE=WCS&REQUEST=GetCoverage&VERSION=2.0.1&WIDTH=99999&HEIGHT=99999", c);
    EXPECT_EQ(wcs.status, 200);
    EXPECT_EQ(wcs.content_type, "application/xml");
    EXPECT_EQ(decided(kKvp, c).status, 400);
}

TEST(WmtsRest, UnreadableTileMatrixIsAnOwsReport) {
    Config c;
    const Response rest = decided("/wmts/pts/default/WebMercatorQuad/z/40/50.png", c);
    EXPECT_EQ(rest.status, 400);
    EXPECT_EQ(rest.content_type, "text/xml");
    const Report r = read(rest.body);
    expect_wmts_report(r, "InvalidParameterValue");
    EXPECT_EQ(r.locator, "TileMatrix");
    const Response missing = decided("/?SERVICE=WMTS&REQUEST=GetTile&TILEROW=1&TILECOL=1", c);
    EXPECT_EQ(missing.status, 400);
    expect_wmts_report(read(missing.body), "MissingParameterValue");
}

TEST(WmtsRest, BudgetRefusalsAreOwsReports) {
    Config c;
    const std::string ok = "/wmts/pts/default/WebMercatorQuad/7/40/50.png";
    const std::string ok_kvp = "/?SERVICE=WMTS&REQUEST=GetTile&TILEMATRIX=7&TILEROW=40&TILECOL=50";
    const SpendResult refused{SpendOutcome::Refused, 0, 0.4, 2.2, 9.0};
    const Response rl = decided(ok, c, refused), rl_kvp = decided(ok_kvp, c, refused);
    EXPECT_EQ(rl.status, 429);
    EXPECT_EQ(rl.content_type, "text/xml");
    expect_wmts_report(read(rl.body), "NoApplicableCode");
    EXPECT_EQ(rl.body, rl_kvp.body);
    EXPECT_EQ(header_value(rl.headers, "Retry-After").value_or(""), "3");

    const Response nf = decided(ok, c, SpendResult{SpendOutcome::NeverFits, 0, 1000, 0, 0});
    EXPECT_EQ(nf.status, 400);
    EXPECT_EQ(nf.content_type, "text/xml");
    expect_wmts_report(read(nf.body), "InvalidParameterValue");
}

TEST(WmtsRest, RateLimitedCapabilitiesAreOwsReports) {
    Config c;
    const SpendResult refused{SpendOutcome::Refused, 0, 0.4, 2.2, 9.0};
    for (const char* caps : {"/wmts/1.0.0/WMTSCapabilities.xml", "/?SERVICE=WMTS&REQUEST=GetCapabilities"}) {
        const Response rl = decided(caps, c, refused);
        EXPECT_EQ(rl.status, 429) << caps;
        EXPECT_EQ(rl.content_type, "text/xml") << caps;
        expect_wmts_report(read(rl.body), "NoApplicableCode");
    }
}

TEST(WmtsRest, FeatureInfoOverTheLevelsIsRefusedAtItsTileMatrix) {
    Config c;
    const Response r = decided("/wmts/pts/default/WebMercatorQuad/30/40/50/3/4.xml", c);
    EXPECT_EQ(r.status, 400);
    EXPECT_EQ(r.content_type, "text/xml");
    const Report rep = read(r.body);
    expect_wmts_report(rep, "InvalidParameterValue");
    EXPECT_NE(rep.text.find("Tile zoom level 30"), std::string::npos);
}

TEST(WmtsRest, UpstreamFailuresAreOwsReports) {
    Config c;
    const std::string ok = "/wmts/pts/default/WebMercatorQuad/7/40/50.png";
    for (auto [kind, status] : {std::pair{ErrorKind::UpstreamDown, 502}, std::pair{ErrorKind::Busy, 503},
                                std::pair{ErrorKind::UpstreamTimeout, 504}}) {
        const Rendered r = upstream_failure(ok, kind, c);
        EXPECT_EQ(r.status, status);
        EXPECT_EQ(r.content_type, "text/xml");
        expect_wmts_report(read(r.body), "NoApplicableCode");
        EXPECT_EQ(r.body, upstream_failure("/?SERVICE=WMTS&REQUEST=GetTile&TILEMATRIX=7", kind, c).body);
    }
}

TEST(OgcApiTiles, RefusalsAreProblemJson) {
    Config c;
    const Response cap = decided("/collections/roads/tiles/WebMercatorQuad/30/1/1", c);
    EXPECT_EQ(cap.status, 400);
    EXPECT_EQ(cap.content_type, "application/problem+json");
    const auto j = nlohmann::json::parse(cap.body);
    EXPECT_EQ(j["status"], 400);
    EXPECT_EQ(j["parameter"], "tileMatrix");
    EXPECT_NE(j["detail"].get<std::string>().find("Tile zoom level 30"), std::string::npos);
    c.exception_status = 400;
    EXPECT_EQ(decided("/tiles/WebMercatorQuad/30/1/1", c).content_type, "application/problem+json");
    const Response rl = decided("/map/tiles/WebMercatorQuad/3/1/1.png", c, SpendResult{SpendOutcome::Refused, 0, 0.4, 2.2, 9.0});
    EXPECT_EQ(rl.status, 429);
    EXPECT_EQ(rl.content_type, "application/problem+json");
    EXPECT_EQ(nlohmann::json::parse(rl.body)["status"], 429);
}

TEST(OwsText, QuotesStayReadable) {
    // GDAL prints a non-200 report raw: "service's", not "service&apos;s".
    const Rendered r = render_error(Service::Wmts, Dialect::Ows11,
                                    {ErrorKind::OverCap, "InvalidParameterValue", "a\"b", "it's \"big\" & <odd>"}, 200);
    EXPECT_NE(r.body.find("<ows:ExceptionText>it's \"big\" &amp; &lt;odd&gt;</ows:ExceptionText>"), std::string::npos)
        << r.body;
    EXPECT_NE(r.body.find("locator=\"a&quot;b\""), std::string::npos) << r.body;
    EXPECT_EQ(read(r.body).text, "it's \"big\" & <odd>");
}

TEST(XyzTiles, StayPlainText) {
    Config c;
    const Response cap = decided("/tiles/30/1/1.png", c);
    EXPECT_EQ(cap.status, 400);
    EXPECT_EQ(cap.content_type, "text/plain; charset=utf-8");
    EXPECT_EQ(cap.body.rfind("Tile zoom level 30", 0), 0u);
    const Response rl = decided("/tiles/3/1/1.png", c, SpendResult{SpendOutcome::Refused, 0, 0.4, 2.2, 9.0});
    EXPECT_EQ(rl.status, 429);
    EXPECT_EQ(rl.content_type, "text/plain; charset=utf-8");
    EXPECT_EQ(upstream_failure("/tiles/3/1/1.png", ErrorKind::UpstreamDown, c).content_type,
              "text/plain; charset=utf-8");
}

TEST(WmsCodes, PixelCapHasNoCode) {
    Config c;
    const Response v130 = decided("/?SERVICE=WMS&REQUEST=GetMap&VERSION=1.3.0&WIDTH=99999&HEIGHT=99999", c);
    EXPECT_EQ(v130.status, 200);
    EXPECT_EQ(v130.content_type, "text/xml");
    const Report r = read(v130.body);
    ASSERT_TRUE(r.parsed);
    EXPECT_EQ(r.root, "ServiceExceptionReport");
    EXPECT_EQ(r.ns, "http://www.opengis.net/ogc");
    EXPECT_EQ(r.version, "1.3.0");
    EXPECT_FALSE(r.has_code) << v130.body;
    EXPECT_EQ(r.locator, "WIDTH");
    EXPECT_NE(r.text.find("pixels"), std::string::npos);

    const Response v111 = decided("/?SERVICE=WMS&REQUEST=GetMap&VERSION=1.1.1&WIDTH=99999&HEIGHT=99999", c);
    EXPECT_EQ(v111.status, 200);
    EXPECT_EQ(v111.content_type, "application/vnd.ogc.se_xml");
    const Report o = read(v111.body);
    ASSERT_TRUE(o.parsed);
    EXPECT_EQ(o.root, "ServiceExceptionReport");
    EXPECT_TRUE(o.ns.empty());
    EXPECT_EQ(o.version, "1.1.1");
    EXPECT_FALSE(o.has_code) << v111.body;
    EXPECT_FALSE(o.has_locator) << v111.body;  // not in the 1.1.1 DTD
}

TEST(WmsCodes, MissingSizeBudgetAndUpstreamHaveNoCode) {
    Config c;
    const std::string v130 = "/?SERVICE=WMS&REQUEST=GetMap&VERSION=1.3.0&CRS=EPSG:4326&BBOX=0,0,1,1&WIDTH=256&HEIGHT=256";
    const Report missing = read(decided("/?SERVICE=WMS&REQUEST=GetMap&VERSION=1.3.0&WIDTH=256", c).body);
    EXPECT_FALSE(missing.has_code);
    EXPECT_EQ(missing.locator, "HEIGHT");
    const Response rl = decided(v130, c, SpendResult{SpendOutcome::Refused, 0, 0.4, 2.2, 9.0});
    EXPECT_EQ(rl.status, 429);
    EXPECT_FALSE(read(rl.body).has_code) << rl.body;
    const Response nf = decided(v130, c, SpendResult{SpendOutcome::NeverFits, 0, 1000, 0, 0});
    EXPECT_EQ(nf.status, 200);
    EXPECT_FALSE(read(nf.body).has_code) << nf.body;
    for (ErrorKind k : {ErrorKind::UpstreamDown, ErrorKind::Busy, ErrorKind::UpstreamTimeout}) {
        const Rendered r = upstream_failure(v130, k, c);
        EXPECT_FALSE(read(r.body).has_code) << r.body;
        const Rendered o = upstream_failure("/?SERVICE=WMS&REQUEST=GetMap&VERSION=1.1.1", k, c);
        EXPECT_FALSE(read(o.body).has_code) << o.body;
    }
}

TEST(WmsCodes, MappedToTheVersionsList) {
    auto code = [](Dialect d, const std::string& c, const std::string& loc) {
        return read(render_error(Service::Wms, d, {ErrorKind::BadRequest, c, loc, "t"}, 200).body);
    };
    EXPECT_EQ(code(Dialect::Wms130, "InvalidParameterValue", "FORMAT").code, "InvalidFormat");
    EXPECT_EQ(code(Dialect::Wms111, "InvalidParameterValue", "format").code, "InvalidFormat");
    EXPECT_EQ(code(Dialect::Wms130, "InvalidParameterValue", "CRS").code, "InvalidCRS");
    EXPECT_EQ(code(Dialect::Wms111, "InvalidParameterValue", "SRS").code, "InvalidSRS");
    EXPECT_EQ(code(Dialect::Wms111, "InvalidCRS", "").code, "InvalidSRS");
    EXPECT_EQ(code(Dialect::Wms130, "InvalidSRS", "").code, "InvalidCRS");
    EXPECT_EQ(code(Dialect::Wms130, "LayerNotDefined", "LAYERS").code, "LayerNotDefined");
    EXPECT_EQ(code(Dialect::Wms130, "LayerNotDefined", "LAYERS").locator, "LAYERS");
    EXPECT_EQ(code(Dialect::Wms111, "OperationNotSupported", "").code, "OperationNotSupported");
    for (const char* ows : {"InvalidParameterValue", "MissingParameterValue", "NoApplicableCode",
                            "OptionNotSupported", "OperationProcessingFailed", "TileOutOfRange"}) {
        EXPECT_FALSE(code(Dialect::Wms130, ows, "WIDTH").has_code) << ows;
        EXPECT_FALSE(code(Dialect::Wms111, ows, "WIDTH").has_code) << ows;
    }
}

TEST(OwsCodes, WfsKeepOwsCodes) {
    const OgcError e{ErrorKind::OverCap, "InvalidParameterValue", "COUNT", "too many"};
    const Report f100 = read(render_error(Service::Wfs, Dialect::Wfs100, e, 200).body);
    EXPECT_EQ(f100.root, "ServiceExceptionReport");
    EXPECT_EQ(f100.version, "1.2.0");
    EXPECT_EQ(f100.code, "InvalidParameterValue");
    EXPECT_EQ(f100.locator, "COUNT");
    const Report f110 = read(render_error(Service::Wfs, Dialect::Wfs110, e, 200).body);
    EXPECT_EQ(f110.root, "ows:ExceptionReport");
    EXPECT_EQ(f110.ns, "http://www.opengis.net/ows");
    EXPECT_EQ(f110.code, "InvalidParameterValue");
    const Rendered f200 = render_error(Service::Wfs, Dialect::Ows11, e, 200);
    EXPECT_EQ(f200.content_type, "application/xml");
    const Report r200 = read(f200.body);
    EXPECT_EQ(r200.ns, kOws11);
    EXPECT_EQ(r200.version, "2.0.0");
    EXPECT_EQ(r200.code, "InvalidParameterValue");
    EXPECT_EQ(r200.locator, "COUNT");
    const OgcError blank{ErrorKind::UpstreamDown, "", "", "down"};
    EXPECT_EQ(read(render_error(Service::Wfs, Dialect::Ows11, blank, 200).body).code, "NoApplicableCode");
}
