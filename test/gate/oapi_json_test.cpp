// OGC API – Features JSON on its way out (oapi_json.hpp): MapServer's own
// answers (test/gate/fixtures/capabilities/mapserver-oapi-*.json), the OpenAPI
// limit in every place it may be declared, JSON's escaped addresses, and bodies
// that must pass unchanged whatever the chunking.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "gate/capabilities_url.hpp"
#include "fixture.hpp"
#include "gate/oapi_json.hpp"

using namespace ot::gate;
using nlohmann::json;

namespace {

CapabilityLimits limits() {
    CapabilityLimits l;
    l.count_default = 100;
    l.public_base = "https://gate.example/maps/";
    l.rewrite_origins = {"http://127.0.0.1:18900"};
    return l;
}

constexpr std::size_t kBuffered = 1 << 20;

std::string chunked(const std::string& in, const CapabilityLimits& l, std::size_t buffer, std::size_t chunk,
                    RewriteReport* rep = nullptr) {
    OapiRewriter r(l, buffer);
    std::string out;
    for (std::size_t i = 0; i < in.size(); i += chunk) r.feed(in.data() + i, std::min(chunk, in.size() - i), out);
    r.finish(out);
    if (rep) *rep = r.report();
    return out;
}

const json* limit_param(const json& params) {
    for (const auto& p : params)
        if (p.value("name", "") == "limit") return &p;
    return nullptr;
}

}  // namespace

TEST(OapiJson, MapServerOpenApiStatesTheGatesMaximum) {
    const std::string in = fixture("mapserver-oapi-api.json");
    ASSERT_NE(in.find("\"maximum\":10000"), std::string::npos);
    RewriteReport rep;
    const std::string out = rewrite_oapi(in, limits(), kBuffered, &rep);
    EXPECT_EQ(rep.kind, CapsDocKind::OpenApi);
    EXPECT_FALSE(rep.passed_raw) << rep.reason;
    const json d = json::parse(out);
    const json* p = limit_param(d["paths"]["/collections/pts/items"]["get"]["parameters"]);
    ASSERT_NE(p, nullptr);
    EXPECT_EQ((*p)["schema"]["maximum"], 100);
    EXPECT_EQ((*p)["schema"]["default"], 10);  // below the cap: kept
    EXPECT_EQ((*p)["schema"]["minimum"], 1);
    EXPECT_EQ(d["servers"][0]["url"], "https://gate.example/maps/demo/ogcapi");
    EXPECT_EQ(out.find("127.0.0.1:18900"), std::string::npos);
    // Other documents' URLs are kept, and so is the key order.
    EXPECT_NE(out.find("http://schemas.opengis.net/ogcapi/features/part1/1.0/openapi/ogcapi-features-1.yaml"), std::string::npos);
    EXPECT_LT(out.find("\"components\""), out.find("\"paths\""));
    ASSERT_FALSE(rep.changes.empty());
    EXPECT_NE(rep.changes[0].find("limit maximum 10000 -> 100"), std::string::npos) << rep.changes[0];
    EXPECT_EQ(rep.first_foreign_origin, "http://127.0.0.1:18900");
    // Whatever the chunks.
    for (std::size_t c : {1, 7, 100, 4096}) EXPECT_EQ(chunked(in, limits(), kBuffered, c), out) << c;
}

