// The Redis script against core/gcra.hpp: the same (time, cost) sequences,
// replayed with a fixed "now", must give the same decisions, balances and
// TATs to the nanosecond; then the production path on Redis's own clock.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "core/gcra.hpp"
#include "gate/redis_script.hpp"
#include "gate/redis_store.hpp"
#include "redis_test_server.hpp"

using namespace ot::gate;
using ot::core::Budget;
using ot::core::SpendOutcome;
using redis_test::run_until;

namespace {

StoreConfig local_redis(int timeout_ms = 1000, int port = redis_test::kPort) {
    StoreConfig c;
    c.store = StoreConfig::Kind::Redis;
    c.endpoint.host = "127.0.0.1";
    c.endpoint.port = std::to_string(port);
    c.timeout_ms = timeout_ms;
    c.key_prefix = "ogc_throttle_test:";
    return c;
}

struct Fixture : ::testing::Test {
    boost::asio::io_context ioc;
    redis::StoreMetrics metrics;
    void SetUp() override { ASSERT_TRUE(redis_test::server().up()) << "redis-server did not start on port 18701"; }

    StoreDecision admit(BucketStore& s, const std::string& key, double cost, Budget b,
                        redis::OnError p = redis::OnError::Closed) {
        std::optional<StoreDecision> out;
        s.admit(key, cost, b, p, [&](StoreDecision d) { out = std::move(d); });
        EXPECT_TRUE(run_until(ioc, [&] { return out.has_value(); })) << "admit never answered";
        return out.value_or(StoreDecision{});
    }
    SettleResult settle(BucketStore& s, const std::string& key, double delta, Budget b) {
        std::optional<SettleResult> out;
        s.settle(key, delta, b, [&](SettleResult r) { out = std::move(r); });
        EXPECT_TRUE(run_until(ioc, [&] { return out.has_value(); })) << "settle never answered";
        return out.value_or(SettleResult{});
    }
    redis::Reply raw(const std::vector<std::string>& cmd) {
        auto c = redis::Client::create(ioc, local_redis().endpoint, {});
        std::optional<redis::Result> out;
        c->command(cmd, [&](redis::Result r) { out = std::move(r); });
        EXPECT_TRUE(run_until(ioc, [&] { return out.has_value(); }));
        c->close();
        EXPECT_TRUE(out && out->ok()) << (out ? out->detail : "no answer");
        return out ? out->reply : redis::Reply{};
    }
};

using RedisGcra = Fixture;

TEST_F(RedisGcra, ScriptLoadAnswersTheShaWeCall) {
    const redis::Reply r = raw({"SCRIPT", "LOAD", redis::gcra_script()});
    EXPECT_EQ(r.str, redis::gcra_script_sha1());
    EXPECT_EQ(redis::gcra_script_sha1().size(), 40u);
}

// One random sequence of admits, charges and refunds per budget; core keeps
// its TAT in a local variable exactly as BucketTable does.
void replay(Fixture& f, Budget b, unsigned seed, int steps) {
    BucketStore store(f.ioc, local_redis(), f.metrics);
    const std::string key = "seq:" + std::to_string(seed);
    f.raw({"DEL", "ogc_throttle_test:" + key});
    std::mt19937_64 rng(seed);
    std::int64_t now = 1'764'000'000'000'000'000LL + static_cast<std::int64_t>(rng() % 1'000'000'000);
    std::int64_t tat = now;
    const double refill_ns = b.capacity / b.rate * 1e9;
    int allowed = 0, refused = 0, never = 0;
    for (int i = 0; i < steps; ++i) {
        const int kind = static_cast<int>(rng() % 10);
        // Time steps from 0 to past a whole refill, some of a single nanosecond.
        const int dk = static_cast<int>(rng() % 4);
        now += dk == 0 ? 0 : dk == 1 ? 1 : static_cast<std::int64_t>(std::uniform_real_distribution<double>(0, refill_ns * (dk == 2 ? 0.1 : 1.2))(rng));
        // Costs: fractions, whole numbers, zero, the capacity itself, above it.
        const int ck = static_cast<int>(rng() % 8);
        double cost = ck == 0 ? 0 : ck == 1 ? b.capacity : ck == 2 ? b.capacity * 1.5
                    : ck == 3 ? std::floor(std::uniform_real_distribution<double>(1, b.capacity)(rng))
                              : std::uniform_real_distribution<double>(0, b.capacity / 3)(rng);
        store.set_fixed_now_for_tests(now);
        SCOPED_TRACE("step " + std::to_string(i) + " kind " + std::to_string(kind) + " cost " + std::to_string(cost));
        if (kind < 7) {
            const auto want = ot::core::gcra_spend(tat, now, cost, b);
            const StoreDecision got = f.admit(store, key, cost, b);
            ASSERT_EQ(got.source, StoreDecision::Source::Redis) << got.detail;
            ASSERT_EQ(got.spend.outcome, want.outcome);
            ASSERT_EQ(got.spend.remaining, want.remaining);
            ASSERT_EQ(got.spend.retry_after_s, want.retry_after_s);
            ASSERT_EQ(got.spend.reset_after_s, want.reset_after_s);
            ASSERT_EQ(std::max(got.spend.new_tat_ns, now), std::max(want.new_tat_ns, now));
            if (want.outcome == SpendOutcome::Allowed) tat = want.new_tat_ns, ++allowed;
            else if (want.outcome == SpendOutcome::Refused) ++refused;
            else ++never;
        } else {
            // A settlement: the measured cost was above (charge) or below (refund) the estimate.
            const double delta = kind < 9 ? cost : -cost;
            tat = delta > 0 ? ot::core::gcra_charge(tat, now, delta, b) : ot::core::gcra_refund(tat, now, -delta, b);
            const SettleResult got = f.settle(store, key, delta, b);
            ASSERT_TRUE(got.ok) << got.detail;
            ASSERT_EQ(got.balance, ot::core::gcra_balance(tat, now, b));
            ASSERT_EQ(std::max(store.last_tat_ns(), now), std::max(tat, now));
        }
    }
    // The sequence must have exercised every outcome, or it proves little.
    EXPECT_GT(allowed, 0);
    EXPECT_GT(refused, 0);
    EXPECT_GT(never, 0);
}

TEST_F(RedisGcra, SameDecisionsAsCoreSmallBudget) { replay(*this, {10, 5}, 1, 2000); }
TEST_F(RedisGcra, SameDecisionsAsCoreGateDefaultTier) { replay(*this, {1000, 100}, 2, 2000); }
TEST_F(RedisGcra, SameDecisionsAsCoreSlowRefill) { replay(*this, {3, 0.01}, 3, 1500); }
TEST_F(RedisGcra, SameDecisionsAsCoreFastRefill) { replay(*this, {500, 100000}, 4, 1500); }
TEST_F(RedisGcra, SameDecisionsAsCoreOddNumbers) { replay(*this, {7.3, 1.7}, 5, 1500); }

TEST_F(RedisGcra, ExactBurstIsAdmittedInOneInstant) {
    // n charges of capacity / n at one instant: all in, the next one out.
    BucketStore store(ioc, local_redis(), metrics);
    raw({"DEL", "ogc_throttle_test:burst"});
    const Budget b{100, 10};
    store.set_fixed_now_for_tests(1'764'000'000'123'456'789LL);
    for (int i = 0; i < 300; ++i) ASSERT_EQ(admit(store, "burst", 100.0 / 300, b).spend.outcome, SpendOutcome::Allowed) << i;
    const StoreDecision d = admit(store, "burst", 0.5, b);
    EXPECT_EQ(d.spend.outcome, SpendOutcome::Refused);
    EXPECT_NEAR(d.spend.retry_after_s, 0.05, 1e-3);
}

TEST_F(RedisGcra, DebtFromSettlementRefusesUntilRepaid) {
    BucketStore store(ioc, local_redis(), metrics);
    raw({"DEL", "ogc_throttle_test:debt"});
    const Budget b{10, 2};
    const std::int64_t t0 = 1'764'000'000'000'000'000LL;
    store.set_fixed_now_for_tests(t0);
    ASSERT_EQ(admit(store, "debt", 4, b).spend.outcome, SpendOutcome::Allowed);
    // It measured 24: 20 more than estimated, 14 into debt.
    const SettleResult s = settle(store, "debt", 20, b);
    ASSERT_TRUE(s.ok);
    EXPECT_DOUBLE_EQ(s.balance, -14);
    EXPECT_DOUBLE_EQ(s.reset_after_s, 12);
    const StoreDecision d = admit(store, "debt", 1, b);
    EXPECT_EQ(d.spend.outcome, SpendOutcome::Refused);
    EXPECT_NEAR(d.spend.retry_after_s, 7.5, 1e-4);  // 14 + 1 tokens at 2 per second
    store.set_fixed_now_for_tests(t0 + 7'500'000'000LL);
    EXPECT_EQ(admit(store, "debt", 1, b).spend.outcome, SpendOutcome::Allowed);
}

TEST_F(RedisGcra, ProductionPathUsesRedisTimeAndExpiresWithinOneRefill) {
    BucketStore store(ioc, local_redis(), metrics);
    const std::string k = "ogc_throttle_test:live";
    raw({"DEL", k});
    const Budget b{10, 5};  // refills in 2 s
    const StoreDecision d = admit(store, "live", 3, b);
    ASSERT_EQ(d.source, StoreDecision::Source::Redis) << d.detail;
    ASSERT_EQ(d.spend.outcome, SpendOutcome::Allowed);
    EXPECT_NEAR(d.spend.remaining, 7, 0.01);
    // The TAT is Redis's clock: within a second of ours.
    const auto wall = std::chrono::duration_cast<std::chrono::nanoseconds>(
                          std::chrono::system_clock::now().time_since_epoch()).count();
    EXPECT_LT(std::llabs(store.last_tat_ns() - 600'000'000LL - wall), 1'000'000'000LL);
    const long long ttl = raw({"PTTL", k}).integer;
    EXPECT_GT(ttl, 400);
    EXPECT_LE(ttl, 601);  // the debt of 0.6 s, never more than one refill
    for (int i = 0; i < 3; ++i) admit(store, "live", 3, b);
    EXPECT_EQ(admit(store, "live", 3, b).spend.outcome, SpendOutcome::Refused);
    EXPECT_LE(raw({"PTTL", k}).integer, 2001);
    // Refunding everything leaves a full bucket: no key at all.
    ASSERT_TRUE(settle(store, "live", -100, b).ok);
    EXPECT_EQ(raw({"EXISTS", k}).integer, 0);
}

TEST_F(RedisGcra, NoscriptIsReloadedWithEval) {
    BucketStore store(ioc, local_redis(), metrics);
    const Budget b{10, 5};
    ASSERT_EQ(admit(store, "flush", 1, b).source, StoreDecision::Source::Redis);
    raw({"SCRIPT", "FLUSH"});
    const StoreDecision d = admit(store, "flush", 1, b);
    EXPECT_EQ(d.source, StoreDecision::Source::Redis) << d.detail;
    EXPECT_EQ(metrics.noscript_reloads.load(), 1u);
    EXPECT_EQ(raw({"SCRIPT", "EXISTS", redis::gcra_script_sha1()}).elements.at(0).integer, 1);
}

TEST_F(RedisGcra, BadInputIsRefusedWhateverThePolicy) {
    BucketStore store(ioc, local_redis(), metrics);
    for (double cost : std::vector<double>{std::nan(""), -1.0, INFINITY}) {
        const StoreDecision d = admit(store, "bad", cost, {10, 5}, redis::OnError::Open);
        EXPECT_EQ(d.source, StoreDecision::Source::FailClosed) << cost;
        EXPECT_EQ(d.spend.outcome, SpendOutcome::Refused);
    }
    EXPECT_EQ(admit(store, "bad", 1, {10, 0}, redis::OnError::Open).source, StoreDecision::Source::FailClosed);
    EXPECT_EQ(admit(store, "bad", 1, {1e9, 1}, redis::OnError::Open).source, StoreDecision::Source::FailClosed);
    EXPECT_FALSE(settle(store, "bad", std::nan(""), {10, 5}).ok);
}

TEST_F(RedisGcra, ScriptRejectsBadArgumentsItself) {
    // Whoever calls the script by hand gets an error, not a bucket.
    const redis::Reply r = raw({"EVAL", redis::gcra_script(), "1", "ogc_throttle_test:x", "admit", "-1", "10", "5"});
    EXPECT_TRUE(r.is_error());
    const redis::Reply r2 = raw({"EVAL", redis::gcra_script(), "1", "ogc_throttle_test:x", "admit", "1", "10", "0"});
    EXPECT_TRUE(r2.is_error());
}

}  // namespace
