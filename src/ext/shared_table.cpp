#include "ext/shared_table.hpp"

#include <algorithm>

extern "C" {
#include "access/xact.h"
}

namespace ot::ext {

LWLock* partition_lock(const SharedTable& t, uint32 hash) { return &t.locks[hash % kPartitions].lock; }

void lock_all(const SharedTable& t, LWLockMode mode) {
    for (int i = 0; i < kPartitions; i++) LWLockAcquire(&t.locks[i].lock, mode);
}

void unlock_all(const SharedTable& t) {
    for (int i = kPartitions - 1; i >= 0; i--) LWLockRelease(&t.locks[i].lock);
}

void* find_shared(const SharedTable& t, const IdentityKey& key, uint32 hash, LWLock** lock) {
    *lock = partition_lock(t, hash);
    LWLockAcquire(*lock, LW_SHARED);
    return hash_search_with_hash_value(t.htab, &key, hash, HASH_FIND, nullptr);
}

void* find_or_create(SharedTable& t, const IdentityKey& key, uint32 hash, LWLock** lock, TimestampTz now,
                     bool may_fail) {
    for (int attempt = 0;; attempt++) {
        if (void* e = find_shared(t, key, hash, lock)) return e;
        LWLockRelease(*lock);

        LWLockAcquire(*lock, LW_EXCLUSIVE);
        bool found = false;
        void* e = hash_search_with_hash_value(t.htab, &key, hash, HASH_ENTER_NULL, &found);
        if (e != nullptr && !found) t.init(e, now);
        LWLockRelease(*lock);
        if (e == nullptr) {
            if (attempt >= 3 && may_fail && !IsTransactionState()) {
                *lock = nullptr;
                return nullptr;
            }
            if (attempt >= 3)
                ereport(ERROR, (errcode(ERRCODE_OUT_OF_MEMORY), errmsg("ogc_throttle: no room in a shared table"),
                                errdetail("Eviction freed no entry after %d attempts.", attempt + 1)));
            lock_all(t, LW_EXCLUSIVE);
            t.evict(&t, now);
            unlock_all(t);
        }
        // Loop: retake the lock in shared mode and find the entry again.
    }
}

namespace {
struct Candidate {
    TimestampTz last;
    void* entry;
};
}  // namespace

long evict_least_recent(SharedTable& t, long want, TimestampTz (*last_of)(const void*)) {
    const long entries = hash_get_num_entries(t.htab);
    if (want <= 0 || entries == 0) return 0;
    auto* all = static_cast<Candidate*>(palloc(sizeof(Candidate) * entries));
    long n = 0;
    HASH_SEQ_STATUS scan;
    hash_seq_init(&scan, t.htab);
    while (void* e = hash_seq_search(&scan)) {
        if (n == entries) {
            hash_seq_term(&scan);
            break;
        }
        all[n++] = {last_of(e), e};
    }
    const long victims = std::min(want, n);
    std::nth_element(all, all + victims, all + n, [](const Candidate& a, const Candidate& b) { return a.last < b.last; });
    for (long i = 0; i < victims; i++) hash_search(t.htab, all[i].entry, HASH_REMOVE, nullptr);
    pfree(all);
    return victims;
}

}  // namespace ot::ext
