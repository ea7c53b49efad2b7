// Reading density grids for the pricing walk. Each backend remembers, per
// column, where its grid is: in the shared store (density_shared.cpp, pinned
// for the current transaction), in a copy of its own (the store is off, full,
// too small, or the grid is this transaction's own uncommitted build), or
// nowhere. What it remembers is dropped by a relcache invalidation of the table
// the grid describes (throttle_density_build sends one at commit) or of
// throttle_density itself, and a shared copy is recognised by the version of the
// row it was read from.
#include "ext/density_grid.hpp"

#include <algorithm>
#include <cstring>

#include "core/density_grid.hpp"
#include "core/density_grid_format.hpp"
#include "ext/catalog.hpp"
#include "ext/density_shared.hpp"

extern "C" {
#include "access/heapam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "commands/extension.h"
#include "miscadmin.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
}

namespace ot::ext {
namespace {

// What one backend keeps of its own copies (CacheMemoryContext): a few full-size grids.
constexpr size_t kMaxCacheBytes = size_t{32} << 20;

enum class Where : unsigned char { None, Local, Shared };

// Plain data, nothing with a destructor.
struct Entry {
    Oid relid;
    AttrNumber attnum;
    Where where;
    bool pinned;  // Shared: pinned until this transaction ends
    // Forgotten when the transaction ends: a copy of this transaction's own build, or one read
    // while an invalidation of its table arrived.
    bool transient;
    bytea* blob;  // Local: in CacheMemoryContext
    SharedGrid shared;
    // The grid's header read once (grid::open, in TopMemoryContext: a View is 1.2 kB, kept out of
    // this array so that the cache stays a few lines): its bytes stay where they are, unchanged, while
    // the entry lasts (a local copy until it is forgotten, a shared one re-pinned at the same version).
    enum : unsigned char { kUnread, kOpen, kNotAGrid } view_state;
    core::grid::View* view;
};
struct Cache {
    bool callbacks_registered;
    Oid table;  // throttle_density, InvalidOid until looked up
    bool table_known;
    int n;
    int pinned;  // entries pinned in this transaction
    int transient;
    Entry entries[64];
    // The entry being read (resolve): outside the array, where neither an invalidation nor an
    // error in the middle of the read can lose its pin.
    bool reading;
    Entry pending;
};
Cache cache;
// Asked outside a transaction (nothing can be pinned or read): no grid, not remembered.
const Entry kNone = {InvalidOid, 0, Where::None, false, false, nullptr, {}};

// The last box asked of a grid: a statement's call walk and its scan walk ask for the same box.
struct LastBox {
    bool valid;
    Oid relid;
    AttrNumber attnum;
    double xmin, ymin, xmax, ymax;
    double rows, pages;
};
LastBox last;

void forget(int i) {
    last.valid = false;
    Entry& e = cache.entries[i];
    if (e.blob != nullptr) pfree(e.blob);
    if (e.view != nullptr) pfree(e.view);
    if (e.pinned) {
        density_shared_unpin(e.shared);
        cache.pinned--;
    }
    if (e.transient) cache.transient--;
    e = cache.entries[--cache.n];
}

void on_relcache(Datum, Oid relid) {
    last.valid = false;
    if (cache.reading && (relid == InvalidOid || relid == cache.table || relid == cache.pending.relid))
        cache.pending.transient = true;
    if (relid == InvalidOid || relid == cache.table) {
        while (cache.n > 0) forget(cache.n - 1);
        cache.table_known = false;
        return;
    }
    for (int i = cache.n - 1; i >= 0; i--)
        if (cache.entries[i].relid == relid) forget(i);
}

// A read that an error interrupted: its pin (if it got one) and its copy go.
void release_pending() {
    if (cache.pending.pinned) density_shared_unpin(cache.pending.shared);
    if (cache.pending.blob != nullptr) pfree(cache.pending.blob);
    cache.pending = {};
    cache.reading = false;
}

// Pins last for one transaction, so that an idle backend holds no grid in the store.
void on_xact(XactEvent event, void*) {
    if (event == XACT_EVENT_PRE_COMMIT || event == XACT_EVENT_PARALLEL_PRE_COMMIT || event == XACT_EVENT_PRE_PREPARE)
        return;
    if (cache.pinned > 0)
        for (int i = 0; i < cache.n; i++)
            if (cache.entries[i].pinned) {
                density_shared_unpin(cache.entries[i].shared);
                cache.entries[i].pinned = false;
            }
    cache.pinned = 0;
    // A build of this transaction is committed (and shared next time) or gone.
    for (int i = cache.n - 1; i >= 0 && cache.transient > 0; i--)
        if (cache.entries[i].transient) forget(i);
    if (cache.reading) release_pending();
}

Oid density_table() {
    if (!cache.callbacks_registered) {
        CacheRegisterRelcacheCallback(on_relcache, 0);
        RegisterXactCallback(on_xact, nullptr);
        cache.callbacks_registered = true;
    }
    if (!cache.table_known) {
        cache.table = InvalidOid;
        const Oid ext = get_extension_oid("ogc_throttle", true);
        if (OidIsValid(ext)) cache.table = get_relname_relid("throttle_density", extension_schema(ext));
        cache.table_known = true;
    }
    return cache.table;
}

bytea* local_copy(const bytea* v) {
    const Size len = VARSIZE_ANY_EXHDR(v);
    auto* out = static_cast<bytea*>(MemoryContextAllocHuge(CacheMemoryContext, len + VARHDRSZ));
    SET_VARSIZE(out, len + VARHDRSZ);
    memcpy(VARDATA(out), VARDATA_ANY(v), len);
    return out;
}

// A grid of an older format rewritten as format 5 (palloc'd), or null when it
// needs no rewrite: rows built before the format changed are read as they
// were, without a rebuild.
bytea* upgraded_copy(const bytea* v) {
    const auto* data = reinterpret_cast<const unsigned char*>(VARDATA_ANY(v));
    const size_t len = VARSIZE_ANY_EXHDR(v);
    const size_t n = core::density_grid_upgraded_bytes(data, len);
    if (n == 0) return nullptr;
    auto* out = static_cast<bytea*>(MemoryContextAllocHuge(CurrentMemoryContext, n + VARHDRSZ));
    SET_VARSIZE(out, n + VARHDRSZ);
    core::upgrade_density_grid(data, len, reinterpret_cast<unsigned char*>(VARDATA(out)), n);
    return out;
}

// Where the grid of the row tup is: the store's copy of the same row version
// (read nothing more), else the row's grid read once and put in the store, else
// a copy of this backend's own.
void place(Entry* e, HeapTuple tup, TupleDesc desc) {
    bool null_grid, null_built;
    const Datum g = heap_getattr(tup, 3, desc, &null_grid);
    const Datum built = heap_getattr(tup, 6, desc, &null_built);
    if (null_grid) return;
    const DensityKey key = {MyDatabaseId, e->relid, e->attnum};
    const DensityVersion version = {HeapTupleHeaderGetRawXmin(tup->t_data), null_built ? 0 : DatumGetTimestampTz(built)};
    // A build this transaction has not committed yet is no one else's to read.
    const bool own = TransactionIdIsCurrentTransactionId(HeapTupleHeaderGetXmin(tup->t_data));
    if (own) e->transient = true;
    DensityVersion other = {};
    SharedFind found = SharedFind::Missing;
    if (density_shared_enabled() && !own) {
        found = density_shared_find(key, version, &e->shared, &other);
        if (found == SharedFind::Same) {
            e->where = Where::Shared;
            e->pinned = true;
            return;
        }
    }
    bytea* v = DatumGetByteaPP(g);
    if (bytea* u = upgraded_copy(v)) {
        if (PointerGetDatum(v) != g) pfree(v);
        v = u;  // freed below like a detoasted copy
    }
    if (density_shared_enabled() && !own) {
        // The store's copy is older than this row when its row is in this snapshot's past (and so was
        // replaced); a copy from a transaction this snapshot does not see yet stays.
        const bool older = found == SharedFind::Other && !XidInMVCCSnapshot(other.xmin, GetActiveSnapshot());
        if ((found == SharedFind::Missing || older) &&
            density_shared_publish(key, version, reinterpret_cast<const unsigned char*>(VARDATA_ANY(v)),
                                   VARSIZE_ANY_EXHDR(v), older ? &other : nullptr, &e->shared)) {
            e->where = Where::Shared;
            e->pinned = true;
            if (PointerGetDatum(v) != g) pfree(v);
            return;
        }
    }
    e->blob = local_copy(v);
    e->where = Where::Local;
    if (PointerGetDatum(v) != g) pfree(v);
}

// Reads the column's row of throttle_density (the grid itself only when no shared copy of that row
// exists). *e is cache.pending, where the end of the transaction finds a pin taken before an error.
void resolve(Entry* e) {
    Relation rel = table_open(cache.table, AccessShareLock);
    TableScanDesc scan = table_beginscan(rel, GetActiveSnapshot(), 0, nullptr);
    TupleDesc desc = RelationGetDescr(rel);
    HeapTuple tup;
    while ((tup = heap_getnext(scan, ForwardScanDirection)) != nullptr) {
        bool n1, n2;
        const Oid r = DatumGetObjectId(heap_getattr(tup, 1, desc, &n1));
        const int16 a = DatumGetInt16(heap_getattr(tup, 2, desc, &n2));
        if (n1 || n2 || r != e->relid || a != e->attnum) continue;
        place(e, tup, desc);
        break;
    }
    table_endscan(scan);
    table_close(rel, AccessShareLock);
}

const Entry* lookup(Oid relid, AttrNumber attnum) {
    const Oid table = density_table();
    for (int i = 0; i < cache.n; i++) {
        Entry& e = cache.entries[i];
        if (e.relid != relid || e.attnum != attnum) continue;
        if (e.where != Where::Shared || e.pinned) return &e;
        // Remembered from an earlier transaction: still there, and the same version?
        if (!IsTransactionState()) return &kNone;
        if (density_shared_repin(e.shared)) {
            e.pinned = true;
            cache.pinned++;
            return &e;
        }
        forget(i);  // evicted or replaced since
        break;
    }
    // No extension: remembered as no grid until an invalidation. No transaction: nothing can be read.
    if (OidIsValid(table) && (!ActiveSnapshotSet() || !IsTransactionState())) return &kNone;
    // At most 64 grids and kMaxCacheBytes of copies of its own in a backend, one more (≤ 5 MiB)
    // included: the oldest go first (forget moves the last entry into the freed slot, so "oldest" is
    // approximate; a grid forgotten is read again).
    while (cache.n > 0) {
        size_t held = 0;
        for (int i = 0; i < cache.n; i++)
            if (cache.entries[i].blob != nullptr) held += VARSIZE(cache.entries[i].blob);
        if (held + (size_t{5} << 20) <= kMaxCacheBytes && cache.n < static_cast<int>(lengthof(cache.entries))) break;
        forget(0);
    }
    // Still reading: an error interrupted the last read and a subtransaction's abort caught it.
    if (cache.reading) release_pending();
    cache.pending = {relid, attnum, Where::None, false, false, nullptr, {}};
    cache.reading = true;
    if (OidIsValid(table)) resolve(&cache.pending);
    Entry* e = &cache.entries[cache.n++];
    *e = cache.pending;
    cache.reading = false;
    if (e->pinned) cache.pinned++;
    if (e->transient) cache.transient++;
    return e;
}

// The column's grid opened, or null when it has none (or what it has is no grid).
const core::grid::View* grid_view(Oid relid, AttrNumber attnum) {
    const Entry* found = lookup(relid, attnum);
    if (found->where == Where::None) return nullptr;
    // Not kNone (whose where is None): an entry of the cache, which is not const.
    Entry* e = const_cast<Entry*>(found);
    if (e->view_state == Entry::kUnread) {
        const unsigned char* data = e->where == Where::Local ? reinterpret_cast<const unsigned char*>(VARDATA(e->blob))
                                                             : e->shared.data;
        const size_t len = e->where == Where::Local ? VARSIZE(e->blob) - VARHDRSZ : e->shared.len;
        core::grid::View v;
        if (!core::grid::open(data, len, &v)) {
            e->view_state = Entry::kNotAGrid;
        } else {
            // The View and, after it, the direct index of the grid's top levels (up to 85 kB), sized for this
            // grid: a box query starts from the index instead of following the levels down from the root.
            // Opened only once both are in place: an allocation that fails leaves the entry unread, not
            // pointing at freed memory.
            if (e->view != nullptr) {
                pfree(e->view);
                e->view = nullptr;
            }
            const size_t jump = core::density_jump_entries(v) * sizeof(std::uint32_t);
            auto* view = static_cast<core::grid::View*>(MemoryContextAlloc(TopMemoryContext, sizeof(v) + jump));
            *view = v;
            auto* table = reinterpret_cast<std::uint32_t*>(view + 1);
            if (core::density_jump_fill(v, table)) {
                view->jump = table;
                view->jump_levels = std::min(v.h.levels, core::grid::kJumpMaxLevels);
            }
            e->view = view;
            e->view_state = Entry::kOpen;
        }
    }
    return e->view_state == Entry::kOpen ? e->view : nullptr;
}

// The column's grid, or false when it has none.
bool grid_of(Oid relid, AttrNumber attnum, const unsigned char** data, size_t* len) {
    const Entry* e = lookup(relid, attnum);
    switch (e->where) {
        case Where::Local:
            *data = reinterpret_cast<const unsigned char*>(VARDATA(e->blob));
            *len = VARSIZE(e->blob) - VARHDRSZ;
            return true;
        case Where::Shared:
            *data = e->shared.data;
            *len = e->shared.len;
            return true;
        case Where::None:
            break;
    }
    return false;
}

}  // namespace

namespace {

const LastBox* box_lookup(Oid relid, AttrNumber attnum, double xmin, double ymin, double xmax, double ymax) {
    if (last.valid && last.relid == relid && last.attnum == attnum && last.xmin == xmin && last.ymin == ymin &&
        last.xmax == xmax && last.ymax == ymax)
        return &last;
    double pages = -1;
    const core::grid::View* v = grid_view(relid, attnum);
    const double rows = v != nullptr ? core::density_rows_pages(*v, xmin, ymin, xmax, ymax, &pages) : -1;
    last = {true, relid, attnum, xmin, ymin, xmax, ymax, rows, pages};
    return &last;
}

}  // namespace

double density_grid_rows(Oid relid, AttrNumber attnum, double xmin, double ymin, double xmax, double ymax) {
    return box_lookup(relid, attnum, xmin, ymin, xmax, ymax)->rows;
}

double density_grid_pages(Oid relid, AttrNumber attnum, double xmin, double ymin, double xmax, double ymax,
                          double rows_read) {
    const LastBox* b = box_lookup(relid, attnum, xmin, ymin, xmax, ymax);
    if (!(b->pages >= 0) || !(b->rows >= 0)) return -1;
    return core::pages_of_rows(rows_read, b->rows, b->pages);
}

double density_grid_rows_around(Oid relid, AttrNumber attnum, double w, double h) {
    const unsigned char* g;
    size_t n;
    // Probes whose centres are unknown are priced as if they landed where the
    // densest tenth of the rows are: where a client wanting work for free puts
    // them (and where LATERAL searches around cities' centres do land).
    return grid_of(relid, attnum, &g, &n) ? core::density_rows_around_dense(g, n, w, h, 0.9) : -1;
}

double density_grid_rows_probed(Oid relid, AttrNumber attnum, double w, double h) {
    const unsigned char* g;
    size_t n;
    return grid_of(relid, attnum, &g, &n) ? core::density_rows_probed(g, n, w, h) : -1;
}

bool density_grid_mean_size(Oid relid, AttrNumber attnum, double* w, double* h) {
    const unsigned char* g;
    size_t n;
    return grid_of(relid, attnum, &g, &n) && core::density_mean_size(g, n, w, h);
}

bool density_grid_probe_size(Oid relid, AttrNumber attnum, double* w, double* h) {
    const unsigned char* g;
    size_t n;
    return grid_of(relid, attnum, &g, &n) && core::density_probe_size(g, n, w, h);
}

}  // namespace ot::ext
