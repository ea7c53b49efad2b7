// The capabilities rewrite on MapServer's own documents (test/gate/fixtures/capabilities)
// and on hand-made edge cases: values lowered/kept/inserted, addresses, and
// documents the rewriter must pass through unchanged whatever the chunking.
#include <gtest/gtest.h>
#include <pugixml.hpp>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "gate/capabilities.hpp"
#include "gate/capabilities_url.hpp"
#include "fixture.hpp"

using namespace ot::gate;

namespace {

CapabilityLimits limits() {
    CapabilityLimits l;
    l.max_width = l.max_height = 2048;
    l.count_default = 100;
    l.public_base = "https://gate.example/maps/";
    l.rewrite_origins = {"http://127.0.0.1:18900"};
    return l;
}

std::string chunked(const std::string& in, const CapabilityLimits& l, std::size_t chunk, RewriteReport* rep = nullptr) {
    CapabilitiesRewriter r(l);
    std::string out;
    for (std::size_t i = 0; i < in.size(); i += chunk) r.feed(in.data() + i, std::min(chunk, in.size() - i), out);
    r.finish(out);
    if (rep) *rep = r.report();
    return out;
}

std::string replace_all(std::string s, const std::string& a, const std::string& b) {
    for (std::size_t p = s.find(a); p != std::string::npos; p = s.find(a, p + b.size())) s.replace(p, a.size(), b);
    return s;
}

std::string text_of(const pugi::xml_document& d, const char* xpath) {
    return d.select_node(xpath).node().text().as_string();
}

const char* kWms130 = R"(<?xml version="1.0"?>
<WMS_Capabilities version="1.3.0" xmlns="http://www.opengis.net/wms" xmlns:xlink="http://www.w3.org/1999/xlink">
<Service><Name>WMS</Name><Title>t</Title>
<OnlineResource xlink:href='http://127.0.0.1:18900/cgi-bin/mapserv?map=a&amp;x=1'/>
<!-- a comment, kept --><![CDATA[ kept <too> ]]>
</Service>
<Capability><Request><GetMap><DCPType><HTTP><Get><OnlineResource
 xlink:href="http://127.0.0.1:18900/x?a=1&amp;b=2"/></Get></HTTP></DCPType></GetMap></Request>
<!-- the map server http://127.0.0.1:18900 --></Capability>
</WMS_Capabilities>
)";

}  // namespace

TEST(CapabilitiesLimits, SidesFitThePixelCap) {
    Caps c;
    c.max_pixels = 500000;
    c.max_features = 100;
    CapabilityLimits l = capability_limits(c, "http://gate", {});
    EXPECT_EQ(l.max_width, 707);  // 707² = 499849 ≤ 500000 < 708²
    EXPECT_EQ(l.max_height, 707);
    EXPECT_EQ(l.count_default, 100);
    c.max_side = 512;
    EXPECT_EQ(capability_limits(c, "", {}).max_width, 512);
    c.max_side = 4000;
    EXPECT_EQ(capability_limits(c, "", {}).max_width, 707);
}

TEST(CapabilitiesWms, MapServer130LargerValuesLowered) {
    RewriteReport rep;
    std::string out = rewrite_capabilities(fixture("mapserver-wms130.xml"), limits(), &rep);
    pugi::xml_document d;
    ASSERT_TRUE(d.load_string(out.c_str()));
    EXPECT_EQ(text_of(d, "//Service/MaxWidth"), "2048");
    EXPECT_EQ(text_of(d, "//Service/MaxHeight"), "2048");
    EXPECT_EQ(rep.kind, CapsDocKind::Wms130);
    EXPECT_FALSE(rep.passed_raw);
    EXPECT_EQ(out.find("127.0.0.1:18900"), std::string::npos) << "an address of the map server survived";
    EXPECT_NE(out.find("xlink:href=\"https://gate.example/maps/?\""), std::string::npos);
    EXPECT_EQ(rep.first_foreign_origin, "http://127.0.0.1:18900");
    // Outside the edits the document is byte for byte what MapServer sent.
    std::string back = replace_all(replace_all(out, "https://gate.example/maps/", "http://127.0.0.1:18900/"),
                                   ">2048<", ">8192<");
    EXPECT_EQ(back, fixture("mapserver-wms130.xml"));
}

