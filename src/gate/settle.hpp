// Charge what the upstream used (issue 12, point 3): the gate admits on its
// estimate and, when the answer is over, settles the bucket to the
// upstream's measured time in milliseconds (the unit of the database's
// pricing hook). These are the pure rules; Session::settle
// (settle_session.cpp) gathers the timings and calls the store once.
#pragma once
#include <cstddef>
#include <string>

namespace ot::gate {

// `charge:` in the config. Estimate: what admission charged stands, less
// refund_fraction for 304/204/empty/5xx/upstream failures (the gate before
// 0.2, and the default, so that budgets tuned on estimates keep their
// meaning). Measured: the upstream's time replaces the estimate.
enum class ChargeMode : unsigned char { Estimate, Measured };
ChargeMode parse_charge_mode(const std::string& v);  // throws std::runtime_error naming the values
const char* charge_mode_name(ChargeMode m);

// Where admission took the estimate from, so the settlement goes there too.
enum class Ledger : unsigned char {
    Local,           // the in-process buckets (no store, or a store failure under on_error: local)
    Store,           // the shared store charged the estimate
    StoreUncharged,  // admitted by on_error: open without a charge: the settlement charges it all
};

// How an exchange ended, as far as the charge goes.
enum class Ending : unsigned char {
    NoUpstream,  // never sent (concurrency class full): no upstream work
    Failed,      // connect/read failure or timeout before an answer: the time until then
    Complete,    // the upstream's last byte is in (any status: 304, 204, 5xx alike)
    Broken,      // the upstream broke off mid-body: the time until then
    Abandoned,   // the client left while the upstream was still answering
};

struct Timing {
    double wall_ms = 0;     // request sent upstream -> its last byte (or the failure)
    double blocked_ms = 0;  // of which the gate waited on the client's socket
    bool sent = false;      // the request reached the upstream at all
};

// A relay blocked on the client for longer than this (summed) is one the
// client slowed down: it loses the refund below its estimate.
inline constexpr double kClientHeldMs = 10.0;

// The upstream's own time: wall time less the time the gate spent blocked
// writing to the client (the upstream then waits on us, not on its work).
double measured_ms(const Timing& t);

// The final charge of one exchange in ms. `shared_ms` is the upstream's
// measured time already net of blocking; `sharers` the requests that shared
// it (1, or a coalesced flight's leader plus followers).
double final_charge(Ending e, double estimate, const Timing& t, double shared_ms, std::size_t sharers);

// A charge for a header or a log line: milliseconds with three decimals.
std::string format_ms(double v);

}  // namespace ot::gate
