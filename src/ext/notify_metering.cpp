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
//
// What a listener may not put on the sender: channels are no one's, so anyone may listen on a
// victim's, and two ways made each delivery dearer at the listener's choice.
// - Many channels: a listener checks each entry against its channels one by one (2.6 ns a channel
//   here), so a listener of the victim's channel and 30 000 others made 3 000 one-byte
//   notifications cost 230 ms to deliver, charged to their sender, against 7 ms for a listener of
//   one channel. The sender pays for a listener's first kFreeChannels channels only: beyond
//   them, its part of a delivery shrinks as kFreeChannels / channels, the rest is the listener's.
// - Reading between deliveries: the CPU time up to a delivered notification holds the reading of
//   the entries before it that were not delivered. A listener that keeps a transaction open
//   (notifications wait for its end) while its role floods another channel between two of the
//   victim's notifications read the whole flood before the victim's second one. A delivery is
//   charged to its sender at most kCapFixedMs plus kCapPerByteMs a byte of the message, five
//   times what one took here (2 µs, and 1.6 ns a byte: 15 µs for 7.9 kB); the rest is the
//   listener's, as its reading of what it does not deliver always was.
#include "ext/metering.hpp"
#include "ext/settlement.hpp"

#include <algorithm>

extern "C" {
#include "funcapi.h"
#include "nodes/execnodes.h"
#include "utils/fmgroids.h"
#include "utils/memutils.h"
}

namespace ot::ext {
namespace {

constexpr double kFreeChannels = 64;
constexpr double kCapFixedMs = 0.01;
constexpr double kCapPerByteMs = 8e-6;
double channels_share = 1;  // of the delivering transaction: min(1, kFreeChannels / channels)

// pg_listening_channels(), called as a query would call it (the list it walks is async.c's own),
// in a context of its own: a listener of 30 000 channels gets as many strings.
int listening_channels() {
    MemoryContext counting = AllocSetContextCreate(CurrentMemoryContext, "ogc_throttle channels", ALLOCSET_SMALL_SIZES);
    MemoryContext caller = MemoryContextSwitchTo(counting);
    FmgrInfo flinfo;
    fmgr_info(F_PG_LISTENING_CHANNELS, &flinfo);
    ReturnSetInfo rsi{};
    rsi.type = T_ReturnSetInfo;
    rsi.econtext = CreateStandaloneExprContext();
    rsi.allowedModes = SFRM_ValuePerCall;
    rsi.returnMode = SFRM_ValuePerCall;
    LOCAL_FCINFO(fcinfo, 0);
    InitFunctionCallInfoData(*fcinfo, &flinfo, 0, InvalidOid, nullptr, reinterpret_cast<Node*>(&rsi));
    int n = 0;
    for (;;) {
        rsi.isDone = ExprSingleResult;
        fcinfo->isnull = false;
        (void)FunctionCallInvoke(fcinfo);
        if (rsi.isDone == ExprEndResult) break;
        n++;
    }
    FreeExprContext(rsi.econtext, true);
    MemoryContextSwitchTo(caller);
    MemoryContextDelete(counting);
    return n;
}

// Delivery time gathered for one sender, charged when the sender changes or the delivering
// transaction ends. The sender's payer is looked up as its first notification goes out.
int32 gathered_pid = 0;
bool gathered_found = false;
Payer gathered_payer{};
double gathered_ms = 0;

// Whether anything was settled for the sender.
bool charge_gathered() {
    const double ms = gathered_ms;
    gathered_ms = 0;
    if (!(ms > 0) || !gathered_found || !gathered_payer.metered || !shared_memory_ready()) return false;
    const Payer& p = gathered_payer;
    publish_measured(ms);  // (not this backend's own measured time: its spans leave delivery out)
    settle(p.key, p.budget, p.charges ? ms : 0, p.charges ? ms : 0, ms);
    return true;
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

void delivery_begin() {
    const int n = listening_channels();
    channels_share = n > kFreeChannels ? kFreeChannels / n : 1.0;
}

double delivery_senders_part(double ms, size_t len) {
    return std::min(ms * channels_share, kCapFixedMs + kCapPerByteMs * static_cast<double>(len));
}

// The last sender's share goes to its bucket now, not with the listener's next charge of 10 ms
// or at its exit: an idle listener held up to 10 ms of each flood it delivered, so a thousand
// long-lived listeners let a flooder's next ten seconds of notifications go out before they were
// paid for. One bucket visit per delivering transaction.
void delivery_flush() {
    if (charge_gathered()) flush_settlements();
    gathered_pid = 0;  // (the next transaction looks its senders up again)
}

}  // namespace ot::ext