TEST(OapiJson, LimitInComponentsPathsRefsAndSwagger) {
    const std::string in = R"({"openapi":"3.0.2","servers":[{"url":"/rel"}],
 "components":{"parameters":{"limit":{"name":"limit","in":"query","schema":{"type":"integer","default":5000,"maximum":10000}},
   "lim2":{"name":"limit","in":"query","schema":{"type":"integer","maximum":50}},
   "other":{"name":"offset","in":"query","schema":{"type":"integer","maximum":10000}}}},
 "paths":{"/a":{"parameters":[{"name":"limit","in":"query","schema":{"type":"integer"}}],
   "get":{"parameters":[{"$ref":"#/components/parameters/limit"},
     {"$ref":"https://schemas.opengis.net/ogcapi/features/part1/1.0/openapi/ogcapi-features-1.yaml#/components/parameters/limit"}]}},
   "/b":{"post":{"parameters":[{"name":"limit","in":"query","schema":{"type":"integer","exclusiveMaximum":1000000}},
     {"name":"limit","in":"header","schema":{"maximum":9}}]}}}})";
    RewriteReport rep;
    const json d = json::parse(rewrite_oapi(in, limits(), kBuffered, &rep));
    const json& c = d["components"]["parameters"];
    EXPECT_EQ(c["limit"]["schema"]["maximum"], 100);
    EXPECT_EQ(c["limit"]["schema"]["default"], 100);  // lowered to the maximum
    EXPECT_EQ(c["lim2"]["schema"]["maximum"], 50);    // smaller: kept
    EXPECT_EQ(c["other"]["schema"]["maximum"], 10000);
    EXPECT_EQ(d["paths"]["/a"]["parameters"][0]["schema"]["maximum"], 100);  // absent: stated
    const json& g = d["paths"]["/a"]["get"]["parameters"];
    EXPECT_EQ(g[0]["$ref"], "#/components/parameters/limit");  // capped where it points
    EXPECT_EQ(g[1]["name"], "limit");                           // another document's: inlined
    EXPECT_EQ(g[1]["schema"]["maximum"], 100);
    const json& b = d["paths"]["/b"]["post"]["parameters"];
    EXPECT_EQ(b[0]["schema"]["maximum"], 100);
    EXPECT_FALSE(b[0]["schema"].contains("exclusiveMaximum"));
    EXPECT_EQ(b[1]["schema"]["maximum"], 9);  // a header named limit is not the query's
    EXPECT_EQ(d["servers"][0]["url"], "/rel");

    const std::string swagger = R"({"swagger":"2.0","paths":{"/i":{"get":{"parameters":[
      {"name":"limit","in":"query","type":"integer","maximum":5000}]}}}})";
    const json s = json::parse(rewrite_oapi(swagger, limits(), kBuffered));
    EXPECT_EQ(s["paths"]["/i"]["get"]["parameters"][0]["maximum"], 100);
}

// Swagger 2 names its server as host + basePath (+ schemes), which no address
// scan finds: a client reading it went straight to the map server.
TEST(OapiJson, SwaggerHostAndBasePathNameTheGate) {
    const std::string in = R"({"swagger":"2.0","host":"127.0.0.1:18900","basePath":"/ogcapi","schemes":["http"],
      "paths":{"/collections":{"get":{"responses":{"200":{"description":"see http://127.0.0.1:18900/ogcapi/x"}}}}}})";
    RewriteReport rep;
    const std::string out = rewrite_oapi(in, limits(), kBuffered, &rep);
    const json d = json::parse(out);
    EXPECT_EQ(d["host"], "gate.example");
    EXPECT_EQ(d["schemes"], json::array({"https"}));
    EXPECT_EQ(d["basePath"], "/maps/ogcapi");  // the public base's path, then the document's
    EXPECT_EQ(out.find("127.0.0.1"), std::string::npos) << out;
    EXPECT_EQ(rep.first_foreign_origin, "http://127.0.0.1:18900");
    // No schemes: http; no basePath: the base's path alone; a host the gate was not told of is still the map server.
    const json e = json::parse(rewrite_oapi(R"({"swagger":"2.0","host":"mapserver.internal","paths":{}})", limits(), kBuffered));
    EXPECT_EQ(e["host"], "gate.example");
    EXPECT_EQ(e["basePath"], "/maps");
    // Already the gate's: untouched bytes.
    const std::string own = R"({"swagger":"2.0","host":"gate.example","schemes":["https"],"basePath":"/maps","paths":{}})";
    EXPECT_EQ(rewrite_oapi(own, limits(), kBuffered), own);
    // No public base: nothing to say.
    CapabilityLimits none;
    EXPECT_EQ(rewrite_oapi(in, none, kBuffered), in);
}

TEST(OapiJson, NoCapNoAddressMeansTheSameBytes) {
    const std::string in = fixture("mapserver-oapi-api.json");
    CapabilityLimits none;
    EXPECT_EQ(rewrite_oapi(in, none, kBuffered), in);
    // A limit already within the cap, nothing else to do: the document's own bytes.
    CapabilityLimits big = limits();
    big.count_default = 20000;
    big.public_base.clear();
    EXPECT_EQ(rewrite_oapi(in, big, kBuffered), in);
}

