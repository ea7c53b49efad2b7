#include "ext/bucket_table.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "ext/bucket_shared.hpp"
#include "ext/hot.hpp"
#include "ext/settings.hpp"
#include "ext/sql_args.hpp"

extern "C" {
#include "access/twophase.h"
#include "access/xact.h"
#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/proc.h"
#include "storage/shmem.h"
#include "utils/builtins.h"
}

namespace ot::ext {

SharedHeader* shared = nullptr;
HTAB* buckets = nullptr;
SharedTable bucket_table = {nullptr, nullptr, 0, nullptr, nullptr};

namespace {

int slot_count() { return MaxBackends + NUM_AUXILIARY_PROCS + max_prepared_xacts; }

size_t header_size() {
    return add_size(offsetof(SharedHeader, slots), mul_size(slot_count(), sizeof(BackendCounters)));
}


void init_bucket(void* entry, TimestampTz now) {
    auto* e = static_cast<BucketEntry*>(entry);
    SpinLockInit(&e->mutex);
    e->throttled = false;
    e->capacity = 0;
    e->rate = 0;
    e->tat_ns = 0;  // long past: a full bucket
    e->last_request = now;
}

TimestampTz last_request_of(const void* entry) { return static_cast<const BucketEntry*>(entry)->last_request; }

// Before a bucket is removed (under the partition lock that removal takes): see bucket_for.
void fence_visitors() {
    pg_atomic_fetch_add_u64(&shared->removals, 1);  // (a full barrier)
    for (int i = 0; i < shared->nslots; i++) {
        pg_atomic_uint64* v = &shared->slots[i].visiting;
        if (pg_atomic_read_u64(v) == 0) continue;
        SpinDelayStatus delay;
        init_local_spin_delay(&delay);
        while (pg_atomic_read_u64(v) != 0) perform_spin_delay(&delay);
        finish_spin_delay(&delay);
    }
}

// Full buckets go first (forgetting them loses nothing); if that frees too
// little, the least recently used go next, and those are counted as lossy.
void evict_buckets(SharedTable* t, TimestampTz now) {
    const long want = eviction_batch(*t);
    if (t->max_entries - hash_get_num_entries(t->htab) >= want) return;  // someone else made room
    fence_visitors();
    long freed = 0;
    HASH_SEQ_STATUS scan;
    hash_seq_init(&scan, t->htab);
    while (BucketEntry* e = static_cast<BucketEntry*>(hash_seq_search(&scan))) {
        if (core::gcra_is_full(e->tat_ns, to_ns(now))) {
            hash_search(t->htab, &e->key, HASH_REMOVE, nullptr);
            freed++;
        }
    }
    pg_atomic_fetch_add_u64(&shared->evicted_full, static_cast<uint64>(freed));
    const long lossy = evict_least_recent(*t, want - freed, last_request_of);
    pg_atomic_fetch_add_u64(&shared->evicted_lossy, static_cast<uint64>(lossy));
}

// Under the entry's spinlock. A refused attempt still counts as use, so that
// a client being refused is not the first to be forgotten.
void record_attempt(BucketEntry* e, int64 new_tat, core::SpendOutcome outcome, core::Budget b, TimestampTz now) {
    e->tat_ns = new_tat;
    e->throttled = outcome != core::SpendOutcome::Allowed;
    e->capacity = static_cast<float>(b.capacity);
    e->rate = static_cast<float>(b.rate);
    e->last_request = now;
}

// A backend visits one bucket, statement after statement: its entry is remembered and visited
// again without the hash lookup and without the partition lock while no bucket was removed. The
// backend names the entry in its own slot's `visiting` (its own cache line), then checks that
// `removals` has not moved; a remover bumps `removals` first, then waits until no slot names an
// entry (fence_visitors). Either the visitor sees the bump and takes the locked path, or the
// remover sees the visit and waits for it (a spinlock's length). Two backends of one identity
// visit its bucket twice a statement each (the deposit, the refund): the partition lock's line
// crossed cores at each visit (bench/HISTORY.md, "one identity's bucket shared by two backends").
struct Remembered {
    bool valid;
    uint32 hash;
    uint64 removals;
    BucketEntry* entry;
    IdentityKey key;
};
Remembered remembered = {};

BucketEntry* remembered_entry(const IdentityKey& key, uint32 hash) {
    if (!remembered.valid || remembered.hash != hash || !same_identity(remembered.key, key)) return nullptr;
    BackendCounters* c = my_counters();
    if (c == nullptr) return nullptr;
    pg_atomic_exchange_u64(&c->visiting, reinterpret_cast<uint64>(remembered.entry));  // (a full barrier)
    if (pg_atomic_read_u64(&shared->removals) == remembered.removals) return remembered.entry;
    pg_atomic_write_u64(&c->visiting, 0);
    return nullptr;
}

// Leaves the entry bucket_for (or bucket_refund's lookup) returned, after its spinlock is released.
inline void leave_bucket(LWLock* lock) {
    if (lock != nullptr) {
        LWLockRelease(lock);
        return;
    }
    pg_memory_barrier();  // every access to the entry before it is no longer named
    pg_atomic_write_u64(&my_counters()->visiting, 0);
}

// Returns with *lock, the partition lock, held in shared mode, or with *lock null and the
// entry named in this backend's slot: either way, leave_bucket(*lock) afterwards. With may_fail,
// nullptr (and *lock null) where find_or_create() says so.
BucketEntry* bucket_for(const IdentityKey& key, uint32 hash, LWLock** lock, TimestampTz now, bool may_fail = false) {
    if (BucketEntry* e = remembered_entry(key, hash)) {
        *lock = nullptr;
        return e;
    }
    auto* e = static_cast<BucketEntry*>(ot::ext::find_or_create(bucket_table, key, hash, lock, now, may_fail));
    if (e == nullptr) return nullptr;
    remembered.valid = true;
    remembered.hash = hash;
    remembered.removals = pg_atomic_read_u64(&shared->removals);  // under the lock: no removal in between
    remembered.entry = e;
    remembered.key = key;
    return e;
}

// Budgets are stored as float to keep an entry small; shown with the float's
// own precision so that 0.01 reads 0.01, not 0.009999999776.
double shown(float f) {
    char buf[32];
    snprintf(buf, sizeof buf, "%.7g", static_cast<double>(f));
    return strtod(buf, nullptr);
}

BucketView view_of(const BucketEntry* e, TimestampTz now) {
    BucketView v;
    v.identity = e->key;
    v.found = true;
    v.throttled = e->throttled;
    v.capacity = shown(e->capacity);
    v.rate = shown(e->rate);
    v.tokens = e->rate > 0 ? core::gcra_balance(e->tat_ns, to_ns(now), {e->capacity, e->rate}) : e->capacity;
    v.last_request = e->last_request;
    v.full_at = std::max<int64>(e->tat_ns / 1000, now);
    return v;
}

}  // namespace

IdentityKey make_identity_key(const char* s, size_t len) {
    if (len == 0)
        ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE), errmsg("ogc_throttle: identity is empty"),
                        errhint("Pass a role name, an API key hash or a client address.")));
    if (len > static_cast<size_t>(kIdentityMax))
        ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
                        errmsg("ogc_throttle: identity is %zu bytes long; the limit is %d", len, kIdentityMax),
                        errhint("Hash long keys (for example with md5()) before passing them.")));
    IdentityKey k;
    std::memset(k.bytes, 0, sizeof k.bytes);
    std::memcpy(k.bytes, s, len);
    return k;
}