TEST(CapabilitiesWms, SmallerUpstreamValueKept) {
    CapabilityLimits l = limits();
    l.max_width = l.max_height = 10000;
    std::string out = rewrite_capabilities(fixture("mapserver-wms130.xml"), l);
    EXPECT_NE(out.find("<MaxWidth>8192</MaxWidth>"), std::string::npos);
    EXPECT_NE(out.find("<MaxHeight>8192</MaxHeight>"), std::string::npos);
}

TEST(CapabilitiesWms, MissingValuesInsertedInSchemaOrder) {
    CapabilityLimits l = limits();
    l.layer_limit = 4;
    std::string out = rewrite_capabilities(kWms130, l);
    EXPECT_NE(out.find("]]>\n<LayerLimit>4</LayerLimit><MaxWidth>2048</MaxWidth><MaxHeight>2048</MaxHeight></Service>"),
              std::string::npos)
        << out;
    EXPECT_NE(out.find("<!-- a comment, kept --><![CDATA[ kept <too> ]]>"), std::string::npos);
    EXPECT_NE(out.find("xlink:href='https://gate.example/maps/cgi-bin/mapserv?map=a&amp;x=1'"), std::string::npos) << out;
    // LayerLimit goes before an existing MaxWidth, not after MaxHeight.
    std::string with = replace_all(kWms130, "</Service>", "<MaxWidth>100</MaxWidth><MaxHeight>9000</MaxHeight></Service>");
    out = rewrite_capabilities(with, l);
    EXPECT_NE(out.find("<LayerLimit>4</LayerLimit><MaxWidth>100</MaxWidth><MaxHeight>2048</MaxHeight></Service>"),
              std::string::npos)
        << out;
}

TEST(CapabilitiesWms, PrefixedRootAndBom) {
    std::string doc = "\xEF\xBB\xBF<wms:WMS_Capabilities xmlns:wms=\"http://www.opengis.net/wms\" version=\"1.3.0\">"
                      "<wms:Service><wms:Name>WMS</wms:Name><wms:MaxWidth/></wms:Service></wms:WMS_Capabilities>";
    RewriteReport rep;
    std::string out = rewrite_capabilities(doc, limits(), &rep);
    EXPECT_EQ(out, "\xEF\xBB\xBF<wms:WMS_Capabilities xmlns:wms=\"http://www.opengis.net/wms\" version=\"1.3.0\">"
                   "<wms:Service><wms:Name>WMS</wms:Name><wms:MaxWidth>2048</wms:MaxWidth>"
                   "<wms:MaxHeight>2048</wms:MaxHeight></wms:Service></wms:WMS_Capabilities>");
    EXPECT_FALSE(rep.passed_raw) << rep.reason;
}

TEST(CapabilitiesWms, Version111GetsACommentAndAddresses) {
    RewriteReport rep;
    std::string out = rewrite_capabilities(fixture("mapserver-wms111.xml"), limits(), &rep);
    EXPECT_EQ(rep.kind, CapsDocKind::Wms111);
    EXPECT_NE(out.find("<!-- ogc-gate: GetMap answers at most 2048x2048 pixels"), std::string::npos);
    EXPECT_EQ(out.find("<MaxWidth>"), std::string::npos);  // not in the 1.1.1 DTD
    EXPECT_EQ(out.find("127.0.0.1:18900"), std::string::npos);
    EXPECT_NE(out.find("<!DOCTYPE WMT_MS_Capabilities"), std::string::npos);
}

TEST(CapabilitiesWfs, MapServer200PagingAndCountDefault) {
    RewriteReport rep;
    std::string out = rewrite_capabilities(fixture("mapserver-wfs200.xml"), limits(), &rep);
    pugi::xml_document d;
    ASSERT_TRUE(d.load_string(out.c_str()));
    // GDAL 3.6 reads ImplementsResultPaging under OperationsMetadata and
    // CountDefault under its GetFeature Operation (doc/capabilities.md).
    EXPECT_EQ(text_of(d, "//ows:OperationsMetadata/ows:Constraint[@name='ImplementsResultPaging']/ows:DefaultValue"), "TRUE");
    EXPECT_EQ(text_of(d, "//ows:Operation[@name='GetFeature']/ows:Constraint[@name='CountDefault']/ows:DefaultValue"), "100");
    EXPECT_EQ(text_of(d, "//ows:OperationsMetadata/ows:Constraint[@name='CountDefault']/ows:DefaultValue"), "100");
    EXPECT_EQ(d.select_nodes("//ows:Constraint[@name='ImplementsResultPaging']").size(), 1u);
    EXPECT_EQ(out.find("127.0.0.1:18900"), std::string::npos);
    EXPECT_EQ(rep.kind, CapsDocKind::Wfs200);
}

