// The pure rooms split out of the server: upstream and listen addresses,
// the access log line, Prometheus text, connection counting, echoed values.
#include <gtest/gtest.h>
#include <pugixml.hpp>
#include <unistd.h>

#include <chrono>
#include <csignal>

#include "gate/access_log.hpp"
#include "gate/conn_limits.hpp"
#include "gate/log_writer.hpp"
#include "gate/decision.hpp"
#include "gate/metrics.hpp"
#include "gate/prom_text.hpp"
#include "gate/text.hpp"
#include "gate/upstream_url.hpp"

using namespace ot::gate;

TEST(ParseUpstream, HostPortPrefix) {
    Upstream u = parse_upstream("http://127.0.0.1:8080");
    EXPECT_EQ(u.host, "127.0.0.1");
    EXPECT_EQ(u.port, "8080");
    EXPECT_EQ(u.prefix, "");
    u = parse_upstream("http://map.example/cgi-bin/mapserv//");
    EXPECT_EQ(u.host, "map.example");
    EXPECT_EQ(u.port, "80");
    EXPECT_EQ(u.prefix, "/cgi-bin/mapserv");
    u = parse_upstream("http://[::1]:81/x");
    EXPECT_EQ(u.host, "::1");
    EXPECT_EQ(u.port, "81");
    EXPECT_EQ(u.prefix, "/x");
    u = parse_upstream("http://[::1]");
    EXPECT_EQ(u.port, "80");
}

TEST(ParseUpstream, RefusesWhatItCannotUse) {
    for (const char* bad : {"", "https://a:1", "http://", "http://:80", "http://a:", "http://a:0", "http://a:65536",
                            "http://a:+80", "http://a:-1", "http://a:8x", "http://[::1", "http://[::1]x",
                            "http://[nothost]:80", "http://u@h:80", "http://a:80/p?q=1", "http://a b:80"})
        EXPECT_THROW(parse_upstream(bad), std::runtime_error) << bad;
}

TEST(ParseListen, Forms) {
    auto ep = parse_listen("127.0.0.1:8000");
    EXPECT_EQ(ep.address().to_string(), "127.0.0.1");
    EXPECT_EQ(ep.port(), 8000);
    ep = parse_listen(":9000");
    EXPECT_EQ(ep.address().to_string(), "0.0.0.0");
    ep = parse_listen("[::1]:1");
    EXPECT_EQ(ep.address().to_string(), "::1");
    for (const char* bad : {"", "8000", "host:80", "1.2.3.4:", "1.2.3.4:65536", "1.2.3.4:-1", "[::1:80", "1.2.3.4:+5"})
        EXPECT_THROW(parse_listen(bad), std::runtime_error) << bad;
}

TEST(AccessLog, KeysInOrderAndValuesEscaped) {
    Exchange ex;
    ex.assessment.price.cost_class = "map";
    ex.assessment.price.cost = 12.5;
    ex.method = "GET";
    ex.request_id = "r-1";
    ex.identity_hash = "abcd";
    ex.tier = "pub\"lic";
    ex.status_sent = 200;
    ex.upstream_status = 200;
    ex.decision.verdict = "pass";
    const std::string line = access_log_line(ex, {3.25, 2.5, "2026-12-01T00:00:00.000Z"});
    EXPECT_EQ(line,
              "{\"class\":\"map\",\"cost\":12.5,\"identity\":\"abcd\",\"latency_ms\":3.25,\"method\":\"GET\","
              "\"operation\":\"other\",\"request_id\":\"r-1\",\"service\":\"unknown\",\"status\":200,"
              "\"tier\":\"pub\\\"lic\",\"ts\":\"2026-12-01T00:00:00.000Z\",\"upstream_ms\":2.5,\"upstream_status\":200,"
              "\"verdict\":\"pass\"}");
}

