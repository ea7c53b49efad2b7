// throttle_density_build(regclass, name): reads a geometry/geography column,
// counts where its rows are (core::build_density_grid) and stores the grid in
// throttle_density; every backend then reads it again (relcache invalidation of
// the table the grid describes, and a new row version for the shared store).
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
}

namespace ot::ext {
namespace {

// A bound on a grid's size (core::build_density_grid raises its threshold until it fits): 2^18
// cells, 4 MiB (16 bytes a cell; 905 694 points in 40 synthetic cities took 71 518).
constexpr size_t kMaxGridCells = size_t{1} << 18;

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