TEST(CapabilitiesWfs, ExistingCountDefaultLoweredOrKept) {
    const std::string base = fixture("mapserver-wfs200.xml");
    const std::string om_end = "</ows:OperationsMetadata>";
    auto with = [&](const std::string& v) {
        return replace_all(base, om_end,
                           "<ows:Constraint name=\"CountDefault\"><ows:NoValues/><ows:DefaultValue>" + v +
                               "</ows:DefaultValue></ows:Constraint>" + om_end);
    };
    pugi::xml_document d;
    std::string out = rewrite_capabilities(with("1000"), limits());
    ASSERT_TRUE(d.load_string(out.c_str()));
    EXPECT_EQ(text_of(d, "//ows:OperationsMetadata/ows:Constraint[@name='CountDefault']/ows:DefaultValue"), "100");
    EXPECT_EQ(d.select_nodes("//ows:OperationsMetadata/ows:Constraint[@name='CountDefault']").size(), 1u);
    out = rewrite_capabilities(with("50"), limits());
    ASSERT_TRUE(d.load_string(out.c_str()));
    EXPECT_EQ(text_of(d, "//ows:OperationsMetadata/ows:Constraint[@name='CountDefault']/ows:DefaultValue"), "50");
    out = rewrite_capabilities(with("lots"), limits());
    ASSERT_TRUE(d.load_string(out.c_str()));
    EXPECT_EQ(text_of(d, "//ows:OperationsMetadata/ows:Constraint[@name='CountDefault']/ows:DefaultValue"), "100");
}

TEST(CapabilitiesWfs, PagingFalseKeptAbsentInsertedBeforeExtendedCapabilities) {
    const std::string base = fixture("mapserver-wfs200.xml");
    RewriteReport rep;
    std::string out = rewrite_capabilities(
        replace_all(base, "ImplementsResultPaging\">\n      <ows:NoValues/>\n      <ows:DefaultValue>TRUE",
                    "ImplementsResultPaging\">\n      <ows:NoValues/>\n      <ows:DefaultValue>FALSE"),
        limits(), &rep);
    EXPECT_NE(out.find("<ows:DefaultValue>FALSE</ows:DefaultValue>"), std::string::npos);
    EXPECT_NE(std::find(rep.changes.begin(), rep.changes.end(), "upstream states ImplementsResultPaging FALSE: kept"),
              rep.changes.end());

    std::string no_paging = replace_all(base,
                                        "<ows:Constraint name=\"ImplementsResultPaging\">\n      <ows:NoValues/>\n"
                                        "      <ows:DefaultValue>TRUE</ows:DefaultValue>\n    </ows:Constraint>",
                                        "");
    ASSERT_EQ(no_paging.find("ImplementsResultPaging"), std::string::npos);
    no_paging = replace_all(no_paging, "</ows:OperationsMetadata>", "<ows:ExtendedCapabilities/></ows:OperationsMetadata>");
    out = rewrite_capabilities(no_paging, limits());
    EXPECT_NE(out.find("<ows:Constraint name=\"ImplementsResultPaging\"><ows:NoValues/><ows:DefaultValue>TRUE"
                       "</ows:DefaultValue></ows:Constraint><ows:Constraint name=\"CountDefault\"><ows:NoValues/>"
                       "<ows:DefaultValue>100</ows:DefaultValue></ows:Constraint><ows:ExtendedCapabilities/>"),
              std::string::npos);
}

