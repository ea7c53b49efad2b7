#include "ext/postgis_functions.hpp"

#include "ext/catalog.hpp"

#include <algorithm>
#include <cstring>

#include "core/gserialized.hpp"

extern "C" {
#include "access/htup_details.h"
#include "access/xact.h"
#include "catalog/pg_class.h"
#include "utils/builtins.h"
#include "utils/catcache.h"
#include "utils/resowner.h"
#include "catalog/pg_proc.h"
#include "catalog/pg_type.h"
#include "commands/extension.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/syscache.h"
}

namespace ot::ext {
namespace {

enum Helper { SridOf, Box3dOfGeometry, Box3dOfBox2d, XMin, YMin, XMax, YMax, Selectivity, Expand, GeogToGeom, EstimatedExtent, kHelpers };

struct Entry {
    Oid fn;
    GisRole role;
};

// Backend-local; plain arrays so nothing here needs a destructor. The recognised
// functions sit in an open-addressed table (at most half full): the walk asks for
// every function of the plan, most of them no PostGIS function at all, and a scan
// of the whole list per question was its dearest lookup.
constexpr int kMaxEntries = 64;
constexpr int kSlots = 128;
static_assert(kMaxEntries < kSlots && (kSlots >> 7) == 1, "slot_of gives 7 bits; the table never fills");
struct Cache {
    bool valid;
    bool callback_registered;
    int count;
    Entry slots[kSlots];  // fn InvalidOid: empty
    Oid helpers[kHelpers];
    bool helper_ready[kHelpers];
    FmgrInfo helper_info[kHelpers];
    bool all_helpers;    // every helper found
    bool box3d_layout;   // box3d is the 52 bytes of PostGIS's BOX3D: read, not asked field by field
    bool expand_folds;   // ST_Expand(geometry, float8) is not volatile (as PostGIS declares it)
    Oid box2d_of_geometry;  // box2d(geometry), the cast ST_AsMVTGeom's bounds go through
    Oid make_point[3];      // ST_MakePoint of 2, 3 and 4 float8 (not volatile, as PostGIS declares them)
    Oid set_srid;           // ST_SetSRID(geometry, int4) (likewise)
};
Cache cache;

void invalidate(Datum, int, uint32) { cache.valid = false; }

uint32 slot_of(Oid fn) { return (static_cast<uint32>(fn) * 2654435761u) >> 25; }  // 7 bits: kSlots

// The first entry of a function stays (as the first match of a scan would).
void remember(Oid fn, GisRole role) {
    for (uint32 i = slot_of(fn);; i = (i + 1) % kSlots) {
        if (cache.slots[i].fn == fn) return;
        if (cache.slots[i].fn == InvalidOid) {
            cache.slots[i] = {fn, role};
            cache.count++;
            return;
        }
    }
}

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
    } else if (named(name, "geometry_contains") && named(arg0, "geometry") && p->pronargs == 2) {
        role = GisRole::ContainsGeometryOp;
    } else if (named(name, "geometry_within") && named(arg0, "geometry") && p->pronargs == 2) {
        role = GisRole::WithinGeometryOp;
    } else if (named(name, "geography_overlaps") && p->pronargs == 2) {
        role = GisRole::OverlapsGeography;
    } else if (named(name, "geometry_distance_centroid") || named(name, "geography_distance_knn")) {
        role = GisRole::Knn;
    } else if (named(name, "st_contains") || named(name, "st_within") || named(name, "st_distance") ||
               named(name, "_st_dwithin") || named(name, "st_covers") || named(name, "st_coveredby") ||
               named(name, "_st_contains") || named(name, "_st_within") || named(name, "_st_intersects") ||
               named(name, "st_dfullywithin") || named(name, "_st_distance") || named(name, "st_intersects")) {
        const bool distance = named(name, "st_distance") || named(name, "_st_distance") ||
                              named(name, "_st_dwithin") || named(name, "st_dfullywithin");
        role = named(arg0, "geography") ? GisRole::PredicateGeography
               : !named(arg0, "geometry") ? GisRole::None
               : distance                 ? GisRole::PredicateGeometry
                                          : GisRole::TopologyGeometry;
    } else if (named(name, "st_asgeojson") || named(name, "st_astext") || named(name, "st_asbinary") ||
               named(name, "st_transform")) {
        role = GisRole::Encode;
    } else if (named(name, "st_estimatedextent") && p->pronargs == 3 && named(arg0, "text")) {
        cache.helpers[EstimatedExtent] = fn;
    } else if (named(name, "geometry") && named(arg0, "geography") && p->pronargs == 1) {
        cache.helpers[GeogToGeom] = fn;
    } else if (named(name, "st_srid") && named(arg0, "geometry")) {
        cache.helpers[SridOf] = fn;
    } else if (named(name, "_postgis_selectivity") && p->pronargs == 4) {
        cache.helpers[Selectivity] = fn;
    } else if (named(name, "st_expand") && p->pronargs == 2 && named(arg0, "geometry")) {
        cache.helpers[Expand] = fn;
        cache.expand_folds = p->provolatile != PROVOLATILE_VOLATILE;
    } else if (named(name, "box2d") && p->pronargs == 1 && named(arg0, "geometry")) {
        cache.box2d_of_geometry = fn;
    } else if (named(name, "st_makepoint") && p->pronargs >= 2 && p->pronargs <= 4 &&
               p->provolatile != PROVOLATILE_VOLATILE) {
        bool doubles = true;
        for (int i = 0; i < p->pronargs; i++) doubles &= p->proargtypes.values[i] == FLOAT8OID;
        if (doubles) cache.make_point[p->pronargs - 2] = fn;
    } else if (named(name, "st_setsrid") && p->pronargs == 2 && named(arg0, "geometry") &&
               p->proargtypes.values[1] == INT4OID && p->provolatile != PROVOLATILE_VOLATILE) {
        cache.set_srid = fn;
    } else if (named(name, "box3d") && p->pronargs == 1) {
        if (named(arg0, "geometry")) cache.helpers[Box3dOfGeometry] = fn;
        if (named(arg0, "box2d")) cache.helpers[Box3dOfBox2d] = fn;
    } else if (named(arg0, "box3d") && p->pronargs == 1) {
        if (named(name, "st_xmin")) cache.helpers[XMin] = fn;
        if (named(name, "st_ymin")) cache.helpers[YMin] = fn;
        if (named(name, "st_xmax")) cache.helpers[XMax] = fn;
        if (named(name, "st_ymax")) cache.helpers[YMax] = fn;
    }
    if (role != GisRole::None && cache.count < kMaxEntries) remember(fn, role);
}

