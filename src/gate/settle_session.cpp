// The settlement of one exchange (settle.hpp has the rules): called from the
// few places where an exchange's upstream leg ends, once per exchange. With
// `charge: measured` the estimate admission took is replaced by the
// upstream's measured time: the difference goes to the same ledger as the
// admission, one more call to the shared store (pipelined on the thread's
// connection, answered without waiting for it).
#include <cmath>

#include "gate/access_log.hpp"
#include "gate/decision.hpp"
#include "gate/session.hpp"

namespace ot::gate {

Timing Session::timing() const {
    Timing t;
    if (ex_.up_sent == Clock::time_point{}) return t;  // never sent: a connect failure, a busy class
    t.sent = true;
    const Clock::time_point end = ex_.up_last == Clock::time_point{} ? Clock::now() : ex_.up_last;
    t.wall_ms = std::max(0.0, std::chrono::duration<double, std::milli>(end - ex_.up_sent).count());
    t.blocked_ms = ex_.client_blocked_ms;
    return t;
}

void Session::note_estimate() {
    if (cfg_->charge != ChargeMode::Measured || !(ex_.decision.charged > 0)) return;
    ex_.decision.headers.push_back({"X-OT-Cost-Estimate", format_ms(ex_.decision.charged)});
}

void Session::settle(Ending e) {
    if (ex_.settled || cfg_->charge != ChargeMode::Measured) return;
    ex_.settled = true;
    if (!(ex_.decision.charged > 0) || ex_.bucket_key.empty()) return;
    const Timing t = timing();
    const double shared = ex_.from_flight ? ex_.flight_ms : measured_ms(t);
    ex_.measured = shared;
    const double charge = final_charge(e, ex_.decision.charged, t, shared, ex_.sharers);
    ex_.final_charge = charge;
    const double taken = ex_.ledger == Ledger::StoreUncharged ? 0.0 : ex_.decision.charged;
    const double delta = charge - taken;
    const std::string cls(log_class(ex_));
    gate_.metrics().settled(worker_, cls, charge);
    if (delta < 0) {
        ex_.refunded = -delta;
        gate_.metrics().refunded(worker_, cls, -delta);
    }
    if (delta == 0) return;
    BucketStore* store = ex_.ledger == Ledger::Local ? nullptr : gate_.store(worker_);
    if (!store) {
        if (delta < 0) gate_.buckets().refund(ex_.bucket_key, -delta, ex_.budget, now_us());
        else gate_.buckets().charge(ex_.bucket_key, delta, ex_.budget, now_us());
        return;
    }
    // A settlement the store cannot take is not retried (a lost reply would
    // charge twice); under on_error: local the gate's own bucket takes it.
    const bool local = cfg_->buckets.policy_for(ex_.assessment.price.cost_class) == redis::OnError::Local;
    store->settle(ex_.bucket_key, delta, ex_.budget,
                  [&gate = gate_, local, key = ex_.bucket_key, delta, b = ex_.budget](const SettleResult& r) {
                      if (r.ok || !local) return;
                      if (delta < 0) gate.buckets().refund(key, -delta, b, now_us());
                      else gate.buckets().charge(key, delta, b, now_us());
                  });
}

// on_error: closed with the store unreachable: the gate cannot tell whether
// the client has budget. That is the gate's trouble, not the client's
// overuse: 503 (retry soon), not 429.
void Session::store_unavailable(double retry_after_s) {
    ex_.decision.verdict = "store_unavailable";
    const int wait = static_cast<int>(std::max(1.0, std::ceil(retry_after_s)));
    OgcError e{ErrorKind::Busy, "NoApplicableCode", "",
               "This gate cannot reach its budget store and does not serve this kind of request without it. Retry "
               "after " + std::to_string(wait) + " s."};
    const Rendered r = render_refusal(ex_.assessment, e, *cfg_);
    respond(r.status, r.content_type, r.body,
            {{"Retry-After", std::to_string(wait)}, {"Cache-Control", "no-store"}});
}

}  // namespace ot::gate