TEST(CapabilitiesWfs, Version100TextOnlineResourceAndAttributes) {
    std::string out = rewrite_capabilities(fixture("mapserver-wfs100.xml"), limits());
    EXPECT_NE(out.find("<OnlineResource>https://gate.example/maps/?</OnlineResource>"), std::string::npos);
    EXPECT_NE(out.find("<Get onlineResource=\"https://gate.example/maps/?\" />"), std::string::npos);
    EXPECT_EQ(out.find("127.0.0.1:18900"), std::string::npos);
    EXPECT_NE(out.find("at most 100 features"), std::string::npos);
}

TEST(CapabilitiesOthers, WcsAndWmtsAddresses) {
    for (const char* f : {"mapserver-wcs100.xml", "mapserver-wcs201.xml", "mapserver-wfs110.xml"}) {
        RewriteReport rep;
        std::string out = rewrite_capabilities(fixture(f), limits(), &rep);
        EXPECT_EQ(out.find("127.0.0.1:18900"), std::string::npos) << f;
        EXPECT_GT(rep.urls_rewritten, 0u) << f;
        EXPECT_FALSE(rep.passed_raw) << f;
    }
    std::string wmts = "<Capabilities xmlns=\"http://www.opengis.net/wmts/1.0\" version=\"1.0.0\"><Contents><Layer>"
                       "<ResourceURL format=\"image/png\" resourceType=\"tile\" "
                       "template=\"http://127.0.0.1:18900/wmts/{TileMatrix}/{TileRow}/{TileCol}.png\"/>"
                       "</Layer></Contents></Capabilities>";
    EXPECT_NE(rewrite_capabilities(wmts, limits()).find("template=\"https://gate.example/maps/wmts/{TileMatrix}"),
              std::string::npos);
}

TEST(CapabilitiesUrls, OnlyTheUpstreamOriginIsRewritten) {
    UrlRewriter u({"http://Map.Internal", "https://127.0.0.1:8443"}, "https://gate.example");
    auto rw = [&](const std::string& in) {
        std::string out;
        return u.rewrite(in, out, nullptr) ? out : "(kept)";
    };
    EXPECT_EQ(rw("http://map.internal:80/wms?"), "https://gate.example/wms?");
    EXPECT_EQ(rw("HTTP://MAP.INTERNAL?x=1"), "https://gate.example?x=1");
    EXPECT_EQ(rw("http://user:pw@map.internal/a"), "https://gate.example/a");
    EXPECT_EQ(rw("https://127.0.0.1:8443#f"), "https://gate.example#f");
    EXPECT_EQ(rw("http://map.internal:8080/wms"), "(kept)");   // another port
    EXPECT_EQ(rw("https://map.internal/wms"), "(kept)");       // another scheme
    EXPECT_EQ(rw("http://map.internal.evil/x"), "(kept)");     // a longer host
    EXPECT_EQ(rw("http://map.internal&amp;x/"), "(kept)");     // escaped authority: not judged
    EXPECT_EQ(rw("/relative?x"), "(kept)");
    EXPECT_EQ(rw(""), "(kept)");
    UrlRewriter esc({"http://a"}, "https://g.example/p?a=1&b=2");
    std::string out;
    ASSERT_TRUE(esc.rewrite("http://a/x", out, nullptr));
    EXPECT_EQ(out, "https://g.example/p?a=1&amp;b=2/x");  // the base is escaped for XML
}

TEST(CapabilitiesStream, EveryChunkBoundaryGivesTheSameOutput) {
    CapabilityLimits l = limits();
    l.layer_limit = 3;
    const std::string doc = kWms130;
    const std::string whole = rewrite_capabilities(doc, l);
    ASSERT_NE(whole, doc);
    for (std::size_t cut = 0; cut <= doc.size(); ++cut) {
        CapabilitiesRewriter r(l);
        std::string out;
        r.feed(doc.data(), cut, out);
        r.feed(doc.data() + cut, doc.size() - cut, out);
        r.finish(out);
        ASSERT_EQ(out, whole) << "split at " << cut;
    }
    EXPECT_EQ(chunked(doc, l, 1), whole);
    const std::string wfs = fixture("mapserver-wfs200.xml");
    const std::string wfs_whole = rewrite_capabilities(wfs, l);
    for (std::size_t c : {1, 2, 3, 7, 64, 1000}) EXPECT_EQ(chunked(wfs, l, c), wfs_whole) << c;
}

