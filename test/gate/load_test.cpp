// Coalescer, concurrency slots, upstream pool and keyed hashes: the logic
// behind the gate-under-load features, without sockets to the upstream.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <cstdlib>
#include <fstream>
#include <unistd.h>

#include "gate/coalescer.hpp"
#include "gate/concurrency.hpp"
#include "gate/identity.hpp"
#include "gate/upstream_pool.hpp"

using namespace ot::gate;

namespace {

std::optional<std::string> key_of(const std::string& method, const std::string& target, const HeaderList& h,
                                  const Config& c = Config{}) {
    HttpIn in{method, target, "", ""};
    return coalesce_key(in, parse_request(in), h, c);
}

const char* kMap = "/?SERVICE=WMS&VERSION=1.3.0&REQUEST=GetMap&LAYERS=a&STYLES=&CRS=EPSG:4326&BBOX=0,0,1,1&WIDTH=10&HEIGHT=10&FORMAT=image/png";

}  // namespace

TEST(Coalescer, FirstLeadsOthersWaitAndAllGetTheResult) {
    Coalescer c;
    int got = 0;
    EXPECT_TRUE(c.join("k", nullptr));
    for (int i = 0; i < 3; ++i)
        EXPECT_FALSE(c.join("k", [&](const FlightResult& r) { got += r.response->status == 200; }));
    EXPECT_TRUE(c.join("other", nullptr));
    EXPECT_EQ(c.in_flight(), 2u);
    auto sr = std::make_shared<SharedResponse>();
    c.finish("k", {FlightResult::Kind::Response, sr, false, {}});
    EXPECT_EQ(got, 3);
    EXPECT_EQ(c.joined_total(), 3u);
    EXPECT_EQ(c.in_flight(), 1u);
}

TEST(Coalescer, ErrorGoesToThatFlightOnlyAndIsNotReused) {
    Coalescer c;
    int errors = 0;
    EXPECT_TRUE(c.join("k", nullptr));
    EXPECT_FALSE(c.join("k", [&](const FlightResult& r) { errors += r.kind == FlightResult::Kind::UpstreamError; }));
    c.finish("k", {FlightResult::Kind::UpstreamError, nullptr, true, "timeout"});
    EXPECT_EQ(errors, 1);
    EXPECT_TRUE(c.join("k", nullptr)) << "the next arrival leads a new flight";
}

TEST(CoalesceKey, NormalisedQuery) {
    auto a = key_of("GET", kMap, {});
    auto b = key_of("GET", "/?request=getmap&service=wms&version=1.3.0&layers=a&styles=&crs=epsg:4326&bbox=0,0,1,1&width=10&height=10&format=IMAGE/PNG", {});
    ASSERT_TRUE(a);
    EXPECT_EQ(*a, *b);
    EXPECT_NE(*a, *key_of("GET", std::string(kMap) + "&TIME=2020", {}));
    EXPECT_NE(*a, *key_of("HEAD", kMap, {}));
    auto la = key_of("GET", "/?SERVICE=WMS&VERSION=1.3.0&REQUEST=GetMap&LAYERS=A&STYLES=&CRS=EPSG:4326&BBOX=0,0,1,1&WIDTH=10&HEIGHT=10&FORMAT=image/png", {});
    EXPECT_NE(*a, *la) << "layer names keep their case";
}

TEST(CoalesceKey, CredentialsSeparateUnlessPublic) {
    const auto anon = key_of("GET", kMap, {});
    const auto alice = key_of("GET", kMap, {{"Authorization", "Bearer alice"}});
    const auto bob = key_of("GET", kMap, {{"Authorization", "Bearer bob"}});
    const auto key = key_of("GET", kMap, {{"X-Api-Key", "k1"}});
    EXPECT_NE(*alice, *bob);
    EXPECT_NE(*anon, *alice);
    EXPECT_NE(*anon, *key);
    EXPECT_EQ(alice->find("alice"), std::string::npos) << "no raw credential in the key";
    Config c;
    c.coalesce.public_paths = {"/"};
    EXPECT_EQ(*key_of("GET", kMap, {{"Authorization", "Bearer alice"}}, c), *key_of("GET", kMap, {{"Authorization", "Bearer bob"}}, c));
}

