#include "core/gcra.hpp"

#include <algorithm>
#include <cmath>

namespace ot::core {
namespace {

constexpr double kNanos = 1e9;
// Keeps every TAT offset far inside int64 nanoseconds (9.2e18).
constexpr double kMaxFillSeconds = 1e9;

// Rounded up would make n charges of capacity/n exceed the tolerance; rounded
// to nearest, each charge is off by at most half a nanosecond.
std::int64_t charge_ns(double cost, double rate) noexcept {
    if (cost <= 0) return 0;
    const double ns = cost * kNanos / rate;
    if (!(ns < kMaxDebtSeconds * kNanos)) return static_cast<std::int64_t>(kMaxDebtSeconds * kNanos);
    return std::max<std::int64_t>(1, std::llround(ns));
}

// The burst tolerance, plus one part per million: n charges rounded to the
// nearest nanosecond can drift by n/2 ns, and a burst of exactly the capacity
// must still fit (it does for any n as long as cost/rate >= 0.5 ms). The
// price is that admitted work may exceed capacity + rate x elapsed by at most
// a millionth of the capacity.
std::int64_t tolerance_ns(Budget b) noexcept {
    const std::int64_t tau = std::llround(b.capacity * kNanos / b.rate);
    return tau + tau / 1'000'000;
}

double tokens_for(std::int64_t debt_ns, Budget b) noexcept {
    double t = b.capacity - static_cast<double>(debt_ns) * b.rate / kNanos;
    return std::clamp(t, 0.0, b.capacity);
}

}  // namespace

std::int64_t gcra_tolerance_ns(Budget b) noexcept { return tolerance_ns(b); }

SpendResult gcra_spend(std::int64_t tat_ns, std::int64_t now_ns, double cost, Budget b) noexcept {
    const std::int64_t base = std::max(tat_ns, now_ns);
    const std::int64_t debt = base - now_ns;
    const std::int64_t tau = tolerance_ns(b);

    if (cost > b.capacity)
        return {SpendOutcome::NeverFits, tat_ns, tokens_for(debt, b), 0.0, debt / kNanos};

    const std::int64_t after = debt + charge_ns(cost, b.rate);
    if (after <= tau)
        return {SpendOutcome::Allowed, base + (after - debt), tokens_for(after, b), 0.0, after / kNanos};

    return {SpendOutcome::Refused, tat_ns, tokens_for(debt, b), (after - tau) / kNanos, debt / kNanos};
}

SpendResult gcra_spend_keeping(std::int64_t tat_ns, std::int64_t now_ns, double cost, double keep,
                               Budget b) noexcept {
    const SpendResult probe = gcra_spend(tat_ns, now_ns, cost + keep, b);
    if (probe.outcome != SpendOutcome::Allowed) return probe;
    return gcra_spend(tat_ns, now_ns, cost, b);
}

ReserveResult gcra_reserve(std::int64_t tat_ns, std::int64_t now_ns, double cost, Budget b,
                           std::int64_t max_wait_ns) noexcept {
    if (cost > b.capacity) return {SpendOutcome::NeverFits, tat_ns, 0, 0.0};
    const std::int64_t base = std::max(tat_ns, now_ns);
    const std::int64_t after = base - now_ns + charge_ns(cost, b.rate);
    const std::int64_t wait = std::max<std::int64_t>(0, after - tolerance_ns(b));
    if (wait > max_wait_ns) return {SpendOutcome::Refused, tat_ns, 0, (wait - max_wait_ns) / kNanos};
    return {SpendOutcome::Allowed, base + charge_ns(cost, b.rate), wait, 0.0, tokens_for(after - wait, b)};
}

std::int64_t gcra_refund(std::int64_t tat_ns, std::int64_t now_ns, double cost, Budget b) noexcept {
    return std::max(tat_ns - charge_ns(cost, b.rate), std::min(tat_ns, now_ns));
}

std::int64_t gcra_charge(std::int64_t tat_ns, std::int64_t now_ns, double cost, Budget b) noexcept {
    const std::int64_t base = std::max(tat_ns, now_ns);
    const std::int64_t limit = now_ns + static_cast<std::int64_t>(kMaxDebtSeconds * kNanos);
    const std::int64_t room = limit > base ? limit - base : 0;
    return base + std::min(charge_ns(cost, b.rate), room);
}

double gcra_balance(std::int64_t tat_ns, std::int64_t now_ns, Budget b) noexcept {
    const double debt_s = static_cast<double>(std::max<std::int64_t>(tat_ns - now_ns, 0)) / kNanos;
    return b.capacity - debt_s * b.rate;
}


const char* budget_problem(Budget b) noexcept {
    if (!std::isfinite(b.capacity) || b.capacity <= 0) return "capacity must be a finite number above zero";
    if (!std::isfinite(b.rate) || b.rate <= 0) return "rate must be a finite number above zero";
    // Keeps every TAT offset far inside int64 microseconds.
    if (b.capacity / b.rate > kMaxFillSeconds) return "capacity / rate (the time to refill) exceeds 1e9 seconds";
    return nullptr;
}

const char* cost_problem(double cost) noexcept {
    if (std::isnan(cost)) return "cost is NaN";
    if (std::isinf(cost)) return "cost is infinite";
    if (cost < 0) return "cost is negative";
    return nullptr;
}

}  // namespace ot::core
