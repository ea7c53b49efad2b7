#include "ext/postgis_functions.hpp"

#include <algorithm>
#include <cstring>

extern "C" {
#include "access/genam.h"
#include "access/htup_details.h"
#include "access/stratnum.h"
#include "access/table.h"
#include "access/xact.h"
#include "catalog/pg_class.h"
#include "utils/builtins.h"
#include "utils/resowner.h"
#include "catalog/dependency.h"
#include "catalog/pg_depend.h"
#include "catalog/pg_extension.h"
#include "catalog/pg_proc.h"
#include "catalog/pg_type.h"
#include "commands/extension.h"
#include "utils/fmgroids.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/syscache.h"
}

namespace ot::ext {
namespace {

enum Helper { SridOf, Box3dOfGeometry, Box3dOfBox2d, XMin, YMin, XMax, YMax, Selectivity, Expand, kHelpers };

struct Entry {
    Oid fn;
    GisRole role;
};

// Backend-local; plain arrays so nothing here needs a destructor.
struct Cache {
    bool valid;
    bool callback_registered;
    int count;
    Entry entries[32];
    Oid helpers[kHelpers];
};
Cache cache;

void invalidate(Datum, int, uint32) { cache.valid = false; }

const char* type_name(Oid type) {
    HeapTuple tup = SearchSysCache1(TYPEOID, ObjectIdGetDatum(type));
    if (!HeapTupleIsValid(tup)) return "";
    static char name[NAMEDATALEN];
    std::strncpy(name, NameStr(reinterpret_cast<Form_pg_type>(GETSTRUCT(tup))->typname), NAMEDATALEN - 1);
    name[NAMEDATALEN - 1] = '\0';
    ReleaseSysCache(tup);
    return name;
}

bool named(const char* a, const char* b) { return std::strcmp(a, b) == 0; }

// Decides what a PostGIS function is to us from its name and first argument type.
void classify(Oid fn, Form_pg_proc p) {
    const char* name = NameStr(p->proname);
    const char* arg0 = p->pronargs > 0 ? type_name(p->proargtypes.values[0]) : "";
    GisRole role = GisRole::None;
    if (named(name, "st_dwithin")) {
        role = named(arg0, "geometry")    ? GisRole::DWithinGeometry
               : named(arg0, "geography") ? GisRole::DWithinGeography
               : named(arg0, "text")      ? GisRole::DWithinText
                                          : GisRole::None;
    } else if (named(name, "st_asmvt")) {
        role = GisRole::AsMVT;
    } else if (named(name, "st_asmvtgeom")) {
        role = GisRole::AsMVTGeom;
    } else if (named(name, "st_tileenvelope")) {
        role = GisRole::TileEnvelope;
    } else if (named(name, "st_makeenvelope")) {
        role = GisRole::MakeEnvelope;
    } else if (named(name, "geometry_overlaps") && named(arg0, "geometry") && p->pronargs == 2) {
        role = GisRole::OverlapsGeometry;
    } else if (named(name, "st_intersects") && named(arg0, "geometry") && p->pronargs == 2) {
        role = GisRole::IntersectsGeometry;
    } else if (named(name, "st_srid") && named(arg0, "geometry")) {
        cache.helpers[SridOf] = fn;
    } else if (named(name, "_postgis_selectivity") && p->pronargs == 4) {
        cache.helpers[Selectivity] = fn;
    } else if (named(name, "st_expand") && p->pronargs == 2 && named(arg0, "geometry")) {
        cache.helpers[Expand] = fn;
    } else if (named(name, "box3d") && p->pronargs == 1) {
        if (named(arg0, "geometry")) cache.helpers[Box3dOfGeometry] = fn;
        if (named(arg0, "box2d")) cache.helpers[Box3dOfBox2d] = fn;
    } else if (named(arg0, "box3d") && p->pronargs == 1) {
        if (named(name, "st_xmin")) cache.helpers[XMin] = fn;
        if (named(name, "st_ymin")) cache.helpers[YMin] = fn;
        if (named(name, "st_xmax")) cache.helpers[XMax] = fn;
        if (named(name, "st_ymax")) cache.helpers[YMax] = fn;
    }
    if (role != GisRole::None && cache.count < static_cast<int>(lengthof(cache.entries)))
        cache.entries[cache.count++] = {fn, role};
}

void rebuild() {
    if (!cache.callback_registered) {
        CacheRegisterSyscacheCallback(PROCOID, invalidate, 0);
        cache.callback_registered = true;
    }
    cache.count = 0;
    for (Oid& h : cache.helpers) h = InvalidOid;
    cache.valid = true;  // before the scan: an invalidation during it marks it stale again

    const Oid ext = get_extension_oid("postgis", true);
    if (!OidIsValid(ext)) return;
    Relation dep = table_open(DependRelationId, AccessShareLock);
    ScanKeyData key[2];
    ScanKeyInit(&key[0], Anum_pg_depend_refclassid, BTEqualStrategyNumber, F_OIDEQ,
                ObjectIdGetDatum(ExtensionRelationId));
    ScanKeyInit(&key[1], Anum_pg_depend_refobjid, BTEqualStrategyNumber, F_OIDEQ, ObjectIdGetDatum(ext));
    SysScanDesc scan = systable_beginscan(dep, DependReferenceIndexId, true, nullptr, 2, key);
    while (HeapTuple t = systable_getnext(scan)) {
        auto* d = reinterpret_cast<Form_pg_depend>(GETSTRUCT(t));
        if (d->classid != ProcedureRelationId || d->deptype != DEPENDENCY_EXTENSION) continue;
        HeapTuple proc = SearchSysCache1(PROCOID, ObjectIdGetDatum(d->objid));
        if (!HeapTupleIsValid(proc)) continue;
        classify(d->objid, reinterpret_cast<Form_pg_proc>(GETSTRUCT(proc)));
        ReleaseSysCache(proc);
    }
    systable_endscan(scan);
    table_close(dep, AccessShareLock);
}

Datum call(Oid fn, Datum arg, bool* isnull) {
    LOCAL_FCINFO(fcinfo, 1);
    FmgrInfo flinfo;
    fmgr_info(fn, &flinfo);
    InitFunctionCallInfoData(*fcinfo, &flinfo, 1, InvalidOid, nullptr, nullptr);
    fcinfo->args[0].value = arg;
    fcinfo->args[0].isnull = false;
    Datum result = FunctionCallInvoke(fcinfo);
    *isnull = fcinfo->isnull;
    return result;
}

bool box_from_box3d(Datum box3d, GisBox* out) {
    bool isnull = false;
    out->xmin = DatumGetFloat8(call(cache.helpers[XMin], box3d, &isnull));
    out->ymin = DatumGetFloat8(call(cache.helpers[YMin], box3d, &isnull));
    out->xmax = DatumGetFloat8(call(cache.helpers[XMax], box3d, &isnull));
    out->ymax = DatumGetFloat8(call(cache.helpers[YMax], box3d, &isnull));
    return !isnull;
}

bool helpers_ready() {
    if (!cache.valid) rebuild();
    for (Oid h : cache.helpers)
        if (!OidIsValid(h)) return false;
    return true;
}

}  // namespace

GisRole gis_role(Oid fn) {
    if (!cache.valid) rebuild();
    for (int i = 0; i < cache.count; i++)
        if (cache.entries[i].fn == fn) return cache.entries[i].role;
    return GisRole::None;
}

const char* gis_role_name(GisRole r) {
    switch (r) {
        case GisRole::DWithinGeometry:
        case GisRole::DWithinGeography:
        case GisRole::DWithinText: return "ST_DWithin";
        case GisRole::AsMVT: return "ST_AsMVT";
        case GisRole::AsMVTGeom: return "ST_AsMVTGeom";
        case GisRole::TileEnvelope: return "ST_TileEnvelope";
        case GisRole::MakeEnvelope: return "ST_MakeEnvelope";
        case GisRole::OverlapsGeometry: return "&&";
        case GisRole::IntersectsGeometry: return "ST_Intersects";
        case GisRole::None: break;
    }
    return "?";
}

int32 geometry_srid(Datum geometry) {
    if (!helpers_ready()) return 0;
    bool isnull = false;
    Datum srid = call(cache.helpers[SridOf], geometry, &isnull);
    return isnull ? 0 : DatumGetInt32(srid);
}

bool geometry_box(Datum geometry, GisBox* out) {
    if (!helpers_ready()) return false;
    bool isnull = false;
    Datum box3d = call(cache.helpers[Box3dOfGeometry], geometry, &isnull);
    if (isnull) return false;
    out->srid = geometry_srid(geometry);
    return box_from_box3d(box3d, out);
}

bool box2d_box(Datum box, GisBox* out) {
    if (!helpers_ready()) return false;
    bool isnull = false;
    Datum box3d = call(cache.helpers[Box3dOfBox2d], box, &isnull);
    if (isnull) return false;
    out->srid = 0;
    return box_from_box3d(box3d, out);
}

bool expand_geometry(Datum geometry, double d, Datum* out) {
    if (!helpers_ready()) return false;
    *out = OidFunctionCall2(cache.helpers[Expand], geometry, Float8GetDatum(d));
    return true;
}

double estimated_rows(Oid relid, AttrNumber attnum, Datum geometry) {
    if (!helpers_ready() || !SearchSysCacheExists3(STATRELATTINH, ObjectIdGetDatum(relid), Int16GetDatum(attnum),
                                                   BoolGetDatum(false)))
        return -1;
    HeapTuple rel = SearchSysCache1(RELOID, ObjectIdGetDatum(relid));
    if (!HeapTupleIsValid(rel)) return -1;
    const double reltuples = reinterpret_cast<Form_pg_class>(GETSTRUCT(rel))->reltuples;
    ReleaseSysCache(rel);
    const char* attname = get_attname(relid, attnum, true);
    if (reltuples < 0 || attname == nullptr) return -1;

    // volatile: read after a longjmp back into this frame.
    volatile double selectivity = -1;
    MemoryContext cxt = CurrentMemoryContext;
    ResourceOwner owner = CurrentResourceOwner;
    BeginInternalSubTransaction(nullptr);
    MemoryContextSwitchTo(cxt);
    PG_TRY();
    {
        selectivity = DatumGetFloat8(OidFunctionCall4(cache.helpers[Selectivity], ObjectIdGetDatum(relid),
                                                      CStringGetTextDatum(attname), geometry,
                                                      CStringGetTextDatum("2")));
        ReleaseCurrentSubTransaction();
    }
    PG_CATCH();
    {
        MemoryContextSwitchTo(cxt);
        FlushErrorState();
        RollbackAndReleaseCurrentSubTransaction();
    }
    PG_END_TRY();
    MemoryContextSwitchTo(cxt);
    CurrentResourceOwner = owner;
    if (!(selectivity >= 0)) return -1;
    return std::min(1.0, static_cast<double>(selectivity)) * reltuples;
}

int32 srid_from_typmod(int32 typmod) {
    if (typmod < 0) return 0;
    // PostGIS packs the SRID into bits 8..28 of a geometry typmod, sign in bit 28.
    return ((typmod & 0x0FFFFF00) - (typmod & 0x10000000)) >> 8;
}

}  // namespace ot::ext
