// The density grids' shared store: a header of slots and a DSA area created in
// place behind it, in the main segment (pg_shmem_allocations: "ogc_throttle
// density grids"). The area's size limit is its own size, so it never maps a
// DSM segment; DSA is here for its allocator, which coalesces the free pages of
// evicted grids (≤ 5 MiB each, of any size) where a hand-made arena would
// fragment. The slots (at most kSlots grids) sit in the fixed header, not in a
// dshash: a lookup happens once per backend, grid and invalidation, under one
// LWLock, while the per-statement path pins by compare-and-swap.
#include "ext/density_shared.hpp"

#include <cstring>
#include <initializer_list>

extern "C" {
#include "access/xact.h"
#include "miscadmin.h"
#include "port/atomics.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "utils/dsa.h"
#include "utils/memutils.h"
}

namespace ot::ext {

int setting_density_shared_kb = 32 * 1024;

namespace {

constexpr const char* kTranche = "ogc_throttle density";
constexpr int kSlots = 512;
// DSA keeps its metadata and, for the spans of large allocations, a 64 kB
// superblock inside the area: what a grid cannot use.
constexpr size_t kOverheadBytes = size_t{72} << 10;
// The smallest store.
constexpr size_t kMinBytes = size_t{128} << 10;

// state = stamp << 32 | kRetired | pins. Pins change by atomics alone; the stamp
// and kRetired only under the exclusive lock. A pin (compare-and-swap) succeeds
// only while the slot holds the grid the stamp names and is not retired, and a
// retired slot's memory is freed once no pin is left: a pinned grid never moves.
constexpr uint64 kPinMask = (uint64{1} << 24) - 1;
constexpr uint64 kRetired = uint64{1} << 24;

struct Slot {
    pg_atomic_uint64 state;
    pg_atomic_uint64 last_used;  // start of the last transaction that pinned it
    // Under the lock:
    bool used;
    DensityKey key;
    DensityVersion version;
    dsa_pointer blob;
    Size len;
};

struct Store {
    LWLock* lock;
    Size area_bytes;
    uint32 next_stamp;
    int high;  // slots [0, high) have been used
    pg_atomic_uint64 loads, shares, evictions, replacements, refused;
    Slot slots[kSlots];
};

Store* store = nullptr;
dsa_area* area = nullptr;  // this backend's attachment, made on first use

size_t area_bytes() {
    if (setting_density_shared_kb <= 0) return 0;
    const size_t b = static_cast<size_t>(setting_density_shared_kb) * 1024;
    return b < kMinBytes ? kMinBytes : b;
}
size_t header_bytes() { return MAXALIGN(sizeof(Store)); }
size_t store_bytes() { return add_size(header_bytes(), area_bytes()); }
void* area_place() { return reinterpret_cast<char*>(store) + header_bytes(); }

bool same(const DensityVersion& a, const DensityVersion& b) { return a.xmin == b.xmin && a.built == b.built; }
bool same(const DensityKey& a, const DensityKey& b) {
    return a.db == b.db && a.relid == b.relid && a.attnum == b.attnum;
}

// The attachment is palloc'd in TopMemoryContext, outside every lock (palloc may ereport).
bool attached() {
    if (store == nullptr) return false;
    if (area == nullptr) {
        MemoryContext old = MemoryContextSwitchTo(TopMemoryContext);
        area = dsa_attach_in_place(area_place(), nullptr);
        MemoryContextSwitchTo(old);
    }
    return true;
}

uint32 stamp_of(uint64 state) { return static_cast<uint32>(state >> 32); }

bool pin(Slot& s, uint32 stamp) {
    uint64 cur = pg_atomic_read_u64(&s.state);
    for (;;) {
        if (stamp_of(cur) != stamp || (cur & kRetired) != 0) return false;
        if (pg_atomic_compare_exchange_u64(&s.state, &cur, cur + 1)) break;
    }
    // Every transaction start writes it once: least recently used is the smallest.
    pg_atomic_write_u64(&s.last_used, static_cast<uint64>(GetCurrentTransactionStartTimestamp()));
    return true;
}

SharedGrid grid_of(int i) {
    Slot& s = store->slots[i];
    return {i, stamp_of(pg_atomic_read_u64(&s.state)),
            static_cast<const unsigned char*>(dsa_get_address(area, s.blob)), s.len};
}

// ---- under the exclusive lock ---------------------------------------------

void free_slot(Slot& s) {
    dsa_free(area, s.blob);
    s.used = false;
    s.blob = InvalidDsaPointer;
    s.len = 0;
}

// Retired, and the last pin gone: its memory goes back to the area.
void sweep() {
    for (int i = 0; i < store->high; i++) {
        Slot& s = store->slots[i];
        const uint64 st = pg_atomic_read_u64(&s.state);
        if (s.used && (st & kRetired) != 0 && (st & kPinMask) == 0) free_slot(s);
    }
}

void retire(Slot& s) {
    const uint64 before = pg_atomic_fetch_or_u64(&s.state, kRetired);
    if ((before & kPinMask) == 0) free_slot(s);  // no pin can be taken once retired
}

int live_slot(const DensityKey& key) {
    for (int i = 0; i < store->high; i++) {
        Slot& s = store->slots[i];
        if (s.used && (pg_atomic_read_u64(&s.state) & kRetired) == 0 && same(s.key, key)) return i;
    }
    return -1;
}

// Evicts the least recently used grid no transaction is reading; false if every one is read.
bool evict_one() {
    int victim = -1;
    uint64 oldest = 0;
    for (int i = 0; i < store->high; i++) {
        Slot& s = store->slots[i];
        const uint64 st = pg_atomic_read_u64(&s.state);
        if (!s.used || (st & (kRetired | kPinMask)) != 0) continue;
        const uint64 t = pg_atomic_read_u64(&s.last_used);
        if (victim < 0 || t < oldest) victim = i, oldest = t;
    }
    if (victim < 0) return false;
    retire(store->slots[victim]);
    pg_atomic_fetch_add_u64(&store->evictions, 1);
    return true;
}

int free_slot_index() {
    for (;;) {
        for (int i = 0; i < kSlots; i++)
            if (!store->slots[i].used) return i;
        if (!evict_one()) return -1;
    }
}

dsa_pointer allocate(size_t len) {
    for (;;) {
        const dsa_pointer p = dsa_allocate_extended(area, len, DSA_ALLOC_NO_OOM | DSA_ALLOC_HUGE);
        if (DsaPointerIsValid(p)) return p;
        if (!evict_one()) return InvalidDsaPointer;
    }
}

}  // namespace

void density_shared_request_shmem() {
    if (setting_density_shared_kb <= 0) return;
    RequestAddinShmemSpace(store_bytes());
    RequestNamedLWLockTranche(kTranche, 1);
}

void density_shared_attach() {
    if (setting_density_shared_kb <= 0) return;
    LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
    bool found = false;
    store = static_cast<Store*>(ShmemInitStruct("ogc_throttle density grids", store_bytes(), &found));
    if (!found) {
        std::memset(static_cast<void*>(store), 0, sizeof(Store));
        store->lock = &GetNamedLWLockTranche(kTranche)->lock;
        store->area_bytes = area_bytes();
        for (Slot& s : store->slots) {
            pg_atomic_init_u64(&s.state, 0);
            pg_atomic_init_u64(&s.last_used, 0);
            s.blob = InvalidDsaPointer;
        }
        for (pg_atomic_uint64* c : {&store->loads, &store->shares, &store->evictions, &store->replacements,
                                    &store->refused})
            pg_atomic_init_u64(c, 0);
        // As pgstat does with its in-place area: pinned for the server's life,
        // limited to the space requested (no DSM segment: the postmaster cannot map one).
        dsa_area* a = dsa_create_in_place(area_place(), store->area_bytes, store->lock->tranche, nullptr);
        dsa_set_size_limit(a, store->area_bytes);
        dsa_pin(a);
        dsa_detach(a);
    }
    LWLockRelease(AddinShmemInitLock);
}

bool density_shared_enabled() { return store != nullptr; }

SharedFind density_shared_find(const DensityKey& key, const DensityVersion& v, SharedGrid* out,
                               DensityVersion* other) {
    if (!attached()) return SharedFind::Missing;
    SharedFind r = SharedFind::Missing;
    LWLockAcquire(store->lock, LW_SHARED);
    const int i = live_slot(key);
    if (i >= 0) {
        Slot& s = store->slots[i];
        // Under the shared lock nothing retires or reuses the slot: the pin holds.
        if (!same(s.version, v)) {
            *other = s.version;
            r = SharedFind::Other;
        } else if (pin(s, stamp_of(pg_atomic_read_u64(&s.state)))) {
            *out = grid_of(i);
            r = SharedFind::Same;
        }
    }
    LWLockRelease(store->lock);
    if (r == SharedFind::Same) pg_atomic_fetch_add_u64(&store->shares, 1);
    return r;
}

bool density_shared_publish(const DensityKey& key, const DensityVersion& v, const unsigned char* data, size_t len,
                            const DensityVersion* replace, SharedGrid* out) {
    if (!attached()) return false;
    // What cannot fit even in an empty store does not evict anything.
    if (len + kOverheadBytes > store->area_bytes) {
        pg_atomic_fetch_add_u64(&store->refused, 1);
        return false;
    }
    bool ok = false;
    LWLockAcquire(store->lock, LW_EXCLUSIVE);
    sweep();
    const int existing = live_slot(key);
    if (existing >= 0) {
        Slot& s = store->slots[existing];
        if (same(s.version, v)) {
            ok = pin(s, stamp_of(pg_atomic_read_u64(&s.state)));
            if (ok) *out = grid_of(existing);
            LWLockRelease(store->lock);
            if (ok) pg_atomic_fetch_add_u64(&store->shares, 1);
            return ok;
        }
        if (replace == nullptr || !same(s.version, *replace)) {
            LWLockRelease(store->lock);  // another backend replaced it meanwhile
            return false;
        }
        retire(s);
        pg_atomic_fetch_add_u64(&store->replacements, 1);
    }
    const int i = free_slot_index();
    const dsa_pointer p = i >= 0 ? allocate(len) : InvalidDsaPointer;
    if (DsaPointerIsValid(p)) {
        Slot& s = store->slots[i];
        std::memcpy(dsa_get_address(area, p), data, len);
        s.used = true;
        s.key = key;
        s.version = v;
        s.blob = p;
        s.len = len;
        if (i >= store->high) store->high = i + 1;
        if (++store->next_stamp == 0) store->next_stamp = 1;
        pg_atomic_write_u64(&s.last_used, static_cast<uint64>(GetCurrentTransactionStartTimestamp()));
        pg_write_barrier();  // the bytes before the state that lets a pin reach them
        pg_atomic_write_u64(&s.state, (static_cast<uint64>(store->next_stamp) << 32) | 1);
        *out = grid_of(i);
        ok = true;
    }
    LWLockRelease(store->lock);
    pg_atomic_fetch_add_u64(ok ? &store->loads : &store->refused, 1);
    return ok;
}

bool density_shared_repin(const SharedGrid& g) { return store != nullptr && pin(store->slots[g.slot], g.stamp); }

void density_shared_unpin(const SharedGrid& g) { pg_atomic_fetch_sub_u64(&store->slots[g.slot].state, 1); }

// ---- views ------------------------------------------------------------------

namespace {

struct Row {
    DensityKey key;
    Size len;
    int pins;
    bool retired;
    TimestampTz last_used;
};

}  // namespace

namespace {

// Copies the slots under the shared lock into rows (palloc'd before the lock).
int density_shared_rows(Row** rows) {
    *rows = static_cast<Row*>(palloc(sizeof(Row) * kSlots));
    if (!attached()) return 0;
    int n = 0;
    LWLockAcquire(store->lock, LW_SHARED);
    for (int i = 0; i < store->high; i++) {
        const Slot& s = store->slots[i];
        if (!s.used) continue;
        const uint64 st = pg_atomic_read_u64(const_cast<pg_atomic_uint64*>(&s.state));
        (*rows)[n++] = {s.key, s.len, static_cast<int>(st & kPinMask), (st & kRetired) != 0,
                        static_cast<TimestampTz>(pg_atomic_read_u64(const_cast<pg_atomic_uint64*>(&s.last_used)))};
    }
    LWLockRelease(store->lock);
    return n;
}

}  // namespace
}  // namespace ot::ext

