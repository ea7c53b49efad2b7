// Recording the priced PostGIS calls of a plan (a radius search, a box
// filter, a tile envelope, MVT geometry) with their arguments' values for
// this execution, for the calls' fixed terms and the explanation.
#include "ext/plan_pricing_walk.hpp"

#include <algorithm>
#include <cmath>

#include "core/geo.hpp"
#include "ext/density_grid.hpp"
#include "ext/srs_units.hpp"

extern "C" {
#include "miscadmin.h"
#include "nodes/nodeFuncs.h"
#include "parser/parsetree.h"
#include "utils/memutils.h"
}

namespace ot::ext::plan {

void start_walk(Walk* w, ParamListInfo params, List* rtable) {
    w->params = params;
    w->rtable = rtable;
    w->eval_cxt = nullptr;
    w->calls = nullptr;
    w->ncalls = w->capacity = 0;
    w->builds_tiles = w->asmvt = false;
    w->limit = core::kNoLimit;
    w->nestloop_params = nullptr;
    w->plan_rows = -1;
    w->saw_postgis = w->saw_costly_function = false;
    w->ngrid = w->neval = w->nbox = w->nexpanded = 0;
    w->facts = nullptr;
    w->kept_ids = 0;
}

core::PricedCall* add_call(Walk* w, core::CallKind kind, GisRole role) {
    if (w->ncalls == w->capacity) {
        w->capacity = w->capacity == 0 ? 8 : w->capacity * 2;
        const size_t bytes = sizeof(core::PricedCall) * w->capacity;
        // In the caller's context, as the evaluation context is: a statement that evaluates nothing
        // (its arguments planned as constants) creates no context at all.
        w->calls = static_cast<core::PricedCall*>(w->calls == nullptr ? palloc(bytes) : repalloc(w->calls, bytes));
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

namespace {

core::Box to_box(const GisBox& b) { return {b.xmin, b.ymin, b.xmax, b.ymax, b.srid}; }

double area_of(const GisBox& b) {
    if (core::bbox_problem(b.xmin, b.ymin, b.xmax, b.ymax) != nullptr) return -1;
    const core::Srs srs = srs_for_box(b.srid, b.xmin, b.ymin, b.xmax, b.ymax);
    return core::bbox_area_km2(srs, b.xmin, b.ymin, b.xmax, b.ymax);
}

// A call priced by the area of a box known now; false when the box is unusable.
bool priced_by_box(core::PricedCall* c, const GisBox& box) {
    const double area = area_of(box);
    if (area < 0) return false;
    c->known = true;
    c->area_km2 = area;
    c->has_box = true;
    c->box = to_box(box);
    return true;
}

// A geometry side of a call: evaluated if it can be, else its column's SRID.
struct Side {
    bool evaluated;
    bool has_box;
    GisBox box;
    int32 srid;
    Datum value;  // when evaluated; 0 while only its box is known (known_box)
    Node* expr;
};

Side read_geometry(Walk* w, Node* e) {
    Side s{false, false, {}, 0, 0, e};
    Datum d;
    if (column_walker(e, w)) {
        s.srid = srid_from_typmod(exprTypmod(e));
    } else if (known_box(w, e, &s.box)) {
        s.evaluated = s.has_box = true;
        s.srid = s.box.srid;
    } else if (eval(w, e, &d)) {
        s.evaluated = true;
        s.value = d;
        s.has_box = box_of(w, d, &s.box);
        s.srid = s.has_box ? s.box.srid : geometry_srid(d);
    } else {
        s.srid = srid_from_typmod(exprTypmod(e));
    }
    return s;
}

// An evaluated side's value, computed now if only its box was.
Datum value_of(Walk* w, const Side& s) {
    Datum d = s.value;
    if (d == 0 && !eval(w, s.expr, &d)) d = 0;
    return d;
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

// Rows a search over a base column meets: its density grid's count when it
// has one. Otherwise, when the planner saw the search's
// value (a literal, a folded constant, a custom plan), its estimate for the
// scan — made by PostGIS's own selectivity function — is already in the plan,
// for free. A generic plan estimated a parameter blindly: then ask PostGIS for
// this execution's value (about 100 µs), once per distinct box per statement.
// The searched geometry is search_side's value (else search_geometry), grown by
// expand_by when that is not negative; made only if PostGIS is asked.
double rows_met(Walk* w, Node* column, Node* search, const Side* search_side, Datum search_geometry,
                double expand_by, const core::Box& box, core::RowsSource* source) {
    Oid relid;
    AttrNumber attnum;
    if (!base_column(w, column, &relid, &attnum)) return -1;
    // The column's density grid first: the number the plan-wide scan uses too.
    const double grid = grid_rows(w, relid, attnum, box.xmin, box.ymin, box.xmax, box.ymax);
    if (grid >= 0) {
        *source = core::RowsSource::Grid;
        return grid;
    }
    if (!param_walker(search, nullptr)) {
        *source = core::RowsSource::Plan;
        return has_statistics(relid, attnum) ? w->plan_rows : -1;
    }
    *source = core::RowsSource::Statistics;
    const double before = rows_asked_before(w, box, w->ncalls - 1);
    if (before >= 0) return before;
    if (search_side != nullptr) search_geometry = value_of(w, *search_side);
    if (search_geometry != 0 && expand_by >= 0 && !expand_geometry(search_geometry, expand_by, &search_geometry))
        return -1;
    return search_geometry != 0 ? estimated_rows(relid, attnum, search_geometry) : -1;
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
        // The centre is made, and grown by r, only if PostGIS is asked (no grid): it has a box, so
        // PostGIS's helpers are there and ST_Expand of it succeeds. (Made first, a generic plan's
        // ST_SetSRID(ST_MakePoint($1, $2), 3857) went through PostGIS for a grid that never read it.)
        if (blind && role == GisRole::DWithinGeometry)
            c->rows = rows_met(w, column, reinterpret_cast<Node*>(args), &point, 0, r, c->box, &c->rows_source);
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
    if (!priced_by_box(c, s.box)) return;
    c->rows = rows_met(w, ca ? a : b, ca ? b : a, &s, 0, -1, c->box, &c->rows_source);
}

void on_make_envelope(Walk* w, Node* call) {
    core::PricedCall* c = add_call(w, core::CallKind::Bbox, GisRole::MakeEnvelope);
    Datum d;
    GisBox box;
    if (eval(w, call, &d) && box_of(w, d, &box)) priced_by_box(c, box);
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
    if (known_box(w, call, &box) || (eval(w, call, &d) && box_of(w, d, &box))) {
        c->has_box = true;
        c->box = to_box(box);
    }
}

void on_mvt_geom(Walk* w, List* args) {
    w->builds_tiles = true;
    core::PricedCall* c = add_call(w, core::CallKind::Tile, GisRole::AsMVTGeom);
    if (list_length(args) < 2) return;
    Node* bounds = static_cast<Node*>(lsecond(args));
    GisBox box;
    // box2d(ST_TileEnvelope(…)), the usual bounds: the envelope's box, read without building it.
    auto* cast = IsA(bounds, FuncExpr) ? reinterpret_cast<FuncExpr*>(bounds) : nullptr;
    const bool known = cast != nullptr && list_length(cast->args) == 1 && is_box2d_of_geometry(cast->funcid) &&
                       known_box(w, static_cast<Node*>(linitial(cast->args)), &box);
    Datum d;
    if (!known && (!eval(w, bounds, &d) || !box2d_box(d, &box))) return;
    // box2d carries no SRID: take the geometry column's, else guess (tile
    // bounds are nearly always Web Mercator metres).
    box.srid = srid_from_typmod(exprTypmod(static_cast<Node*>(linitial(args))));
    if (box.srid == 0)
        box.srid = core::guess_unknown_srs(box.xmin, box.ymin, box.xmax, box.ymax).units == core::Units::Linear ? 3857
                                                                                                            : 4326;
    priced_by_box(c, box);
}

// One pass serves both walks: the calls are recorded, and the facts of the
// list being walked (w->facts, when the visit wants them) added, in the
// same pre-order the plan-wide walk read them in.
bool expr_walker(Node* node, Walk* w);

// A list of expressions, in order: what expression_tree_walker does with a
// List, without the detour through it (a call and a stack check per list).
void walk_each(List* l, Walk* w) {
    ListCell* lc;
    foreach (lc, l) expr_walker(static_cast<Node*>(lfirst(lc)), w);
}

bool expr_walker(Node* node, Walk* w) {
    if (node == nullptr || is_leaf(node)) return false;
    // The lists, entries and calls most of a plan's expressions are made of are descended here, in
    // expression_tree_walker's order; everything else through it.
    if (IsA(node, List)) {
        walk_each(reinterpret_cast<List*>(node), w);
        return false;
    }
    if (IsA(node, TargetEntry)) return expr_walker(reinterpret_cast<Node*>(reinterpret_cast<TargetEntry*>(node)->expr), w);
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
        if (w->facts != nullptr) add_function_facts(w->facts, role, f->funcid, f->args);
        check_stack_depth();
        walk_each(f->args, w);
        return false;
    } else if (IsA(node, OpExpr)) {
        auto* o = reinterpret_cast<OpExpr*>(node);
        if (o->opfuncid == InvalidOid) set_opfuncid(o);
        const GisRole role = gis_role(o->opfuncid);
        w->saw_postgis |= role != GisRole::None;
        if (role == GisRole::OverlapsGeometry) on_bbox_filter(w, GisRole::OverlapsGeometry, o->args);
        if (w->facts != nullptr) add_function_facts(w->facts, role, o->opfuncid, o->args);
        check_stack_depth();
        walk_each(o->args, w);
        return false;
    } else if (IsA(node, BoolExpr)) {
        check_stack_depth();
        walk_each(reinterpret_cast<BoolExpr*>(node)->args, w);
        return false;
    } else if (IsA(node, Aggref)) {
        const GisRole role = gis_role(reinterpret_cast<Aggref*>(node)->aggfnoid);
        w->saw_postgis |= role != GisRole::None;
        if (role == GisRole::AsMVT) {
            w->builds_tiles = true;
            w->asmvt = true;
        }
        if (w->facts != nullptr) add_aggregate_facts(w->facts, reinterpret_cast<Aggref*>(node), role);
    } else if (IsA(node, SubPlan)) {
        if (w->facts != nullptr) add_subplan_facts(w->facts, reinterpret_cast<SubPlan*>(node));
    }
    return expression_tree_walker(node, as_walker(expr_walker), w);
}

void walk_exprs(Node* n, Walk* w) {
    if (n != nullptr) expr_walker(n, w);
}

// A node's targetlist or qual: its calls, and its facts into *f.
void walk_list(List* l, Walk* w, ExprFacts* f) {
    w->facts = f;
    walk_exprs(reinterpret_cast<Node*>(l), w);
    w->facts = nullptr;
}

void on_limit(Walk* w, Limit* l) {
    // LIMIT n OFFSET m reads n + m rows; of several LIMITs the largest bounds the work.
    int64 count;
    const double rows = limit_rows(w, l, &count);
    if (rows >= 0) w->limit = std::max(w->limit, rows);
}


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

}  // namespace

void walk_plan(Plan* p, Walk* w) {
    if (p == nullptr) return;
    check_stack_depth();
    w->plan_rows = p->plan_rows;
    const int id = p->plan_node_id;
    if (id >= 0 && id < kKeptNodes) {
        NodeFacts* k = &w->kept[id];
        k->plan = p;
        k->tf = ExprFacts{};
        k->qf = ExprFacts{};
        walk_list(p->targetlist, w, &k->tf);
        walk_list(p->qual, w, &k->qf);
        w->kept_ids |= uint32{1} << id;
    } else {
        walk_list(p->targetlist, w, nullptr);
        walk_list(p->qual, w, nullptr);
    }
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

}  // namespace ot::ext::plan