TEST(CoalesceKey, NeverForWritesOrNonMaps) {
    EXPECT_FALSE(key_of("POST", kMap, {}));
    EXPECT_FALSE(key_of("GET", "/?SERVICE=WFS&VERSION=2.0.0&REQUEST=GetFeature&TYPENAMES=a&COUNT=1", {}));
    EXPECT_FALSE(key_of("GET", "/?SERVICE=WMS&REQUEST=GetCapabilities", {}));
    EXPECT_FALSE(key_of("GET", kMap, {{"Range", "bytes=0-10"}}));
    Config off;
    off.coalesce.enabled = false;
    EXPECT_FALSE(key_of("GET", kMap, {}, off));
    EXPECT_TRUE(key_of("GET", "/?SERVICE=WMTS&REQUEST=GetTile&VERSION=1.0.0&LAYER=a&TILEMATRIXSET=g&TILEMATRIX=3&TILEROW=1&TILECOL=1&FORMAT=image/png", {}));
}

TEST(Slots, LimitQueueAndCancel) {
    Slots s;
    s.configure({{"map", {"GetMap"}, 2}}, 1);
    std::uint64_t t = 0;
    int granted = 0;
    EXPECT_EQ(s.acquire("map", nullptr, &t), Slots::Outcome::Granted);
    EXPECT_EQ(s.acquire("map", nullptr, &t), Slots::Outcome::Granted);
    EXPECT_EQ(s.acquire("map", [&] { granted++; }, &t), Slots::Outcome::Queued);
    std::uint64_t t2 = 0;
    EXPECT_EQ(s.acquire("map", nullptr, &t2), Slots::Outcome::Full);
    s.release("map");  // passes straight to the queued one
    EXPECT_EQ(granted, 1);
    EXPECT_FALSE(s.cancel("map", t)) << "already granted";
    EXPECT_EQ(s.acquire("map", [&] { granted++; }, &t2), Slots::Outcome::Queued);
    EXPECT_TRUE(s.cancel("map", t2));
    s.release("map");
    EXPECT_EQ(granted, 1) << "a cancelled waiter is never granted";
    EXPECT_EQ(s.acquire("map", nullptr, &t), Slots::Outcome::Granted);
    EXPECT_EQ(s.acquire("unknown", nullptr, &t), Slots::Outcome::Granted);
    const auto v = s.view();
    ASSERT_EQ(v.size(), 1u);
    EXPECT_EQ(v[0].active, 2);
    EXPECT_EQ(v[0].rejected, 2u);
}

TEST(Slots, DefaultClasses) {
    Config c;
    OgcRequest r;
    r.op = Op::GetMap;
    EXPECT_EQ(concurrency_class(r, "map", c), "maps");
    r.op = Op::GetFeature;
    EXPECT_EQ(concurrency_class(r, "features", c), "features");
    r.op = Op::GetCoverage;
    EXPECT_EQ(concurrency_class(r, "coverage", c), "downloads");
    r.op = Op::Other;
    EXPECT_EQ(concurrency_class(r, "other", c), "");
    EXPECT_EQ(config_problem(c), "");
}

TEST(Slots, ClassByOperationOrCostClass) {
    Config c;
    c.concurrency.classes = {{"maps", {"GetMap"}, 8}, {"downloads", {"coverage", "GetFeature"}, 2}};
    OgcRequest r;
    r.op = Op::GetMap;
    EXPECT_EQ(concurrency_class(r, "map", c), "maps");
    r.op = Op::GetCoverage;
    EXPECT_EQ(concurrency_class(r, "coverage", c), "downloads");
    r.op = Op::Other;
    EXPECT_EQ(concurrency_class(r, "other", c), "");
}