TEST(OapiJson, LinksOfEveryAnswerNameTheGate) {
    for (const char* f : {"mapserver-oapi-landing.json", "mapserver-oapi-collections.json",
                          "mapserver-oapi-items.json", "mapserver-oapi-conformance.json"}) {
        const std::string in = fixture(f);
        for (std::size_t buffer : {std::size_t{0}, kBuffered}) {
            RewriteReport rep;
            const std::string out = rewrite_oapi(in, limits(), buffer, &rep);
            EXPECT_FALSE(rep.passed_raw) << f << rep.reason;
            EXPECT_EQ(out.find("127.0.0.1:18900"), std::string::npos) << f;
            const json d = json::parse(out);  // still JSON
            if (d.contains("links")) {
                for (const auto& l : d["links"])
                    EXPECT_EQ(l["href"].get<std::string>().rfind("https://gate.example/maps/demo/ogcapi", 0), 0u) << f;
            }
            for (std::size_t c : {1, 3, 64}) EXPECT_EQ(chunked(in, limits(), buffer, c), out) << f << " " << c;
        }
    }
    // The items' next link keeps its query as MapServer wrote it.
    const std::string out = rewrite_oapi(fixture("mapserver-oapi-items.json"), limits(), 0);
    EXPECT_NE(out.find("\"https://gate.example/maps/demo/ogcapi/collections/pts/items?f=json&limit=3&offset=3\""),
              std::string::npos);
    // OGC's conformance URIs are not the map server's.
    EXPECT_EQ(rewrite_oapi(fixture("mapserver-oapi-conformance.json"), limits(), 0), fixture("mapserver-oapi-conformance.json"));
}

