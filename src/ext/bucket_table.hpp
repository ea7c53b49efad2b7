// The shared bucket table: one GCRA bucket per identity, across all backends.
#pragma once
#include "ext/hot.hpp"
#include "ext/pg.hpp"

#include <cstdint>

#include "core/gcra.hpp"

extern "C" {
#include "port/atomics.h"
#include "access/xact.h"
}

namespace ot::ext {

inline constexpr int kIdentityMax = 63;  // bytes; longer identities are refused, not truncated

// The same two numbers, bit for bit: the hot paths' test that a budget is the
// one they saw (two integer compares; a double's compare also tests for NaN).
// Unequal bits for equal numbers (0.0 and -0.0) only send them the slow way.
inline bool same_budget(core::Budget a, core::Budget b) {
    std::uint64_t ac, ar, bc, br;
    __builtin_memcpy(&ac, &a.capacity, 8);
    __builtin_memcpy(&ar, &a.rate, 8);
    __builtin_memcpy(&bc, &b.capacity, 8);
    __builtin_memcpy(&br, &b.rate, 8);
    return ac == bc && ar == br;
}

// Zero-padded, so it can be hashed and copied as a fixed-size key.
struct IdentityKey {
    char bytes[kIdentityMax + 1];
};

// Word by word, inline (keys are zero-padded): compared a few times a statement.
inline bool same_identity(const IdentityKey& a, const IdentityKey& b) {
    static_assert(sizeof a.bytes % 8 == 0, "identity keys are whole words");
    unsigned long long diff = 0;
    for (unsigned i = 0; i < sizeof a.bytes; i += 8) {
        unsigned long long x, y;
        __builtin_memcpy(&x, a.bytes + i, 8);
        __builtin_memcpy(&y, b.bytes + i, 8);
        diff |= x ^ y;
    }
    return diff == 0;
}

// Errors (22023) for empty or over-long identities.
IdentityKey make_identity_key(const char* s, size_t len);

void request_shared_memory();
void attach_shared_memory();
// ERROR 55000 naming the fix unless the library was preloaded.
void require_shared_memory();
// Set once this backend has attached the shared table (read every statement: inline).
extern OT_LOCAL bool shared_memory_attached;
inline bool shared_memory_ready() { return shared_memory_attached; }
size_t bucket_table_shmem_size();

// owed: a measured remainder (> 0, charged) or an unused deposit (< 0,
// refunded) of this identity's earlier statements, settled in the same visit
// to the bucket before the new cost is decided on.
core::SpendResult bucket_spend(const IdentityKey& key, double cost, core::Budget b, double owed = 0);
core::ReserveResult bucket_reserve(const IdentityKey& key, double cost, core::Budget b, int64 max_wait_us,
                                   double owed = 0);
void bucket_refund(const IdentityKey& key, double cost, core::Budget b);
// Spends amount when the bucket holds it and keep more (owed settled first, whatever the
// outcome) and returns the tokens left; otherwise leaves the bucket as it was, counts no
// refusal, and returns a negative number. (ogc_throttle.lazy_pricing: enough tokens, no
// estimate needed.)
double bucket_spend_if_held(const IdentityKey& key, double amount, double keep, core::Budget b, double owed);
// Whether a zero-cost statement can be admitted without visiting key's
// bucket: when the lock-free debt board proves the bucket is not in debt, a
// lower bound of its tokens (>= 0). Negative means only "visit the bucket"
// (another identity may share the board's slot). (Returned, not written
// through a pointer: a local whose address is taken costs its caller a
// stack-protector canary.)
double bucket_quick_admit(const IdentityKey& key, core::Budget b);
// The same, inline in the ExecutorStart hook for the usual case: the identity
// last admitted (known by its nonzero serial), its budget's tolerance known,
// and its board slot no later than the burst tolerance past the message's
// arrival (a call and the memo's look-ups were a tenth of an unpriced
// statement's admission). bucket_quick_admit() sets the memo.
struct QuickAdmitMemo {
    std::uint64_t serial;     // identity_serial() of the key the slot is for (0: none)
    pg_atomic_uint64* slot;   // its debt board slot
    core::Budget tau_of;      // the budget tau is for
    int64 tau;                // its burst tolerance (ns)
};
extern OT_LOCAL QuickAdmitMemo quick_memo;
inline double bucket_quick_admit_inline(const IdentityKey& key, core::Budget b, std::uint64_t serial) {
    const QuickAdmitMemo& m = quick_memo;
    if (likely(serial != 0 && serial == m.serial && same_budget(b, m.tau_of))) {
        const int64 bound = static_cast<int64>(pg_atomic_read_u64(m.slot));
        const int64 arrived = GetCurrentStatementStartTimestamp() * 1000;  // ns, as bucket times
        if (bound <= arrived) return b.capacity;
        if (bound - arrived <= m.tau) return core::gcra_tokens(bound, arrived, b);
    }
    return bucket_quick_admit(key, b);
}

// Charges cost however little is left (the bucket may go into debt): the
// measured remainder of work already done. Raises an error only when the
// shared table has no room even after evicting (it always can evict).
void bucket_charge(const IdentityKey& key, double cost, core::Budget b);

// Statement-level counters of the pricing hook (this backend's slot).
enum class HookEvent { Priced, ShadowRefusal, Delayed, Cutoff };
void count_hook_event(HookEvent e, int64 delay_us = 0);
// Everything this backend has counted as measured since it started (ms).
extern OT_LOCAL double measured_here_ms;
inline double measured_so_far_ms() { return measured_here_ms; }
// This backend's measured-time counter in shared memory, once found (single
// writer: a plain read and write); count_measured_first() finds it.
extern OT_LOCAL pg_atomic_uint64* measured_counter;
void count_measured_first(double ms);
// Adds ms to the shared counter only (measured_here_ms has it already).
void publish_measured(double ms);
// Executor time measured by the metering (log mode included), in milliseconds.
// Every pass counts: inline.
inline void count_measured(double ms) {
    if (!(ms > 0)) return;
    if (unlikely(measured_counter == nullptr)) return count_measured_first(ms);
    measured_here_ms += ms;
    pg_atomic_write_u64(measured_counter, pg_atomic_read_u64(measured_counter) + static_cast<uint64>(ms * 1000.0));
}

struct BucketView {
    IdentityKey identity;
    bool found;
    bool throttled;
    double tokens;  // negative while in debt
    double capacity;
    double rate;
    TimestampTz last_request;  // 0 when never seen
    TimestampTz full_at;       // when the bucket will be full again
};

BucketView bucket_peek(const IdentityKey& key, core::Budget b);
bool bucket_reset(const IdentityKey& key);
int64 bucket_reset_all();
// palloc'd array of every bucket; *count receives its length.
BucketView* bucket_snapshot(int64* count);

struct TableStats {
    int64 spends;
    int64 refusals;
    int64 never_fits;
    double cost_charged;
    int64 identities;
    int64 max_identities;
    int64 evicted_full;
    int64 evicted_lossy;
    int64 statements_priced;
    int64 statements_delayed;
    double delay_seconds;
    int64 shadow_refusals;
    double measured_ms;  // executor time measured
    int64 cutoffs;       // statements cancelled for running past their budget
    TimestampTz stats_reset;
};
TableStats table_stats();
void table_stats_reset();

}  // namespace ot::ext