// Every name the hook cares about: looked up by name (a handful of syscache
// lists) and kept when it lives in PostGIS's schema — not a walk over all of
// PostGIS's ~700 functions, which cost every new connection ~2 ms.
const char* const kNames[] = {"st_dwithin",   "st_asmvt",          "st_asmvtgeom", "st_tileenvelope",
                              "st_makeenvelope", "geometry_overlaps", "st_intersects", "st_srid",
                              "box3d",        "st_xmin",           "st_ymin",      "st_xmax",
                              "st_ymax",      "_postgis_selectivity", "st_expand",
                              "geometry_contains", "geometry_within", "geography_overlaps",
                              "geometry_distance_centroid", "geography_distance_knn", "st_contains", "st_within",
                              "st_distance", "_st_dwithin", "st_covers", "st_coveredby", "_st_contains", "_st_within",
                              "_st_intersects", "st_dfullywithin", "_st_distance", "st_asgeojson", "st_astext",
                              "st_asbinary", "st_transform", "geometry", "st_estimatedextent", "box2d",
                              "st_makepoint", "st_setsrid"};

void rebuild() {
    if (!cache.callback_registered) {
        CacheRegisterSyscacheCallback(PROCOID, invalidate, 0);
        cache.callback_registered = true;
    }
    cache.count = 0;
    for (Entry& e : cache.slots) e = {InvalidOid, GisRole::None};
    for (Oid& h : cache.helpers) h = InvalidOid;
    for (bool& r : cache.helper_ready) r = false;
    cache.all_helpers = cache.box3d_layout = cache.expand_folds = false;
    cache.box2d_of_geometry = InvalidOid;
    for (Oid& m : cache.make_point) m = InvalidOid;
    cache.set_srid = InvalidOid;
    cache.valid = true;  // before the lookups: an invalidation during them marks it stale again

    const Oid ext = get_extension_oid("postgis", true);
    if (!OidIsValid(ext)) return;
    const Oid schema = extension_schema(ext);
    for (const char* name : kNames) {
        CatCList* list = SearchSysCacheList1(PROCNAMEARGSNSP, CStringGetDatum(name));
        for (int i = 0; i < list->n_members; i++) {
            HeapTuple proc = &list->members[i]->tuple;
            auto* p = reinterpret_cast<Form_pg_proc>(GETSTRUCT(proc));
            if (p->pronamespace == schema) classify(p->oid, p);
        }
        ReleaseSysCacheList(list);
    }
    cache.all_helpers = true;
    for (Oid h : cache.helpers) cache.all_helpers &= OidIsValid(h);
    // PostGIS's BOX3D: six doubles and an int32 SRID, INTERNALLENGTH = 52 since PostGIS 2.0.
    cache.box3d_layout = cache.all_helpers && get_typlen(get_func_rettype(cache.helpers[Box3dOfGeometry])) == 52 &&
                         get_typlen(get_func_rettype(cache.helpers[Box3dOfBox2d])) == 52;
}

