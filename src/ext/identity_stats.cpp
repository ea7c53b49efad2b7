#include "ext/identity_stats.hpp"

#include "ext/settings.hpp"
#include "ext/shared_table.hpp"

extern "C" {
#include "storage/shmem.h"
#include "storage/spin.h"
}

namespace ot::ext {
namespace {

constexpr const char* kTranche = "ogc_throttle identity stats";

struct StatsEntry {
    IdentityKey key;  // first: dynahash compares keys here
    slock_t mutex;
    int64 statements;
    int64 refused;
    int64 delayed;
    int64 delay_us;
    double cost;
    double measured_ms;
    TimestampTz last;
};

SharedTable table = {nullptr, nullptr, 0, nullptr, nullptr};

bool enabled() { return table.htab != nullptr; }

void init_entry(void* entry, TimestampTz now) {
    auto* e = static_cast<StatsEntry*>(entry);
    SpinLockInit(&e->mutex);
    e->statements = e->refused = e->delayed = e->delay_us = 0;
    e->cost = 0;
    e->measured_ms = 0;
    e->last = now;
}

TimestampTz last_of(const void* entry) { return static_cast<const StatsEntry*>(entry)->last; }

void evict(SharedTable* t, TimestampTz) {
    const long want = eviction_batch(*t);
    if (t->max_entries - hash_get_num_entries(t->htab) >= want) return;
    evict_least_recent(*t, want, last_of);
}

}  // namespace

size_t identity_stats_shmem_size() {
    return setting_max_identity_stats > 0 ? hash_estimate_size(setting_max_identity_stats, sizeof(StatsEntry)) : 0;
}

void identity_stats_request_shmem() {
    if (setting_max_identity_stats <= 0) return;
    RequestAddinShmemSpace(identity_stats_shmem_size());
    RequestNamedLWLockTranche(kTranche, kPartitions);
}

void identity_stats_attach() {
    if (setting_max_identity_stats <= 0) return;
    HASHCTL info;
    info.keysize = sizeof(IdentityKey);
    info.entrysize = sizeof(StatsEntry);
    info.num_partitions = kPartitions;
    LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
    HTAB* h = ShmemInitHash("ogc_throttle identity stats", setting_max_identity_stats, setting_max_identity_stats,
                            &info, HASH_ELEM | HASH_STRINGS | HASH_PARTITION | HASH_FIXED_SIZE);
    LWLockRelease(AddinShmemInitLock);
    table = {h, GetNamedLWLockTranche(kTranche), setting_max_identity_stats, init_entry, evict};
}

void record_statement(const IdentityKey& id, const StatementRecord& r) {
    if (!enabled()) return;
    const TimestampTz now = GetCurrentTimestamp();
    LWLock* lock;
    auto* e = static_cast<StatsEntry*>(find_or_create(table, id, get_hash_value(table.htab, &id), &lock, now));
    SpinLockAcquire(&e->mutex);
    e->statements++;
    e->refused += r.refused ? 1 : 0;
    e->delayed += r.delay_us > 0 ? 1 : 0;
    e->delay_us += r.delay_us > 0 ? r.delay_us : 0;
    e->cost += r.cost;
    e->last = now;
    SpinLockRelease(&e->mutex);
    LWLockRelease(lock);
}

void record_batch(const IdentityKey& id, int64 statements, double charge_delta, double measured_ms) {
    if (!enabled() || (statements == 0 && charge_delta == 0 && measured_ms == 0)) return;
    const TimestampTz now = GetCurrentTimestamp();
    LWLock* lock;
    // (settlements flush after commits too: there, a batch finding no room is lost, not raised)
    auto* e = static_cast<StatsEntry*>(find_or_create(table, id, get_hash_value(table.htab, &id), &lock, now, true));
    if (e == nullptr) return;
    SpinLockAcquire(&e->mutex);
    e->statements += statements;
    e->cost += charge_delta;
    e->measured_ms += measured_ms;
    e->last = now;
    SpinLockRelease(&e->mutex);
    LWLockRelease(lock);
}

IdentityStatsRow* identity_stats_snapshot(int64* count) {
    *count = 0;
    if (!enabled()) return nullptr;
    lock_all(table, LW_SHARED);
    const long cap = hash_get_num_entries(table.htab);
    auto* out = static_cast<IdentityStatsRow*>(palloc(sizeof(IdentityStatsRow) * (cap > 0 ? cap : 1)));
    HASH_SEQ_STATUS scan;
    hash_seq_init(&scan, table.htab);
    while (auto* e = static_cast<StatsEntry*>(hash_seq_search(&scan))) {
        if (*count == cap) {
            hash_seq_term(&scan);
            break;
        }
        SpinLockAcquire(&e->mutex);
        out[(*count)++] = {e->key, e->statements, e->refused, e->delayed, e->delay_us / 1e6, e->cost, e->measured_ms, e->last};
        SpinLockRelease(&e->mutex);
    }
    unlock_all(table);
    return out;
}

void identity_stats_reset() {
    if (!enabled()) return;
    lock_all(table, LW_EXCLUSIVE);
    HASH_SEQ_STATUS scan;
    hash_seq_init(&scan, table.htab);
    while (auto* e = static_cast<StatsEntry*>(hash_seq_search(&scan))) hash_search(table.htab, &e->key, HASH_REMOVE, nullptr);
    unlock_all(table);
}

}  // namespace ot::ext