TEST(AccessLog, OptionalFieldsOnlyWhenSet) {
    Exchange ex;
    ex.decision.verdict = "invalid";
    std::string line = access_log_line(ex, {1, 0, "t"});
    EXPECT_EQ(line.find("upstream_ms"), std::string::npos);
    EXPECT_EQ(line.find("coalesced"), std::string::npos);
    EXPECT_NE(line.find("\"class\":\"other\""), std::string::npos);
    ex.coalesced = ex.retried = true;
    ex.refunded = 0.9;
    ex.slot_class = "maps";
    ex.upstream_error = "timeout: x";
    line = access_log_line(ex, {1, 0, "t"});
    for (const char* k : {"\"coalesced\":true", "\"upstream_retried\":true", "\"refunded\":0.9",
                          "\"concurrency_class\":\"maps\"", "\"upstream_error\":\"timeout: x\""})
        EXPECT_NE(line.find(k), std::string::npos) << k;
}

TEST(PromText, NumbersRoundTripExactly) {
    std::string s;
    prom_number(s, 1234567.5);
    EXPECT_EQ(s, "1234567.5");
    s.clear();
    prom_number(s, 0.1 + 0.2);
    EXPECT_EQ(std::stod(s), 0.1 + 0.2);
    s.clear();
    prom_number(s, 1e21);
    EXPECT_EQ(std::stod(s), 1e21);
    s.clear();
    prom_number(s, std::uint64_t{18446744073709551615ull});
    EXPECT_EQ(s, "18446744073709551615");
    s.clear();
    prom_number(s, 1.0 / 0.0);
    EXPECT_EQ(s, "+Inf");
}

TEST(PromText, LabelValuesEscaped) {
    std::string s;
    prom_sample(s, "m", {{"class", "a\"b\\c\nd"}}, 1.0);
    EXPECT_EQ(s, "m{class=\"a\\\"b\\\\c\\nd\"} 1\n");
}

TEST(PromText, MetricsPageExact) {
    Metrics m(2);
    m.request(0, "map", "pass", 1234567.5);
    m.request(1, "map", "pass", 0.25);
    m.request(0, "we\"ird", "pass", 0);
    const std::string p = m.prometheus(3);
    EXPECT_NE(p.find("ogc_gate_cost_charged_total{class=\"map\"} 1234567.75\n"), std::string::npos) << p;
    EXPECT_NE(p.find("ogc_gate_requests_total{class=\"map\",verdict=\"pass\"} 2\n"), std::string::npos);
    EXPECT_NE(p.find("ogc_gate_requests_total{class=\"we\\\"ird\",verdict=\"pass\"} 1\n"), std::string::npos);
    EXPECT_NE(p.find("ogc_gate_upstream_latency_seconds_bucket{le=\"0.005\"} 0\n"), std::string::npos);
    EXPECT_EQ(p.find("e+0"), std::string::npos);
}

TEST(ConnLimits, PerAddressGlobalAndProbeReserve) {
    ConnLimits l;
    l.configure(4, 2, 1);
    const IpAddr a = *parse_ip("10.0.0.1"), b = *parse_ip("10.0.0.2"), c = *parse_ip("10.0.0.3");
    ConnLimits::Ticket t1, t2, t3, t4, t5, t6, t7;
    EXPECT_EQ(l.admit(a, t1), ConnLimits::Admit::Ok);
    EXPECT_EQ(l.admit(a, t2), ConnLimits::Admit::Ok);
    EXPECT_EQ(l.admit(a, t3), ConnLimits::Admit::OverAddress);
    EXPECT_EQ(l.admit(b, t3), ConnLimits::Admit::Ok);
    EXPECT_EQ(l.admit(c, t4), ConnLimits::Admit::Ok);
    EXPECT_EQ(l.open(), 4u);
    EXPECT_EQ(l.admit(c, t5), ConnLimits::Admit::ProbeOnly);  // the reserve
    EXPECT_EQ(l.admit(b, t6), ConnLimits::Admit::Full);
    EXPECT_EQ(l.refused_address(), 1u);
    EXPECT_EQ(l.refused_global(), 1u);
    t1.release();
    t5 = ConnLimits::Ticket{};
    EXPECT_EQ(l.open(), 3u);
    EXPECT_EQ(l.admit(a, t7), ConnLimits::Admit::Ok);
    {
        ConnLimits::Ticket moved = std::move(t7);
        EXPECT_EQ(l.open(), 4u);
    }
    EXPECT_EQ(l.open(), 3u);
    EXPECT_EQ(l.addresses(), 3u);
}