#include "ext/boundary.hpp"

extern "C" {
#include "funcapi.h"
#include "utils/tuplestore.h"
}

using namespace ot::ext;

// throttle_density_shared(): one row per grid in the store (every database's).
OT_SQL_FUNCTION(throttle_density_shared_all) {
    InitMaterializedSRF(fcinfo, 0);
    auto* rsinfo = reinterpret_cast<ReturnSetInfo*>(fcinfo->resultinfo);
    Row* rows;
    const int n = density_shared_rows(&rows);
    for (int i = 0; i < n; i++) {
        Datum values[7] = {ObjectIdGetDatum(rows[i].key.db), ObjectIdGetDatum(rows[i].key.relid),
                           Int16GetDatum(rows[i].key.attnum), Int64GetDatum(static_cast<int64>(rows[i].len)),
                           Int32GetDatum(rows[i].pins), BoolGetDatum(rows[i].retired),
                           TimestampTzGetDatum(rows[i].last_used)};
        bool nulls[7] = {false, false, false, false, false, false, rows[i].last_used == 0};
        tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
    }
    return static_cast<Datum>(0);
}

// throttle_density_shared_stats(): the store's size and counters; NULLs without a store.
OT_SQL_FUNCTION(throttle_density_shared_stats) {
    TupleDesc desc;
    if (get_call_result_type(fcinfo, nullptr, &desc) != TYPEFUNC_COMPOSITE)
        ereport(ERROR, (errmsg("ogc_throttle: throttle_density_shared_stats must return a row")));
    Datum values[8] = {};
    bool nulls[8] = {true, true, true, true, true, true, true, true};
    if (density_shared_enabled()) {
        Row* rows;
        const int n = density_shared_rows(&rows);
        int64 used = 0;
        for (int i = 0; i < n; i++) used += static_cast<int64>(rows[i].len);
        const int64 counters[5] = {
            static_cast<int64>(pg_atomic_read_u64(&store->loads)),
            static_cast<int64>(pg_atomic_read_u64(&store->shares)),
            static_cast<int64>(pg_atomic_read_u64(&store->evictions)),
            static_cast<int64>(pg_atomic_read_u64(&store->replacements)),
            static_cast<int64>(pg_atomic_read_u64(&store->refused))};
        values[0] = Int64GetDatum(static_cast<int64>(store->area_bytes));
        values[1] = Int64GetDatum(used);
        values[2] = Int32GetDatum(n);
        for (int i = 0; i < 5; i++) values[3 + i] = Int64GetDatum(counters[i]);
        for (bool& b : nulls) b = false;
    }
    PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(desc, values, nulls)));
}
