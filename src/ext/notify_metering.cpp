// Delivering notifications (LISTEN/NOTIFY), charged to whoever sent them. A listening backend
// reads every notification its database queued and sends those on its channels to its client,
// on no meter: 3 000 notifications of 7.9 kB in one transaction were charged 183 ms to their
// sender, and twenty listeners used 907 ms of backend CPU to deliver them, free; the gap grows
// with the listeners. NOTIFY needs no privilege, so the listener does not pay: a flood on a
// channel someone listens to would be charged to the victim. The sender does: its PID is in
// each NotificationResponse, and the identity that pays for what it queues is in its payer slot
// (payer_slots.cpp). A sender whose slot is gone (it exited, and another backend took its PGPROC
// and published) is not found: the listener pays for that delivery, as for its other reading.
//
// What a listener is charged for: the backend CPU time from one NotificationResponse it sends to
// the next (reading the queue's entries up to the next delivered one, building and sending it),
// the first from just before it is sent (message_metering.cpp times them). The reading of entries
// it does not deliver (on channels it does not listen to) names no sender: the listener pays for
// that (message_metering.cpp's idle_transaction_ended). CPU, not wall time: a listener's client
// that reads slowly blocks the send, which is not the sender's work.
#include "ext/metering.hpp"
#include "ext/settlement.hpp"

namespace ot::ext {
namespace {

// Delivery time gathered for one sender, charged when the sender changes or the delivering
// transaction ends. The sender's payer is looked up as its first notification goes out.
int32 gathered_pid = 0;
bool gathered_found = false;
Payer gathered_payer{};
double gathered_ms = 0;

void charge_gathered() {
    const double ms = gathered_ms;
    gathered_ms = 0;
    if (!(ms > 0) || !gathered_found || !gathered_payer.metered || !shared_memory_ready()) return;
    const Payer& p = gathered_payer;
    publish_measured(ms);  // (not this backend's own measured time: its spans leave delivery out)
    settle(p.key, p.budget, p.charges ? ms : 0, p.charges ? ms : 0, ms);
}

}  // namespace

bool delivery_charge(int32 sender, double ms) {
    if (sender != gathered_pid) {
        charge_gathered();
        gathered_pid = sender;
        gathered_found = shared_memory_ready() && find_payer(sender, gathered_payer);
    }
    if (!gathered_found) return false;
    if (ms > 0) gathered_ms += ms;
    return true;
}

void delivery_flush() {
    charge_gathered();
    gathered_pid = 0;  // (the next transaction looks its senders up again)
}

}  // namespace ot::ext
