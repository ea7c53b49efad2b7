// The bytes the upstream leg writes itself (the request head, the chunk
// framing of a relayed answer), the log line formatted into the thread's
// buffer, and the log writer's gathering.
#include <gtest/gtest.h>
#include <unistd.h>

#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <thread>

#include "gate/access_log.hpp"
#include "beast_bytes.hpp"
#include "gate/http_head.hpp"
#include "gate/log_line.hpp"
#include "gate/log_writer.hpp"

using namespace ot::gate;
namespace http = boost::beast::http;

TEST(RequestHead, SameBytesAsBeastSerializer) {
    http::request<http::string_body> get;
    get.method_string("GET");
    get.target("/wms?SERVICE=WMS&REQUEST=GetMap&OT_CLIENT=ip:0123456789abcdef");
    get.version(11);
    get.insert("Host", "maps.example");
    get.insert("Accept", "*/*");
    get.set("X-Request-Id", "abc");
    get.set("X-Forwarded-For", "10.0.0.1, 127.0.0.1");
    get.keep_alive(true);
    std::string mine;
    serialize_head(get.base(), mine);
    EXPECT_EQ(mine, beast_head_bytes(get));
    EXPECT_EQ(mine.rfind("GET /wms?SERVICE=WMS&REQUEST=GetMap&OT_CLIENT=ip:0123456789abcdef HTTP/1.1\r\nHost: ", 0), 0u);

    http::request<http::string_body> post;
    post.method_string("POST");
    post.target("/wfs");
    post.version(11);
    post.insert("Content-Type", "text/xml");
    post.body() = "<GetFeature/>";
    post.prepare_payload();
    serialize_head(post.base(), mine);
    EXPECT_EQ(mine, beast_head_bytes(post));
    EXPECT_NE(mine.find("Content-Length: 13\r\n"), std::string::npos) << mine;

    http::request<http::string_body> odd;  // a method Beast has no verb for, as a passthrough may send
    odd.method_string("PROPFIND");
    odd.target("/");
    odd.version(10);
    serialize_head(odd.base(), mine);
    EXPECT_EQ(mine, beast_head_bytes(odd));
}

TEST(ChunkFraming, SizeLinesAreLowerCaseHexAndABeastParserReadsTheBody) {
    char line[24];
    EXPECT_EQ(std::string(line, chunk_size_line(4, line)), "4\r\n");
    EXPECT_EQ(std::string(line, chunk_size_line(500, line)), "1f4\r\n");
    EXPECT_EQ(std::string(line, chunk_size_line(65536, line)), "10000\r\n");
    // What write_client sends for a chunked answer in three pieces.
    std::string wire = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n";
    const std::string pieces[] = {"<Capabilities>", std::string(70000, 'x'), "</Capabilities>"};
    std::string body;
    for (const auto& p : pieces) {
        wire.append(line, chunk_size_line(p.size(), line));
        wire += p;
        wire += "\r\n";
        body += p;
    }
    wire += kLastChunk;
    http::response_parser<http::string_body> parser;
    parser.body_limit(1 << 20);
    boost::beast::error_code ec;
    std::size_t used = 0;
    while (used < wire.size() && !ec && !parser.is_done())
        used += parser.put(boost::asio::buffer(wire.data() + used, wire.size() - used), ec);
    ASSERT_FALSE(ec) << ec.message();
    EXPECT_TRUE(parser.is_done());
    EXPECT_EQ(used, wire.size());
    EXPECT_EQ(parser.get().body(), body);
}

TEST(JsonLine, AppendsToABufferAsTheStandaloneLine) {
    Exchange ex;
    ex.method = "GET";
    ex.request_id = "r-1";
    ex.decision.verdict = "throttled";
    ex.status_sent = 429;
    const LogTimes t{1.5, 0, "2026-12-01T00:00:00.000Z"};
    std::string buf = "{\"earlier\":1}\n";
    append_access_log_line(buf, ex, t);
    EXPECT_EQ(buf, "{\"earlier\":1}\n" + access_log_line(ex, t));
    EXPECT_EQ(buf.back(), '}');
    EXPECT_NE(buf.find("\"verdict\":\"throttled\""), std::string::npos);
}

TEST(JsonLine, TimestampViewMatchesTheString) {
    const std::string a = iso_now_ms();
    const std::string_view b = iso_now_ms_view();
    ASSERT_EQ(b.size(), 24u);
    EXPECT_EQ(b[10], 'T');
    EXPECT_EQ(b.back(), 'Z');
    EXPECT_EQ(a.substr(0, 16), b.substr(0, 16));  // the same minute, unless one just turned
}

namespace {

// Lines at a steady pace into a writer with `gather`: what was written, and
// how often the writer was woken.
std::pair<std::string, std::uint64_t> steady_lines(std::chrono::microseconds gather, std::string& expect) {
    int p[2];
    EXPECT_EQ(pipe(p), 0);
    std::uint64_t wakeups = 0;
    expect.clear();
    {
        LogWriter w(p[1], 16u << 20, gather);
        for (int i = 0; i < 300; ++i) {
            const std::string line = "line " + std::to_string(i) + "\n";
            w.submit(line);
            expect += line;
            std::this_thread::sleep_for(std::chrono::microseconds(100));  // ~30 ms of steady requests
        }
        w.drain();
        wakeups = w.wakeups();
    }
    ::close(p[1]);
    std::string got;
    char buf[4096];
    for (ssize_t n; (n = ::read(p[0], buf, sizeof buf)) > 0;) got.append(buf, static_cast<std::size_t>(n));
    ::close(p[0]);
    return {got, wakeups};
}

}  // namespace

// At one connection the I/O thread hands over a line per request; the
// writer must not be woken for each (a futex wake and a context switch).
TEST(LogWriter, GathersLinesInsteadOfWakingPerLine) {
    std::string expect;
    const auto [got, wakeups] = steady_lines(std::chrono::microseconds(2000), expect);
    EXPECT_EQ(got, expect);
    EXPECT_LT(wakeups, 60u) << "the writer was woken for most lines";
    // The writer as it was (no gathering) for comparison: woken for most of the 300.
    const auto [got0, wakeups0] = steady_lines(std::chrono::microseconds(0), expect);
    EXPECT_EQ(got0, expect);
    EXPECT_GT(wakeups0, 2 * wakeups) << wakeups0 << " vs " << wakeups;
}

TEST(LogWriter, ALoneLineIsWrittenAtOnce) {
    int p[2];
    ASSERT_EQ(pipe(p), 0);
    LogWriter w(p[1]);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));  // the writer waits
    const auto t0 = std::chrono::steady_clock::now();
    w.submit("x\n");
    char c[2];
    ASSERT_EQ(::read(p[0], c, 2), 2);
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(500));
    ::close(p[0]);
    w.drain();
    ::close(p[1]);
}