FmgrInfo* helper_info(Helper h) {
    if (!cache.helper_ready[h]) {
        fmgr_info_cxt(cache.helpers[h], &cache.helper_info[h], TopMemoryContext);
        cache.helper_ready[h] = true;
    }
    return &cache.helper_info[h];
}

Datum call(Helper h, Datum arg, bool* isnull) {
    LOCAL_FCINFO(fcinfo, 1);
    InitFunctionCallInfoData(*fcinfo, helper_info(h), 1, InvalidOid, nullptr, nullptr);
    fcinfo->args[0].value = arg;
    fcinfo->args[0].isnull = false;
    Datum result = FunctionCallInvoke(fcinfo);
    *isnull = fcinfo->isnull;
    return result;
}

// The fields of PostGIS's BOX3D (liblwgeom.h).
struct Box3d {
    double xmin, ymin, zmin, xmax, ymax, zmax;
    int32 srid;
};

// What ST_XMin, ST_YMin, ST_XMax and ST_YMax return for the box (BOX3D_xmin…:
// Min(xmin, xmax) and so on), read from it instead of four calls through fmgr.
void read_box3d(Datum box3d, GisBox* out) {
    const auto* b = reinterpret_cast<const Box3d*>(DatumGetPointer(box3d));
    out->xmin = Min(b->xmin, b->xmax);
    out->ymin = Min(b->ymin, b->ymax);
    out->xmax = Max(b->xmin, b->xmax);
    out->ymax = Max(b->ymin, b->ymax);
}

bool box_from_box3d(Datum box3d, GisBox* out) {
    if (cache.box3d_layout) {
        read_box3d(box3d, out);
        return true;
    }
    bool isnull = false;
    out->xmin = DatumGetFloat8(call(XMin, box3d, &isnull));
    out->ymin = DatumGetFloat8(call(YMin, box3d, &isnull));
    out->xmax = DatumGetFloat8(call(XMax, box3d, &isnull));
    out->ymax = DatumGetFloat8(call(YMax, box3d, &isnull));
    return !isnull;
}

bool helpers_ready() {
    if (!cache.valid) rebuild();
    return cache.all_helpers;
}

}  // namespace

