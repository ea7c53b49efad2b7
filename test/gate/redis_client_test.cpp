// The store's client under failure: nothing listening, a stalled server, and
// many calls in flight on one connection. Real redis-server (port 18701).
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "gate/redis_store.hpp"
#include "redis_test_server.hpp"

using namespace ot::gate;
using ot::core::SpendOutcome;
using redis_test::run_until;
using Clock = std::chrono::steady_clock;

namespace {

StoreConfig cfg(int port, int timeout_ms) {
    StoreConfig c;
    c.store = StoreConfig::Kind::Redis;
    c.endpoint.host = "127.0.0.1";
    c.endpoint.port = std::to_string(port);
    c.timeout_ms = timeout_ms;
    c.key_prefix = "ogc_throttle_test:";
    return c;
}

double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

TEST(RedisClient, NothingListeningFallsBackAtOnce) {
    boost::asio::io_context ioc;
    redis::StoreMetrics m;
    BucketStore store(ioc, cfg(18799, 200), m);  // 18799: nothing there
    for (int i = 0; i < 3; ++i) {
        std::optional<StoreDecision> d;
        const auto t = Clock::now();
        store.admit("k", 1, {10, 5}, redis::OnError::Local, [&](StoreDecision x) { d = std::move(x); });
        ASSERT_TRUE(run_until(ioc, [&] { return d.has_value(); }));
        EXPECT_LT(ms_since(t), 100) << "refused connections must not wait for the timeout";
        EXPECT_EQ(d->source, StoreDecision::Source::Local);
        EXPECT_EQ(d->failure, redis::Failure::Unavailable);
    }
    EXPECT_EQ(m.fallbacks[static_cast<int>(redis::OnError::Local)].load(), 3u);
    EXPECT_EQ(m.unavailable.load(), 3u);
}

TEST(RedisClient, StalledServerTimesOutThenRecovers) {
    ASSERT_TRUE(redis_test::server().up());
    boost::asio::io_context ioc;
    redis::StoreMetrics m;
    BucketStore store(ioc, cfg(redis_test::kPort, 50), m);
    std::optional<StoreDecision> d;
    store.admit("stall", 1, {10, 5}, redis::OnError::Open, [&](StoreDecision x) { d = std::move(x); });
    ASSERT_TRUE(run_until(ioc, [&] { return d.has_value(); }));
    ASSERT_EQ(d->source, StoreDecision::Source::Redis) << d->detail;

    // Another client pauses every client for 400 ms: Redis accepts, never answers.
    auto pauser = redis::Client::create(ioc, cfg(redis_test::kPort, 1000).endpoint, {});
    std::optional<redis::Result> paused;
    pauser->command({"CLIENT", "PAUSE", "400", "ALL"}, [&](redis::Result r) { paused = std::move(r); });
    ASSERT_TRUE(run_until(ioc, [&] { return paused.has_value(); }));
    ASSERT_TRUE(paused->ok() && !paused->reply.is_error()) << paused->detail << paused->reply.str;
    const auto t = Clock::now();
    d.reset();
    store.admit("stall", 1, {10, 5}, redis::OnError::Open, [&](StoreDecision x) { d = std::move(x); });
    ASSERT_TRUE(run_until(ioc, [&] { return d.has_value(); }));
    EXPECT_EQ(d->source, StoreDecision::Source::FailOpen);
    EXPECT_EQ(d->spend.outcome, SpendOutcome::Allowed);
    EXPECT_EQ(d->failure, redis::Failure::Timeout);
    EXPECT_GE(ms_since(t), 45);
    EXPECT_LT(ms_since(t), 300);
    EXPECT_EQ(m.timeouts.load(), 1u);

    // Once the pause is over, the same store decides with Redis again.
    const auto until = Clock::now() + std::chrono::milliseconds(2000);
    bool back = false;
    while (!back && Clock::now() < until) {
        d.reset();
        store.admit("stall", 1, {10, 5}, redis::OnError::Closed, [&](StoreDecision x) { d = std::move(x); });
        ASSERT_TRUE(run_until(ioc, [&] { return d.has_value(); }));
        back = d->source == StoreDecision::Source::Redis;
        if (!back) run_until(ioc, [] { return false; }, std::chrono::milliseconds(50));
    }
    EXPECT_TRUE(back);
    pauser->close();
}

TEST(RedisClient, ThousandCallsInFlightGetTheirOwnAnswers) {
    ASSERT_TRUE(redis_test::server().up());
    boost::asio::io_context ioc;
    redis::StoreMetrics m;
    BucketStore store(ioc, cfg(redis_test::kPort, 2000), m);
    std::optional<SettleResult> reset;
    store.settle("pipe", -1e6, {100, 0.01}, [&](SettleResult r) { reset = r; });  // starts full
    ASSERT_TRUE(run_until(ioc, [&] { return reset.has_value(); }));
    int answered = 0, allowed = 0;
    std::vector<double> remaining;
    for (int i = 0; i < 1000; ++i)
        store.admit("pipe", 1, {100, 0.01}, redis::OnError::Closed, [&](StoreDecision d) {
            ++answered;
            if (d.source == StoreDecision::Source::Redis && d.spend.outcome == SpendOutcome::Allowed) {
                ++allowed;
                remaining.push_back(d.spend.remaining);
            }
        });
    ASSERT_TRUE(run_until(ioc, [&] { return answered == 1000; }));
    EXPECT_EQ(allowed, 100);  // the burst, and not one more
    ASSERT_EQ(remaining.size(), 100u);
    for (std::size_t i = 1; i < remaining.size(); ++i) EXPECT_LT(remaining[i], remaining[i - 1]);  // in order
    store.settle("pipe", -1e6, {100, 0.01}, [&](SettleResult) {});
    run_until(ioc, [] { return false; }, std::chrono::milliseconds(20));
}

}  // namespace