TEST(UpstreamPool, MostRecentFirstDropsDeadAndExpired) {
    IdlePool<std::unique_ptr<int>> p(2, 10);
    const auto t0 = IdlePool<std::unique_ptr<int>>::Clock::now();
    auto never = [](const std::unique_ptr<int>&) { return false; };
    p.put(std::make_unique<int>(1), t0);
    p.put(std::make_unique<int>(2), t0);
    p.put(std::make_unique<int>(3), t0);  // over max_idle: the oldest goes
    EXPECT_EQ(p.idle(), 2u);
    auto c = p.take(t0, [](const std::unique_ptr<int>& v) { return *v == 3; });  // 3 is dead
    ASSERT_TRUE(c);
    EXPECT_EQ(**c, 2);
    EXPECT_EQ(p.idle(), 0u);
    p.put(std::move(*c), t0);
    EXPECT_FALSE(p.take(t0 + std::chrono::seconds(11), never)) << "idle past the timeout";
    p.configure(0, 10);
    p.put(std::make_unique<int>(4), t0);
    EXPECT_EQ(p.idle(), 0u) << "upstream_keepalive 0 keeps nothing";
}

TEST(UpstreamPool, PeekSeesAClosedPeer) {
    int a[2];
    ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, a), 0);
    EXPECT_FALSE(idle_conn_dead(a[0]));
    ::close(a[1]);
    EXPECT_TRUE(idle_conn_dead(a[0]));
    ::close(a[0]);
}

TEST(KeyedHash, Hmac) {
    // RFC 2202 test case 2, truncated to 16 hex digits.
    EXPECT_EQ(keyed_hash("Jefe", "what do ya want for nothing?"), "effcdf6ae5eb2fa2");
    EXPECT_NE(keyed_hash("k1", "192.0.2.1"), keyed_hash("k2", "192.0.2.1"));
    Config c;
    c.hash_secret = "s";
    const Identity id = identify({}, *parse_ip("192.0.2.1"), c);
    EXPECT_EQ(id.hash, keyed_hash("s", ip_to_string(*parse_ip("192.0.2.1"))));
    EXPECT_NE(id.hash, hash_secret("192.0.2.1"));
}

TEST(LoadConfig, KeysAndChecks) {
    char path[] = "/tmp/gate_load_testXXXXXX";
    const int fd = mkstemp(path);
    ASSERT_GE(fd, 0);
    std::ofstream(path) << "coalesce: {max_body_bytes: 1000, public_paths: [/tiles/]}\n"
                           "concurrency:\n  queue_timeout: 1.5\n  classes:\n    - {name: maps, match: [GetMap], limit: 8}\n"
                           "refund_fraction: 0.5\nidentity: {hash_secret: abc}\nlimits: {upstream_keepalive: 3}\n";
    const Config c = load_config_file(path, Config{});
    EXPECT_EQ(c.coalesce.max_body_bytes, 1000u);
    EXPECT_EQ(c.coalesce.public_paths.at(0), "/tiles/");
    EXPECT_EQ(c.concurrency.classes.at(0).limit, 8);
    EXPECT_DOUBLE_EQ(c.concurrency.queue_timeout_s, 1.5);
    EXPECT_DOUBLE_EQ(c.refund_fraction, 0.5);
    EXPECT_EQ(c.hash_secret, "abc");
    EXPECT_EQ(c.limits.upstream_keepalive, 3u);
    std::ofstream(path) << "concurrency: {classes: [{name: x, match: [GetMap], limit: 0}]}\n";
    EXPECT_THROW(load_config_file(path, Config{}), std::runtime_error);
    std::ofstream(path) << "concurrency: {classes: []}\n";
    EXPECT_TRUE(load_config_file(path, Config{}).concurrency.classes.empty()) << "an empty list turns them off";
    std::ofstream(path) << "refund_fraction: 2\n";
    EXPECT_THROW(load_config_file(path, Config{}), std::runtime_error);
    ::close(fd);
    std::remove(path);
}
