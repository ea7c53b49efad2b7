#include "gate/settle.hpp"

#include <algorithm>
#include <cstdio>
#include <stdexcept>

namespace ot::gate {

ChargeMode parse_charge_mode(const std::string& v) {
    if (v == "estimate") return ChargeMode::Estimate;
    if (v == "measured") return ChargeMode::Measured;
    throw std::runtime_error("charge: must be 'estimate' or 'measured', not '" + v + "'");
}

const char* charge_mode_name(ChargeMode m) { return m == ChargeMode::Measured ? "measured" : "estimate"; }

double measured_ms(const Timing& t) {
    if (!t.sent) return 0;
    return std::max(0.0, t.wall_ms - t.blocked_ms);
}

double final_charge(Ending e, double estimate, const Timing& t, double shared_ms, std::size_t sharers) {
    const double n = static_cast<double>(std::max<std::size_t>(sharers, 1));
    const double share = std::max(0.0, shared_ms) / n;
    switch (e) {
        case Ending::NoUpstream: return 0;
        case Ending::Failed:
        case Ending::Broken: return share;
        case Ending::Abandoned:
            // The upstream kept working for an answer nobody reads (a map is
            // rendered before its first byte): leaving early saves nothing.
            return std::max(estimate, share);
        case Ending::Complete: break;
    }
    // A client that held the relay up hides the upstream work done meanwhile
    // (it fills the socket buffers while the gate waits on the client): no
    // refund below the estimate for it, unless the whole exchange was shorter.
    if (t.blocked_ms > kClientHeldMs) return std::max(share, std::min(estimate, t.wall_ms / n));
    return share;
}

std::string format_ms(double v) {
    char b[32];
    std::snprintf(b, sizeof b, "%.3f", v);
    return b;
}

}  // namespace ot::gate
