// GCRA bucket math: what a client can count on, checked at exact nanosecond
// boundaries because the bucket is stored as a nanosecond TAT.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <ostream>
#include <random>
#include <vector>

#include "core/gcra.hpp"

using namespace ot::core;

namespace ot::core {
// Readable parameter names in failure reports.
void PrintTo(const Budget& b, std::ostream* os) { *os << "{capacity " << b.capacity << ", rate " << b.rate << "}"; }
}  // namespace ot::core

namespace {

constexpr std::int64_t kT0 = 1'000'000'000'000'000;  // an arbitrary "now" (ns), far from zero

// Spends `cost` until refused at a single instant; returns how many fit.
int drain(std::int64_t& tat, std::int64_t now, double cost, Budget b, int limit = 1'000'000) {
    int n = 0;
    for (; n < limit; n++) {
        SpendResult r = gcra_spend(tat, now, cost, b);
        if (r.outcome != SpendOutcome::Allowed) break;
        tat = r.new_tat_ns;
    }
    return n;
}

std::int64_t ns(double seconds) { return static_cast<std::int64_t>(std::llround(seconds * 1e9)); }

}  // namespace

TEST(Gcra, FreshBucketIsFull) {
    Budget b{10, 2};
    EXPECT_DOUBLE_EQ(gcra_tokens(0, kT0, b), 10.0);
    EXPECT_TRUE(gcra_is_full(0, kT0));
    EXPECT_TRUE(gcra_is_full(kT0, kT0));
    EXPECT_FALSE(gcra_is_full(kT0 + 1, kT0));
}

// A burst of exactly `capacity` unit spends must fit, and not one more, for
// rates whose 1/rate is not a whole number of nanoseconds as well.
class BurstTest : public ::testing::TestWithParam<Budget> {};

TEST_P(BurstTest, AdmitsExactlyCapacityAtOnce) {
    const Budget b = GetParam();
    std::int64_t tat = 0;
    EXPECT_EQ(drain(tat, kT0, 1.0, b), static_cast<int>(b.capacity))
        << "capacity " << b.capacity << " rate " << b.rate;
}

INSTANTIATE_TEST_SUITE_P(Budgets, BurstTest,
                         ::testing::Values(Budget{10, 1}, Budget{50, 20}, Budget{100, 0.5}, Budget{10, 3},
                                           Budget{50, 7}, Budget{1000, 50}, Budget{7, 0.3}, Budget{1, 1e6}));

TEST(Gcra, FractionalCostsAddUpToCapacity) {
    Budget b{50, 20};
    std::int64_t tat = 0;
    EXPECT_EQ(drain(tat, kT0, 0.1, b), 500);
}

