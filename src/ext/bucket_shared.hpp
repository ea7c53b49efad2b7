// Layout of the shared bucket table, private to bucket_table.cpp, bucket_persist.cpp,
// bucket_counters.cpp and payer_slots.cpp.
#pragma once
#include "ext/hot.hpp"
#include "ext/bucket_table.hpp"
#include "ext/shared_table.hpp"

extern "C" {
#include "port/atomics.h"
#include "storage/lwlock.h"
#include "storage/spin.h"
#include "utils/hsearch.h"
}

namespace ot::ext {

inline constexpr const char* kTrancheName = "ogc_throttle";

// A bucket is its TAT; capacity and rate are kept only to display tokens.
struct BucketEntry {
    IdentityKey key;  // must be first: dynahash compares keys here
    slock_t mutex;    // guards the fields below; taken under a shared partition lock
    bool throttled;   // the last attempt was refused
    float capacity;
    float rate;
    int64 tat_ns;  // nanoseconds since the PostgreSQL epoch
    TimestampTz last_request;
};

// Who pays for the work a backend causes in others (payer_slots.cpp): written by that backend,
// read by the listeners that deliver its notifications and by its parallel workers. seq is odd
// while a write is under way (one writer: the slot's backend).
struct PayerSlot {
    pg_atomic_uint32 seq;
    int32 pid;
    bool metered;  // the sender's mode meters (not off, true-up on, a budget the spend path takes)
    bool charges;  // ... and charges (not log)
    double capacity;
    double rate;
    IdentityKey key;
};

// One per PGPROC slot, each on its own cache line: a backend only writes its own.
struct alignas(64) BackendCounters {
    // The bucket entry this backend is visiting without its partition lock, or 0 (bucket_table.cpp).
    pg_atomic_uint64 visiting;
    pg_atomic_uint64 spends;
    pg_atomic_uint64 refusals;
    pg_atomic_uint64 never_fits;
    pg_atomic_uint64 cost_micro;
    pg_atomic_uint64 statements_priced;
    pg_atomic_uint64 statements_delayed;
    pg_atomic_uint64 delay_us;
    pg_atomic_uint64 shadow_refusals;
    pg_atomic_uint64 measured_us;
    pg_atomic_uint64 cutoffs;
    PayerSlot payer;  // (after the counters: read by listeners only)
};

// The debt board: for each of kBoardSlots slots, the latest TAT any bucket
// hashing there was given. An upper bound, read without a lock: a slot whose
// TAT leaves a zero-cost statement within the burst tolerance proves every
// bucket of that slot can admit one, and bounds its tokens from below.
inline constexpr int kBoardSlots = 4096;  // power of two

struct SharedHeader {
    pg_atomic_uint64 board[kBoardSlots];
    LWLockPadded* locks;
    pg_atomic_uint64 evicted_full;
    pg_atomic_uint64 evicted_lossy;
    pg_atomic_uint64 stats_reset;  // a TimestampTz
    // Bumped, under an exclusive partition lock, before any bucket is removed: an entry a backend
    // remembered is still its key's while this has not moved (dynahash entries never move).
    pg_atomic_uint64 removals;
    int nslots;
    BackendCounters slots[FLEXIBLE_ARRAY_MEMBER];
};

extern OT_LOCAL SharedHeader* shared;
extern OT_LOCAL HTAB* buckets;
extern OT_LOCAL SharedTable bucket_table;

// Bucket times are nanoseconds (see core/gcra.hpp); PostgreSQL's are microseconds.
inline int64 to_ns(TimestampTz t) { return t * 1000; }

// Raises the debt board's slot for hash to tat_ns if it is below.
void publish_tat(uint32 hash, int64 tat_ns);

// bucket_counters.cpp: this backend's slot (null before it has a PGPROC), and what goes in it.
BackendCounters* my_counters();
void init_counters();
void count_spend(const core::SpendResult& r, double cost);
// A charge (> 0) or a refund (< 0) settled outside a spend.
void count_owed(double owed);

// Persistence: load runs in the postmaster before any backend exists.
void load_saved_buckets();
void register_save_at_shutdown();

}  // namespace ot::ext
