// A bounded, partitioned hash table in shared memory keyed by identity: the
// shape both the bucket table and the per-identity statistics take.
// Hot path: one shared partition lock plus the entry's own spinlock.
#pragma once
#include "ext/bucket_table.hpp"

extern "C" {
#include "storage/lwlock.h"
#include "utils/hsearch.h"
}

namespace ot::ext {

inline constexpr int kPartitions = 16;  // power of two

struct SharedTable {
    HTAB* htab;
    LWLockPadded* locks;  // kPartitions of them
    long max_entries;
    // Initialises a new entry (its key is already set).
    void (*init)(void* entry, TimestampTz now);
    // Makes room; runs with every partition lock held exclusively.
    void (*evict)(SharedTable* table, TimestampTz now);
};

LWLock* partition_lock(const SharedTable& t, uint32 hash);
void lock_all(const SharedTable& t, LWLockMode mode);
void unlock_all(const SharedTable& t);

// The entry for key, created if needed, with its partition lock held in
// shared mode (*lock receives it). When eviction keeps losing the room it made
// to other backends (three rounds), an ERROR; but a caller that can do without
// the entry (may_fail) gets nullptr, and no lock held, outside a running
// transaction: in a commit's or an abort's callbacks, or the commit's memory
// cleanup, an ERROR would abort a committed transaction (a PANIC once it has
// an xid) or an abort in progress.
void* find_or_create(SharedTable& t, const IdentityKey& key, uint32 hash, LWLock** lock, TimestampTz now,
                     bool may_fail = false);
// The entry for key or nullptr, with its partition lock held in shared mode.
void* find_shared(const SharedTable& t, const IdentityKey& key, uint32 hash, LWLock** lock);

// Removes the `want` entries with the oldest last_of(entry), at most. Call
// with every partition lock held exclusively. Returns how many it removed.
long evict_least_recent(SharedTable& t, long want, TimestampTz (*last_of)(const void* entry));

// How many entries an eviction round aims to free: 1% of the table.
inline long eviction_batch(const SharedTable& t) { return t.max_entries / 100 > 1 ? t.max_entries / 100 : 1; }

}  // namespace ot::ext
