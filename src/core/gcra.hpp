// Token-bucket arithmetic in GCRA form: the whole bucket is one number, the
// theoretical arrival time (TAT), in nanoseconds. A TAT at or before "now" is
// a full bucket, which is why a full bucket can be forgotten without losing
// anything. Charges are rounded to the nearest nanosecond (at least 1 for a
// positive cost) and the tolerance has one part per million of slack, so a
// burst of exactly the capacity is admitted at once; what is admitted never
// exceeds capacity × (1 + 1e-6) + rate × elapsed.
#pragma once
#include <cstdint>

namespace ot::core {

struct Budget {
    double capacity;  // burst, in cost units
    double rate;      // refill, cost units per second (> 0)
};

enum class SpendOutcome : std::uint8_t {
    Allowed,
    Refused,    // short now; retry_after_s says when it would fit
    NeverFits,  // cost > capacity: no amount of waiting helps
};

struct SpendResult {
    SpendOutcome outcome;
    std::int64_t new_tat_ns;  // equals the old TAT unless allowed
    double remaining;         // tokens left after this decision
    double retry_after_s;     // 0 unless refused
    double reset_after_s;     // until the bucket is full again
};

// Inputs are validated by the caller (finite, cost >= 0, capacity > 0, rate > 0).
SpendResult gcra_spend(std::int64_t tat_ns, std::int64_t now_ns, double cost, Budget b) noexcept;
// The spend of gcra_spend(cost), allowed only where keep more tokens would still be
// left after it (a spend that must not leave the bucket short of what the next
// statement may need); otherwise the outcome of gcra_spend(cost + keep).
SpendResult gcra_spend_keeping(std::int64_t tat_ns, std::int64_t now_ns, double cost, double keep, Budget b) noexcept;

// Delay-mode spend: the cost is charged now and the caller waits wait_ns for
// its turn (its TAT may run past the burst tolerance: that is the queue).
// Arrivals reserve consecutive slots, so waiters are served in arrival order.
// Refused (nothing charged) when the wait would exceed max_wait_ns.
struct ReserveResult {
    SpendOutcome outcome;
    std::int64_t new_tat_ns;
    std::int64_t wait_ns;
    double retry_after_s;  // when refused: how much sooner the queue must drain
    double remaining;      // when allowed: tokens in the bucket once the wait is over (0 after a wait)
};
ReserveResult gcra_reserve(std::int64_t tat_ns, std::int64_t now_ns, double cost, Budget b,
                           std::int64_t max_wait_ns) noexcept;

// The burst tolerance: a zero-cost spend is allowed while tat - now is at most this.
std::int64_t gcra_tolerance_ns(Budget b) noexcept;

// Gives back a charge that bought nothing (a waiter that was cancelled).
std::int64_t gcra_refund(std::int64_t tat_ns, std::int64_t now_ns, double cost, Budget b) noexcept;

// Charges cost whatever the bucket holds: the measured remainder of a
// statement that already ran. The bucket may go into debt (TAT beyond the
// burst tolerance); spends are then refused until the debt is repaid.
// The TAT is kept within kMaxDebtSeconds of now so it stays representable.
std::int64_t gcra_charge(std::int64_t tat_ns, std::int64_t now_ns, double cost, Budget b) noexcept;
inline constexpr double kMaxDebtSeconds = 1e9;

// Tokens at now_ns, negative while the bucket is in debt; at most capacity.
double gcra_balance(std::int64_t tat_ns, std::int64_t now_ns, Budget b) noexcept;

// Tokens available at now_ns, in [0, capacity]. (Inline: the extension's
// quick admission asks every statement.)
inline double gcra_tokens(std::int64_t tat_ns, std::int64_t now_ns, Budget b) noexcept {
    const std::int64_t debt_ns = tat_ns > now_ns ? tat_ns - now_ns : 0;
    const double t = b.capacity - static_cast<double>(debt_ns) * b.rate / 1e9;
    return t < 0 ? 0 : (t > b.capacity ? b.capacity : t);
}

inline bool gcra_is_full(std::int64_t tat_ns, std::int64_t now_ns) noexcept { return tat_ns <= now_ns; }

// Why a budget or a cost is not acceptable; nullptr when it is.
const char* budget_problem(Budget b) noexcept;
const char* cost_problem(double cost) noexcept;

}  // namespace ot::core