size_t bucket_table_shmem_size() {
    return add_size(header_size(), hash_estimate_size(setting_max_identities, sizeof(BucketEntry)));
}

void request_shared_memory() {
    RequestAddinShmemSpace(bucket_table_shmem_size());
    RequestNamedLWLockTranche(kTrancheName, kPartitions);
}

void attach_shared_memory() {
    LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
    bool found = false;
    shared = static_cast<SharedHeader*>(ShmemInitStruct("ogc_throttle header", header_size(), &found));
    if (!found) {
        shared->locks = GetNamedLWLockTranche(kTrancheName);
        pg_atomic_init_u64(&shared->evicted_full, 0);
        pg_atomic_init_u64(&shared->evicted_lossy, 0);
        pg_atomic_init_u64(&shared->stats_reset, static_cast<uint64>(GetCurrentTimestamp()));
        pg_atomic_init_u64(&shared->removals, 0);
        for (pg_atomic_uint64& slot : shared->board) pg_atomic_init_u64(&slot, 0);
        shared->nslots = slot_count();
        init_counters();
    }
    HASHCTL info;
    info.keysize = sizeof(IdentityKey);
    info.entrysize = sizeof(BucketEntry);
    info.num_partitions = kPartitions;
    buckets = ShmemInitHash("ogc_throttle buckets", setting_max_identities, setting_max_identities, &info,
                            HASH_ELEM | HASH_STRINGS | HASH_PARTITION | HASH_FIXED_SIZE);
    LWLockRelease(AddinShmemInitLock);
    bucket_table = {buckets, shared->locks, setting_max_identities, init_bucket, evict_buckets};
    shared_memory_attached = shared != nullptr && buckets != nullptr;

    if (!IsUnderPostmaster) {
        register_save_at_shutdown();
        if (!found) load_saved_buckets();
    }
}