TEST(EchoValue, NeverCutsACharacterInTwo) {
    const std::string v = std::string(39, 'a') + "\xC3\xA9" + "zzz";  // é straddles byte 40
    EXPECT_EQ(echo_value(v, 40), std::string(39, 'a'));
    EXPECT_EQ(echo_value("\xE2\x82\xAC", 2), "");
    EXPECT_EQ(echo_value("a\xFF" "b\xC3", 40), "a?b?");
    EXPECT_EQ(echo_value("a\x01" "b", 40), "a?b");
    EXPECT_EQ(echo_value("\xED\xA0\x80", 40), "???");  // a surrogate
    EXPECT_EQ(echo_value("\xC0\xAF", 40), "??");        // overlong '/'
}

static bool valid_utf8(std::string s) {
    for (char& c : s)
        if (c == '\n' || c == '\r') c = ' ';  // line breaks are fine in a document, not in an echoed value
    return echo_value(s, s.size() + 1) == s;
}

TEST(EchoValue, RefusalReportIsWellFormed) {
    HttpIn in{"GET", "/?SERVICE=WMS&VERSION=1.3.0&REQUEST=GetMap&LAYERS=a&STYLES=&CRS=EPSG:4326&BBOX=0,0,1,1&FORMAT=image/png&"
                     "HEIGHT=10&WIDTH=" + std::string(39, '1') + "%C3%A9", "", ""};
    Config c;
    const Assessment a = assess(in, c);
    ASSERT_TRUE(a.caps.error);
    const Decision d = decide(in, a, c.tiers[0], std::nullopt, c);
    ASSERT_FALSE(d.forward);
    EXPECT_TRUE(valid_utf8(d.response.body)) << d.response.body;
    pugi::xml_document doc;
    EXPECT_TRUE(doc.load_string(d.response.body.c_str()));
}

TEST(LogWriter, WritesInOrderOffTheCallersThread) {
    int p[2];
    ASSERT_EQ(pipe(p), 0);
    std::string expect;
    {
        LogWriter w(p[1]);
        for (int i = 0; i < 100; ++i) {
            const std::string line = "line " + std::to_string(i) + "\n";
            w.submit(line);
            expect += line;
        }
        w.drain();
    }
    ::close(p[1]);
    std::string got;
    char buf[4096];
    for (ssize_t n; (n = ::read(p[0], buf, sizeof buf)) > 0;) got.append(buf, static_cast<std::size_t>(n));
    ::close(p[0]);
    EXPECT_EQ(got, expect);
}

TEST(LogWriter, AStalledReaderDropsInsteadOfBlocking) {
    std::signal(SIGPIPE, SIG_IGN);
    int p[2];
    ASSERT_EQ(pipe(p), 0);  // nobody reads: the pipe fills at 64 kB
    {
        LogWriter w(p[1], 256 * 1024);
        const std::string chunk(32 * 1024, 'x');
        const auto t0 = std::chrono::steady_clock::now();
        for (int i = 0; i < 64; ++i) w.submit(chunk);  // 2 MB
        EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(1)) << "submit never waits on write";
        EXPECT_GT(w.dropped_bytes(), 0u);
        ::close(p[0]);  // the writer's next write fails (EPIPE is ignored below): it can stop
    }
    ::close(p[1]);
}