TEST(CapabilitiesStream, NotCapabilitiesPassesUnchanged) {
    for (const std::string& body :
         {fixture("mapserver-wmts-error.html"), std::string("{\"type\":\"FeatureCollection\"}"), std::string(),
          std::string("<ows:ExceptionReport xmlns:ows=\"http://www.opengis.net/ows/1.1\"><ows:Exception/></ows:ExceptionReport>"),
          std::string("\xFF\xFE<\0W\0", 6), std::string("<?xml version=\"1.0\"?>")}) {
        for (std::size_t c : {1, 5, 4096}) {
            RewriteReport rep;
            EXPECT_EQ(chunked(body, limits(), c, &rep), body) << body.substr(0, 40) << " chunk " << c;
            EXPECT_TRUE(rep.passed_raw) << body.substr(0, 40);
            EXPECT_FALSE(rep.reason.empty());
        }
    }
}

TEST(CapabilitiesStream, ParseErrorLaterKeepsWhatWasEmittedAndPassesTheRestRaw) {
    const std::string good = fixture("mapserver-wms130.xml");
    const std::size_t cut = good.find("<Capability>");
    ASSERT_NE(cut, std::string::npos);
    // Malformed after the Service block: an unclosed attribute quote.
    const std::string bad = good.substr(0, cut) + "<Capability attr=\"oops>\n" + good.substr(cut + 12);
    CapabilityLimits strict = limits();
    strict.full_parse = true;
    // Fed at once: the error comes in the same call as the edits, nothing was
    // emitted yet, the whole document goes out as it came.
    RewriteReport rep;
    EXPECT_EQ(rewrite_capabilities(bad, strict, &rep), bad);
    EXPECT_TRUE(rep.passed_raw);
    EXPECT_NE(rep.reason.find("XML error"), std::string::npos) << rep.reason;
    // Fed in two parts: the Service block (already emitted, rewritten) stays
    // rewritten, everything after the last parsed point is raw.
    CapabilitiesRewriter r(strict);
    std::string out;
    r.feed(bad.data(), cut, out);
    r.feed(bad.data() + cut, bad.size() - cut, out);
    r.finish(out);
    std::string head = rewrite_capabilities(good, strict).substr(0, out.size());
    std::size_t same = 0;
    while (same < out.size() && out[same] == head[same]) ++same;
    EXPECT_GT(same, good.find("</Service>"));  // the caps made it out
    EXPECT_NE(out.find("<MaxWidth>2048</MaxWidth>"), std::string::npos);
    const std::string tail = bad.substr(bad.size() - (out.size() - same));
    EXPECT_EQ(out.substr(same), tail) << "the rest must be the input's bytes";
    EXPECT_NE(out.find("<Capability attr=\"oops>"), std::string::npos);
    EXPECT_NE(out.find("http://127.0.0.1:18900"), std::string::npos);  // raw part keeps its addresses
}

TEST(CapabilitiesStream, AfterTheCapsOnlyAddressesChangeEvenInAMalformedRest) {
    const std::string good = fixture("mapserver-wms130.xml");
    const std::size_t cut = good.find("<Capability>");
    const std::string bad = good.substr(0, cut) + "<Capability attr=\"oops>\n" + good.substr(cut + 12);
    for (std::size_t c : {1, 13, 16384, 1 << 20}) {
        RewriteReport rep;
        std::string out = chunked(bad, limits(), c, &rep);
        EXPECT_FALSE(rep.passed_raw) << c;
        EXPECT_EQ(out.find("127.0.0.1:18900"), std::string::npos) << c;
        std::string back = replace_all(replace_all(out, "https://gate.example/maps/", "http://127.0.0.1:18900/"),
                                       ">2048<", ">8192<");
        EXPECT_EQ(back, bad) << c;
    }
}

TEST(CapabilitiesStream, ScanningTheRestEqualsParsingIt) {
    for (const char* f : {"mapserver-wms111.xml", "mapserver-wms130.xml", "mapserver-wfs100.xml", "mapserver-wfs110.xml",
                          "mapserver-wfs200.xml", "mapserver-wcs100.xml", "mapserver-wcs201.xml"}) {
        CapabilityLimits strict = limits();
        strict.full_parse = true;
        RewriteReport a, b;
        const std::string doc = fixture(f);
        EXPECT_EQ(rewrite_capabilities(doc, limits(), &a), rewrite_capabilities(doc, strict, &b)) << f;
        EXPECT_EQ(a.urls_rewritten, b.urls_rewritten) << f;
        for (std::size_t c : {1, 5, 100}) EXPECT_EQ(chunked(doc, limits(), c), rewrite_capabilities(doc, strict)) << f << " " << c;
    }
}

