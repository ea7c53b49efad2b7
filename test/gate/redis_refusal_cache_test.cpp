// The refusal cache of the shared store (src/gate/redis_refusal_cache.hpp)
// against src/core's GCRA standing in for the store's script (the script is
// the same arithmetic: redis_gcra_test.cpp): it refuses only what the store
// would refuse, with the store's figures, never past the store's instant,
// for the key and budget it was told about only, in a fixed size.
#include <gtest/gtest.h>

#include <string>

#include "core/gcra.hpp"
#include "gate/redis_refusal_cache.hpp"

using namespace ot;
using gate::RefusalCache;

namespace {

constexpr std::int64_t kSec = 1'000'000'000;
constexpr std::int64_t kT0 = 1'000 * kSec;  // some steady-clock instant
const core::Budget kB{10, 2};               // burst 10, 2 per second

// A store (core's GCRA on its own clock) with a bucket emptied by a burst.
struct Store {
    std::int64_t tat = 0;
    core::SpendResult admit(std::int64_t now, double cost) {
        const core::SpendResult r = core::gcra_spend(tat, now, cost, kB);
        if (r.outcome == core::SpendOutcome::Allowed) tat = r.new_tat_ns;
        return r;
    }
};

// Asks the store at `asked` (it reads its clock `rtt` later), caches the answer.
core::SpendResult ask(RefusalCache& c, Store& s, const std::string& key, double cost, std::int64_t asked,
                      std::int64_t rtt = 0) {
    const std::uint32_t t = c.ticket(key);
    const core::SpendResult r = s.admit(asked + rtt, cost);
    if (r.outcome == core::SpendOutcome::Refused) c.refused(key, cost, kB, r, asked, t);
    else if (r.outcome == core::SpendOutcome::Allowed) c.admitted(key, kB, r, asked, t);
    return r;
}

TEST(RefusalCache, OffCachesNothing) {
    RefusalCache c(0);
    Store s;
    ask(c, s, "ip:a", 10, kT0);
    ASSERT_EQ(ask(c, s, "ip:a", 5, kT0).outcome, core::SpendOutcome::Refused);
    EXPECT_FALSE(c.lookup("ip:a", 5, kB, kT0));
    EXPECT_EQ(c.capacity(), 0u);
}

TEST(RefusalCache, RefusesWithTheStoresFiguresUntilItsInstant) {
    RefusalCache c(64);
    Store s;
    ask(c, s, "ip:a", 10, kT0);                     // empties the bucket
    const auto r = ask(c, s, "ip:a", 1, kT0 + 1);  // refused: fits in 0.5 s
    ASSERT_EQ(r.outcome, core::SpendOutcome::Refused);
    for (std::int64_t dt : {std::int64_t{0}, kSec / 4, 49 * kSec / 100}) {
        const auto hit = c.lookup("ip:a", 1, kB, kT0 + 1 + dt);
        ASSERT_TRUE(hit) << dt;
        const auto store = core::gcra_spend(s.tat, kT0 + 1 + dt, 1, kB);
        EXPECT_EQ(hit->outcome, store.outcome);
        EXPECT_NEAR(hit->remaining, store.remaining, 1e-8);
        EXPECT_NEAR(hit->retry_after_s, store.retry_after_s, 2e-9);
        EXPECT_NEAR(hit->reset_after_s, store.reset_after_s, 2e-9);
    }
    // At the store's instant the store decides (and admits).
    const std::int64_t fits = kT0 + 1 + static_cast<std::int64_t>(r.retry_after_s * 1e9);
    EXPECT_FALSE(c.lookup("ip:a", 1, kB, fits));
    EXPECT_EQ(core::gcra_spend(s.tat, fits + 1, 1, kB).outcome, core::SpendOutcome::Allowed);
}

TEST(RefusalCache, ALongWaitIsHeldOneSecondThenAskedAgain) {
    // Refunds by other gates are not seen here: after a second the store
    // is asked again, whatever wait it named. The figures stay the store's.
    RefusalCache c(64);
    Store s;
    ask(c, s, "ip:a", 10, kT0);
    const auto r = ask(c, s, "ip:a", 4, kT0);  // fits in 2 s
    ASSERT_EQ(r.outcome, core::SpendOutcome::Refused);
    ASSERT_NEAR(r.retry_after_s, 2.0, 1e-5);
    const auto hit = c.lookup("ip:a", 4, kB, kT0 + 9 * kSec / 10);
    ASSERT_TRUE(hit);
    EXPECT_NEAR(hit->retry_after_s, 1.1, 1e-5);
    EXPECT_FALSE(c.lookup("ip:a", 4, kB, kT0 + RefusalCache::kMaxHoldNs));
    // The store's next refusal holds it for another second.
    ASSERT_EQ(ask(c, s, "ip:a", 4, kT0 + kSec).outcome, core::SpendOutcome::Refused);
    EXPECT_TRUE(c.lookup("ip:a", 4, kB, kT0 + kSec + kSec / 2));
}

TEST(RefusalCache, NeverRefusesWhatTheStoreWouldAdmitNorSaysALongerWait) {
    // Redis reads its clock up to `rtt` after the call is sent: the cache's
    // bucket is the one as of sending, at least as full as the store's.
    for (std::int64_t rtt : {std::int64_t{0}, std::int64_t{300'000}, std::int64_t{5'000'000}}) {
        RefusalCache c(64);
        Store s;
        ask(c, s, "ip:a", 9, kT0, rtt);
        ASSERT_EQ(ask(c, s, "ip:a", 3, kT0 + kSec / 10, rtt).outcome, core::SpendOutcome::Refused);
        for (std::int64_t t = kT0; t < kT0 + 3 * kSec; t += kSec / 1000) {
            for (double cost : {3.0, 3.5, 8.0}) {
                const auto hit = c.lookup("ip:a", cost, kB, t);
                if (!hit) continue;
                const auto store = core::gcra_spend(s.tat, t, cost, kB);
                ASSERT_EQ(store.outcome, core::SpendOutcome::Refused) << "rtt " << rtt << " t " << t - kT0;
                ASSERT_LE(hit->retry_after_s, store.retry_after_s + 1e-9);
            }
        }
    }
}

TEST(RefusalCache, OnlyCostsAtLeastTheRefusedOneAreRefused) {
    RefusalCache c(64);
    Store s;
    ask(c, s, "ip:a", 10, kT0);
    ASSERT_EQ(ask(c, s, "ip:a", 3, kT0).outcome, core::SpendOutcome::Refused);
    EXPECT_TRUE(c.lookup("ip:a", 3, kB, kT0 + 1));
    EXPECT_TRUE(c.lookup("ip:a", 9.5, kB, kT0 + 1));
    // Just under: it may fit sooner, so the store decides (no free pass, no
    // refusal the store did not give).
    EXPECT_FALSE(c.lookup("ip:a", 2.999999, kB, kT0 + 1));
    // A larger cost is refused with its own, longer wait.
    EXPECT_GT(c.lookup("ip:a", 9.5, kB, kT0 + 1)->retry_after_s, c.lookup("ip:a", 3, kB, kT0 + 1)->retry_after_s);
    // A lower refused cost then replaces the entry and covers more.
    ASSERT_EQ(ask(c, s, "ip:a", 1, kT0 + 2).outcome, core::SpendOutcome::Refused);
    EXPECT_TRUE(c.lookup("ip:a", 2, kB, kT0 + 3));
}

TEST(RefusalCache, OneKeysRefusalNeverAnswersForAnother) {
    RefusalCache c(64);
    Store s;
    ask(c, s, "ip:aa", 10, kT0);
    ASSERT_EQ(ask(c, s, "ip:aa", 1, kT0).outcome, core::SpendOutcome::Refused);
    EXPECT_TRUE(c.lookup("ip:aa", 1, kB, kT0 + 1));
    for (const char* other : {"ip:ab", "ip:a", "ip:aaa", "key:aa", "ip:aa@z14/1/2", "IP:AA", ""})
        EXPECT_FALSE(c.lookup(other, 1, kB, kT0 + 1)) << other;
    // Nor for the same key under another tier's budget (a reload, a new tier).
    EXPECT_FALSE(c.lookup("ip:aa", 1, core::Budget{10, 3}, kT0 + 1));
    EXPECT_FALSE(c.lookup("ip:aa", 1, core::Budget{20, 2}, kT0 + 1));
    // A cell's refusal is its own key: the address still goes to the store.
    Store cell;
    ask(c, cell, "ip:bb@z14/8/9", 10, kT0);
    ASSERT_EQ(ask(c, cell, "ip:bb@z14/8/9", 1, kT0).outcome, core::SpendOutcome::Refused);
    EXPECT_TRUE(c.lookup("ip:bb@z14/8/9", 1, kB, kT0 + 1));
    EXPECT_FALSE(c.lookup("ip:bb", 1, kB, kT0 + 1));
    EXPECT_FALSE(c.lookup("ip:bb@z14/8/1", 1, kB, kT0 + 1));
}

TEST(RefusalCache, KeysLongerThanASlotAreLeftToTheStore) {
    RefusalCache c(64);
    Store s;
    const std::string longkey = "ip:" + std::string(RefusalCache::kMaxKey, 'x');
    ask(c, s, longkey, 10, kT0);
    ASSERT_EQ(ask(c, s, longkey, 1, kT0).outcome, core::SpendOutcome::Refused);
    EXPECT_FALSE(c.lookup(longkey, 1, kB, kT0 + 1));
    EXPECT_FALSE(c.lookup(longkey.substr(0, RefusalCache::kMaxKey), 1, kB, kT0 + 1));
}

TEST(RefusalCache, FixedSizeWhateverTheNumberOfClients) {
    RefusalCache c(100);  // rounded up to 128
    EXPECT_EQ(c.capacity(), 128u);
    const core::SpendResult refused{core::SpendOutcome::Refused, 0, 0, 5.0, 10.0};
    for (int i = 0; i < 10'000; ++i)
        c.refused("ip:" + std::to_string(i), 1, kB, refused, kT0 + i, c.ticket("ip:" + std::to_string(i)));
    EXPECT_EQ(c.capacity(), 128u);
    EXPECT_EQ(c.size(kT0 + 10'000), 128u);
    EXPECT_EQ(c.evictions(), 10'000u - 128u);
    // The newest are kept (the entries that would expire first go).
    EXPECT_TRUE(c.lookup("ip:9999", 1, kB, kT0 + 10'000));
    // Expired entries are reused before any live one is pushed out.
    RefusalCache d(4);
    const core::SpendResult soon{core::SpendOutcome::Refused, 0, 0, 1e-6, 1.0};
    for (int i = 0; i < 100; ++i) d.refused("k" + std::to_string(i), 1, kB, soon, kT0 + i * kSec, 0);
    EXPECT_EQ(d.evictions(), 0u);
    EXPECT_EQ(d.size(kT0 + 99 * kSec), 1u);
}

TEST(RefusalCache, ThisThreadsRefundForgetsTheKey) {
    RefusalCache c(64);
    Store s;
    ask(c, s, "ip:a", 10, kT0);
    ASSERT_EQ(ask(c, s, "ip:a", 5, kT0).outcome, core::SpendOutcome::Refused);
    ASSERT_TRUE(c.lookup("ip:a", 5, kB, kT0 + 1));
    c.refunding("ip:a");
    EXPECT_FALSE(c.lookup("ip:a", 5, kB, kT0 + 1));
}

TEST(RefusalCache, ARefusalReadAfterARefundWasSentIsNotCached) {
    // Pipelined: admit sent, refund sent, then the admit's refusal arrives;
    // it describes the bucket before the refund.
    RefusalCache c(64);
    Store s;
    ask(c, s, "ip:a", 10, kT0);
    const std::uint32_t t = c.ticket("ip:a");
    const core::SpendResult r = s.admit(kT0, 5);
    ASSERT_EQ(r.outcome, core::SpendOutcome::Refused);
    c.refunding("ip:a");
    c.refused("ip:a", 5, kB, r, kT0, t);
    EXPECT_FALSE(c.lookup("ip:a", 5, kB, kT0 + 1));
    // With a ticket taken after the refund, it is.
    c.refused("ip:a", 5, kB, r, kT0, c.ticket("ip:a"));
    EXPECT_TRUE(c.lookup("ip:a", 5, kB, kT0 + 1));
}

TEST(RefusalCache, AnAdmissionMovesTheCachedBucketOn) {
    RefusalCache c(64);
    Store s;
    ask(c, s, "ip:a", 8, kT0);
    ASSERT_EQ(ask(c, s, "ip:a", 5, kT0).outcome, core::SpendOutcome::Refused);  // 2 left
    const auto before = c.lookup("ip:a", 5, kB, kT0);
    ASSERT_TRUE(before);
    ASSERT_EQ(ask(c, s, "ip:a", 2, kT0).outcome, core::SpendOutcome::Allowed);  // 0 left
    const auto after = c.lookup("ip:a", 5, kB, kT0);
    ASSERT_TRUE(after);
    EXPECT_NEAR(after->retry_after_s, before->retry_after_s + 1.0, 1e-6);
    EXPECT_NEAR(after->retry_after_s, core::gcra_spend(s.tat, kT0, 5, kB).retry_after_s, 1e-9);
}

}  // namespace
