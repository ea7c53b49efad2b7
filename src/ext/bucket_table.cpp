#include "ext/bucket_table.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "ext/bucket_shared.hpp"
#include "ext/settings.hpp"

extern "C" {
#include "access/twophase.h"
#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/proc.h"
#include "storage/shmem.h"
#include "utils/builtins.h"
}

namespace ot::ext {

SharedHeader* shared = nullptr;
HTAB* buckets = nullptr;

namespace {

constexpr double kMicros = 1e6;

int slot_count() { return MaxBackends + NUM_AUXILIARY_PROCS + max_prepared_xacts; }

size_t header_size() {
    return add_size(offsetof(SharedHeader, slots), mul_size(slot_count(), sizeof(BackendCounters)));
}

LWLock* partition_lock(uint32 hash) { return &shared->locks[hash % kPartitions].lock; }

void lock_all(LWLockMode mode) {
    for (int i = 0; i < kPartitions; i++) LWLockAcquire(&shared->locks[i].lock, mode);
}

void unlock_all() {
    for (int i = kPartitions - 1; i >= 0; i--) LWLockRelease(&shared->locks[i].lock);
}

BackendCounters* my_counters() {
    if (MyProc == nullptr || MyProc->pgprocno < 0 || MyProc->pgprocno >= shared->nslots) return nullptr;
    return &shared->slots[MyProc->pgprocno];
}

// Single writer per slot: a plain read-then-write is enough and avoids a locked instruction.
void bump(pg_atomic_uint64* c, uint64 by) { pg_atomic_write_u64(c, pg_atomic_read_u64(c) + by); }

void count(const core::SpendResult& r, double cost) {
    BackendCounters* c = my_counters();
    if (c == nullptr) return;
    switch (r.outcome) {
        case core::SpendOutcome::Allowed:
            bump(&c->spends, 1);
            bump(&c->cost_micro, static_cast<uint64>(cost * kMicros));
            break;
        case core::SpendOutcome::Refused: bump(&c->refusals, 1); break;
        case core::SpendOutcome::NeverFits: bump(&c->never_fits, 1); break;
    }
}

struct Candidate {
    TimestampTz last_request;
    BucketEntry* entry;
};

// Called with every partition lock held exclusively. Full buckets go first
// (forgetting them loses nothing); if that frees too little, the least recently
// used go next, and those are counted as lossy.
void evict_locked(TimestampTz now) {
    const long entries = hash_get_num_entries(buckets);
    const long want = std::max<long>(1, setting_max_identities / 100);
    if (setting_max_identities - entries >= want) return;  // someone else made room

    Candidate* live = static_cast<Candidate*>(palloc(sizeof(Candidate) * std::max<long>(entries, 1)));
    long nlive = 0;
    long freed = 0;
    HASH_SEQ_STATUS scan;
    hash_seq_init(&scan, buckets);
    while (BucketEntry* e = static_cast<BucketEntry*>(hash_seq_search(&scan))) {
        if (core::gcra_is_full(e->tat_us, now)) {
            hash_search(buckets, &e->key, HASH_REMOVE, nullptr);
            freed++;
        } else {
            live[nlive++] = {e->last_request, e};
        }
    }
    pg_atomic_fetch_add_u64(&shared->evicted_full, static_cast<uint64>(freed));

    long lossy = std::min(want - freed, nlive);
    if (lossy > 0) {
        std::nth_element(live, live + lossy, live + nlive,
                         [](const Candidate& a, const Candidate& b) { return a.last_request < b.last_request; });
        for (long i = 0; i < lossy; i++) hash_search(buckets, &live[i].entry->key, HASH_REMOVE, nullptr);
        pg_atomic_fetch_add_u64(&shared->evicted_lossy, static_cast<uint64>(lossy));
    }
    pfree(live);
}

void make_room(TimestampTz now) {
    lock_all(LW_EXCLUSIVE);
    evict_locked(now);
    unlock_all();
}

// Returns the entry with its partition lock held in shared mode, creating it if
// needed. *lock receives the lock to release.
BucketEntry* find_or_create(const IdentityKey& key, uint32 hash, LWLock** lock, TimestampTz now) {
    *lock = partition_lock(hash);
    for (int attempt = 0;; attempt++) {
        LWLockAcquire(*lock, LW_SHARED);
        auto* e = static_cast<BucketEntry*>(hash_search_with_hash_value(buckets, &key, hash, HASH_FIND, nullptr));
        if (e != nullptr) return e;
        LWLockRelease(*lock);

        LWLockAcquire(*lock, LW_EXCLUSIVE);
        bool found = false;
        e = static_cast<BucketEntry*>(hash_search_with_hash_value(buckets, &key, hash, HASH_ENTER_NULL, &found));
        if (e != nullptr && !found) {
            SpinLockInit(&e->mutex);
            e->throttled = false;
            e->capacity = 0;
            e->rate = 0;
            e->tat_us = 0;  // long past: a full bucket
            e->last_request = now;
        }
        LWLockRelease(*lock);
        if (e == nullptr) {
            if (attempt >= 3)
                ereport(ERROR, (errcode(ERRCODE_OUT_OF_MEMORY),
                                errmsg("ogc_throttle: no room in the bucket table"),
                                errdetail("Eviction freed no entry after %d attempts.", attempt + 1)));
            make_room(now);
        }
        // Loop: retake the lock in shared mode and find the entry again.
    }
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
    v.tokens = e->rate > 0 ? core::gcra_tokens(e->tat_us, now, {e->capacity, e->rate}) : e->capacity;
    v.last_request = e->last_request;
    v.full_at = std::max<int64>(e->tat_us, now);
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
        shared->nslots = slot_count();
        for (int i = 0; i < shared->nslots; i++) {
            BackendCounters* c = &shared->slots[i];
            pg_atomic_init_u64(&c->spends, 0);
            pg_atomic_init_u64(&c->refusals, 0);
            pg_atomic_init_u64(&c->never_fits, 0);
            pg_atomic_init_u64(&c->cost_micro, 0);
            pg_atomic_init_u64(&c->statements_priced, 0);
            pg_atomic_init_u64(&c->statements_delayed, 0);
            pg_atomic_init_u64(&c->delay_us, 0);
            pg_atomic_init_u64(&c->shadow_refusals, 0);
        }
    }
    HASHCTL info;
    info.keysize = sizeof(IdentityKey);
    info.entrysize = sizeof(BucketEntry);
    info.num_partitions = kPartitions;
    buckets = ShmemInitHash("ogc_throttle buckets", setting_max_identities, setting_max_identities, &info,
                            HASH_ELEM | HASH_STRINGS | HASH_PARTITION | HASH_FIXED_SIZE);
    LWLockRelease(AddinShmemInitLock);