GisRole gis_role(Oid fn) {
    if (!cache.valid) rebuild();
    if (fn == InvalidOid) return GisRole::None;
    for (uint32 i = slot_of(fn);; i = (i + 1) % kSlots) {
        const Entry& e = cache.slots[i];
        if (e.fn == fn) return e.role;
        if (e.fn == InvalidOid) return GisRole::None;
    }
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
        case GisRole::ContainsGeometryOp: return "~";
        case GisRole::WithinGeometryOp: return "@";
        case GisRole::OverlapsGeography: return "&&";
        case GisRole::Knn: return "<->";
        case GisRole::PredicateGeometry:
        case GisRole::TopologyGeometry:
        case GisRole::PredicateGeography: return "predicate";
        case GisRole::Encode: return "encode";
        case GisRole::None: break;
    }
    return "?";
}

int32 geometry_srid(Datum geometry) {
    if (!helpers_ready()) return 0;
    bool isnull = false;
    Datum srid = call(SridOf, geometry, &isnull);
    return isnull ? 0 : DatumGetInt32(srid);
}

bool geometry_box(Datum geometry, GisBox* out) {
    if (!helpers_ready()) return false;
    // A point or an envelope, as most searches are: read where it lies, as box3d() would compute it.
    const auto* v = reinterpret_cast<const varlena*>(DatumGetPointer(geometry));
    if (VARATT_IS_4B_U(v) &&
        core::gserialized_box(reinterpret_cast<const unsigned char*>(v), VARSIZE(v), &out->xmin, &out->ymin, &out->xmax,
                              &out->ymax, &out->srid) == core::GserializedBox::Box)
        return true;
    bool isnull = false;
    Datum box3d = call(Box3dOfGeometry, geometry, &isnull);
    if (isnull) return false;
    if (cache.box3d_layout) {
        // box3d(geometry) carries the geometry's SRID (LWGEOM_to_BOX3D), as ST_SRID would say.
        read_box3d(box3d, out);
        out->srid = reinterpret_cast<const Box3d*>(DatumGetPointer(box3d))->srid;
        return true;
    }
    out->srid = geometry_srid(geometry);
    return box_from_box3d(box3d, out);
}

bool box2d_box(Datum box, GisBox* out) {
    if (!helpers_ready()) return false;
    bool isnull = false;
    Datum box3d = call(Box3dOfBox2d, box, &isnull);
    if (isnull) return false;
    out->srid = 0;
    return box_from_box3d(box3d, out);
}

bool expand_geometry(Datum geometry, double d, Datum* out) {
    if (!helpers_ready()) return false;
    *out = FunctionCall2(helper_info(Expand), geometry, Float8GetDatum(d));
    return true;
}

bool is_st_expand(Oid fn) { return helpers_ready() && fn == cache.helpers[Expand]; }

bool is_foldable_st_expand(Oid fn) { return is_st_expand(fn) && cache.expand_folds; }

bool is_box2d_of_geometry(Oid fn) { return helpers_ready() && fn == cache.box2d_of_geometry; }

bool is_make_point(Oid fn, int nargs) {
    return nargs >= 2 && nargs <= 4 && helpers_ready() && fn == cache.make_point[nargs - 2];
}

bool is_set_srid(Oid fn) { return helpers_ready() && fn == cache.set_srid; }

bool is_point_call(Oid fn, int nargs) {
    if (nargs < 2 || nargs > 4 || !helpers_ready()) return false;
    return fn == cache.make_point[nargs - 2] || (nargs == 2 && fn == cache.set_srid);
}

bool geography_as_geometry(Datum geography, Datum* out) {
    if (!helpers_ready()) return false;
    bool isnull = false;
    *out = call(GeogToGeom, geography, &isnull);
    return !isnull;
}

