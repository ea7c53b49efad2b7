// What the gate writes by hand on the hot path, checked against the
// libraries it replaces there: response heads against Beast's serializer,
// log lines against nlohmann's parser.
#include <gtest/gtest.h>

#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <cmath>
#include <nlohmann/json.hpp>

#include "beast_bytes.hpp"
#include "gate/http_head.hpp"
#include "gate/log_line.hpp"
#include "gate/text.hpp"

using namespace ot::gate;
namespace http = boost::beast::http;

TEST(HttpHead, SameBytesAsBeastSerializer) {
    for (unsigned status : {200u, 304u, 404u, 429u, 503u}) {
        for (bool keep : {true, false}) {
            http::response<http::string_body> res{static_cast<http::status>(status), 11};
            res.set(http::field::server, "ogc-gate");
            res.set(http::field::content_type, "text/xml");
            res.insert("RateLimit", "\"public\";r=0;t=10");
            res.insert("Retry-After", "10");
            if (status != 304) res.body() = "<x/>";  // a 304 has none, and Beast says so
            res.prepare_payload();
            res.keep_alive(keep);
            std::string mine;
            serialize_head(res.base(), mine);
            EXPECT_EQ(mine, beast_head_bytes(res)) << status << " keep-alive " << keep;
        }
    }
}

TEST(HttpHead, KeepsAnUpstreamReasonPhrase) {
    http::response<http::string_body> res{http::status::ok, 10};
    res.reason("Fine Thanks");
    res.set("X-A", "b");
    res.prepare_payload();
    std::string mine;
    serialize_head(res.base(), mine);
    EXPECT_EQ(mine.rfind("HTTP/1.0 200 Fine Thanks\r\n", 0), 0u) << mine;
    EXPECT_EQ(mine, beast_head_bytes(res));
}

TEST(HttpHead, WriterMatchesBeastForTheGatesOwnAnswers) {
    std::string mine;
    HeadWriter(mine, 11, 429)
        .field("Server", "ogc-gate")
        .field("Content-Type", "text/xml")
        .field("Retry-After", "10")
        .field("Content-Length", std::size_t{360})
        .end();
    http::response<http::string_body> res{http::status::too_many_requests, 11};
    res.set(http::field::server, "ogc-gate");
    res.set(http::field::content_type, "text/xml");
    res.insert("Retry-After", "10");
    res.body().assign(360, 'x');
    res.prepare_payload();
    EXPECT_EQ(mine, beast_head_bytes(res));
    // And a parser reads it back.
    http::response_parser<http::empty_body> p;
    p.skip(true);
    boost::beast::error_code ec;
    p.put(boost::asio::buffer(mine), ec);
    EXPECT_FALSE(ec) << ec.message();
    EXPECT_TRUE(p.is_header_done());
    EXPECT_EQ(p.get().result_int(), 429u);
    EXPECT_EQ(p.get()["Retry-After"], "10");
}

TEST(JsonLine, ParsesBackWithEveryValue) {
    JsonLine j;
    j.str("a", "plain").str("b", "quote \" back\\slash\nnewline\x01").num("c", 1.5).num("d", std::int64_t{-42});
    j.boolean("e", true).num("f", std::nan("")).num("g", 0.1 + 0.2).str("h", "caf\xc3\xa9");
    const std::string line = std::move(j).finish();
    const auto v = nlohmann::json::parse(line);
    EXPECT_EQ(v["a"], "plain");
    EXPECT_EQ(v["b"], "quote \" back\\slash\nnewline\x01");
    EXPECT_EQ(v["c"], 1.5);
    EXPECT_EQ(v["d"], -42);
    EXPECT_EQ(v["e"], true);
    EXPECT_TRUE(v["f"].is_null());
    EXPECT_EQ(v["g"].get<double>(), 0.1 + 0.2);  // shortest round-trip form loses nothing
    EXPECT_EQ(v["h"], "caf\xc3\xa9");
    EXPECT_EQ(line.find('\n'), std::string::npos);
}

TEST(JsonLine, InvalidUtf8IsReplacedNotThrown) {
    JsonLine j;
    j.str("note", "bad \xff\xfe bytes");
    const std::string line = std::move(j).finish();
    const auto v = nlohmann::json::parse(line);
    EXPECT_NE(v["note"].get<std::string>().find("bad "), std::string::npos);
}

TEST(JsonLine, TimestampIsIsoUtcWithMilliseconds) {
    const std::string t = iso_now_ms();
    ASSERT_EQ(t.size(), 24u) << t;
    EXPECT_EQ(t[4], '-');
    EXPECT_EQ(t[10], 'T');
    EXPECT_EQ(t[19], '.');
    EXPECT_EQ(t.back(), 'Z');
}

TEST(XmlEscape, AttributesEscapeQuotesTextKeepsThem) {
    EXPECT_EQ(xml_escape("plain text"), "plain text");
    EXPECT_EQ(xml_escape("a<b>&\"c'"), "a&lt;b&gt;&amp;&quot;c&apos;");
    EXPECT_EQ(xml_escape_text("a<b>&\"c'"), "a&lt;b&gt;&amp;\"c'");
    // Control characters have no place in XML 1.0; tab and newlines do.
    EXPECT_EQ(xml_escape("x\x01y\tz\n"), "x?y\tz\n");
    EXPECT_EQ(xml_escape_text("\x1f"), "?");
    EXPECT_EQ(xml_escape(""), "");
}

TEST(JsonLine, GrowsPastItsFirstBuffer) {
    JsonLine j;
    const std::string big(3000, 'x');
    j.str("a", big).str("b", std::string(700, '"')).num("c", std::int64_t{7});
    const auto v = nlohmann::json::parse(std::move(j).finish());
    EXPECT_EQ(v["a"], big);
    EXPECT_EQ(v["b"], std::string(700, '"'));
    EXPECT_EQ(v["c"], 7);
    EXPECT_EQ(std::move(JsonLine()).finish(), "{}");
}
