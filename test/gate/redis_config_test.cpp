// The store's configuration, the RESP codec and the metrics text: no server.
#include <gtest/gtest.h>

#include <stdexcept>

#include "gate/redis_metrics.hpp"
#include "gate/redis_resp.hpp"
#include "gate/store_config.hpp"

using namespace ot::gate;
using redis::OnError;

namespace {

StoreConfig parse(const std::string& yaml) { return parse_store_config(YAML::Load(yaml)["buckets"]); }

std::string parse_error(const std::string& yaml) {
    try {
        parse(yaml);
    } catch (const std::runtime_error& e) {
        return e.what();
    }
    return "";
}

TEST(StoreConfig, DefaultsToLocalBuckets) {
    const StoreConfig c = parse("{}");
    EXPECT_EQ(c.store, StoreConfig::Kind::Local);
    EXPECT_EQ(c.on_error, OnError::Local);
    EXPECT_EQ(c.policy_for("map"), OnError::Local);
    EXPECT_EQ(c.refusal_cache, 4096u);
}

TEST(StoreConfig, ReadsEveryFieldAndPerClassOverrides) {
    const StoreConfig c = parse(
        "buckets:\n"
        "  store: redis\n"
        "  url: redis://gate:s%40cret@10.0.0.5:6380/2\n"
        "  timeout_ms: 25\n"
        "  on_error: closed\n"
        "  key_prefix: 'fleet1:'\n"
        "  refusal_cache: 0\n"
        "  classes: {tile: {on_error: open}, coverage: {on_error: closed}, other: {on_error: local}}\n");
    EXPECT_EQ(c.store, StoreConfig::Kind::Redis);
    EXPECT_EQ(c.endpoint.host, "10.0.0.5");
    EXPECT_EQ(c.endpoint.port, "6380");
    EXPECT_EQ(c.endpoint.db, 2);
    EXPECT_EQ(c.endpoint.username, "gate");
    EXPECT_EQ(c.endpoint.password, "s@cret");
    EXPECT_EQ(c.timeout_ms, 25);
    EXPECT_EQ(c.key_prefix, "fleet1:");
    EXPECT_EQ(c.refusal_cache, 0u);
    EXPECT_EQ(c.policy_for("tile"), OnError::Open);
    EXPECT_EQ(c.policy_for("coverage"), OnError::Closed);
    EXPECT_EQ(c.policy_for("map"), OnError::Closed);  // the default
    EXPECT_EQ(c.policy_for(""), OnError::Local);      // no class: "other"
}

TEST(StoreConfig, RefusesWhatItCannotUse) {
    EXPECT_NE(parse_error("buckets: {store: redis}").find("buckets.url: is required"), std::string::npos);
    EXPECT_NE(parse_error("buckets: {store: memcached}").find("buckets.store"), std::string::npos);
    EXPECT_NE(parse_error("buckets: {store: redis, url: 'http://x'}").find("redis://"), std::string::npos);
    EXPECT_NE(parse_error("buckets: {url: 'redis://h:99999'}").find("bad port"), std::string::npos);
    EXPECT_NE(parse_error("buckets: {url: 'redis://h/x'}").find("database"), std::string::npos);
    EXPECT_NE(parse_error("buckets: {url: 'redis://:6379'}").find("no host"), std::string::npos);
    EXPECT_NE(parse_error("buckets: {timeout_ms: 0}").find("timeout_ms"), std::string::npos);
    EXPECT_NE(parse_error("buckets: {timeout_ms: fast}").find("timeout_ms"), std::string::npos);
    EXPECT_NE(parse_error("buckets: {on_error: maybe}").find("open, closed or local"), std::string::npos);
    EXPECT_NE(parse_error("buckets: {classes: {tiles: {on_error: open}}}").find("buckets.classes.tiles"), std::string::npos);
    EXPECT_NE(parse_error("buckets: {classes: {tile: {on_error: ajar}}}").find("classes.tile.on_error"), std::string::npos);
    EXPECT_NE(parse_error("buckets: {classes: {tile: {}}}").find("needs on_error"), std::string::npos);
    EXPECT_NE(parse_error("buckets: {refusal_cache: -1}").find("buckets.refusal_cache"), std::string::npos);
    EXPECT_NE(parse_error("buckets: {refusal_cache: lots}").find("buckets.refusal_cache"), std::string::npos);
    EXPECT_NE(parse_error("buckets: {refusal_cache: 2000000}").find("buckets.refusal_cache"), std::string::npos);
    EXPECT_NE(parse_error("buckets: {sentinel: x}").find("unknown key 'sentinel'"), std::string::npos);
    EXPECT_NE(parse_error("buckets: [redis]").find("must be a mapping"), std::string::npos);
}

TEST(StoreConfig, RedisUrls) {
    redis::Endpoint ep;
    EXPECT_EQ(parse_redis_url("redis://localhost", ep), "");
    EXPECT_EQ(ep.host, "localhost");
    EXPECT_EQ(ep.port, "6379");
    EXPECT_EQ(ep.db, 0);
    EXPECT_EQ(parse_redis_url("redis://[::1]:7000/3", ep), "");
    EXPECT_EQ(ep.host, "::1");
    EXPECT_EQ(ep.port, "7000");
    EXPECT_EQ(ep.db, 3);
    EXPECT_EQ(parse_redis_url("redis://only-a-password@h", ep), "");
    EXPECT_EQ(ep.password, "only-a-password");
    EXPECT_EQ(ep.username, "");
    EXPECT_EQ(parse_redis_url("redis://:pw@h", ep), "");
    EXPECT_EQ(ep.password, "pw");
    EXPECT_NE(parse_redis_url("rediss://h", ep), "");  // TLS: not supported, said so
    EXPECT_NE(parse_redis_url("redis://[::1", ep), "");
    EXPECT_NE(parse_redis_url("redis://u:%zz@h", ep), "");
}

TEST(RedisResp, EncodesBinarySafeCommands) {
    std::string out;
    redis::encode_command({"SET", std::string("k\0ey", 4), ""}, out);
    EXPECT_EQ(out, std::string("*3\r\n$3\r\nSET\r\n$4\r\nk\0ey\r\n$0\r\n\r\n", 29));
}

TEST(RedisResp, ParsesRepliesFedInPieces) {
    const std::string wire = "+OK\r\n:42\r\n$-1\r\n-NOSCRIPT No matching script\r\n*3\r\n:0\r\n$3\r\n7.5\r\n*1\r\n$2\r\nab\r\n";
    redis::ReplyParser p;
    std::vector<redis::Reply> got;
    for (char ch : wire) {  // one byte at a time: replies may straddle reads
        ASSERT_TRUE(p.feed(&ch, 1));
        while (auto r = p.next()) got.push_back(*r);
    }
    ASSERT_EQ(got.size(), 5u);
    EXPECT_EQ(got[0].type, redis::Reply::Type::Status);
    EXPECT_EQ(got[1].integer, 42);
    EXPECT_EQ(got[2].type, redis::Reply::Type::Nil);
    EXPECT_TRUE(got[3].is_error());
    EXPECT_EQ(got[3].str, "NOSCRIPT No matching script");
    ASSERT_EQ(got[4].elements.size(), 3u);
    EXPECT_EQ(got[4].elements[1].str, "7.5");
    EXPECT_EQ(got[4].elements[2].elements.at(0).str, "ab");
}

TEST(RedisResp, GarbageIsAnErrorNotACrash) {
    redis::ReplyParser p;
    p.feed("?what\r\n", 7);
    EXPECT_FALSE(p.next().has_value());
    EXPECT_FALSE(p.error().empty());
}

TEST(StoreMetrics, PrometheusText) {
    redis::StoreMetrics m;
    m.observe_ns(150'000);     // 0.15 ms
    m.observe_ns(2'000'000);   // 2 ms
    m.observe_ns(900'000'000); // 900 ms: +Inf
    m.timeouts = 3;
    m.fallback(OnError::Local);
    m.fallback(OnError::Local);
    m.local_refusals = 7;
    m.refusal_cache_evictions = 2;
    const std::string t = m.prometheus();
    EXPECT_NE(t.find("ogc_gate_store_latency_seconds_bucket{le=\"0.0001\"} 0\n"), std::string::npos) << t;
    EXPECT_NE(t.find("ogc_gate_store_latency_seconds_bucket{le=\"0.0002\"} 1\n"), std::string::npos) << t;
    EXPECT_NE(t.find("ogc_gate_store_latency_seconds_bucket{le=\"0.002\"} 2\n"), std::string::npos) << t;
    EXPECT_NE(t.find("ogc_gate_store_latency_seconds_bucket{le=\"+Inf\"} 3\n"), std::string::npos) << t;
    EXPECT_NE(t.find("ogc_gate_store_latency_seconds_count 3\n"), std::string::npos);
    EXPECT_NE(t.find("ogc_gate_store_errors_total{kind=\"timeout\"} 3\n"), std::string::npos);
    EXPECT_NE(t.find("ogc_gate_store_fallbacks_total{on_error=\"local\"} 2\n"), std::string::npos);
    EXPECT_NE(t.find("ogc_gate_store_local_refusals_total 7\n"), std::string::npos) << t;
    EXPECT_NE(t.find("ogc_gate_store_refusal_cache_evictions_total 2\n"), std::string::npos) << t;
    EXPECT_EQ(m.errors(), 3u);
}

}  // namespace