bool has_statistics(Oid relid, AttrNumber attnum) {
    return SearchSysCacheExists3(STATRELATTINH, ObjectIdGetDatum(relid), Int16GetDatum(attnum), BoolGetDatum(false));
}

namespace {

// Runs fn(arg) in a subtransaction: an error PostGIS raises (a table without
// statistics, a dropped column) is swallowed and reported as false, never
// failing the statement being priced. C frames only: fn may ereport.
bool in_subtransaction(void (*fn)(void*), void* arg) {
    volatile bool ok = false;  // read after a longjmp back into this frame
    MemoryContext cxt = CurrentMemoryContext;
    ResourceOwner owner = CurrentResourceOwner;
    BeginInternalSubTransaction(nullptr);
    MemoryContextSwitchTo(cxt);
    PG_TRY();
    {
        fn(arg);
        ReleaseCurrentSubTransaction();
        ok = true;
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
    return ok;
}

struct SelectivityCall {
    Oid relid;
    const char* attname;
    Datum geometry;
    double selectivity;
};

void call_selectivity(void* arg) {
    auto* c = static_cast<SelectivityCall*>(arg);
    c->selectivity = DatumGetFloat8(FunctionCall4(helper_info(Selectivity), ObjectIdGetDatum(c->relid),
                                                  CStringGetTextDatum(c->attname), c->geometry,
                                                  CStringGetTextDatum("2")));
}

struct ExtentCall {
    const char* nspname;
    const char* relname;
    const char* attname;
    GisBox* out;
    bool ok;
};

void call_extent(void* arg) {
    auto* c = static_cast<ExtentCall*>(arg);
    LOCAL_FCINFO(fcinfo, 3);
    InitFunctionCallInfoData(*fcinfo, helper_info(EstimatedExtent), 3, InvalidOid, nullptr, nullptr);
    fcinfo->args[0].value = CStringGetTextDatum(c->nspname);
    fcinfo->args[1].value = CStringGetTextDatum(c->relname);
    fcinfo->args[2].value = CStringGetTextDatum(c->attname);
    fcinfo->args[0].isnull = fcinfo->args[1].isnull = fcinfo->args[2].isnull = false;
    const Datum box = FunctionCallInvoke(fcinfo);
    c->ok = !fcinfo->isnull && box2d_box(box, c->out);
}

}  // namespace

double estimated_rows(Oid relid, AttrNumber attnum, Datum geometry) {
    if (!helpers_ready() || !has_statistics(relid, attnum)) return -1;
    HeapTuple rel = SearchSysCache1(RELOID, ObjectIdGetDatum(relid));
    if (!HeapTupleIsValid(rel)) return -1;
    const double reltuples = reinterpret_cast<Form_pg_class>(GETSTRUCT(rel))->reltuples;
    ReleaseSysCache(rel);
    const char* attname = get_attname(relid, attnum, true);
    if (reltuples < 0 || attname == nullptr) return -1;
    SelectivityCall call{relid, attname, geometry, -1};
    if (!in_subtransaction(call_selectivity, &call) || !(call.selectivity >= 0)) return -1;
    return std::min(1.0, call.selectivity) * reltuples;
}

bool estimated_extent(Oid relid, AttrNumber attnum, GisBox* out) {
    if (!helpers_ready() || !has_statistics(relid, attnum)) return false;
    const char* attname = get_attname(relid, attnum, true);
    const char* relname = get_rel_name(relid);
    const char* nspname = get_namespace_name(get_rel_namespace(relid));
    if (attname == nullptr || relname == nullptr || nspname == nullptr) return false;
    ExtentCall call{nspname, relname, attname, out, false};
    return in_subtransaction(call_extent, &call) && call.ok;
}

int32 srid_from_typmod(int32 typmod) {
    if (typmod < 0) return 0;
    // PostGIS packs the SRID into bits 8..28 of a geometry typmod, sign in bit 28.
    return ((typmod & 0x0FFFFF00) - (typmod & 0x10000000)) >> 8;
}

}  // namespace ot::ext