bool shared_memory_attached = false;

void require_shared_memory() {
    if (shared == nullptr || buckets == nullptr)
        ereport(ERROR, (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
                        errmsg("ogc_throttle must be loaded via shared_preload_libraries"),
                        errdetail("The shared bucket table does not exist, so no budget can be checked."),
                        errhint("Add ogc_throttle to shared_preload_libraries in postgresql.conf and restart the "
                                "server.")));
}

static int64 settle_owed(int64 tat_ns, TimestampTz now, double owed, core::Budget b) {
    if (owed > 0) return core::gcra_charge(tat_ns, to_ns(now), owed, b);
    if (owed < 0) return core::gcra_refund(tat_ns, to_ns(now), -owed, b);
    return tat_ns;
}


// Raised to the TAT rounded up to kBoardGrainNs, still an upper bound: a bucket's deposits
// within one grain write the slot's line once. Each statement's deposit moves its bucket's TAT
// on by the time since the last, and two backends of one identity passed the line between cores
// at every statement. (A bound later by less than the grain leaves the tokens it proves lower by
// up to the grain's refill: 1 ms of TAT is 0.05 ms of tokens at the default rate.)
constexpr int64 kBoardGrainNs = 1000000;

void publish_tat(uint32 hash, int64 tat_ns) {
    pg_atomic_uint64* slot = &shared->board[hash & (kBoardSlots - 1)];
    uint64 seen = pg_atomic_read_u64(slot);
    if (static_cast<int64>(seen) >= tat_ns) return;
    const int64 bound = tat_ns > 0 && tat_ns <= PG_INT64_MAX - kBoardGrainNs
                            ? (tat_ns + kBoardGrainNs - 1) / kBoardGrainNs * kBoardGrainNs
                            : tat_ns;
    while (static_cast<int64>(seen) < bound)
        if (pg_atomic_compare_exchange_u64(slot, &seen, static_cast<uint64>(bound))) break;
}

// A backend admits one identity, statement after statement: its hash is
// remembered (hashing the 64-byte key was a third of the quick admission).
__attribute__((always_inline)) static inline uint32 identity_hash(const IdentityKey& key) {
    static IdentityKey last_key;
    static uint32 last_hash;
    static bool last_valid = false;
    static std::uint64_t last_serial = 0;
    const std::uint64_t serial = identity_serial(key);
    if (serial != 0 && serial == last_serial) return last_hash;
    if (!last_valid || !same_identity(last_key, key)) {
        last_hash = get_hash_value(buckets, &key);
        last_key = key;
        last_valid = true;
    }
    last_serial = serial;
    return last_hash;
}

QuickAdmitMemo quick_memo = {0, nullptr, {0.0, 0.0}, 0};

