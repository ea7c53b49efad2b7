#include "ext/density_grid.hpp"

#include <cmath>

#include <algorithm>
#include <cstring>
#include <new>
#include <vector>

#include "core/density_grid.hpp"
#include "core/geo.hpp"
#include "ext/boundary.hpp"
#include "ext/catalog.hpp"
#include "ext/postgis_functions.hpp"
#include "ext/srs_units.hpp"

extern "C" {
#include "access/heapam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/tableam.h"
#include "catalog/pg_class.h"
#include "catalog/pg_type.h"
#include "commands/extension.h"
#include "executor/spi.h"
#include "lib/stringinfo.h"
#include "storage/itemptr.h"
#include "utils/builtins.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
}

namespace ot::ext {
namespace {

// A bound on a grid's size (core::build_density_grid raises its threshold until it fits): 2^18
// cells, 5 MiB, in the table and in each backend's cache that reads it (905 694 points in 40
// synthetic cities took 71 518).
constexpr size_t kMaxGridCells = size_t{1} << 18;
// What one backend keeps of them (CacheMemoryContext): a few full-size grids.
constexpr size_t kMaxCacheBytes = size_t{32} << 20;

// Backend-local cache: plain arrays, nothing with a destructor.
struct Entry {
    Oid relid;
    AttrNumber attnum;
    bytea* blob;  // in CacheMemoryContext; nullptr: the column has no grid
};
struct Cache {
    bool callback_registered;
    Oid table;  // throttle_density, InvalidOid until looked up
    bool table_known;
    int n;
    Entry entries[64];
};
Cache cache;

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
    if (cache.entries[i].blob != nullptr) pfree(cache.entries[i].blob);
    cache.entries[i] = cache.entries[--cache.n];
}

void on_relcache(Datum, Oid relid) {
    last.valid = false;
    if (relid == InvalidOid || relid == cache.table) {
        while (cache.n > 0) forget(cache.n - 1);
        cache.table_known = false;
        return;
    }
    for (int i = cache.n - 1; i >= 0; i--)
        if (cache.entries[i].relid == relid) forget(i);
}

Oid density_table() {
    if (!cache.callback_registered) {
        CacheRegisterRelcacheCallback(on_relcache, 0);
        cache.callback_registered = true;
    }
    if (!cache.table_known) {
        cache.table = InvalidOid;
        const Oid ext = get_extension_oid("ogc_throttle", true);
        if (OidIsValid(ext)) cache.table = get_relname_relid("throttle_density", extension_schema(ext));
        cache.table_known = true;
    }
    return cache.table;
}

bytea* load(Oid relid, AttrNumber attnum) {
    const Oid table = density_table();
    if (!OidIsValid(table) || !ActiveSnapshotSet()) return nullptr;
    Relation rel = table_open(table, AccessShareLock);
    TableScanDesc scan = table_beginscan(rel, GetActiveSnapshot(), 0, nullptr);
    TupleDesc desc = RelationGetDescr(rel);
    bytea* out = nullptr;
    HeapTuple tup;
    while ((tup = heap_getnext(scan, ForwardScanDirection)) != nullptr) {
        bool n1, n2, n3;
        const Oid r = DatumGetObjectId(heap_getattr(tup, 1, desc, &n1));
        const int16 a = DatumGetInt16(heap_getattr(tup, 2, desc, &n2));
        const Datum g = heap_getattr(tup, 3, desc, &n3);
        if (n1 || n2 || n3 || r != relid || a != attnum) continue;
        bytea* v = DatumGetByteaPP(g);
        const Size len = VARSIZE_ANY_EXHDR(v);
        out = static_cast<bytea*>(MemoryContextAllocHuge(CacheMemoryContext, len + VARHDRSZ));
        SET_VARSIZE(out, len + VARHDRSZ);
        memcpy(VARDATA(out), VARDATA_ANY(v), len);
        break;
    }
    table_endscan(scan);
    table_close(rel, AccessShareLock);
    return out;
}

const Entry* lookup(Oid relid, AttrNumber attnum) {
    density_table();
    for (int i = 0; i < cache.n; i++)
        if (cache.entries[i].relid == relid && cache.entries[i].attnum == attnum) return &cache.entries[i];
    bytea* blob = load(relid, attnum);
    // At most 64 grids and kMaxCacheBytes of them in a backend: the oldest go first (forget moves the
    // last entry into the freed slot, so "oldest" is approximate; a grid forgotten is read again).
    const size_t bytes = blob != nullptr ? VARSIZE(blob) : 0;
    for (;;) {
        size_t held = bytes;
        for (int i = 0; i < cache.n; i++)
            if (cache.entries[i].blob != nullptr) held += VARSIZE(cache.entries[i].blob);
        if (cache.n == 0 || (held <= kMaxCacheBytes && cache.n < static_cast<int>(lengthof(cache.entries)))) break;
        forget(0);
    }
    cache.entries[cache.n] = {relid, attnum, blob};
    return &cache.entries[cache.n++];
}

// ---- building -------------------------------------------------------------

// The blob for the points, as a palloc'd bytea; the C++ vector is gone
// before anything that can ereport runs.
bytea* make_blob(const double* x, const double* y, const uint32* blocks, size_t n, core::DensityExtent e,
                 double mean_w, double mean_h, double mean_area) {
    // The area-weighted size in the rows' mean aspect.
    const double aspect = mean_w > 0 && mean_h > 0 ? mean_w / mean_h : 1;
    const double probe_w = std::sqrt(std::max(mean_area, 0.0) * aspect);
    const double probe_h = std::sqrt(std::max(mean_area, 0.0) / aspect);
    std::vector<unsigned char> g = core::build_density_grid(x, y, n, e, 20, 32, mean_w, mean_h, probe_w, probe_h,
                                                            blocks, kMaxGridCells);
    void* mem = MemoryContextAllocExtended(CurrentMemoryContext, g.size() + VARHDRSZ,
                                           MCXT_ALLOC_HUGE | MCXT_ALLOC_NO_OOM);
    if (mem == nullptr) throw std::bad_alloc();
    auto* out = static_cast<bytea*>(mem);
    SET_VARSIZE(out, g.size() + VARHDRSZ);
    memcpy(VARDATA(out), g.data(), g.size());
    return out;
}

}  // namespace

