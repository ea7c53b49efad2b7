// Linked only into build/gate/ogc-gate-faults, the gate built with
// OGC_GATE_FAULTS for test/gate/handler_faults.t.sh. A request carrying
// `X-OT-Test-Fault: N` throws at the Nth completion handler of its exchange,
// before the handler's body runs; `N+` throws after it has run (its state
// already advanced). The production binary has neither the header nor the code.
#include <stdexcept>
#include <string>

#include "gate/session.hpp"

namespace ot::gate {

void Session::inject_fault(bool after) {
    if (ex_.started != fault_epoch_) {  // a new exchange on this connection
        fault_epoch_ = ex_.started;
        fault_calls_ = 0;
    }
    const auto v = req_["X-OT-Test-Fault"];
    if (v.empty()) return;
    const std::string want(v.data(), v.size());
    if (!after) ++fault_calls_;  // handlers are counted on their "before" call
    if (after != (want.back() == '+') || fault_calls_ != std::stoul(want)) return;
    fault_calls_ = 1u << 30;  // once per exchange: the error answer's own handlers run clean
    throw std::runtime_error("injected fault at handler " + want);
}

}  // namespace ot::gate
