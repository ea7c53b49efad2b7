#include "core/gcra.hpp"

#include <algorithm>
#include <cmath>

namespace ot::core {
namespace {

constexpr double kMicros = 1e6;
constexpr double kMaxFillSeconds = 1e11;

// Rounding always errs towards the limiter: a charge is rounded up and the
// tolerance down, so the admitted total never exceeds capacity + rate*elapsed.
std::int64_t charge_us(double cost, double rate) noexcept {
    return static_cast<std::int64_t>(std::ceil(cost * kMicros / rate - 1e-6));
}

std::int64_t tolerance_us(Budget b) noexcept {
    return static_cast<std::int64_t>(std::floor(b.capacity * kMicros / b.rate + 1e-6));
}

double tokens_for(std::int64_t debt_us, Budget b) noexcept {
    double t = b.capacity - static_cast<double>(debt_us) * b.rate / kMicros;
    return std::clamp(t, 0.0, b.capacity);
}

}  // namespace

SpendResult gcra_spend(std::int64_t tat_us, std::int64_t now_us, double cost, Budget b) noexcept {
    const std::int64_t base = std::max(tat_us, now_us);
    const std::int64_t debt = base - now_us;
    const std::int64_t tau = tolerance_us(b);

    if (cost > b.capacity)
        return {SpendOutcome::NeverFits, tat_us, tokens_for(debt, b), 0.0, debt / kMicros};

    const std::int64_t after = debt + charge_us(cost, b.rate);
    if (after <= tau)
        return {SpendOutcome::Allowed, base + (after - debt), tokens_for(after, b), 0.0, after / kMicros};

    return {SpendOutcome::Refused, tat_us, tokens_for(debt, b), (after - tau) / kMicros, debt / kMicros};
}

ReserveResult gcra_reserve(std::int64_t tat_us, std::int64_t now_us, double cost, Budget b,
                           std::int64_t max_wait_us) noexcept {
    if (cost > b.capacity) return {SpendOutcome::NeverFits, tat_us, 0, 0.0};
    const std::int64_t base = std::max(tat_us, now_us);
    const std::int64_t after = base - now_us + charge_us(cost, b.rate);
    const std::int64_t wait = std::max<std::int64_t>(0, after - tolerance_us(b));
    if (wait > max_wait_us) return {SpendOutcome::Refused, tat_us, 0, (wait - max_wait_us) / kMicros};
    return {SpendOutcome::Allowed, base + charge_us(cost, b.rate), wait, 0.0};
}

std::int64_t gcra_refund(std::int64_t tat_us, std::int64_t now_us, double cost, Budget b) noexcept {
    return std::max(tat_us - charge_us(cost, b.rate), std::min(tat_us, now_us));
}

double gcra_tokens(std::int64_t tat_us, std::int64_t now_us, Budget b) noexcept {
    return tokens_for(std::max<std::int64_t>(tat_us - now_us, 0), b);
}

const char* budget_problem(Budget b) noexcept {
    if (!std::isfinite(b.capacity) || b.capacity <= 0) return "capacity must be a finite number above zero";
    if (!std::isfinite(b.rate) || b.rate <= 0) return "rate must be a finite number above zero";
    // Keeps every TAT offset far inside int64 microseconds.
    if (b.capacity / b.rate > kMaxFillSeconds) return "capacity / rate (the time to refill) exceeds 1e11 seconds";
    return nullptr;
}

const char* cost_problem(double cost) noexcept {
    if (std::isnan(cost)) return "cost is NaN";
    if (std::isinf(cost)) return "cost is infinite";
    if (cost < 0) return "cost is negative";
    return nullptr;
}

}  // namespace ot::core
