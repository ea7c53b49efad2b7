// Evaluating a pricing argument before execution, with this execution's
// parameters: only Var-free, non-volatile expressions (a column or an outer
// row's value is known only while the plan runs).
#include "ext/plan_pricing_walk.hpp"

#include <algorithm>
#include <cmath>

#include "ext/direct_eval.hpp"

extern "C" {
#include "executor/executor.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/optimizer.h"
#include "utils/datum.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
}

namespace ot::ext::plan {
namespace {

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
        case T_Const:
            return false;
        default:
            break;
    }
    return expression_tree_walker(node, as_walker(not_evaluable_walker), w);
}

bool evaluable(Node* e, Walk* w) {
    return !not_evaluable_walker(e, w) && !contain_volatile_functions(e);
}

}  // namespace

MemoryContext walk_context(Walk* w) {
    if (w->eval_cxt == nullptr)
        w->eval_cxt = AllocSetContextCreate(CurrentMemoryContext, "ogc_throttle pricing", ALLOCSET_SMALL_SIZES);
    return w->eval_cxt;
}

bool box_of(Walk* w, Datum geometry, GisBox* out) {
    for (int i = 0, n = std::min(w->nbox, kWalkMemo); i < n; i++)
        if (w->boxes[i].geometry == geometry) {
            *out = w->boxes[i].box;
            return true;
        }
    // Only boxes found are kept: a value without one (an empty geometry) leaves *out as the
    // caller had it, every time.
    if (!geometry_box(geometry, out)) return false;
    w->boxes[w->nbox++ % kWalkMemo] = {geometry, *out};
    return true;
}

// ST_Expand(g, d) with g and d known now and d >= 0: LWGEOM_expand makes the polygon of g's box
// grown by d on each side (the same doubles, g's SRID), whose box is that box. The search of
// ST_DWithin's index condition, read without making and reading the polygon; its value is
// evaluated only if something asks for it (eval, memoised as usual). A tile's envelope
// likewise: building it through PostGIS (three times a tile statement under a generic plan) was
// over two fifths of what the hook added to one (bench/HISTORY.md, 2026-12-04).
namespace {

bool expand_box(Walk* w, FuncExpr* f, GisBox* out) {
    double d;
    Datum g;
    GisBox b;
    if (!eval_float8(w, static_cast<Node*>(lsecond(f->args)), &d) || !std::isfinite(d) || !(d >= 0)) return false;
    Node* inner = static_cast<Node*>(linitial(f->args));
    // (a custom plan's point is a constant: asked only of a call)
    if (!(IsA(inner, FuncExpr) && known_box(w, inner, &b)) && (!eval(w, inner, &g) || !box_of(w, g, &b)))
        return false;
    // An empty g (no box) is returned as it is; a NaN would order differently in PostGIS's min and max.
    if (std::isnan(b.xmin) || std::isnan(b.ymin) || std::isnan(b.xmax) || std::isnan(b.ymax)) return false;
    *out = {b.xmin - d, b.ymin - d, b.xmax + d, b.ymax + d, b.srid};
    return true;
}

// ST_SetSRID(ST_MakePoint(x, y[, z[, m]]), srid), or ST_MakePoint alone (SRID 0), its arguments
// known: the point PostGIS would make has the box (x, y, x, y), as geometry_box reads a point.
// A search around a point given as parameters (a generic plan's ST_DWithin(geom,
// ST_SetSRID(ST_MakePoint($1, $2), 3857), $3)) was a third of what pricing it took, in PostGIS
// building the point. An SRID PostGIS would change (below 0, above 999 999: it clamps it, with a
// NOTICE) and coordinates that are not finite are left to PostGIS.
bool point_box(Walk* w, FuncExpr* f, GisBox* out) {
    int64 srid = 0;
    if (is_set_srid(f->funcid)) {
        auto* inner = static_cast<Node*>(linitial(f->args));
        if (!IsA(inner, FuncExpr)) return false;
        if (!eval_int(w, static_cast<Node*>(lsecond(f->args)), &srid) || srid < 0 || srid > 999999) return false;
        f = reinterpret_cast<FuncExpr*>(inner);
        if (f->funcretset || !is_make_point(f->funcid, list_length(f->args))) return false;
    }
    double xy[2];
    int i = 0;
    ListCell* lc;
    foreach (lc, f->args) {
        double v;  // z and m too: a NULL one makes the point NULL (ST_MakePoint is strict)
        if (!eval_float8(w, static_cast<Node*>(lfirst(lc)), &v)) return false;
        if (i < 2) {
            if (!std::isfinite(v)) return false;
            xy[i] = v;
        }
        i++;
    }
    *out = {xy[0], xy[1], xy[0], xy[1], static_cast<int32>(srid)};
    return true;
}

// ST_TileEnvelope(zoom, x, y, bounds, margin) as PostGIS 3 computes it (the same double
// operations in the same order, bounds read from their coordinates), so the box is the one its
// polygon's box would be. Whatever PostGIS would refuse (a zoom, x or y out of range, a margin
// under -0.5, bounds without area) is left to it: evaluated, it raises its own error.
bool tile_box(Walk* w, FuncExpr* f, GisBox* out) {
    const int nargs = list_length(f->args);
    if (nargs != 4 && nargs != 5) return false;
    int64 zoom, x, y;
    Datum bounds;
    GisBox b;
    double margin = 0;
    if (!eval_int(w, static_cast<Node*>(list_nth(f->args, 0)), &zoom) ||
        !eval_int(w, static_cast<Node*>(list_nth(f->args, 1)), &x) ||
        !eval_int(w, static_cast<Node*>(list_nth(f->args, 2)), &y) ||
        (nargs == 5 && !eval_float8(w, static_cast<Node*>(list_nth(f->args, 4)), &margin)))
        return false;
    if (!std::isfinite(margin) || margin < -0.5 || zoom < 0 || zoom >= 32) return false;
    if (!eval(w, static_cast<Node*>(list_nth(f->args, 3)), &bounds) || !box_of(w, bounds, &b)) return false;
    const double bounds_width = b.xmax - b.xmin, bounds_height = b.ymax - b.ymin;
    if (!(bounds_width > 0) || !(bounds_height > 0)) return false;
    const uint32 world = 1u << static_cast<uint32>(zoom);
    if (x < 0 || x >= world || y < 0 || y >= world) return false;
    const int32 tx = static_cast<int32>(x), ty = static_cast<int32>(y);
    const double size_x = bounds_width / world, size_y = bounds_height / world;
    double x1, x2;
    if ((1 + margin * 2) > world) {
        x1 = b.xmin;
        x2 = b.xmax;
    } else {
        x1 = b.xmin + size_x * (tx - margin);
        x2 = b.xmin + size_x * (tx + 1 + margin);
    }
    double y1 = b.ymax - size_y * (ty + 1 + margin);
    double y2 = b.ymax - size_y * (ty - margin);
    if (y1 < b.ymin) y1 = b.ymin;
    if (y2 > b.ymax) y2 = b.ymax;
    *out = {std::min(x1, x2), std::min(y1, y2), std::max(x1, x2), std::max(y1, y2), b.srid};
    return true;
}

}  // namespace

