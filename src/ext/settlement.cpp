#include "ext/settlement.hpp"
#include "ext/hot.hpp"

#include <cmath>
#include <cstring>

#include "ext/identity_stats.hpp"

extern "C" {
#include "storage/ipc.h"
}

namespace ot::ext {

Pending pending_settlement = {};

namespace {

// (kFlushMs, kStatsFlushMs, kStatsFlushStatements and Pending: settlement.hpp)
Pending& pending = pending_settlement;
bool exit_flush_registered = false;

bool same_id(const IdentityKey& a, const IdentityKey& b) { return same_identity(a, b); }

void flush_owed() {
    if (!pending.any) return;
    pending.any = false;
    pending.fast_serial = Pending::kNoFast;
    if (pending.owed > 0)
        bucket_charge(pending.id, pending.owed, pending.budget);
    else if (pending.owed < 0)
        bucket_refund(pending.id, -pending.owed, pending.budget);
    pending.owed = 0;
}

void flush_stats() {
    if (!pending.stats_any) return;
    pending.stats_any = false;
    pending.fast_serial = Pending::kNoFast;
    if (pending.counted_ms > 0) publish_measured(pending.counted_ms);
    pending.counted_ms = 0;
    record_batch(pending.id, pending.stats_admitted, pending.stats_charge, pending.stats_measured);
    pending.stats_charge = pending.stats_measured = 0;
    pending.stats_statements = pending.stats_admitted = 0;
}

void flush_at_exit(int, Datum) {
    if (!shared_memory_ready()) return;
    flush_owed();
    flush_stats();
}

// The identity of what is pending becomes id: a no-op when it is already
// (known by its serial inline, in settle(); compared here).
void adopt(const IdentityKey& id, std::uint64_t serial) {
    pending.fast_serial = Pending::kNoFast;  // (settle() sets it again)
    if (pending.has_id && ((serial != 0 && serial == pending.serial) || same_id(pending.id, id))) {
        if (serial != 0) pending.serial = serial;
        return;
    }
    flush_owed();
    flush_stats();
    pending.id = id;
    pending.serial = serial;
    pending.has_id = true;
    if (!exit_flush_registered) {
        before_shmem_exit(flush_at_exit, 0);
        exit_flush_registered = true;
    }
}

OT_HOT inline void add_owed(core::Budget b, double amount) {
    if (amount == 0) return;
    if (pending.any && (pending.budget.capacity != b.capacity || pending.budget.rate != b.rate)) flush_owed();
    if (!pending.any) {
        pending.any = true;
        pending.budget = b;
        pending.owed = 0;
    }
    pending.owed += amount;
    if (std::fabs(pending.owed) >= kFlushMs) flush_owed();
}

OT_HOT inline void add_stats(double charge, double measured) {
    pending.stats_any = true;
    pending.stats_charge += charge;
    pending.stats_measured += measured;
    pending.stats_statements++;
    if (pending.stats_measured >= kStatsFlushMs || pending.stats_statements >= kStatsFlushStatements) flush_stats();
}

}  // namespace

OT_HOT void owe(const IdentityKey& id, core::Budget b, double amount, std::uint64_t serial) {
    if (amount == 0) return;
    if (unlikely(serial == 0 || serial != pending.serial || !pending.has_id)) adopt(id, serial);
    add_owed(b, amount);
}

OT_HOT void settle(const IdentityKey& id, core::Budget b, double owed, double charge, double measured,
                   std::uint64_t serial) {
    if (unlikely(serial == 0 || serial != pending.serial || !pending.has_id)) adopt(id, serial);
    add_owed(b, owed);
    add_stats(charge, measured);
    if (pending.any && pending.stats_any && pending.serial != 0) pending.fast_serial = pending.serial;
}

OT_HOT void count_admitted(const IdentityKey& id, double cost, std::uint64_t serial) {
    if (unlikely(serial == 0 || serial != pending.serial || !pending.has_id)) adopt(id, serial);
    pending.stats_any = true;
    pending.stats_charge += cost;
    if (++pending.stats_admitted >= kStatsFlushStatements) flush_stats();
    if (pending.any && pending.stats_any && pending.serial != 0) pending.fast_serial = pending.serial;
}

void flush_pending_stats() {
    if (shared_memory_ready()) flush_stats();
}

void settle_flush_due() {
    if (std::fabs(pending.owed) >= kFlushMs) flush_owed();
    if (pending.stats_measured >= kStatsFlushMs || pending.stats_statements >= kStatsFlushStatements) flush_stats();
}

void flush_settlements() {
    if (!shared_memory_ready()) return;
    flush_owed();
    flush_stats();
}

OT_HOT double take_owed(const IdentityKey& id, core::Budget b) {
    if (!pending.any) return 0;
    if (!same_id(pending.id, id) || pending.budget.capacity != b.capacity || pending.budget.rate != b.rate) {
        flush_owed();
        return 0;
    }
    const double owed = pending.owed;
    pending.any = false;
    pending.fast_serial = Pending::kNoFast;
    pending.owed = 0;
    return owed;
}

}  // namespace ot::ext