OT_HOT double bucket_quick_admit(const IdentityKey& key, core::Budget b) {
    const uint32 hash = identity_hash(key);
    pg_atomic_uint64* slot = &shared->board[hash & (kBoardSlots - 1)];
    // gcra_spend(bound, now, 0, b) allows exactly what is below; the tolerance is kept per budget.
    QuickAdmitMemo& m = quick_memo;
    if (b.capacity != m.tau_of.capacity || b.rate != m.tau_of.rate) {
        m.tau = core::gcra_tolerance_ns(b);
        m.tau_of = b;
    }
    m.serial = identity_serial(key);  // bucket_quick_admit_inline's memo: this key's slot
    m.slot = slot;
    const int64 bound = static_cast<int64>(pg_atomic_read_u64(slot));
    // Charged up to no later than the current message's arrival (a time before
    // now, read by PostgreSQL when the message came): full, without a clock read.
    const int64 arrived = to_ns(GetCurrentStatementStartTimestamp());
    if (bound <= arrived) return b.capacity;
    // Out of debt at the message's arrival is out of debt now (the bucket only
    // refills in between): admitted without a clock read, with the tokens it
    // held then (a lower bound: the refill since is left out of the cut-off's
    // allowance; a clock read per statement was a twentieth of the hook's cost).
    if (bound - arrived <= m.tau) return core::gcra_tokens(bound, arrived, b);
    const int64 now = to_ns(GetCurrentTimestamp());
    if (bound <= now) return b.capacity;  // charged up to no later than now: full
    if (bound - now > m.tau) return -1;
    return core::gcra_tokens(bound, now, b);
}

// One visit to key's bucket: what is owed settled first, then decide(entry, now) under its spinlock
// (it must not raise: gcra's arithmetic only), the TAT published on the debt board afterwards.
template <class Decide>
__attribute__((always_inline)) inline void visit_bucket(const IdentityKey& key, core::Budget b, double owed,
                                                        Decide decide) {
    const TimestampTz now = GetCurrentTimestamp();
    const uint32 hash = identity_hash(key);
    LWLock* lock;
    BucketEntry* e = bucket_for(key, hash, &lock, now);

    SpinLockAcquire(&e->mutex);
    e->tat_ns = settle_owed(e->tat_ns, now, owed, b);
    decide(e, now);
    const int64 tat = e->tat_ns;
    SpinLockRelease(&e->mutex);
    leave_bucket(lock);
    publish_tat(hash, tat);
    count_owed(owed);
}

core::SpendResult bucket_spend(const IdentityKey& key, double cost, core::Budget b, double owed) {
    core::SpendResult r;
    visit_bucket(key, b, owed, [&](BucketEntry* e, TimestampTz now) {
        r = core::gcra_spend(e->tat_ns, to_ns(now), cost, b);
        record_attempt(e, r.new_tat_ns, r.outcome, b, now);
    });
    count_spend(r, cost);
    return r;
}

double bucket_spend_if_held(const IdentityKey& key, double amount, double keep, core::Budget b, double owed) {
    core::SpendResult r;
    visit_bucket(key, b, owed, [&](BucketEntry* e, TimestampTz now) {
        r = core::gcra_spend_keeping(e->tat_ns, to_ns(now), amount, keep, b);
        if (r.outcome == core::SpendOutcome::Allowed) record_attempt(e, r.new_tat_ns, r.outcome, b, now);
    });
    if (r.outcome != core::SpendOutcome::Allowed) return -1.0;
    count_spend(r, amount);
    return r.remaining;
}

core::ReserveResult bucket_reserve(const IdentityKey& key, double cost, core::Budget b, int64 max_wait_us,
                                   double owed) {
    core::ReserveResult r;
    visit_bucket(key, b, owed, [&](BucketEntry* e, TimestampTz now) {
        r = core::gcra_reserve(e->tat_ns, to_ns(now), cost, b, max_wait_us * 1000);
        record_attempt(e, r.new_tat_ns, r.outcome, b, now);
    });
    count_spend({r.outcome, r.new_tat_ns, 0, r.retry_after_s, 0}, cost);
    return r;
}

void bucket_refund(const IdentityKey& key, double cost, core::Budget b) {
    const TimestampTz now = GetCurrentTimestamp();
    const uint32 hash = identity_hash(key);
    LWLock* lock = nullptr;
    BucketEntry* e = remembered_entry(key, hash);
    // (a bucket forgotten is full: nothing to refund)
    if (e == nullptr) e = static_cast<BucketEntry*>(find_shared(bucket_table, key, hash, &lock));
    if (e != nullptr) {
        SpinLockAcquire(&e->mutex);
        e->tat_ns = core::gcra_refund(e->tat_ns, to_ns(now), cost, b);
        SpinLockRelease(&e->mutex);
    }
    leave_bucket(lock);
    count_owed(-cost);
}