TEST(Gcra, RefillsAtRate) {
    Budget b{10, 4};  // one token every 250 ms
    std::int64_t tat = 0;
    ASSERT_EQ(drain(tat, kT0, 1.0, b), 10);
    EXPECT_NEAR(gcra_tokens(tat, kT0, b), 0.0, 1e-9);
    // 250 ms later exactly one more fits.
    EXPECT_EQ(gcra_spend(tat, kT0 + 249'990'000, 1.0, b).outcome, SpendOutcome::Refused);  // 10 µs early (the ppm slack is 2.5 µs)
    std::int64_t t2 = tat;
    EXPECT_EQ(drain(t2, kT0 + 250'000'000, 1.0, b), 1);
    // 1.5 s later: six tokens back.
    EXPECT_NEAR(gcra_tokens(tat, kT0 + 1'500'000'000, b), 6.0, 1e-9);
    t2 = tat;
    EXPECT_EQ(drain(t2, kT0 + 1'500'000'000, 1.0, b), 6);
    // After the full refill time the bucket is full again and no fuller.
    EXPECT_TRUE(gcra_is_full(tat, kT0 + 2'500'000'000));
    EXPECT_DOUBLE_EQ(gcra_tokens(tat, kT0 + 100'000'000'000, b), 10.0);
}

TEST(Gcra, RefusedSpendChangesNothing) {
    Budget b{5, 1};
    std::int64_t tat = 0;
    ASSERT_EQ(drain(tat, kT0, 1.0, b), 5);
    const double before = gcra_tokens(tat, kT0 + 300'000'000, b);
    SpendResult r = gcra_spend(tat, kT0 + 300'000'000, 1.0, b);
    EXPECT_EQ(r.outcome, SpendOutcome::Refused);
    EXPECT_EQ(r.new_tat_ns, tat);
    EXPECT_NEAR(r.remaining, before, 1e-9);
    EXPECT_DOUBLE_EQ(gcra_tokens(r.new_tat_ns, kT0 + 300'000'000, b), before);
}

TEST(Gcra, CostAboveCapacityNeverFits) {
    Budget b{10, 1};
    for (std::int64_t tat : {std::int64_t{0}, kT0 + 3'000'000'000}) {
        SpendResult r = gcra_spend(tat, kT0, 10.000001, b);
        EXPECT_EQ(r.outcome, SpendOutcome::NeverFits);
        EXPECT_EQ(r.new_tat_ns, tat);
        EXPECT_EQ(r.retry_after_s, 0.0);
    }
    // A full bucket takes a cost of exactly capacity.
    EXPECT_EQ(gcra_spend(0, kT0, 10.0, b).outcome, SpendOutcome::Allowed);
}

// lazy_pricing's deposit: spends only what it is asked, but only where keep more is left.
TEST(Gcra, SpendKeepingLeavesAtLeastKeep) {
    Budget b{1000, 10};
    SpendResult r = gcra_spend_keeping(0, kT0, 500, 500, b);  // a full bucket: 500 spent, 500 left
    ASSERT_EQ(r.outcome, SpendOutcome::Allowed);
    EXPECT_NEAR(r.remaining, 500, 1e-6);
    EXPECT_EQ(r.new_tat_ns, gcra_spend(0, kT0, 500, b).new_tat_ns);
    SpendResult again = gcra_spend_keeping(r.new_tat_ns, kT0, 1, 500, b);  // 500 held, 501 needed
    EXPECT_EQ(again.outcome, SpendOutcome::Refused);
    EXPECT_EQ(again.new_tat_ns, r.new_tat_ns);
    EXPECT_EQ(gcra_spend(r.new_tat_ns, kT0, 500, b).outcome, SpendOutcome::Allowed);  // what it kept is there
    // Refilled by 1 token (0.1 s): now 501 are held.
    EXPECT_EQ(gcra_spend_keeping(r.new_tat_ns, kT0 + ns(0.1), 1, 500, b).outcome, SpendOutcome::Allowed);
    // cost + keep above capacity never fits, however long one waits.
    EXPECT_EQ(gcra_spend_keeping(0, kT0, 600, 500, b).outcome, SpendOutcome::NeverFits);
}

TEST(Gcra, ZeroCostAlwaysFitsAndCostsNothing) {
    Budget b{3, 1};
    std::int64_t tat = 0;
    ASSERT_EQ(drain(tat, kT0, 1.0, b), 3);
    SpendResult r = gcra_spend(tat, kT0, 0.0, b);
    EXPECT_EQ(r.outcome, SpendOutcome::Allowed);
    EXPECT_EQ(r.new_tat_ns, tat);
}

// Waiting exactly retry_after is enough, and a nanosecond less is not.
TEST(Gcra, RetryAfterIsExact) {
    std::mt19937_64 rng(7);
    std::uniform_real_distribution<double> cap(1, 100), rate(0.1, 50), frac(0.05, 1.0);
    for (int i = 0; i < 500; i++) {
        Budget b{cap(rng), rate(rng)};
        std::int64_t tat = 0;
        const double cost = b.capacity * frac(rng);
        drain(tat, kT0, cost, b);
        SpendResult r = gcra_spend(tat, kT0, cost, b);
        ASSERT_EQ(r.outcome, SpendOutcome::Refused);
        ASSERT_GT(r.retry_after_s, 0.0);
        const std::int64_t wait = ns(r.retry_after_s);
        EXPECT_EQ(gcra_spend(tat, kT0 + wait, cost, b).outcome, SpendOutcome::Allowed)
            << "cap " << b.capacity << " rate " << b.rate << " cost " << cost << " wait " << wait;
        EXPECT_EQ(gcra_spend(tat, kT0 + wait - 1, cost, b).outcome, SpendOutcome::Refused)
            << "cap " << b.capacity << " rate " << b.rate << " cost " << cost << " wait " << wait;
    }
}

TEST(Gcra, ResetAfterIsTimeUntilFull) {
    Budget b{10, 2};
    std::int64_t tat = 0;
    SpendResult r = gcra_spend(tat, kT0, 4.0, b);
    ASSERT_EQ(r.outcome, SpendOutcome::Allowed);
    EXPECT_NEAR(r.reset_after_s, 2.0, 1e-6);
    EXPECT_TRUE(gcra_is_full(r.new_tat_ns, kT0 + ns(r.reset_after_s)));
    EXPECT_FALSE(gcra_is_full(r.new_tat_ns, kT0 + ns(r.reset_after_s) - 1));
}

TEST(Gcra, TokensClampToZeroAndCapacity) {
    Budget b{10, 1};
    EXPECT_DOUBLE_EQ(gcra_tokens(kT0 - 1'000'000'000'000, kT0, b), 10.0);
    EXPECT_DOUBLE_EQ(gcra_tokens(kT0 + 1'000'000'000'000, kT0, b), 0.0);
    std::mt19937_64 rng(3);
    std::uniform_int_distribution<std::int64_t> off(-50'000'000'000, 50'000'000'000);
    for (int i = 0; i < 10000; i++) {
        double t = gcra_tokens(kT0 + off(rng), kT0, b);
        ASSERT_GE(t, 0.0);
        ASSERT_LE(t, 10.0);
    }
    SpendResult r = gcra_spend(kT0 + 1'000'000'000'000, kT0, 1.0, b);
    EXPECT_EQ(r.outcome, SpendOutcome::Refused);
    EXPECT_GE(r.remaining, 0.0);
}

// Property: over any window of a random spend sequence, what is admitted never
// exceeds capacity + rate × (window length); the bucket starts full.
TEST(Gcra, NeverAdmitsMoreThanCapacityPlusRateTimesElapsed) {
    std::mt19937_64 rng(20261130);
    std::uniform_real_distribution<double> cap(0.5, 200), rate(0.05, 100), u(0, 1);
    for (int seq = 0; seq < 200; seq++) {
        const Budget b{cap(rng), rate(rng)};
        std::int64_t now = kT0, tat = 0;
        std::vector<std::pair<std::int64_t, double>> admitted;  // (time, cost)
        for (int i = 0; i < 400; i++) {
            // Mostly bursts, sometimes pauses long enough to refill a lot.
            now += u(rng) < 0.8 ? static_cast<std::int64_t>(u(rng) * 1e9 / b.rate)
                                : static_cast<std::int64_t>(u(rng) * 2e9 * b.capacity / b.rate);
            const double cost = u(rng) < 0.1 ? b.capacity * u(rng) : b.capacity * u(rng) * 0.05;
            SpendResult r = gcra_spend(tat, now, cost, b);
            ASSERT_GE(r.remaining, 0.0);
            ASSERT_LE(r.remaining, b.capacity);
            if (r.outcome == SpendOutcome::Allowed) {
                ASSERT_GE(r.new_tat_ns, tat);
                tat = r.new_tat_ns;
                admitted.emplace_back(now, cost);
            } else {
                ASSERT_EQ(r.new_tat_ns, tat);
            }
        }
        for (size_t a = 0; a < admitted.size(); a++) {
            double sum = 0;
            for (size_t z = a; z < admitted.size(); z++) {
                sum += admitted[z].second;
                const double elapsed = (admitted[z].first - admitted[a].first) / 1e9;
                // The documented bound: a millionth of the capacity of slack
                // for charges rounded to the nanosecond.
                ASSERT_LE(sum, b.capacity * (1 + 1e-6) + b.rate * elapsed + 1e-9 * b.capacity)
                    << "seq " << seq << " window " << a << ".." << z;
            }
        }
    }
}

// Under demand that always exceeds supply, what is refused is only what the
// budget could not cover: admitted ≈ capacity + rate × elapsed.
TEST(Gcra, AdmitsWhatTheBudgetAllowsUnderSaturation) {
    const Budget b{50, 20};
    std::int64_t tat = 0;
    double admitted = 0;
    const std::int64_t step = 1'000'000;  // an attempt every millisecond for 10 s
    for (std::int64_t now = kT0; now <= kT0 + 10'000'000'000; now += step) {
        SpendResult r = gcra_spend(tat, now, 1.0, b);
        if (r.outcome == SpendOutcome::Allowed) {
            tat = r.new_tat_ns;
            admitted += 1.0;
        }
    }
    EXPECT_LE(admitted, 50 + 20 * 10.0);
    EXPECT_GE(admitted, 50 + 20 * 10.0 - 1);
}

TEST(Gcra, RejectsBadBudgetsAndCosts) {
    EXPECT_EQ(budget_problem({10, 1}), nullptr);
    EXPECT_NE(budget_problem({0, 1}), nullptr);
    EXPECT_NE(budget_problem({-1, 1}), nullptr);
    EXPECT_NE(budget_problem({10, 0}), nullptr);
    EXPECT_NE(budget_problem({NAN, 1}), nullptr);
    EXPECT_NE(budget_problem({10, INFINITY}), nullptr);
    EXPECT_NE(budget_problem({1e12, 1e-3}), nullptr);  // refill time beyond 1e9 s
    EXPECT_EQ(cost_problem(0.0), nullptr);
    EXPECT_EQ(cost_problem(3.5), nullptr);
    EXPECT_NE(cost_problem(-0.001), nullptr);
    EXPECT_NE(cost_problem(NAN), nullptr);
    EXPECT_NE(cost_problem(INFINITY), nullptr);
}

// Debt: a measured remainder is charged even past the burst; spends are then
// refused until it is repaid, and the refusal says exactly when.
TEST(GcraDebt, ChargeGoesIntoDebtAndBlocksSpendsUntilRepaid) {
    const Budget b{100, 10};  // 100 ms burst, 10 ms per second
    std::int64_t tat = gcra_charge(0, kT0, 150, b);  // 50 beyond a full bucket
    EXPECT_DOUBLE_EQ(gcra_balance(tat, kT0, b), -50);
    EXPECT_EQ(gcra_tokens(tat, kT0, b), 0);
    SpendResult r = gcra_spend(tat, kT0, 0, b);
    EXPECT_EQ(r.outcome, SpendOutcome::Refused);
    EXPECT_NEAR(r.retry_after_s, 5.0, 2e-5);  // 50 units at 10 per second (less the ppm slack)
    // Refused until the debt is repaid (less the tolerance's ppm slack, 10 µs here), allowed from then on.
    const std::int64_t repaid = kT0 + 5'000'000'000LL - 10'000;
    EXPECT_EQ(gcra_spend(tat, repaid - 1, 0, b).outcome, SpendOutcome::Refused);
    EXPECT_EQ(gcra_spend(tat, repaid, 0, b).outcome, SpendOutcome::Allowed);
}

TEST(GcraDebt, RefundAfterChargeRestoresTheBalance) {
    const Budget b{100, 10};
    std::int64_t tat = gcra_spend(0, kT0, 40, b).new_tat_ns;
    tat = gcra_charge(tat, kT0, 30, b);
    EXPECT_NEAR(gcra_balance(tat, kT0, b), 30, 1e-9);
    tat = gcra_refund(tat, kT0, 70, b);
    EXPECT_NEAR(gcra_balance(tat, kT0, b), 100, 1e-9);
    // A refund never makes the bucket fuller than full.
    EXPECT_NEAR(gcra_balance(gcra_refund(tat, kT0, 1000, b), kT0, b), 100, 1e-9);
}

TEST(GcraDebt, HugeChargesStayRepresentable) {
    const Budget b{1e6, 0.01};  // the slowest refill budget_problem() accepts: 1e8 s
    ASSERT_EQ(budget_problem(b), nullptr);
    std::int64_t tat = gcra_charge(0, kT0, 1e300, b);
    EXPECT_GT(tat, kT0);
    tat = gcra_charge(tat, kT0, 1e300, b);  // no overflow on a second one
    EXPECT_GT(tat, kT0);
    EXPECT_LE(tat - kT0, static_cast<std::int64_t>(kMaxDebtSeconds * 1e9));
    EXPECT_EQ(gcra_spend(tat, kT0, 0, b).outcome, SpendOutcome::Refused);
    EXPECT_EQ(gcra_charge(kT0, kT0, 0, b), kT0);
}

// The pricing hook's quick admission tests a debt board's TAT against the tolerance alone: it must
// be exactly where a zero-cost spend stops being allowed.
TEST(GcraTolerance, IsTheEdgeOfAZeroCostSpend) {
    for (const Budget b : {Budget{100, 10}, Budget{1e9, 500}, Budget{0.001, 1e9}, Budget{1e6, 0.01}}) {
        const std::int64_t tol = gcra_tolerance_ns(b);
        EXPECT_GE(tol, 0);
        EXPECT_EQ(gcra_spend(kT0 + tol, kT0, 0, b).outcome, SpendOutcome::Allowed) << b.capacity << "/" << b.rate;
        EXPECT_EQ(gcra_spend(kT0 + tol + 1, kT0, 0, b).outcome, SpendOutcome::Refused) << b.capacity << "/" << b.rate;
    }
}

// Delay mode: what a reservation leaves is what the statement may run on once
// its turn comes (its cut-off allowance): the bucket's tokens when it did not
// wait, nothing when it did.
TEST(GcraReserve, RemainingIsWhatTheTurnLeaves) {
    const Budget b{10, 2};
    ReserveResult r = gcra_reserve(0, kT0, 3.0, b, ns(10));
    ASSERT_EQ(r.outcome, SpendOutcome::Allowed);
    EXPECT_EQ(r.wait_ns, 0);
    EXPECT_NEAR(r.remaining, 7.0, 1e-9);
    r = gcra_reserve(r.new_tat_ns, kT0, 7.0, b, ns(10));
    ASSERT_EQ(r.outcome, SpendOutcome::Allowed);
    EXPECT_EQ(r.wait_ns, 0);
    EXPECT_NEAR(r.remaining, 0.0, 1e-9);
    r = gcra_reserve(r.new_tat_ns, kT0, 4.0, b, ns(10));  // empty: 4 tokens come in 2 s
    ASSERT_EQ(r.outcome, SpendOutcome::Allowed);
    EXPECT_NEAR(static_cast<double>(r.wait_ns), 2e9, 1e4);  // (less the tolerance's ppm slack)
    EXPECT_NEAR(r.remaining, 0.0, 1e-9);
    EXPECT_EQ(gcra_reserve(r.new_tat_ns, kT0, 4.0, b, ns(3)).outcome, SpendOutcome::Refused);  // a 4 s wait
}