TEST(CapabilitiesStream, TruncatedBodyEndsRaw) {
    const std::string good = fixture("mapserver-wfs200.xml");
    const std::string cut = good.substr(0, good.size() / 2);
    RewriteReport rep;
    std::string out = chunked(cut, limits(), 512, &rep);
    // Past the error only the map server's addresses change (fast mode).
    EXPECT_FALSE(rep.passed_raw);
    EXPECT_NE(rep.reason.find("XML error"), std::string::npos) << rep.reason;
    // Each output byte is either a complete edit or the input's own.
    std::string back = replace_all(out, "https://gate.example/maps/", "http://127.0.0.1:18900/");
    back = replace_all(back, "<ows:Constraint name=\"CountDefault\"><ows:NoValues/><ows:DefaultValue>100</ows:DefaultValue></ows:Constraint>", "");
    EXPECT_EQ(back, cut);
    EXPECT_NE(out, back);  // the first half was rewritten
}

TEST(CapabilitiesStream, MemoryStaysBounded) {
    // A large document comes out as it goes in, not at the end.
    std::string big = "<WMS_Capabilities xmlns=\"http://www.opengis.net/wms\" version=\"1.3.0\"><Service><Name>x</Name></Service><Capability>";
    while (big.size() < 4u << 20)
        big += "<Layer><Name>l</Name><Style><LegendURL><OnlineResource xmlns:xlink=\"http://www.w3.org/1999/xlink\" "
               "xlink:href=\"http://127.0.0.1:18900/?SERVICE=WMS&amp;REQUEST=GetLegendGraphic\"/></LegendURL></Style></Layer>\n";
    big += "</Capability></WMS_Capabilities>";
    CapabilitiesRewriter r(limits());
    std::string out;
    std::size_t fed = 0, worst_lag = 0;
    for (std::size_t i = 0; i < big.size(); i += 16384) {
        std::size_t n = std::min<std::size_t>(16384, big.size() - i);
        r.feed(big.data() + i, n, out);
        fed += n;
        // Output is longer per byte (the base URL is longer than the origin); compare input consumed.
        std::size_t emitted_input = out.size() - r.report().urls_rewritten * (std::string("https://gate.example/maps").size() - std::string("http://127.0.0.1:18900").size());
        worst_lag = std::max(worst_lag, fed - std::min(fed, emitted_input));
    }
    r.finish(out);
    EXPECT_LT(worst_lag, 4096u) << "input held back";
    EXPECT_FALSE(r.report().passed_raw);
    // One token beyond max_pending: the rewriter gives up, loses nothing.
    CapabilityLimits small = limits();
    small.max_pending = 1 << 16;
    std::string huge = "<WMS_Capabilities xmlns=\"http://www.opengis.net/wms\"><Service a=\"" + std::string(200000, 'x') +
                       "\"><MaxWidth>9999</MaxWidth></Service></WMS_Capabilities>";
    RewriteReport rep;
    EXPECT_EQ(chunked(huge, small, 8192, &rep), huge);
    EXPECT_TRUE(rep.passed_raw);
    // A value we would replace that never ends is not held forever either.
    std::string long_value = "<WMS_Capabilities xmlns=\"http://www.opengis.net/wms\"><Service><MaxWidth>" +
                             std::string(100000, '9') + "</MaxWidth></Service></WMS_Capabilities>";
    out = chunked(long_value, limits(), 4096, &rep);
    EXPECT_FALSE(rep.passed_raw);
    EXPECT_EQ(out.size(), long_value.size() + std::string("<MaxHeight>2048</MaxHeight>").size());
}