TEST(OapiJson, EscapedSlashesAndCutsAnywhere) {
    const std::string in =
        R"({"links":[{"href":"http:\/\/127.0.0.1:18900\/demo\/ogcapi?f=json","rel":"self"},)"
        R"({"href":"HTTP:\/\/127.0.0.1:18900"},{"href":"http://127.0.0.1:18900/x"},)"
        R"({"href":"http:\/\/127.0.0.1:189001\/no"},{"href":"http:\/\/other.example\/keep"},)"
        R"({"t":"see http:\/\/127.0.0.1:18900\/y, and \"http://127.0.0.1:18900\""}]})";
    const std::string want =
        R"({"links":[{"href":"https://gate.example/maps\/demo\/ogcapi?f=json","rel":"self"},)"
        R"({"href":"https://gate.example/maps"},{"href":"https://gate.example/maps/x"},)"
        R"({"href":"http:\/\/127.0.0.1:189001\/no"},{"href":"http:\/\/other.example\/keep"},)"
        R"({"t":"see https://gate.example/maps\/y, and \"https://gate.example/maps\""}]})";
    for (std::size_t buffer : {std::size_t{0}, kBuffered}) {
        RewriteReport rep;
        EXPECT_EQ(rewrite_oapi(in, limits(), buffer, &rep), want) << buffer;
        EXPECT_EQ(rep.urls_rewritten, 5u);
        for (std::size_t c = 1; c < 40; ++c) EXPECT_EQ(chunked(in, limits(), buffer, c), want) << c;
    }
    // A base that needs escaping in a JSON string is escaped.
    CapabilityLimits l = limits();
    l.public_base = "https://gate.example/a\"b";
    EXPECT_EQ(rewrite_oapi(R"(["http://127.0.0.1:18900/z"])", l, 0), R"(["https://gate.example/a\"b/z"])");
}

TEST(OapiJson, LearnsTheServersOwnAddressFromSelfAndServers) {
    // A map server that calls itself by a name the gate was never told.
    const std::string landing = R"({"links":[{"href":"http://ms.internal:8080/ogc?f=json","rel":"self"},)"
                                R"({"href":"http://ms.internal:8080/ogc/collections","rel":"data"},)"
                                R"({"href":"http://elsewhere.example/doc","rel":"license"}]})";
    RewriteReport rep;
    const std::string out = rewrite_oapi(landing, limits(), kBuffered, &rep);
    EXPECT_EQ(out.find("ms.internal"), std::string::npos) << out;
    EXPECT_NE(out.find("http://elsewhere.example/doc"), std::string::npos);
    EXPECT_EQ(rep.first_foreign_origin, "http://ms.internal:8080");
    // Streamed (items), there is no endpoint to learn from: only known origins.
    EXPECT_EQ(rewrite_oapi(landing, limits(), 0), landing);
}

TEST(OapiJson, NotJsonOrMalformedPassesUnchanged) {
    const std::string items = fixture("mapserver-oapi-items.json");
    const std::string html = fixture("mapserver-wmts-error.html");
    const std::string cut = items.substr(0, items.size() / 2) + "\"broken" + items.substr(items.size() / 2);
    for (std::size_t buffer : {std::size_t{0}, kBuffered}) {
        for (std::size_t c : {1, 5, 100000}) {
            RewriteReport rep;
            EXPECT_EQ(chunked(html, limits(), buffer, c, &rep), html);
            EXPECT_TRUE(rep.passed_raw);
            EXPECT_EQ(chunked("", limits(), buffer, c, &rep), "");
            EXPECT_EQ(chunked("   \n", limits(), buffer, c, &rep), "   \n");
            EXPECT_EQ(chunked("<x>http://127.0.0.1:18900/</x>", limits(), buffer, c), "<x>http://127.0.0.1:18900/</x>");
        }
    }
    // Held whole and parsed: a malformed document goes as it came.
    RewriteReport rep;
    EXPECT_EQ(rewrite_oapi(cut, limits(), kBuffered, &rep), cut);
    EXPECT_TRUE(rep.passed_raw);
    EXPECT_NE(rep.reason.find("parse error"), std::string::npos);
    const std::string api = fixture("mapserver-oapi-api.json");
    const std::string bad_api = api.substr(0, api.size() / 2);  // cut: not a document
    EXPECT_EQ(rewrite_oapi(bad_api, limits(), kBuffered), bad_api);
    // Streamed: JSON by its first byte, addresses replaced, never more broken.
    const std::string s = rewrite_oapi(cut, limits(), 0, &rep);
    EXPECT_EQ(s.find("127.0.0.1:18900"), std::string::npos);
    EXPECT_NE(s.find("\"broken"), std::string::npos);
    // A byte-order mark and blanks before the JSON are fine.
    EXPECT_EQ(rewrite_oapi("\xEF\xBB\xBF \n[\"http://127.0.0.1:18900/a\"]", limits(), 0), "\xEF\xBB\xBF \n[\"https://gate.example/maps/a\"]");
}

TEST(OapiJson, PastTheBufferBoundItStreams) {
    std::string big = "{\"features\":[";
    for (int i = 0; i < 2000; ++i) big += R"({"id":)" + std::to_string(i) + R"(,"href":"http://127.0.0.1:18900/i/)" + std::to_string(i) + "\"},";
    big += R"({}],"links":[{"href":"http://127.0.0.1:18900/next","rel":"next"}]})";
    RewriteReport rep;
    const std::string out = chunked(big, limits(), 4096, 1000, &rep);
    EXPECT_NE(rep.reason.find("addresses only"), std::string::npos);
    EXPECT_EQ(out.find("127.0.0.1:18900"), std::string::npos);
    EXPECT_EQ(rep.urls_rewritten, 2001u);
    EXPECT_NO_THROW(json::parse(out));
}

TEST(AddressScan, FindsSeparatorsAtEveryOffset) {
    // The vector searches (64 bytes at a time, then 16, then scalar) agree with a plain search.
    for (std::size_t pad = 0; pad < 200; ++pad) {
        std::string b(pad, ':');
        for (std::size_t k = 1; k < pad; k += 7) b[k] = '/';  // ":/" pairs that are not "://"
        b += "x:/ y:\\/ http://h a:\\/\\/b";
        std::size_t len = 0;
        const std::size_t at = find_scheme_separator(b, 0, false, &len);
        EXPECT_EQ(at, b.find("://")) << pad;
        EXPECT_EQ(len, 3u);
        const std::size_t j = find_scheme_separator(b, at + 1, true, &len);
        EXPECT_EQ(j, b.find(":\\/\\/")) << pad;
        EXPECT_EQ(len, 5u);
        EXPECT_EQ(find_scheme_separator(b, j + 1, true, &len), std::string::npos);
        EXPECT_EQ(find_scheme_separator(b + std::string(100, 'x'), j + 1, true, &len), std::string::npos);
    }
}
