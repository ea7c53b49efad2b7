#include "ext/plan_pricing.hpp"

#include <algorithm>
#include <cmath>

#include "core/geo.hpp"
#include "ext/density_grid.hpp"
#include "ext/direct_eval.hpp"
#include "ext/postgis_functions.hpp"
#include "ext/settings.hpp"
#include "ext/srs_units.hpp"

extern "C" {
#include "access/htup_details.h"
#include "catalog/pg_class.h"
#include "executor/executor.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "nodes/nodeFuncs.h"
#include "parser/parsetree.h"
#include "optimizer/clauses.h"
#include "optimizer/optimizer.h"
#include "utils/datum.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/syscache.h"
}

namespace ot::ext {
namespace {

struct Walk {
    ParamListInfo params;
    List* rtable;
    MemoryContext eval_cxt;  // created on the first priced call
    core::PricedCall* calls;
    int ncalls;
    int capacity;
    bool builds_tiles;
    bool asmvt;
    double limit;
    Bitmapset* nestloop_params;  // PARAM_EXEC ids that carry an outer row's column
    double plan_rows;            // the planner's row estimate for the node being walked
    bool saw_postgis;            // a recognised PostGIS function or operator appears in the plan
};

// PostgreSQL 15 declares tree walkers K&R-style, as bool (*)(); the detour
// through void (*)() is the sanctioned generic function-pointer cast.
using Walker = bool (*)();
template <class F>
Walker as_walker(F* f) {
    return reinterpret_cast<Walker>(reinterpret_cast<void (*)()>(f));
}

// ---- evaluating arguments before execution -----------------------------

bool not_evaluable_walker(Node* node, Walk* w) {
    if (node == nullptr) return false;
    switch (nodeTag(node)) {
        case T_Var:
        case T_SubPlan:
        case T_AlternativeSubPlan:
        case T_SubLink:
        case T_Aggref:
        case T_WindowFunc:
        case T_GroupingFunc:
        case T_CurrentOfExpr:
        case T_NextValueExpr:
            return true;
        case T_Param: {
            auto* p = reinterpret_cast<Param*>(node);
            return p->paramkind != PARAM_EXTERN || w->params == nullptr;
        }
        default:
            break;
    }
    return expression_tree_walker(node, as_walker(not_evaluable_walker), w);
}

bool evaluable(Node* e, Walk* w) {
    return !not_evaluable_walker(e, w) && !contain_volatile_functions(e);
}

// A column of this row, or of the outer row of a nested loop (which the
// planner passes to the inner side as a PARAM_EXEC).
bool column_walker(Node* node, Walk* w) {
    if (node == nullptr) return false;
    if (IsA(node, Var)) return true;
    if (IsA(node, Param)) {
        auto* p = reinterpret_cast<Param*>(node);
        return p->paramkind == PARAM_EXEC && bms_is_member(p->paramid, w->nestloop_params);
    }
    return expression_tree_walker(node, as_walker(column_walker), w);
}

// Evaluates a Var-free, non-volatile expression with this execution's
// parameters; the result lives in w->eval_cxt.
bool eval(Walk* w, Node* e, Datum* out) {
    if (IsA(e, Const)) {
        auto* c = reinterpret_cast<Const*>(e);
        *out = c->constvalue;
        return !c->constisnull;
    }
    if (!evaluable(e, w)) return false;
    if (w->eval_cxt == nullptr)
        w->eval_cxt = AllocSetContextCreate(CurrentMemoryContext, "ogc_throttle pricing", ALLOCSET_SMALL_SIZES);
    MemoryContext old = MemoryContextSwitchTo(w->eval_cxt);
    bool direct_null = false;
    if (direct_eval(e, w->params, out, &direct_null)) {
        MemoryContextSwitchTo(old);
        return !direct_null;
    }
    ExprState* state = ExecInitExprWithParams(reinterpret_cast<Expr*>(e), w->params);
    ExprContext* econtext = CreateStandaloneExprContext();
    econtext->ecxt_param_list_info = w->params;  // read at run time by PARAM_EXTERN steps
    bool isnull = false;
    Datum d = ExecEvalExprSwitchContext(state, econtext, &isnull);
    if (!isnull) {
        int16 typlen;
        bool typbyval;
        get_typlenbyval(exprType(e), &typlen, &typbyval);
        d = datumCopy(d, typbyval, typlen);
    }
    FreeExprContext(econtext, true);
    MemoryContextSwitchTo(old);
    *out = d;
    return !isnull;
}

bool eval_float8(Walk* w, Node* e, double* out) {
    Datum d;
    if (exprType(e) != FLOAT8OID || !eval(w, e, &d)) return false;
    *out = DatumGetFloat8(d);
    return true;
}

bool eval_int(Walk* w, Node* e, int64* out) {
    Datum d;
    const Oid t = exprType(e);
    if ((t != INT4OID && t != INT8OID && t != INT2OID) || !eval(w, e, &d)) return false;
    *out = t == INT8OID ? DatumGetInt64(d) : t == INT4OID ? DatumGetInt32(d) : DatumGetInt16(d);
    return true;
}

// ---- recording calls ----------------------------------------------------

core::PricedCall* add_call(Walk* w, core::CallKind kind, GisRole role) {
    if (w->ncalls == w->capacity) {
        if (w->eval_cxt == nullptr)
            w->eval_cxt = AllocSetContextCreate(CurrentMemoryContext, "ogc_throttle pricing", ALLOCSET_SMALL_SIZES);
        w->capacity = w->capacity == 0 ? 8 : w->capacity * 2;
        const size_t bytes = sizeof(core::PricedCall) * w->capacity;
        w->calls = static_cast<core::PricedCall*>(w->calls == nullptr ? MemoryContextAlloc(w->eval_cxt, bytes)
                                                                       : repalloc(w->calls, bytes));
    }
    core::PricedCall* c = &w->calls[w->ncalls++];
    *c = core::PricedCall{};
    c->kind = kind;
    c->function = gis_role_name(role);
    c->known = false;
    c->zoom = -1;
    c->same_as = -1;
    c->rows = -1;
    return c;
}

core::Box to_box(const GisBox& b) { return {b.xmin, b.ymin, b.xmax, b.ymax, b.srid}; }

double area_of(const GisBox& b) {
    if (core::bbox_problem(b.xmin, b.ymin, b.xmax, b.ymax) != nullptr) return -1;
    const core::Srs srs = srs_for_box(b.srid, b.xmin, b.ymin, b.xmax, b.ymax);
    return core::bbox_area_km2(srs, b.xmin, b.ymin, b.xmax, b.ymax);
}

// A geometry side of a call: evaluated if it can be, else its column's SRID.
struct Side {
    bool evaluated;
    bool has_box;
    GisBox box;
    int32 srid;
    Datum value;  // when evaluated
};

Side read_geometry(Walk* w, Node* e) {
    Side s{false, false, {}, 0, 0};
    Datum d;
    if (!column_walker(e, w) && eval(w, e, &d)) {
        s.evaluated = true;
        s.value = d;
        s.has_box = geometry_box(d, &s.box);
        s.srid = s.has_box ? s.box.srid : geometry_srid(d);
    } else {
        s.srid = srid_from_typmod(exprTypmod(e));
    }
    return s;
}

// The base-table column a search runs over, when that side is one: the key to
// PostGIS's statistics for it.
bool base_column(Walk* w, Node* e, Oid* relid, AttrNumber* attnum) {
    while (IsA(e, RelabelType)) e = reinterpret_cast<Node*>(reinterpret_cast<RelabelType*>(e)->arg);
    if (!IsA(e, Var)) return false;
    auto* v = reinterpret_cast<Var*>(e);
    // Scan-level Vars name their range table entry; join-level ones (INNER_VAR…) do not.
    if (v->varno < 1 || v->varno > list_length(w->rtable) || v->varattno <= 0) return false;
    RangeTblEntry* rte = rt_fetch(v->varno, w->rtable);
    if (rte->rtekind != RTE_RELATION) return false;
    *relid = rte->relid;
    *attnum = v->varattno;
    return true;
}

bool param_walker(Node* node, void*) {
    if (node == nullptr) return false;
    if (IsA(node, Param)) return true;
    return expression_tree_walker(node, as_walker(param_walker), nullptr);
}

// Rows a search over a base column meets. When the planner saw the search's
// value (a literal, a folded constant, a custom plan), its estimate for the
// scan — made by PostGIS's own selectivity function — is already in the plan,
// for free. A generic plan estimated a parameter blindly: then ask PostGIS for
// this execution's value (about 100 µs), once per distinct box per statement.
double rows_from_statistics(Walk* w, Node* column, Node* search, Datum search_geometry, const core::Box& box) {
    Oid relid;
    AttrNumber attnum;
    if (!base_column(w, column, &relid, &attnum)) return -1;
    if (!param_walker(search, nullptr)) return has_statistics(relid, attnum) ? w->plan_rows : -1;
    for (int i = 0; i < w->ncalls - 1; i++)
        if (w->calls[i].rows >= 0 && w->calls[i].has_box && core::same_box(w->calls[i].box, box)) return w->calls[i].rows;
    return estimated_rows(relid, attnum, search_geometry);
}

void on_dwithin(Walk* w, GisRole role, List* args) {
    core::PricedCall* c = add_call(w, core::CallKind::Radius, role);
    if (list_length(args) < 3) return;
    double r;
    if (!eval_float8(w, static_cast<Node*>(lthird(args)), &r) || !std::isfinite(r) || r < 0) return;
    if (role == GisRole::DWithinGeography) {
        c->radius_m = r;
        c->known = true;
        return;
    }
    Side a = read_geometry(w, static_cast<Node*>(linitial(args)));
    Side b = read_geometry(w, static_cast<Node*>(lsecond(args)));
    const Side& point = a.evaluated ? a : b;
    const int32 srid = a.srid != 0 ? a.srid : b.srid;
    // Unknown units: a radius that could be degrees is read as degrees (dearer).
    const core::Srs srs = srid > 0 ? srs_for(srid) : (r <= 180 ? core::kDegrees : core::kMetres);
    c->radius_m = core::radius_metres(srs, r);
    c->known = true;
    if (point.has_box) {
        // The box ST_DWithin's index condition (geom && ST_Expand(point, r)) searches.
        c->has_box = true;
        c->box = {point.box.xmin - r, point.box.ymin - r, point.box.xmax + r, point.box.ymax + r, point.box.srid};
        // The planner's rows for the scan are what is left after the radius
        // filter, not what the search meets; the index condition it derives
        // (the same box, as an && term) carries those. Only a parameter, which
        // the generic plan could not see, needs PostGIS asked directly.
        Node* column = static_cast<Node*>(a.evaluated ? lsecond(args) : linitial(args));
        const bool blind = param_walker(reinterpret_cast<Node*>(args), nullptr);
        Datum expanded;
        if (blind && role == GisRole::DWithinGeometry && expand_geometry(point.value, r, &expanded))
            c->rows = rows_from_statistics(w, column, reinterpret_cast<Node*>(args), expanded, c->box);
    }
}

void on_bbox_filter(Walk* w, GisRole role, List* args) {
    if (list_length(args) != 2) return;
    Node* a = static_cast<Node*>(linitial(args));
    Node* b = static_cast<Node*>(lsecond(args));
    const bool ca = column_walker(a, w), cb = column_walker(b, w);
    if (ca && cb) return;  // column against column: a join, not a box filter
    core::PricedCall* c = add_call(w, core::CallKind::Bbox, role);
    Side s = read_geometry(w, ca ? b : a);
    if (!s.evaluated) return;  // a subquery or runtime value: unknown
    if (!s.has_box) {          // an empty geometry matches nothing
        c->known = true;
        c->area_km2 = 0;
        return;
    }
    const double area = area_of(s.box);
    if (area < 0) return;
    c->known = true;
    c->area_km2 = area;
    c->has_box = true;
    c->box = to_box(s.box);
    c->rows = rows_from_statistics(w, ca ? a : b, ca ? b : a, s.value, c->box);
}

void on_make_envelope(Walk* w, Node* call) {
    core::PricedCall* c = add_call(w, core::CallKind::Bbox, GisRole::MakeEnvelope);
    Datum d;
    GisBox box;
    if (!eval(w, call, &d) || !geometry_box(d, &box)) return;
    const double area = area_of(box);
    if (area < 0) return;
    c->known = true;
    c->area_km2 = area;
    c->has_box = true;
    c->box = to_box(box);
}

void on_tile_envelope(Walk* w, Node* call, List* args) {
    w->builds_tiles = true;
    core::PricedCall* c = add_call(w, core::CallKind::Tile, GisRole::TileEnvelope);
    int64 zoom;
    if (list_length(args) < 1 || !eval_int(w, static_cast<Node*>(linitial(args)), &zoom)) return;
    if (zoom < 0 || zoom > core::kMaxZoom) return;  // ST_TileEnvelope itself will refuse it
    c->zoom = static_cast<int>(zoom);
    c->known = true;
    Datum d;
    GisBox box;
    if (eval(w, call, &d) && geometry_box(d, &box)) {
        c->has_box = true;
        c->box = to_box(box);
    }
}

void on_mvt_geom(Walk* w, List* args) {
    w->builds_tiles = true;
    core::PricedCall* c = add_call(w, core::CallKind::Tile, GisRole::AsMVTGeom);
    Datum d;
    GisBox box;
    if (list_length(args) < 2 || !eval(w, static_cast<Node*>(lsecond(args)), &d) || !box2d_box(d, &box)) return;
    // box2d carries no SRID: take the geometry column's, else guess (tile
    // bounds are nearly always Web Mercator metres).
    box.srid = srid_from_typmod(exprTypmod(static_cast<Node*>(linitial(args))));
    if (box.srid == 0)
        box.srid = core::guess_unknown_srs(box.xmin, box.ymin, box.xmax, box.ymax).units == core::Units::Linear ? 3857
                                                                                                            : 4326;
    const double area = area_of(box);
    if (area < 0) return;
    c->known = true;
    c->area_km2 = area;
    c->has_box = true;
    c->box = to_box(box);
}

bool expr_walker(Node* node, Walk* w) {
    if (node == nullptr) return false;
    if (IsA(node, FuncExpr)) {
        auto* f = reinterpret_cast<FuncExpr*>(node);
        GisRole role = gis_role(f->funcid);
        w->saw_postgis |= role != GisRole::None;
        switch (role) {
            case GisRole::DWithinGeometry:
            case GisRole::DWithinGeography:
            case GisRole::DWithinText: on_dwithin(w, role, f->args); break;
            case GisRole::IntersectsGeometry: on_bbox_filter(w, role, f->args); break;
            case GisRole::MakeEnvelope: on_make_envelope(w, node); break;
            case GisRole::TileEnvelope: on_tile_envelope(w, node, f->args); break;
            case GisRole::AsMVTGeom: on_mvt_geom(w, f->args); break;
            default: break;
        }
    } else if (IsA(node, OpExpr)) {
        auto* o = reinterpret_cast<OpExpr*>(node);
        if (o->opfuncid == InvalidOid) set_opfuncid(o);
        const GisRole role = gis_role(o->opfuncid);
        w->saw_postgis |= role != GisRole::None;
        if (role == GisRole::OverlapsGeometry) on_bbox_filter(w, GisRole::OverlapsGeometry, o->args);
    } else if (IsA(node, Aggref)) {
        w->saw_postgis |= gis_role(reinterpret_cast<Aggref*>(node)->aggfnoid) != GisRole::None;
        if (gis_role(reinterpret_cast<Aggref*>(node)->aggfnoid) == GisRole::AsMVT) {
            w->builds_tiles = true;
            w->asmvt = true;
        }
    }
    return expression_tree_walker(node, as_walker(expr_walker), w);
}

void walk_exprs(Node* n, Walk* w) {
    if (n != nullptr) expr_walker(n, w);
}

void on_limit(Walk* w, Limit* l) {
    int64 count, offset = 0;
    if (l->limitCount == nullptr || !eval_int(w, l->limitCount, &count)) return;
    if (l->limitOffset != nullptr && !eval_int(w, l->limitOffset, &offset)) return;
    // LIMIT n OFFSET m reads n + m rows; of several LIMITs the largest bounds the work.
    const double rows = static_cast<double>(std::max<int64>(count, 0)) + static_cast<double>(std::max<int64>(offset, 0));
    w->limit = std::max(w->limit, rows);
}

void walk_plan(Plan* p, Walk* w);

// The expressions a plan node of type T keeps in `field`, besides its
// targetlist and qual.
template <class T, class M>
void walk_member(Plan* p, M T::*field, Walk* w) {
    walk_exprs(reinterpret_cast<Node*>(reinterpret_cast<T*>(p)->*field), w);
}

void walk_plans(List* plans, Walk* w) {
    ListCell* lc;
    foreach (lc, plans) walk_plan(static_cast<Plan*>(lfirst(lc)), w);
}

void walk_plan(Plan* p, Walk* w) {
    if (p == nullptr) return;
    check_stack_depth();
    w->plan_rows = p->plan_rows;
    walk_exprs(reinterpret_cast<Node*>(p->targetlist), w);
    walk_exprs(reinterpret_cast<Node*>(p->qual), w);
    switch (nodeTag(p)) {
        case T_IndexScan: walk_member(p, &IndexScan::indexqualorig, w); break;
        case T_IndexOnlyScan: walk_member(p, &IndexOnlyScan::indexqual, w); break;
        case T_BitmapIndexScan: walk_member(p, &BitmapIndexScan::indexqualorig, w); break;
        case T_BitmapHeapScan: walk_member(p, &BitmapHeapScan::bitmapqualorig, w); break;
        case T_FunctionScan: walk_member(p, &FunctionScan::functions, w); break;
        case T_ValuesScan: walk_member(p, &ValuesScan::values_lists, w); break;
        case T_SubqueryScan: walk_plan(reinterpret_cast<SubqueryScan*>(p)->subplan, w); break;
        case T_Append: walk_plans(reinterpret_cast<Append*>(p)->appendplans, w); break;
        case T_MergeAppend: walk_plans(reinterpret_cast<MergeAppend*>(p)->mergeplans, w); break;
        case T_BitmapAnd: walk_plans(reinterpret_cast<BitmapAnd*>(p)->bitmapplans, w); break;
        case T_BitmapOr: walk_plans(reinterpret_cast<BitmapOr*>(p)->bitmapplans, w); break;
        case T_CustomScan: walk_plans(reinterpret_cast<CustomScan*>(p)->custom_plans, w); break;
        case T_NestLoop: {
            ListCell* lc;
            foreach (lc, reinterpret_cast<NestLoop*>(p)->nestParams)
                w->nestloop_params = bms_add_member(w->nestloop_params, lfirst_node(NestLoopParam, lc)->paramno);
            walk_member(p, &Join::joinqual, w);
            break;
        }
        case T_MergeJoin:
        case T_HashJoin: walk_member(p, &Join::joinqual, w); break;
        case T_Limit: on_limit(w, reinterpret_cast<Limit*>(p)); break;
        case T_Result: walk_exprs(reinterpret_cast<Result*>(p)->resconstantqual, w); break;
        default: break;
    }
    walk_plan(p->lefttree, w);
    walk_plan(p->righttree, w);
}

// ---- plan-wide pricing ----------------------------------------------------
//
// Every scan of every relation is priced from the rows it READS (the index
// condition's rows, not the rows left after the filter), times the times it
// runs (the inner side of a nested loop runs once per outer row), summed over
// parallel workers; a LIMIT bounds a scan only through nodes that stream
// (no sort, hash or aggregate between). Per-row work of dear operators is
// counted apart: exact spatial predicates (geography ones in full, geometry
// ones at a tenth), output encoding (MVT geometry, GeoJSON, text, reprojection),
// and rows through joins, sorts and aggregates.

constexpr int kMaxSubplans = 64;

struct PlanCtx {
    Walk* w;
    core::PlanFeatures f;
    double subplan_loops[kMaxSubplans];  // by plan_id - 1
    bool have_last_box;                  // the box the last spatial scan walked searched
    GisBox last_box;
    Oid last_rel;                        // ... of this relation's column
    AttrNumber last_att;
    bool have_join_box;                  // the outer side's search box, for the inner side of a spatial join
    GisBox join_box;
};

struct ExprFacts {
    bool geog_pred;
    bool geom_pred;
    bool encode;
    int nsub;
    int sub[8];  // plan_ids of correlated SubPlans
};

bool facts_walker(Node* node, ExprFacts* f) {
    if (node == nullptr) return false;
    Oid fn = InvalidOid;
    if (IsA(node, FuncExpr)) {
        fn = reinterpret_cast<FuncExpr*>(node)->funcid;
    } else if (IsA(node, OpExpr)) {
        auto* o = reinterpret_cast<OpExpr*>(node);
        if (o->opfuncid == InvalidOid) set_opfuncid(o);
        fn = o->opfuncid;
    } else if (IsA(node, SubPlan)) {
        auto* sp = reinterpret_cast<SubPlan*>(node);
        if (sp->parParam != NIL && f->nsub < static_cast<int>(lengthof(f->sub))) f->sub[f->nsub++] = sp->plan_id;
    }
    if (fn != InvalidOid) {
        switch (gis_role(fn)) {
            case GisRole::DWithinGeography:
            case GisRole::PredicateGeography: f->geog_pred = true; break;
            case GisRole::DWithinGeometry:
            case GisRole::DWithinText:
            case GisRole::IntersectsGeometry:
            case GisRole::PredicateGeometry: f->geom_pred = true; break;
            case GisRole::AsMVTGeom:
            case GisRole::Encode: f->encode = true; break;
            default: break;
        }
    }
    return expression_tree_walker(node, as_walker(facts_walker), f);
}

ExprFacts facts_of(Node* n) {
    ExprFacts f{};
    facts_walker(n, &f);
    return f;
}

double reltuples_of(Oid relid) {
    HeapTuple rel = SearchSysCache1(RELOID, ObjectIdGetDatum(relid));
    if (!HeapTupleIsValid(rel)) return -1;
    const double t = reinterpret_cast<Form_pg_class>(GETSTRUCT(rel))->reltuples;
    ReleaseSysCache(rel);
    return t;
}

Oid scan_relation(PlanCtx* c, Plan* p) {
    const Index rti = reinterpret_cast<Scan*>(p)->scanrelid;
    if (rti < 1 || rti > static_cast<Index>(list_length(c->w->rtable))) return InvalidOid;
    RangeTblEntry* rte = rt_fetch(rti, c->w->rtable);
    return rte->rtekind == RTE_RELATION ? rte->relid : InvalidOid;
}

double planned(Plan* p, double par) { return std::max(0.0, p->plan_rows) * par; }

// The scan column a spatial expression searches (a Var of this scan).
bool scan_column(Node* e, Index scanrelid, AttrNumber* attnum) {
    while (IsA(e, RelabelType)) e = reinterpret_cast<Node*>(reinterpret_cast<RelabelType*>(e)->arg);
    if (!IsA(e, Var)) return false;
    auto* v = reinterpret_cast<Var*>(e);
    if (v->varno != static_cast<int>(scanrelid) || v->varattno <= 0) return false;
    *attnum = v->varattno;
    return true;
}

struct Search {
    AttrNumber attnum;
    GisBox box;
    bool geography;
    Datum geometry;   // the searched box as a geometry (0 for geography)
    bool from_param;  // the searched value is a parameter: the (generic) plan's estimates are blind to it
};

// ST_DWithin(geography column, point, r) among the quals: the box of the
// radius around the point, in degrees (generous: the shortest metres per degree).
bool geography_radius_search(PlanCtx* c, List* quals, Index scanrelid, Search* out) {
    ListCell* lc;
    foreach (lc, quals) {
        auto* n = static_cast<Node*>(lfirst(lc));
        if (!IsA(n, FuncExpr)) continue;
        auto* f = reinterpret_cast<FuncExpr*>(n);
        if (gis_role(f->funcid) != GisRole::DWithinGeography || list_length(f->args) < 3) continue;
        Node* a = static_cast<Node*>(linitial(f->args));
        Node* b = static_cast<Node*>(lsecond(f->args));
        AttrNumber att;
        Node* other = scan_column(a, scanrelid, &att) ? b : scan_column(b, scanrelid, &att) ? a : nullptr;
        if (other == nullptr || column_walker(other, c->w)) continue;
        double r;
        Datum g, geom;
        GisBox box;
        if (!eval_float8(c->w, static_cast<Node*>(lthird(f->args)), &r) || !(r >= 0)) continue;
        if (!eval(c->w, other, &g) || !geography_as_geometry(g, &geom) || !geometry_box(geom, &box)) continue;
        const double dlat = r / 110574.0;
        const double lat = std::min(89.0, std::max(std::fabs(box.ymin), std::fabs(box.ymax)) + dlat);
        const double dlon = std::min(360.0, dlat / std::cos(lat * 3.14159265358979323846 / 180.0));
        out->attnum = att;
        out->box = {box.xmin - dlon, box.ymin - dlat, box.xmax + dlon, box.ymax + dlat, 4326};
        out->geography = true;
        out->geometry = 0;
        return true;
    }
    return false;
}

// A box index condition (&&, ~, @) of this scan against a value known now.
bool box_search(PlanCtx* c, List* quals, Index scanrelid, Search* out) {
    ListCell* lc;
    foreach (lc, quals) {
        auto* n = static_cast<Node*>(lfirst(lc));
        if (!IsA(n, OpExpr) || list_length(reinterpret_cast<OpExpr*>(n)->args) != 2) continue;
        auto* o = reinterpret_cast<OpExpr*>(n);
        if (o->opfuncid == InvalidOid) set_opfuncid(o);
        const GisRole role = gis_role(o->opfuncid);
        if (role != GisRole::OverlapsGeometry && role != GisRole::ContainsGeometryOp &&
            role != GisRole::WithinGeometryOp && role != GisRole::OverlapsGeography)
            continue;
        Node* a = static_cast<Node*>(linitial(o->args));
        Node* b = static_cast<Node*>(lsecond(o->args));
        AttrNumber att;
        Node* other = scan_column(a, scanrelid, &att) ? b : scan_column(b, scanrelid, &att) ? a : nullptr;
        if (other == nullptr || column_walker(other, c->w)) continue;
        Datum d;
        if (!eval(c->w, other, &d)) continue;
        if (role == GisRole::OverlapsGeography) {
            Datum geom;
            if (!geography_as_geometry(d, &geom) || !geometry_box(geom, &out->box)) continue;
            // A geography box made by _st_expand keeps only its point here: no use.
            if (out->box.xmax - out->box.xmin < 1e-12 && out->box.ymax - out->box.ymin < 1e-12) continue;
            out->geography = true;
            out->geometry = 0;
        } else {
            if (!geometry_box(d, &out->box)) {  // an empty geometry: nothing matches
                out->box = {0, 0, -1, -1, 0};
            }
            out->geography = false;
            out->geometry = d;
        }
        out->attnum = att;
        out->from_param = param_walker(other, nullptr);
        return true;
    }
    return false;
}

// A radius search whose centre comes from the outer row of a nested loop
// (ST_DWithin(t.geom, outer.geom, r) → t.geom && ST_Expand($n, r), or the
// geography form's filter): the search's size, in the column's units.
bool outer_centre_search(PlanCtx* c, List* quals, List* filter, Index scanrelid, AttrNumber* attnum, double* w,
                         double* h) {
    ListCell* lc;
    foreach (lc, quals) {
        auto* n = static_cast<Node*>(lfirst(lc));
        if (!IsA(n, OpExpr) || list_length(reinterpret_cast<OpExpr*>(n)->args) != 2) continue;
        auto* o = reinterpret_cast<OpExpr*>(n);
        if (o->opfuncid == InvalidOid) set_opfuncid(o);
        if (gis_role(o->opfuncid) != GisRole::OverlapsGeometry) continue;
        Node* a = static_cast<Node*>(linitial(o->args));
        Node* b = static_cast<Node*>(lsecond(o->args));
        Node* other = scan_column(a, scanrelid, attnum) ? b : scan_column(b, scanrelid, attnum) ? a : nullptr;
        if (other == nullptr || !IsA(other, FuncExpr)) continue;
        auto* f = reinterpret_cast<FuncExpr*>(other);
        double r;
        if (!is_st_expand(f->funcid) || list_length(f->args) != 2 || !column_walker(static_cast<Node*>(linitial(f->args)), c->w) ||
            !eval_float8(c->w, static_cast<Node*>(lsecond(f->args)), &r))
            continue;
        *w = *h = 2 * std::max(r, 0.0);
        return true;
    }
    foreach (lc, filter) {
        auto* n = static_cast<Node*>(lfirst(lc));
        if (!IsA(n, FuncExpr)) continue;
        auto* f = reinterpret_cast<FuncExpr*>(n);
        if (gis_role(f->funcid) != GisRole::DWithinGeography || list_length(f->args) < 3) continue;
        Node* a = static_cast<Node*>(linitial(f->args));
        Node* b = static_cast<Node*>(lsecond(f->args));
        Node* other = scan_column(a, scanrelid, attnum) ? b : scan_column(b, scanrelid, attnum) ? a : nullptr;
        if (other == nullptr || !column_walker(other, c->w)) continue;  // a known centre is priced as such
        double r;
        if (!eval_float8(c->w, static_cast<Node*>(lthird(f->args)), &r)) continue;
        *h = 2 * std::max(r, 0.0) / 110574.0;
        *w = *h / 0.64;  // about 50° of latitude
        return true;
    }
    return false;
}

// A spatial index condition against the other side of a join (t.geom && p.geom
// with p.geom an outer row's value): the inner side of a spatial join.
bool join_search(PlanCtx* c, List* quals, Index scanrelid, AttrNumber* attnum) {
    ListCell* lc;
    foreach (lc, quals) {
        auto* n = static_cast<Node*>(lfirst(lc));
        if (!IsA(n, OpExpr) || list_length(reinterpret_cast<OpExpr*>(n)->args) != 2) continue;
        auto* o = reinterpret_cast<OpExpr*>(n);
        if (o->opfuncid == InvalidOid) set_opfuncid(o);
        const GisRole role = gis_role(o->opfuncid);
        if (role != GisRole::OverlapsGeometry && role != GisRole::ContainsGeometryOp && role != GisRole::WithinGeometryOp)
            continue;
        Node* a = static_cast<Node*>(linitial(o->args));
        Node* b = static_cast<Node*>(lsecond(o->args));
        Node* other = scan_column(a, scanrelid, attnum) ? b : scan_column(b, scanrelid, attnum) ? a : nullptr;
        // A bare outer column (an ST_Expand of one is a radius search, priced apart).
        if (other != nullptr && (IsA(other, Param) || IsA(other, Var)) && column_walker(other, c->w)) return true;
    }
    return false;
}

// Rows a scan's index condition meets: the density grid, else PostGIS's
// statistics (geometry only), else negative.
double search_rows(PlanCtx* c, Oid relid, const Search& s, bool may_ask_postgis) {
    if (s.box.xmax < s.box.xmin) return 0;
    const double g = density_grid_rows(relid, s.attnum, s.box.xmin, s.box.ymin, s.box.xmax, s.box.ymax);
    if (g >= 0) return g;
    if (may_ask_postgis && !s.geography && s.geometry != 0) {
        // For a parameter the call walk asked PostGIS already for the same box (ST_DWithin's, a &&
        // filter's): once per statement. (For a literal its rows are the plan's, not PostGIS's.)
        const core::Box b{s.box.xmin, s.box.ymin, s.box.xmax, s.box.ymax, s.box.srid};
        for (int i = 0; s.from_param && i < c->w->ncalls; i++)
            if (c->w->calls[i].rows >= 0 && c->w->calls[i].has_box && core::same_box(c->w->calls[i].box, b))
                return c->w->calls[i].rows;
        return estimated_rows(relid, s.attnum, s.geometry);
    }
    return -1;
}

void add_scan(PlanCtx* c, double read, double loops, const ExprFacts& qf) {
    // A scan starts once; a nested loop's inner scan is probed again per outer row (class join, fixed).
    c->f.calls[static_cast<int>(core::CostClass::Scan)] += 1;
    if (loops > 1) c->f.calls[static_cast<int>(core::CostClass::Join)] += loops;
    c->f.rows[static_cast<int>(core::CostClass::Scan)] += read * loops;
    if (qf.geog_pred)
        c->f.rows[static_cast<int>(core::CostClass::Distance)] += read * loops;
    else if (qf.geom_pred)
        c->f.rows[static_cast<int>(core::CostClass::Distance)] += 0.1 * read * loops;
}

void add_upper(PlanCtx* c, double rows, double loops) {
    c->f.rows[static_cast<int>(core::CostClass::Join)] += rows * loops;
}

double capped(double rows, double cap) { return cap >= 0 ? std::min(rows, cap) : rows; }

double parallel_divisor(int workers) {
    double d = workers;
    const double leader = 1.0 - 0.3 * workers;
    if (leader > 0) d += leader;
    return std::max(1.0, d);
}

double visit(PlanCtx* c, Plan* p, double loops, double cap, double par);

double visit_list(PlanCtx* c, List* plans, double loops, double cap, double par) {
    double out = 0;
    ListCell* lc;
    foreach (lc, plans) out += visit(c, static_cast<Plan*>(lfirst(lc)), loops, cap, par);
    return out;
}

// A scan that reads `index_rows` (or the whole relation) to emit `out_full`.
double price_scan(PlanCtx* c, double read_full, double out_full, double loops, double cap, const ExprFacts& qf) {
    double read = read_full, out = out_full;
    if (cap >= 0 && out_full > cap) {
        read = read_full * cap / out_full;
        out = cap;
    }
    add_scan(c, read, loops, qf);
    return out;
}

// A LIMIT stops a filtered scan in storage (or key) order after its first
// matches; spatial rows are usually stored clustered, so those lie on average
// half-way through what does not match.
void add_clustered_skip(PlanCtx* c, Plan* p, double rows, double out_full, double cap, double loops) {
    if (p->qual == NIL || cap < 0 || !(out_full > cap) || !(rows > 0)) return;
    const double skipped = (1.0 - out_full / rows) * rows / 2;
    c->f.rows[static_cast<int>(core::CostClass::Scan)] += std::min(skipped, rows - rows * cap / out_full) * loops;
}

double visit(PlanCtx* c, Plan* p, double loops, double cap, double par) {
    if (p == nullptr) return 0;
    check_stack_depth();
    const ExprFacts tf = facts_of(reinterpret_cast<Node*>(p->targetlist));
    const ExprFacts qf = facts_of(reinterpret_cast<Node*>(p->qual));
    double out = 0;
    double processed = 0;  // rows this node looks at (for correlated subplans in its expressions)
    switch (nodeTag(p)) {
        case T_SeqScan:
        case T_SampleScan: {
            const Oid relid = scan_relation(c, p);
            Search s{};
            double filtered = -1;  // what a box in the filter keeps, by the grid
            if (OidIsValid(relid) && box_search(c, p->qual, reinterpret_cast<Scan*>(p)->scanrelid, &s)) {
                c->have_last_box = true;
                c->last_box = s.box;
                c->last_rel = relid;
                c->last_att = s.attnum;
                filtered = search_rows(c, relid, s, false);
            }
            double rows = OidIsValid(relid) ? reltuples_of(relid) : -1;
            if (rows < 0) rows = planned(p, par);
            const double out_full = std::min(rows, filtered >= 0 ? filtered : planned(p, par));
            out = price_scan(c, rows, out_full, loops, cap, qf);
            add_clustered_skip(c, p, rows, out_full, cap, loops);
            processed = rows;
            break;
        }
        case T_IndexScan:
        case T_IndexOnlyScan:
        case T_BitmapHeapScan: {
            const Oid relid = scan_relation(c, p);
            const Index rti = reinterpret_cast<Scan*>(p)->scanrelid;
            List* quals = nodeTag(p) == T_IndexScan        ? reinterpret_cast<IndexScan*>(p)->indexqualorig
                          : nodeTag(p) == T_BitmapHeapScan ? reinterpret_cast<BitmapHeapScan*>(p)->bitmapqualorig
                                                           : NIL;
            // The recheck may leave out a condition the filter implies (ST_Contains's @): read the bitmap's own.
            if (nodeTag(p) == T_BitmapHeapScan && p->lefttree != nullptr && IsA(p->lefttree, BitmapIndexScan))
                quals = list_concat_copy(quals, reinterpret_cast<BitmapIndexScan*>(p->lefttree)->indexqualorig);
            double rows = -1;
            Search s{};
            AttrNumber join_att;
            const bool joined = OidIsValid(relid) && join_search(c, quals, rti, &join_att);
            const bool found =
                OidIsValid(relid) && (geography_radius_search(c, p->qual, rti, &s) || box_search(c, quals, rti, &s));
            if (joined) {
                // The inner side of a spatial join: over all its loops it reads about the rows in the
                // region searched (its own box, else the outer side's), as the outer rows tile it.
                const GisBox* region = found ? &s.box : c->have_join_box ? &c->join_box : nullptr;
                if (region != nullptr) {
                    const double total = density_grid_rows(relid, join_att, region->xmin, region->ymin, region->xmax,
                                                           region->ymax);
                    if (total >= 0) rows = std::max(1.0, total / std::max(1.0, loops));
                }
                // Large boxes probed by small ones (districts by points): each probe meets the rows
                // around it grown by their mean size, wherever the region says otherwise.
                const double probed = density_grid_rows_probed(relid, join_att, 0, 0);
                if (probed >= 0) rows = std::max(rows, probed);
            } else if (found) {
                // PostGIS is asked when the plan's estimate is blind: a parameter (a generic plan), or an
                // index scan whose exact test (ST_DWithin, ST_Intersects…) the planner multiplied into the
                // box's selectivity a second time, so that its rows say ~10 for a box holding thousands.
                rows = search_rows(c, relid, s,
                                   s.from_param || (nodeTag(p) == T_IndexScan && (qf.geom_pred || qf.geog_pred)));
                c->have_last_box = true;
                c->last_box = s.box;
                c->last_rel = relid;
                c->last_att = s.attnum;
            } else if (OidIsValid(relid) && box_search(c, p->qual, rti, &s)) {
                c->have_last_box = true;  // a box in the filter still says where a join's outer rows are
                c->last_box = s.box;
                c->last_rel = relid;
                c->last_att = s.attnum;
            }
            AttrNumber att;
            double sw, sh;
            if (rows < 0 && OidIsValid(relid) && outer_centre_search(c, quals, p->qual, rti, &att, &sw, &sh)) {
                rows = density_grid_rows_around(relid, att, sw, sh);
                // No grid: the search's share of the column's extent (PostGIS's statistics), as if uniform.
                GisBox ext;
                const double n = reltuples_of(relid);
                if (rows < 0 && n > 0 && estimated_extent(relid, att, &ext)) {
                    const double area = (ext.xmax - ext.xmin) * (ext.ymax - ext.ymin);
                    if (area > 0) rows = std::max(n * std::min(1.0, sw * sh / area), planned(p, par));
                }
            }
            // The bitmap's own estimate is the index condition's; what the heap returns cannot exceed
            // what the bitmap held (PostGIS estimates ST_Contains's @ condition at a flat 100 rows).
            if (rows < 0 && nodeTag(p) == T_BitmapHeapScan && p->lefttree != nullptr)
                rows = std::max(planned(p->lefttree, par), planned(p, par));
            if (rows < 0 && nodeTag(p) == T_IndexScan && quals == NIL && OidIsValid(relid))
                rows = reltuples_of(relid);  // a whole index in order (KNN, ORDER BY): until the consumer stops
            if (rows < 0) rows = planned(p, par);
            // What the filter leaves: the recheck of the searched box keeps most; a box the index
            // does not search (an ordered scan over another key) keeps what the grid says; otherwise
            // the planner's share.
            Search fs{};
            double filtered = -1;
            if (!found && !joined && OidIsValid(relid) && box_search(c, p->qual, rti, &fs))
                filtered = search_rows(c, relid, fs, false);
            double out_full = p->qual == NIL                       ? rows
                              : filtered >= 0                      ? std::min(rows, filtered)
                              : found && (qf.geog_pred || qf.geom_pred) ? 0.8 * rows
                                                                   : std::min(rows, planned(p, par));
            out = price_scan(c, rows, out_full, loops, cap, qf);
            if (!found && !joined && quals == NIL) add_clustered_skip(c, p, rows, out_full, cap, loops);
            // A bitmap is built whole before the first row, whatever stops the heap scan early.
            if (nodeTag(p) == T_BitmapHeapScan && out < out_full)
                c->f.rows[static_cast<int>(core::CostClass::Scan)] += (rows - rows * out / std::max(out_full, 1.0)) * loops;
            // An ordered (KNN) scan computes a distance and keeps a queue per row read.
            if (nodeTag(p) == T_IndexScan && reinterpret_cast<IndexScan*>(p)->indexorderby != NIL)
                c->f.rows[static_cast<int>(core::CostClass::Distance)] += std::min(rows, out * rows / std::max(out_full, 1.0)) * loops;
            processed = rows;
            break;
        }
        case T_SubqueryScan:
            out = visit(c, reinterpret_cast<SubqueryScan*>(p)->subplan, loops, cap, par);
            processed = out;
            break;
        case T_FunctionScan:
        case T_ValuesScan:
        case T_CteScan:
        case T_WorkTableScan:
        case T_NamedTuplestoreScan:
        case T_TableFuncScan:
        case T_TidScan:
        case T_TidRangeScan:
        case T_ForeignScan:
        case T_CustomScan:
            out = price_scan(c, planned(p, par), planned(p, par), loops, cap, qf);
            processed = out;
            break;
        case T_NestLoop: {
            c->have_last_box = false;
            const double outer = visit(c, p->lefttree, loops, -1, par);
            const JoinType jt = reinterpret_cast<Join*>(p)->jointype;
            const bool one = jt == JOIN_SEMI || jt == JOIN_ANTI || reinterpret_cast<Join*>(p)->inner_unique;
            const bool saved_have = c->have_join_box;
            const GisBox saved_box = c->join_box;
            c->have_join_box = c->have_last_box;
            c->join_box = c->last_box;
            // The outer rows found in a box reach out of it by their own size.
            double mw, mh;
            if (c->have_last_box && density_grid_mean_size(c->last_rel, c->last_att, &mw, &mh)) {
                c->join_box.xmin -= mw / 2, c->join_box.xmax += mw / 2;
                c->join_box.ymin -= mh / 2, c->join_box.ymax += mh / 2;
            }
            const double inner = visit(c, p->righttree, loops * std::max(1.0, outer), one ? 1 : -1, 1.0);
            c->have_join_box = saved_have;
            c->join_box = saved_box;
            // Every inner row found is a result unless a join condition remains to be checked.
            const bool all_pushed_down = reinterpret_cast<Join*>(p)->joinqual == NIL && p->qual == NIL;
            out = capped(all_pushed_down ? std::max(1.0, outer) * inner : planned(p, par), cap);
            add_upper(c, out, loops);
            processed = outer + inner;
            break;
        }
        case T_HashJoin:
        case T_MergeJoin: {
            const double outer = visit(c, p->lefttree, loops, -1, par);
            const double inner = visit(c, p->righttree, loops, -1, par);
            out = capped(planned(p, par), cap);
            add_upper(c, outer + inner + out, loops);
            processed = outer + inner;
            break;
        }
        case T_Hash:
        case T_Sort:
        case T_IncrementalSort:
        case T_Material: {
            const double in = visit(c, p->lefttree, loops, -1, par);
            add_upper(c, in, loops);
            out = capped(in, cap);
            processed = in;
            break;
        }
        case T_Agg:
        case T_WindowAgg:
        case T_Group:
        case T_SetOp:
        case T_Unique: {
            const double in = visit(c, p->lefttree, loops, -1, par);
            add_upper(c, in, loops);
            out = capped(std::min(in, std::max(1.0, planned(p, par))), cap);
            processed = in;
            // ST_AsMVT(ROW(…, ST_AsMVTGeom(…))) encodes every input row.
            if (tf.encode) c->f.rows[static_cast<int>(core::CostClass::Encode)] += in * loops;
            break;
        }
        case T_Limit: {
            auto* l = reinterpret_cast<Limit*>(p);
            int64 count = -1, offset = 0;
            double lim = -1;
            if (l->limitCount != nullptr && eval_int(c->w, l->limitCount, &count) &&
                (l->limitOffset == nullptr || eval_int(c->w, l->limitOffset, &offset)))
                lim = static_cast<double>(std::max<int64>(count, 0)) + static_cast<double>(std::max<int64>(offset, 0));
            const double child_cap = lim < 0 ? cap : cap < 0 ? lim : std::min(cap, lim);
            const double in = visit(c, p->lefttree, loops, child_cap, par);
            out = count >= 0 ? std::min(in, static_cast<double>(count)) : in;
            processed = in;
            break;
        }
        case T_Gather:
            c->f.calls[static_cast<int>(core::CostClass::Worker)] += loops * reinterpret_cast<Gather*>(p)->num_workers;
            out = visit(c, p->lefttree, loops, cap, parallel_divisor(reinterpret_cast<Gather*>(p)->num_workers));
            processed = out;
            break;
        case T_GatherMerge:
            c->f.calls[static_cast<int>(core::CostClass::Worker)] += loops * reinterpret_cast<GatherMerge*>(p)->num_workers;
            out = visit(c, p->lefttree, loops, cap, parallel_divisor(reinterpret_cast<GatherMerge*>(p)->num_workers));
            processed = out;
            break;
        case T_Append:
            out = visit_list(c, reinterpret_cast<Append*>(p)->appendplans, loops, cap, par);
            processed = out;
            break;
        case T_MergeAppend:
            out = visit_list(c, reinterpret_cast<MergeAppend*>(p)->mergeplans, loops, cap, par);
            processed = out;
            break;
        case T_RecursiveUnion:
        case T_BitmapAnd:
        case T_BitmapOr:
        case T_BitmapIndexScan:
        default: {
            const double l = visit(c, p->lefttree, loops, p->righttree == nullptr ? cap : -1, par);
            const double r = visit(c, p->righttree, loops, -1, par);
            out = p->lefttree != nullptr && p->righttree == nullptr ? l : capped(planned(p, par), cap);
            processed = l + r;
            if (p->lefttree == nullptr) out = capped(std::max(1.0, planned(p, par)), cap);
            break;
        }
    }
    if (tf.encode && !IsA(p, Agg) && !IsA(p, WindowAgg) && !IsA(p, Group) && !IsA(p, SetOp) && !IsA(p, Unique))
        c->f.rows[static_cast<int>(core::CostClass::Encode)] += out * loops;
    for (const ExprFacts* f : {&tf, &qf})
        for (int i = 0; i < f->nsub; i++)
            if (f->sub[i] >= 1 && f->sub[i] <= kMaxSubplans)
                c->subplan_loops[f->sub[i] - 1] = std::max(c->subplan_loops[f->sub[i] - 1], loops * std::max(1.0, processed));
    return out;
}

core::PlanFeatures plan_features(PlannedStmt* stmt, Walk* w) {
    PlanCtx c{};
    c.w = w;
    visit(&c, stmt->planTree, 1, -1, 1);
    int id = 0;
    ListCell* lc;
    foreach (lc, stmt->subplans) {
        const double loops = id < kMaxSubplans && c.subplan_loops[id] > 0 ? c.subplan_loops[id] : 1;
        visit(&c, static_cast<Plan*>(lfirst(lc)), loops, -1, 1);
        id++;
    }
    return c.f;
}

}  // namespace

// The planner lists every non-built-in function a plan calls (operators'
// and aggregates' too) among its invalidation items, to replan when one
// changes. No such item: no PostGIS call, and no walk needed.
bool calls_extension_functions(const PlannedStmt* stmt) {
    ListCell* lc;
    foreach (lc, stmt->invalItems)
        if (lfirst_node(PlanInvalItem, lc)->cacheId == PROCOID) return true;
    return false;
}

StatementPricing price_planned_statement(PlannedStmt* stmt, ParamListInfo params) {
    if (!calls_extension_functions(stmt)) return {nullptr, 0, {false, core::kNoLimit, {}}, {}};
    Walk w{params, stmt->rtable, nullptr, nullptr, 0, 0, false, false, core::kNoLimit, nullptr, -1, false};
    walk_plan(stmt->planTree, &w);
    ListCell* lc;
    foreach (lc, stmt->subplans) walk_plan(static_cast<Plan*>(lfirst(lc)), &w);
    // Plan-wide terms for every statement that uses PostGIS.
    core::PlanFeatures plan{};
    if (w.saw_postgis || w.ncalls > 0) {
        plan = plan_features(stmt, &w);
        core::PricedCall* c = add_call(&w, core::CallKind::Plan, GisRole::None);
        c->function = "plan";
        c->known = true;
        c->scans = plan.calls[static_cast<int>(core::CostClass::Scan)];
        c->probes = plan.calls[static_cast<int>(core::CostClass::Join)];
        c->workers = plan.calls[static_cast<int>(core::CostClass::Worker)];
        c->scan_rows = plan.rows[static_cast<int>(core::CostClass::Scan)];
        c->upper_rows = plan.rows[static_cast<int>(core::CostClass::Join)];
        c->encode_rows = plan.rows[static_cast<int>(core::CostClass::Encode)];
        c->predicate_rows = plan.rows[static_cast<int>(core::CostClass::Distance)];
    }
    // A tile aggregate whose bounds could not be read is a tile of unknown size.
    if (w.asmvt) {
        bool have_tile = false;
        for (int i = 0; i < w.ncalls; i++) have_tile |= w.calls[i].kind == core::CallKind::Tile;
        if (!have_tile) add_call(&w, core::CallKind::Tile, GisRole::AsMVT);
    }
    StatementPricing out{w.calls, w.ncalls, {w.builds_tiles, w.limit, plan}, {}};
    if (w.ncalls > 0) out.price = core::price_statement(current_cost_model(), w.calls, w.ncalls, out.facts);
    return out;
}

char* describe_call(const core::PricedCall& c, int index) {
    StringInfoData s;
    initStringInfo(&s);
    appendStringInfo(&s, "#%d %s", index + 1, c.function);
    if (!c.known) {
        appendStringInfoString(&s, " (argument known only during execution)");
    } else {
        switch (c.kind) {
            case core::CallKind::Radius: appendStringInfo(&s, " radius %g m", c.radius_m); break;
            case core::CallKind::Bbox: appendStringInfo(&s, " box %g km²", c.area_km2); break;
            case core::CallKind::Plan:
                appendStringInfo(&s, ": %g scan(s) reading ~%.0f rows", c.scans, c.scan_rows);
                if (c.probes > 0) appendStringInfo(&s, " in ~%.0f nested-loop probes", c.probes);
                if (c.upper_rows > 0) appendStringInfo(&s, ", ~%.0f rows through joins/sorts/aggregates", c.upper_rows);
                if (c.encode_rows > 0) appendStringInfo(&s, ", ~%.0f rows encoded", c.encode_rows);
                if (c.predicate_rows > 0) appendStringInfo(&s, ", ~%.0f exact-predicate rows", c.predicate_rows);
                if (c.workers > 0) appendStringInfo(&s, ", %g parallel worker(s)", c.workers);
                break;
            case core::CallKind::Tile:
                if (c.zoom >= 0)
                    appendStringInfo(&s, " zoom %d", c.zoom);
                else
                    appendStringInfo(&s, " tile bounds %g km²", c.area_km2);
                break;
        }
    }
    if (c.known && c.rows >= 0 && c.kind != core::CallKind::Tile)
        appendStringInfo(&s, ", ~%.0f rows by PostGIS's statistics", c.rows);
    if (c.folded_into_tile)
        appendStringInfoString(&s, ": part of the tile, not charged");
    else if (c.same_as >= 0)
        appendStringInfo(&s, ": same box as #%d", c.same_as + 1);
    else
        appendStringInfo(&s, ": %g", c.cost);
    return s.data;
}

char* describe_pricing(const StatementPricing& p) {
    StringInfoData s;
    initStringInfo(&s);
    for (int i = 0; i < p.ncalls; i++) {
        if (i > 0) appendStringInfoString(&s, "; ");
        appendStringInfoString(&s, describe_call(p.calls[i], i));
    }
    if (p.facts.limit >= 0) appendStringInfo(&s, "; rows capped at %g by LIMIT", p.facts.limit);
    if (p.price.clamped) appendStringInfoString(&s, "; total clamped at ogc_throttle.cost_max");
    return s.data;
}

}  // namespace ot::ext