bool known_box(Walk* w, Node* e, GisBox* out) {
    if (!IsA(e, FuncExpr)) return false;
    auto* f = reinterpret_cast<FuncExpr*>(e);
    if (f->funcretset) return false;
    const int nargs = list_length(f->args);
    const bool expand = nargs == 2 && is_foldable_st_expand(f->funcid);
    const bool tile = !expand && nargs >= 4 && gis_role(f->funcid) == GisRole::TileEnvelope;
    if (!expand && !tile && !is_point_call(f->funcid, nargs)) return false;
    for (int i = 0, n = std::min(w->nexpanded, kKnownBoxes); i < n; i++)
        if (w->expanded[i].expr == e) {
            *out = w->expanded[i].box;
            return true;
        }
    if (!(expand ? expand_box(w, f, out) : tile ? tile_box(w, f, out) : point_box(w, f, out))) return false;
    w->expanded[w->nexpanded++ % kKnownBoxes] = {e, *out};
    return true;
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
    if (is_leaf(node)) return false;
    return expression_tree_walker(node, as_walker(column_walker), w);
}

bool param_walker(Node* node, void*) {
    if (node == nullptr) return false;
    if (IsA(node, Param)) return true;
    if (is_leaf(node)) return false;
    return expression_tree_walker(node, as_walker(param_walker), nullptr);
}

bool evaluate(Walk* w, Node* e, Datum* out);

// Evaluates a Var-free, non-volatile expression with this execution's
// parameters; the result lives in w->eval_cxt.
bool eval(Walk* w, Node* e, Datum* out) {
    if (IsA(e, Const)) {
        auto* c = reinterpret_cast<Const*>(e);
        *out = c->constvalue;
        return !c->constisnull;
    }
    // A generic plan's usual argument, read where it lies: no evaluation context is made for it
    // (a search's point and radius read from three parameters made one, checked, for nothing).
    bool isnull = false;
    if (IsA(e, Param) && extern_param(reinterpret_cast<Param*>(e), w->params, out, &isnull)) return !isnull;
    // The call walk and the scan walk read the same argument: evaluated once.
    for (int i = 0, n = std::min(w->neval, kWalkMemo); i < n; i++)
        if (w->evals[i].expr == e) {
            *out = w->evals[i].value;
            return w->evals[i].ok;
        }
    const bool ok = evaluate(w, e, out);
    w->evals[w->neval++ % kWalkMemo] = {e, ok ? *out : 0, ok};
    return ok;
}

bool evaluate(Walk* w, Node* e, Datum* out) {
    if (!evaluable(e, w)) return false;
    MemoryContext old = MemoryContextSwitchTo(walk_context(w));
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

double limit_rows(Walk* w, Limit* l, int64* count) {
    int64 offset = 0;
    *count = -1;
    if (l->limitCount == nullptr || !eval_int(w, l->limitCount, count)) return (*count = -1);
    if (l->limitOffset != nullptr && !eval_int(w, l->limitOffset, &offset)) return (*count = -1);
    return static_cast<double>(std::max<int64>(*count, 0)) + static_cast<double>(std::max<int64>(offset, 0));
}

double rows_asked_before(const Walk* w, const core::Box& box, int ncalls) {
    for (int i = 0; i < ncalls; i++)
        if (w->calls[i].rows >= 0 && w->calls[i].has_box && core::same_box(w->calls[i].box, box)) return w->calls[i].rows;
    return -1;
}

}  // namespace ot::ext::plan