TEST(CapabilitiesUrls, ScannerAgreesWithTheParserOnWhatIsOurs) {
    UrlRewriter u({"http://Map.Internal"}, "https://gate.example");
    const std::string in = "<a href=\"http://map.internal:80/a\"/> http://user@MAP.internal?x <!-- http://map.internal -->"
                           " http://map.internal&amp;b https://map.internal/ http://map.internal:8080/ http://map.internal.evil/"
                           " xhttps://map.internal/";
    const std::string want = "<a href=\"https://gate.example/a\"/> https://gate.example?x <!-- https://gate.example -->"
                             " http://map.internal&amp;b https://map.internal/ http://map.internal:8080/ http://map.internal.evil/"
                             " xhttps://map.internal/";
    for (std::size_t chunk = 1; chunk <= in.size(); ++chunk) {
        AddressScanner sc(u);
        std::string out;
        for (std::size_t i = 0; i < in.size(); i += chunk) sc.feed(in.data() + i, std::min(chunk, in.size() - i), out, false);
        sc.feed(nullptr, 0, out, true);
        ASSERT_EQ(out, want) << "chunk " << chunk;
        EXPECT_EQ(sc.rewritten, 3u);
        EXPECT_EQ(sc.first_origin, "http://map.internal:80");
    }
}

// The map server names itself at an address the gate was not told about:
// every operation endpoint is still the gate's, and the rest of the document's
// URLs to that host follow; other hosts stay.
TEST(CapabilitiesEndpoints, AnyEndpointHostIsTheGates) {
    const std::string doc =
        "<WMS_Capabilities xmlns='http://www.opengis.net/wms' xmlns:xlink='http://www.w3.org/1999/xlink' version='1.3.0'>"
        "<Service><Name>WMS</Name><OnlineResource xlink:href='http://internal.lan:8080/ms?map=a'/></Service>"
        "<Capability><Request><GetMap><DCPType><HTTP><Get><OnlineResource xlink:href='http://internal.lan:8080/ms?map=a&amp;'/>"
        "</Get></HTTP></DCPType></GetMap></Request>"
        "<Layer><Style><LegendURL><OnlineResource xlink:href='http://internal.lan:8080/ms?legend'/></LegendURL></Style>"
        "<MetadataURL><OnlineResource xlink:href='http://example.org/meta'/></MetadataURL></Layer></Capability>"
        "</WMS_Capabilities>";
    CapabilityLimits l;
    l.public_base = "https://gate.example/maps";
    RewriteReport rep;
    const std::string out = rewrite_capabilities(doc, l, &rep);
    EXPECT_EQ(out.find("internal.lan"), std::string::npos) << out;
    EXPECT_NE(out.find("'https://gate.example/maps/ms?map=a&amp;'"), std::string::npos) << out;
    EXPECT_NE(out.find("'https://gate.example/maps/ms?legend'"), std::string::npos) << out;
    EXPECT_NE(out.find("'http://example.org/meta'"), std::string::npos) << out;
    EXPECT_EQ(rep.first_foreign_origin, "http://internal.lan:8080");
    // Already the gate's: nothing to do.
    l.public_base = "http://internal.lan:8080";
    EXPECT_EQ(rewrite_capabilities(doc, l), doc);
}

TEST(CapabilitiesEndpoints, OtherXmlGetsAddressesOnlyWhenAsked) {
    const std::string gml =
        "<wfs:FeatureCollection xmlns:wfs='http://www.opengis.net/wfs/2.0' "
        "xmlns:xsi='http://www.w3.org/2001/XMLSchema-instance' "
        "xsi:schemaLocation='http://www.opengis.net/wfs/2.0 http://127.0.0.1:18900/?SERVICE=WFS&amp;REQUEST=DescribeFeatureType'>"
        "<wfs:member>http://127.0.0.1:18900/x</wfs:member></wfs:FeatureCollection>";
    CapabilityLimits l;
    l.public_base = "https://gate.example";
    l.rewrite_origins = {"http://127.0.0.1:18900"};
    RewriteReport rep;
    EXPECT_EQ(rewrite_capabilities(gml, l, &rep), gml);
    EXPECT_TRUE(rep.passed_raw);
    l.addresses_in_other_xml = true;
    const std::string out = rewrite_capabilities(gml, l, &rep);
    EXPECT_EQ(out.find("18900"), std::string::npos) << out;
    EXPECT_NE(out.find("https://gate.example/?SERVICE=WFS"), std::string::npos) << out;
    EXPECT_FALSE(rep.passed_raw);
}
