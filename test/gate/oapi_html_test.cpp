// OGC API answers in HTML (oapi_html.hpp), from MapServer's own pages
// (fixtures mapserver-oapi-*.html): every link names the gate afterwards, the
// rest of the page is kept byte for byte, and chunking changes nothing.
#include <gtest/gtest.h>

#include <string>

#include "fixture.hpp"
#include "gate/oapi_html.hpp"

using namespace ot::gate;

namespace {

CapabilityLimits limits(std::string base = "https://gate.example/maps") {
    CapabilityLimits l;
    l.public_base = std::move(base);
    l.rewrite_origins = {"http://127.0.0.1:18900"};
    return l;
}

std::string chunked(const std::string& in, const CapabilityLimits& l, std::size_t chunk, RewriteReport* rep = nullptr) {
    OapiHtmlRewriter r(l);
    std::string out;
    for (std::size_t i = 0; i < in.size(); i += chunk) r.feed(in.data() + i, std::min(chunk, in.size() - i), out);
    r.finish(out);
    if (rep) *rep = r.report();
    return out;
}

std::size_t count(const std::string& s, const std::string& what) {
    std::size_t n = 0;
    for (auto p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) ++n;
    return n;
}

std::string replace_all(std::string s, const std::string& from, const std::string& to) {
    for (auto p = s.find(from); p != std::string::npos; p = s.find(from, p + to.size())) s.replace(p, from.size(), to);
    return s;
}

}  // namespace

TEST(OapiHtml, MapServerLinksNameTheGate) {
    for (const char* name : {"mapserver-oapi-landing.html", "mapserver-oapi-items.html"}) {
        const std::string in = fixture(name);
        ASSERT_GT(count(in, "http://127.0.0.1:18900/"), 5u) << name;
        RewriteReport rep;
        const std::string out = chunked(in, limits(), in.size(), &rep);
        EXPECT_EQ(count(out, "127.0.0.1:18900"), 0u) << name;
        // Nothing but the origins changed.
        EXPECT_EQ(out, replace_all(in, "http://127.0.0.1:18900", "https://gate.example/maps")) << name;
        EXPECT_EQ(rep.urls_rewritten, count(in, "http://127.0.0.1:18900"));
        EXPECT_EQ(rep.first_foreign_origin, "http://127.0.0.1:18900");
        EXPECT_EQ(rep.kind, CapsDocKind::OapiHtml);
    }
}

TEST(OapiHtml, AnyChunkingGivesTheSamePage) {
    const std::string in = fixture("mapserver-oapi-items.html");
    const std::string whole = chunked(in, limits(), in.size());
    for (std::size_t chunk : {1, 2, 3, 7, 16, 31, 64, 100, 257, 1000}) EXPECT_EQ(chunked(in, limits(), chunk), whole) << chunk;
}

TEST(OapiHtml, OtherOriginsAndEscapesAreKept) {
    const std::string in =
        "<a href=\"http://127.0.0.1:18900/demo/ogcapi/collections?f=html&amp;limit=10\">x</a>"
        "<a href=\"https://www.ogc.org/standards/ogcapi-features\">OGC</a>"
        "<p>http://127.0.0.1:189001/not-this-one</p>";
    const std::string out = chunked(in, limits("https://gate.example/a&b"), 5);
    EXPECT_NE(out.find("href=\"https://gate.example/a&amp;b/demo/ogcapi/collections?f=html&amp;limit=10\""), std::string::npos) << out;
    EXPECT_NE(out.find("https://www.ogc.org/standards/ogcapi-features"), std::string::npos);
    EXPECT_NE(out.find("http://127.0.0.1:189001/not-this-one"), std::string::npos) << out;
}

TEST(OapiHtml, NoPublicAddressPassesThePageUnchanged) {
    const std::string in = fixture("mapserver-oapi-landing.html");
    RewriteReport rep;
    EXPECT_EQ(chunked(in, limits(""), 10, &rep), in);
    EXPECT_TRUE(rep.passed_raw);
}