namespace {

// The column's grid, or false when it has none.
bool grid_of(Oid relid, AttrNumber attnum, const unsigned char** data, size_t* len) {
    const Entry* e = lookup(relid, attnum);
    if (e->blob == nullptr) return false;
    *data = reinterpret_cast<const unsigned char*>(VARDATA(e->blob));
    *len = VARSIZE(e->blob) - VARHDRSZ;
    return true;
}

}  // namespace

namespace {

const LastBox* box_lookup(Oid relid, AttrNumber attnum, double xmin, double ymin, double xmax, double ymax) {
    if (last.valid && last.relid == relid && last.attnum == attnum && last.xmin == xmin && last.ymin == ymin &&
        last.xmax == xmax && last.ymax == ymax)
        return &last;
    const unsigned char* g;
    size_t n;
    double pages = -1;
    const double rows = grid_of(relid, attnum, &g, &n) ? core::density_rows_pages(g, n, xmin, ymin, xmax, ymax, &pages) : -1;
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

using namespace ot;
using namespace ot::ext;

// throttle_density_build(rel regclass, col name) -> cells stored
OT_SQL_FUNCTION(throttle_density_build) {
    if (PG_ARGISNULL(0) || PG_ARGISNULL(1))
        ereport(ERROR, (errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED), errmsg("ogc_throttle: arguments must not be NULL")));
    const Oid relid = PG_GETARG_OID(0);
    const char* col = NameStr(*PG_GETARG_NAME(1));
    const AttrNumber attnum = get_attnum(relid, col);
    if (attnum <= 0)
        ereport(ERROR, (errcode(ERRCODE_UNDEFINED_COLUMN),
                        errmsg("ogc_throttle: column \"%s\" of relation \"%s\" does not exist", col,
                               get_rel_name(relid) ? get_rel_name(relid) : "?")));
    const Oid type = get_atttype(relid, attnum);
    const char* tname = format_type_be(type);
    const bool geography = strcmp(tname, "geography") == 0;
    if (!geography && strcmp(tname, "geometry") != 0)
        ereport(ERROR, (errcode(ERRCODE_DATATYPE_MISMATCH),
                        errmsg("ogc_throttle: column \"%s\" is %s, not geometry or geography", col, tname)));
    int32 typmod = -1;
    Oid type_again, collation;
    get_atttypetypmodcoll(relid, attnum, &type_again, &typmod, &collation);
    const int32 srid = geography ? 4326 : srid_from_typmod(typmod);

    // The heap block of each row (how clustered the rows are on disk), where rows have one.
    const char kind = get_rel_relkind(relid);
    const bool with_blocks = kind == RELKIND_RELATION || kind == RELKIND_MATVIEW;
    const char* relname = quote_qualified_identifier(get_namespace_name(get_rel_namespace(relid)), get_rel_name(relid));
    StringInfoData q;
    initStringInfo(&q);
    // The centre of each row's box (a point's own coordinates).
    appendStringInfo(&q,
                     "SELECT (ST_XMin(b) + ST_XMax(b)) / 2, (ST_YMin(b) + ST_YMax(b)) / 2, "
                     "ST_XMax(b) - ST_XMin(b), ST_YMax(b) - ST_YMin(b), t "
                     "FROM (SELECT Box2D(%s::geometry) AS b, %s AS t FROM %s WHERE %s IS NOT NULL) s",
                     quote_identifier(col), with_blocks ? "ctid" : "NULL::tid", relname, quote_identifier(col));
    if (SPI_connect() != SPI_OK_CONNECT) ereport(ERROR, (errmsg("ogc_throttle: SPI_connect failed")));
    MemoryContext outer = MemoryContextSwitchTo(CurTransactionContext);
    size_t cap = 1 << 16, n = 0;
    double* xs = static_cast<double*>(MemoryContextAllocHuge(CurTransactionContext, cap * sizeof(double)));
    double* ys = static_cast<double*>(MemoryContextAllocHuge(CurTransactionContext, cap * sizeof(double)));
    uint32* bs = static_cast<uint32*>(MemoryContextAllocHuge(CurTransactionContext, cap * sizeof(uint32)));
    bool blocks_known = with_blocks;
    MemoryContextSwitchTo(outer);
    SPIPlanPtr plan = SPI_prepare(q.data, 0, nullptr);
    if (plan == nullptr) ereport(ERROR, (errmsg("ogc_throttle: could not read \"%s\": %s", relname, SPI_result_code_string(SPI_result))));
    Portal portal = SPI_cursor_open(nullptr, plan, nullptr, nullptr, true);
    double xmin = 1e300, ymin = 1e300, xmax = -1e300, ymax = -1e300, sum_w = 0, sum_h = 0, sum_wh = 0;
    for (;;) {
        SPI_cursor_fetch(portal, true, 10000);
        if (SPI_processed == 0) break;
        for (uint64 i = 0; i < SPI_processed; i++) {
            bool nx, ny;
            const Datum dx = SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1, &nx);
            const Datum dy = SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 2, &ny);
            if (nx || ny) continue;
            bool nw, nh;
            const Datum dw = SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 3, &nw);
            const Datum dh = SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 4, &nh);
            if (!nw) sum_w += DatumGetFloat8(dw);
            if (!nh) sum_h += DatumGetFloat8(dh);
            if (!nw && !nh) sum_wh += DatumGetFloat8(dw) * DatumGetFloat8(dh);
            if (n == cap) {
                cap *= 2;
                xs = static_cast<double*>(repalloc_huge(xs, cap * sizeof(double)));
                ys = static_cast<double*>(repalloc_huge(ys, cap * sizeof(double)));
                bs = static_cast<uint32*>(repalloc_huge(bs, cap * sizeof(uint32)));
            }
            bool nt;
            const Datum dt = SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 5, &nt);
            if (nt)
                blocks_known = false;
            else
                bs[n] = ItemPointerGetBlockNumberNoCheck(reinterpret_cast<ItemPointer>(DatumGetPointer(dt)));
            xs[n] = DatumGetFloat8(dx);
            ys[n] = DatumGetFloat8(dy);
            xmin = std::min(xmin, xs[n]), xmax = std::max(xmax, xs[n]);
            ymin = std::min(ymin, ys[n]), ymax = std::max(ymax, ys[n]);
            n++;
        }
        SPI_freetuptable(SPI_tuptable);
    }
    SPI_cursor_close(portal);
    // Degrees: the whole world, so that keys do not depend on the data; other
    // units: the data's own extent.
    const bool degrees = geography || (srid > 0 && srs_for(srid).units == core::Units::Degrees) || (srid == 0 && n > 0 &&
                         core::guess_unknown_srs(xmin, ymin, xmax, ymax).units == core::Units::Degrees);
    core::DensityExtent e = degrees ? core::DensityExtent{-180, -90, 180, 90}
                            : n > 0 ? core::DensityExtent{xmin, ymin, xmax + (xmax - xmin) * 1e-9 + 1e-9, ymax + (ymax - ymin) * 1e-9 + 1e-9}
                                    : core::DensityExtent{0, 0, 1, 1};
    bytea* blob = make_blob(xs, ys, blocks_known ? bs : nullptr, n, e, n > 0 ? sum_w / n : 0, n > 0 ? sum_h / n : 0, n > 0 ? sum_wh / n : 0);
    const long cells = core::density_cells(reinterpret_cast<const unsigned char*>(VARDATA(blob)), VARSIZE(blob) - VARHDRSZ);

    const Oid ext = get_extension_oid("ogc_throttle", false);
    const char* table = quote_qualified_identifier(get_namespace_name(extension_schema(ext)), "throttle_density");
    StringInfoData w;
    initStringInfo(&w);
    appendStringInfo(&w, "DELETE FROM %s WHERE relid = $1 AND attnum = $2", table);
    Oid types[5] = {OIDOID, INT2OID, BYTEAOID, FLOAT8OID, INT8OID};
    Datum vals[5] = {ObjectIdGetDatum(relid), Int16GetDatum(attnum), PointerGetDatum(blob), Float8GetDatum(static_cast<double>(n)),
                     Int64GetDatum(cells)};
    if (SPI_execute_with_args(w.data, 2, types, vals, nullptr, false, 0) != SPI_OK_DELETE)
        ereport(ERROR, (errmsg("ogc_throttle: could not write %s", table)));
    resetStringInfo(&w);
    appendStringInfo(&w, "INSERT INTO %s (relid, attnum, grid, rows_counted, cells, built) VALUES ($1, $2, $3, $4, $5, now())", table);
    if (SPI_execute_with_args(w.data, 5, types, vals, nullptr, false, 0) != SPI_OK_INSERT)
        ereport(ERROR, (errmsg("ogc_throttle: could not write %s", table)));
    SPI_finish();
    CacheInvalidateRelcacheByRelid(relid);  // every backend drops its cached grid (or its "none") at commit
    PG_RETURN_INT64(cells);
}