void bucket_charge(const IdentityKey& key, double cost, core::Budget b) {
    if (!(cost > 0)) return;
    const TimestampTz now = GetCurrentTimestamp();
    const uint32 hash = identity_hash(key);
    LWLock* lock;
    BucketEntry* e = bucket_for(key, hash, &lock, now, true);
    if (e == nullptr) {
        // (after a commit or in an abort: no ERROR, and nothing to charge it to; no lock held,
        // no entry named)
        ereport(WARNING, (errcode(ERRCODE_OUT_OF_MEMORY),
                          errmsg("ogc_throttle: a charge of %.1f ms to identity \"%s\" was dropped", cost, key.bytes),
                          errdetail("The bucket table had no room for its bucket after three evictions."),
                          errhint("Raise ogc_throttle.max_identities.")));
        return;
    }
    SpinLockAcquire(&e->mutex);
    e->tat_ns = core::gcra_charge(e->tat_ns, to_ns(now), cost, b);
    e->capacity = static_cast<float>(b.capacity);
    e->rate = static_cast<float>(b.rate);
    e->last_request = now;
    const int64 tat = e->tat_ns;
    SpinLockRelease(&e->mutex);
    leave_bucket(lock);
    publish_tat(hash, tat);
    count_owed(cost);
}


BucketView bucket_peek(const IdentityKey& key, core::Budget b) {
    const TimestampTz now = GetCurrentTimestamp();
    LWLock* lock;
    auto* e = static_cast<BucketEntry*>(find_shared(bucket_table, key, get_hash_value(buckets, &key), &lock));
    BucketView v;
    if (e != nullptr) {
        SpinLockAcquire(&e->mutex);
        v = view_of(e, now);
        SpinLockRelease(&e->mutex);
    }
    LWLockRelease(lock);
    if (e == nullptr) {
        // Never seen (or forgotten while full): a full bucket of the caller's budget.
        v = {key, false, false, b.capacity, b.capacity, b.rate, 0, now};
    }
    return v;
}

bool bucket_reset(const IdentityKey& key) {
    const uint32 hash = identity_hash(key);
    LWLock* lock = partition_lock(bucket_table, hash);
    LWLockAcquire(lock, LW_EXCLUSIVE);
    bool found = false;
    if (hash_search_with_hash_value(buckets, &key, hash, HASH_FIND, nullptr) != nullptr) {
        fence_visitors();
        hash_search_with_hash_value(buckets, &key, hash, HASH_REMOVE, &found);
    }
    LWLockRelease(lock);
    return found;
}

int64 bucket_reset_all() {
    int64 removed = 0;
    lock_all(bucket_table, LW_EXCLUSIVE);
    if (hash_get_num_entries(buckets) > 0) fence_visitors();
    HASH_SEQ_STATUS scan;
    hash_seq_init(&scan, buckets);
    while (BucketEntry* e = static_cast<BucketEntry*>(hash_seq_search(&scan))) {
        hash_search(buckets, &e->key, HASH_REMOVE, nullptr);
        removed++;
    }
    unlock_all(bucket_table);
    return removed;
}

BucketView* bucket_snapshot(int64* count) {
    const TimestampTz now = GetCurrentTimestamp();
    lock_all(bucket_table, LW_SHARED);
    const long cap = std::max<long>(hash_get_num_entries(buckets), 1);
    auto* out = static_cast<BucketView*>(palloc(sizeof(BucketView) * cap));
    int64 n = 0;
    HASH_SEQ_STATUS scan;
    hash_seq_init(&scan, buckets);
    while (BucketEntry* e = static_cast<BucketEntry*>(hash_seq_search(&scan))) {
        if (n == cap) {
            hash_seq_term(&scan);
            break;
        }
        SpinLockAcquire(&e->mutex);
        out[n++] = view_of(e, now);
        SpinLockRelease(&e->mutex);
    }
    unlock_all(bucket_table);
    *count = n;
    return out;
}


}  // namespace ot::ext
