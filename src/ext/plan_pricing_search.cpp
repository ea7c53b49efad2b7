// Scan selectivity for plan-wide pricing: what a scan's index condition
// searches (a box, a geography radius, an outer row's neighbourhood, the
// other side of a spatial join) and how many rows that search meets.
#include "ext/plan_pricing_walk.hpp"

#include <algorithm>
#include <cmath>

#include "ext/catalog_memo.hpp"
#include "ext/density_grid.hpp"

extern "C" {
#include "access/htup_details.h"
#include "catalog/pg_class.h"
#include "catalog/pg_proc.h"
#include "nodes/nodeFuncs.h"
#include "parser/parsetree.h"
#include "utils/syscache.h"
}

namespace ot::ext::plan {

double reltuples_of(Oid relid) { return memo_reltuples(relid); }

double relpages_of(Oid relid) { return memo_relpages(relid); }

Oid scan_relation(PlanCtx* c, Plan* p) {
    const Index rti = reinterpret_cast<Scan*>(p)->scanrelid;
    if (rti < 1 || rti > static_cast<Index>(list_length(c->w->rtable))) return InvalidOid;
    RangeTblEntry* rte = rt_fetch(rti, c->w->rtable);
    return rte->rtekind == RTE_RELATION ? rte->relid : InvalidOid;
}

namespace {

// The scan column a spatial expression searches (a Var of this scan).
bool scan_column(Node* e, Index scanrelid, AttrNumber* attnum) {
    while (IsA(e, RelabelType)) e = reinterpret_cast<Node*>(reinterpret_cast<RelabelType*>(e)->arg);
    if (!IsA(e, Var)) return false;
    auto* v = reinterpret_cast<Var*>(e);
    if (v->varno != static_cast<int>(scanrelid) || v->varattno <= 0) return false;
    *attnum = v->varattno;
    return true;
}

// A spatial test of a scan's column among its conditions: an operator with
// the column on one side, or a function with it as one of its first two
// arguments (ST_DWithin(col, point, r)).
struct ColumnTest {
    GisRole role;
    AttrNumber attnum;
    Node* other;  // the other side
    List* args;
};

bool column_test(Node* n, Index scanrelid, ColumnTest* t) {
    List* args;
    Oid fn;
    if (IsA(n, OpExpr)) {
        auto* o = reinterpret_cast<OpExpr*>(n);
        if (list_length(o->args) != 2) return false;
        if (o->opfuncid == InvalidOid) set_opfuncid(o);
        fn = o->opfuncid;
        args = o->args;
    } else if (IsA(n, FuncExpr)) {
        auto* f = reinterpret_cast<FuncExpr*>(n);
        if (list_length(f->args) < 2) return false;
        fn = f->funcid;
        args = f->args;
    } else {
        return false;
    }
    t->role = gis_role(fn);
    if (t->role == GisRole::None) return false;
    Node* a = static_cast<Node*>(linitial(args));
    Node* b = static_cast<Node*>(lsecond(args));
    t->other = scan_column(a, scanrelid, &t->attnum) ? b : scan_column(b, scanrelid, &t->attnum) ? a : nullptr;
    t->args = args;
    return t->other != nullptr;
}

bool is_box_operator(GisRole r) {
    return r == GisRole::OverlapsGeometry || r == GisRole::ContainsGeometryOp || r == GisRole::WithinGeometryOp;
}

// The radius argument of ST_DWithin(geography column, value, r).
bool geography_radius(PlanCtx* c, const ColumnTest& t, double* r) {
    return t.role == GisRole::DWithinGeography && list_length(t.args) >= 3 &&
           eval_float8(c->w, static_cast<Node*>(lthird(t.args)), r);
}

}  // namespace

// ST_DWithin(geography column, point, r) among the quals: the box of the
// radius around the point, in degrees (generous: the shortest metres per degree).
bool geography_radius_search(PlanCtx* c, List* quals, Index scanrelid, Search* out) {
    ListCell* lc;
    foreach (lc, quals) {
        ColumnTest t;
        double r;
        Datum g, geom;
        GisBox box;
        if (!column_test(static_cast<Node*>(lfirst(lc)), scanrelid, &t) || column_walker(t.other, c->w) ||
            !geography_radius(c, t, &r) || !(r >= 0))
            continue;
        if (!eval(c->w, t.other, &g) || !geography_as_geometry(g, &geom) || !box_of(c->w, geom, &box)) continue;
        const double dlat = r / 110574.0;
        const double lat = std::min(89.0, std::max(std::fabs(box.ymin), std::fabs(box.ymax)) + dlat);
        const double dlon = std::min(360.0, dlat / std::cos(lat * 3.14159265358979323846 / 180.0));
        out->attnum = t.attnum;
        out->box = {box.xmin - dlon, box.ymin - dlat, box.xmax + dlon, box.ymax + dlat, 4326};
        out->geography = true;
        out->geometry = 0;
        out->from_param = param_walker(t.other, nullptr);
        return true;
    }
    return false;
}

// A box index condition (&&, ~, @) of this scan against a value known now.
bool box_search(PlanCtx* c, List* quals, Index scanrelid, Search* out) {
    ListCell* lc;
    foreach (lc, quals) {
        ColumnTest t;
        Datum d;
        if (!column_test(static_cast<Node*>(lfirst(lc)), scanrelid, &t) || !IsA(lfirst(lc), OpExpr) ||
            !(is_box_operator(t.role) || t.role == GisRole::OverlapsGeography) || column_walker(t.other, c->w))
            continue;
        out->geometry_expr = nullptr;
        if (t.role != GisRole::OverlapsGeography && known_box(c->w, t.other, &out->box)) {
            out->geography = false;
            out->geometry = 0;
            out->geometry_expr = t.other;  // evaluated only if PostGIS is asked
        } else if (!eval(c->w, t.other, &d)) {
            continue;
        } else if (t.role == GisRole::OverlapsGeography) {
            Datum geom;
            if (!geography_as_geometry(d, &geom) || !box_of(c->w, geom, &out->box)) continue;
            // A geography box made by _st_expand keeps only its point here: no use.
            if (out->box.xmax - out->box.xmin < 1e-12 && out->box.ymax - out->box.ymin < 1e-12) continue;
            out->geography = true;
            out->geometry = 0;
        } else {
            if (!box_of(c->w, d, &out->box)) out->box = {0, 0, -1, -1, 0};  // an empty geometry: nothing matches
            out->geography = false;
            out->geometry = d;
        }
        out->attnum = t.attnum;
        out->from_param = param_walker(t.other, nullptr);
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
        ColumnTest t;
        if (!IsA(lfirst(lc), OpExpr) || !column_test(static_cast<Node*>(lfirst(lc)), scanrelid, &t) ||
            t.role != GisRole::OverlapsGeometry || !IsA(t.other, FuncExpr))
            continue;
        auto* f = reinterpret_cast<FuncExpr*>(t.other);
        double r;
        if (!is_st_expand(f->funcid) || list_length(f->args) != 2 ||
            !column_walker(static_cast<Node*>(linitial(f->args)), c->w) ||
            !eval_float8(c->w, static_cast<Node*>(lsecond(f->args)), &r))
            continue;
        *attnum = t.attnum;
        *w = *h = 2 * std::max(r, 0.0);
        return true;
    }
    foreach (lc, filter) {
        ColumnTest t;
        double r;
        // A known centre is priced as such.
        if (!column_test(static_cast<Node*>(lfirst(lc)), scanrelid, &t) || !column_walker(t.other, c->w) ||
            !geography_radius(c, t, &r))
            continue;
        *attnum = t.attnum;
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
        ColumnTest t;
        // A bare outer column (an ST_Expand of one is a radius search, priced apart).
        if (column_test(static_cast<Node*>(lfirst(lc)), scanrelid, &t) && IsA(lfirst(lc), OpExpr) &&
            is_box_operator(t.role) && (IsA(t.other, Param) || IsA(t.other, Var)) && column_walker(t.other, c->w)) {
            *attnum = t.attnum;
            return true;
        }
    }
    return false;
}

double search_rows(PlanCtx* c, Oid relid, const Search& s, bool may_ask_postgis, core::RowsSource* source) {
    core::RowsSource ignored;
    if (source == nullptr) source = &ignored;
    *source = core::RowsSource::Grid;
    if (s.box.xmax < s.box.xmin) return 0;
    const double g = grid_rows(c->w, relid, s.attnum, s.box.xmin, s.box.ymin, s.box.xmax, s.box.ymax);
    if (g >= 0) return g;
    if (may_ask_postgis && !s.geography && (s.geometry != 0 || s.geometry_expr != nullptr)) {
        // For a parameter the call walk asked PostGIS already for the same box (ST_DWithin's, a &&
        // filter's): once per statement. (For a literal its rows are the plan's, not PostGIS's.)
        *source = core::RowsSource::Statistics;
        const double before =
            s.from_param ? rows_asked_before(c->w, {s.box.xmin, s.box.ymin, s.box.xmax, s.box.ymax, s.box.srid},
                                             c->w->ncalls)
                         : -1;
        if (before >= 0) return before;
        Datum g = s.geometry;
        if (g == 0 && !eval(c->w, s.geometry_expr, &g)) return -1;
        return estimated_rows(relid, s.attnum, g);
    }
    *source = core::RowsSource::Plan;
    return -1;
}

}  // namespace ot::ext::plan