    if (!IsUnderPostmaster) {
        register_save_at_shutdown();
        if (!found) load_saved_buckets();
    }
}

bool shared_memory_ready() { return shared != nullptr && buckets != nullptr; }

void require_shared_memory() {
    if (shared == nullptr || buckets == nullptr)
        ereport(ERROR, (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
                        errmsg("ogc_throttle must be loaded via shared_preload_libraries"),
                        errdetail("The shared bucket table does not exist, so no budget can be checked."),
                        errhint("Add ogc_throttle to shared_preload_libraries in postgresql.conf and restart the "
                                "server.")));
}

core::SpendResult bucket_spend(const IdentityKey& key, double cost, core::Budget b) {
    const TimestampTz now = GetCurrentTimestamp();
    const uint32 hash = get_hash_value(buckets, &key);
    LWLock* lock;
    BucketEntry* e = find_or_create(key, hash, &lock, now);

    SpinLockAcquire(&e->mutex);
    const core::SpendResult r = core::gcra_spend(e->tat_us, now, cost, b);
    e->tat_us = r.new_tat_us;
    e->throttled = r.outcome != core::SpendOutcome::Allowed;
    e->capacity = static_cast<float>(b.capacity);
    e->rate = static_cast<float>(b.rate);
    e->last_request = now;
    SpinLockRelease(&e->mutex);
    LWLockRelease(lock);

    count(r, cost);
    return r;
}

core::ReserveResult bucket_reserve(const IdentityKey& key, double cost, core::Budget b, int64 max_wait_us) {
    const TimestampTz now = GetCurrentTimestamp();
    const uint32 hash = get_hash_value(buckets, &key);
    LWLock* lock;
    BucketEntry* e = find_or_create(key, hash, &lock, now);

    SpinLockAcquire(&e->mutex);
    const core::ReserveResult r = core::gcra_reserve(e->tat_us, now, cost, b, max_wait_us);
    e->tat_us = r.new_tat_us;
    e->throttled = r.outcome != core::SpendOutcome::Allowed;
    e->capacity = static_cast<float>(b.capacity);
    e->rate = static_cast<float>(b.rate);
    e->last_request = now;
    SpinLockRelease(&e->mutex);
    LWLockRelease(lock);

    count({r.outcome, r.new_tat_us, 0, r.retry_after_s, 0}, cost);
    return r;
}

void bucket_refund(const IdentityKey& key, double cost, core::Budget b) {
    const TimestampTz now = GetCurrentTimestamp();
    const uint32 hash = get_hash_value(buckets, &key);
    LWLock* lock = partition_lock(hash);
    LWLockAcquire(lock, LW_SHARED);
    auto* e = static_cast<BucketEntry*>(hash_search_with_hash_value(buckets, &key, hash, HASH_FIND, nullptr));
    if (e != nullptr) {
        SpinLockAcquire(&e->mutex);
        e->tat_us = core::gcra_refund(e->tat_us, now, cost, b);
        SpinLockRelease(&e->mutex);
    }
    LWLockRelease(lock);
    if (BackendCounters* c = my_counters()) {
        const uint64 charged = pg_atomic_read_u64(&c->cost_micro);
        const uint64 back = static_cast<uint64>(cost * kMicros);
        pg_atomic_write_u64(&c->cost_micro, charged > back ? charged - back : 0);
    }
}

void count_hook_event(HookEvent ev, int64 delay_us) {
    BackendCounters* c = my_counters();
    if (c == nullptr) return;
    switch (ev) {
        case HookEvent::Priced: bump(&c->statements_priced, 1); break;
        case HookEvent::ShadowRefusal: bump(&c->shadow_refusals, 1); break;
        case HookEvent::Delayed:
            bump(&c->statements_delayed, 1);
            bump(&c->delay_us, static_cast<uint64>(std::max<int64>(delay_us, 0)));
            break;
    }
}

BucketView bucket_peek(const IdentityKey& key, core::Budget b) {
    const TimestampTz now = GetCurrentTimestamp();
    const uint32 hash = get_hash_value(buckets, &key);
    LWLock* lock = partition_lock(hash);
    LWLockAcquire(lock, LW_SHARED);
    auto* e = static_cast<BucketEntry*>(hash_search_with_hash_value(buckets, &key, hash, HASH_FIND, nullptr));
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
    const uint32 hash = get_hash_value(buckets, &key);
    LWLock* lock = partition_lock(hash);
    LWLockAcquire(lock, LW_EXCLUSIVE);
    bool found = false;
    hash_search_with_hash_value(buckets, &key, hash, HASH_REMOVE, &found);
    LWLockRelease(lock);
    return found;
}

int64 bucket_reset_all() {
    int64 removed = 0;
    lock_all(LW_EXCLUSIVE);
    HASH_SEQ_STATUS scan;
    hash_seq_init(&scan, buckets);
    while (BucketEntry* e = static_cast<BucketEntry*>(hash_seq_search(&scan))) {
        hash_search(buckets, &e->key, HASH_REMOVE, nullptr);
        removed++;
    }
    unlock_all();
    return removed;
}

BucketView* bucket_snapshot(int64* count) {
    const TimestampTz now = GetCurrentTimestamp();
    lock_all(LW_SHARED);
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
    unlock_all();
    *count = n;
    return out;
}

TableStats table_stats() {
    TableStats s{};
    for (int i = 0; i < shared->nslots; i++) {
        BackendCounters* c = &shared->slots[i];
        s.spends += static_cast<int64>(pg_atomic_read_u64(&c->spends));
        s.refusals += static_cast<int64>(pg_atomic_read_u64(&c->refusals));
        s.never_fits += static_cast<int64>(pg_atomic_read_u64(&c->never_fits));
        s.cost_charged += static_cast<double>(pg_atomic_read_u64(&c->cost_micro)) / kMicros;
        s.statements_priced += static_cast<int64>(pg_atomic_read_u64(&c->statements_priced));
        s.statements_delayed += static_cast<int64>(pg_atomic_read_u64(&c->statements_delayed));
        s.delay_seconds += static_cast<double>(pg_atomic_read_u64(&c->delay_us)) / kMicros;
        s.shadow_refusals += static_cast<int64>(pg_atomic_read_u64(&c->shadow_refusals));
    }
    s.identities = hash_get_num_entries(buckets);
    s.max_identities = setting_max_identities;
    s.evicted_full = static_cast<int64>(pg_atomic_read_u64(&shared->evicted_full));
    s.evicted_lossy = static_cast<int64>(pg_atomic_read_u64(&shared->evicted_lossy));
    s.stats_reset = static_cast<TimestampTz>(pg_atomic_read_u64(&shared->stats_reset));
    return s;
}

void table_stats_reset() {
    // Counters are single-writer without locks; a backend bumping its counter at
    // this very instant may write back its pre-reset value. Acceptable for stats.
    for (int i = 0; i < shared->nslots; i++) {
        BackendCounters* c = &shared->slots[i];
        pg_atomic_write_u64(&c->spends, 0);
        pg_atomic_write_u64(&c->refusals, 0);
        pg_atomic_write_u64(&c->never_fits, 0);
        pg_atomic_write_u64(&c->cost_micro, 0);
        pg_atomic_write_u64(&c->statements_priced, 0);
        pg_atomic_write_u64(&c->statements_delayed, 0);
        pg_atomic_write_u64(&c->delay_us, 0);
        pg_atomic_write_u64(&c->shadow_refusals, 0);
    }
    pg_atomic_write_u64(&shared->evicted_full, 0);
    pg_atomic_write_u64(&shared->evicted_lossy, 0);
    pg_atomic_write_u64(&shared->stats_reset, static_cast<uint64>(GetCurrentTimestamp()));
}

}  // namespace ot::ext
