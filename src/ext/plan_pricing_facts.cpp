// What a plan node's expression lists compute, for the per-row classes of
// plan-wide pricing (ExprFacts): exact spatial predicates, box filters,
// encoding, correlated subplans, functions' declared costs. The call walk
// gathers them in its own pass over a node's targetlist and qual (one
// traversal, one gis_role lookup per function), and keeps them for the
// plan-wide visit by plan_node_id.
#include "ext/plan_pricing_walk.hpp"

#include "ext/catalog_memo.hpp"

extern "C" {
#include "access/transam.h"
#include "nodes/nodeFuncs.h"
}

namespace ot::ext::plan {
namespace {

// Another row's value: a nested loop's outer row (PARAM_EXEC) or a join's
// own Vars (INNER_VAR, OUTER_VAR).
bool other_row_walker(Node* node, void*) {
    if (node == nullptr) return false;
    if (IsA(node, Param)) return reinterpret_cast<Param*>(node)->paramkind == PARAM_EXEC;
    if (IsA(node, Var)) return IS_SPECIAL_VARNO(reinterpret_cast<Var*>(node)->varno);
    if (is_leaf(node)) return false;
    return expression_tree_walker(node, as_walker(other_row_walker), nullptr);
}

bool facts_walker(Node* node, ExprFacts* f) {
    if (node == nullptr || is_leaf(node)) return false;
    if (IsA(node, FuncExpr)) {
        auto* fe = reinterpret_cast<FuncExpr*>(node);
        add_function_facts(f, gis_role(fe->funcid), fe->funcid, fe->args);
    } else if (IsA(node, OpExpr)) {
        auto* o = reinterpret_cast<OpExpr*>(node);
        if (o->opfuncid == InvalidOid) set_opfuncid(o);
        add_function_facts(f, gis_role(o->opfuncid), o->opfuncid, o->args);
    } else if (IsA(node, Aggref)) {
        add_aggregate_facts(f, reinterpret_cast<Aggref*>(node), gis_role(reinterpret_cast<Aggref*>(node)->aggfnoid));
    } else if (IsA(node, SubPlan)) {
        add_subplan_facts(f, reinterpret_cast<SubPlan*>(node));
    }
    return expression_tree_walker(node, as_walker(facts_walker), f);
}

}  // namespace

void add_function_facts(ExprFacts* f, GisRole role, Oid fn, List* args) {
    if (fn == InvalidOid) return;
    switch (role) {
        case GisRole::DWithinGeography:
        case GisRole::PredicateGeography: f->geog_pred = true; break;
        case GisRole::IntersectsGeometry:
        case GisRole::TopologyGeometry: f->geom_topo = true; [[fallthrough]];
        case GisRole::DWithinGeometry:
        case GisRole::DWithinText:
        case GisRole::PredicateGeometry:
            f->geom_pred = true;
            f->join_pred |= other_row_walker(reinterpret_cast<Node*>(args), nullptr);
            break;
        case GisRole::OverlapsGeometry:
        case GisRole::ContainsGeometryOp:
        case GisRole::WithinGeometryOp:
        case GisRole::OverlapsGeography: f->box_filter = true; break;
        case GisRole::AsMVTGeom:
        case GisRole::Encode: f->encode++; break;
        case GisRole::None: {
            // What PostGIS (or whoever wrote the function) declares it costs: PostGIS says 10000
            // for GEOS work (ST_Buffer), 50-500 for cheaper geometry maths, 1 for an accessor.
            // Declared as cheap as an operator: the scan's per-row weight covers it.
            // (pg_proc.procost, readable by every role; no function is called.)
            const float4 cost = memo_procost(fn);
            if (cost <= 1) break;
            f->procost += cost;
            f->costly |= fn >= FirstNormalObjectId;
            break;
        }
        default: break;
    }
}

void add_aggregate_facts(ExprFacts* f, Aggref* a, GisRole role) {
    if (role != GisRole::AsMVT) return;
    // ST_AsMVT encodes every column of each row it aggregates: its geometry and each attribute
    // as a key and a value it looks up in the tile's dictionaries.
    List* targs = a->args;
    Node* row = targs != NIL ? reinterpret_cast<Node*>(linitial_node(TargetEntry, targs)->expr) : nullptr;
    if (row != nullptr && IsA(row, RowExpr))
        f->mvt_columns += list_length(reinterpret_cast<RowExpr*>(row)->args);
    else if (row != nullptr)
        f->mvt_row_var = true;
}

void add_subplan_facts(ExprFacts* f, SubPlan* sp) {
    if (sp->parParam != NIL && f->nsub < static_cast<int>(lengthof(f->sub))) f->sub[f->nsub++] = sp->plan_id;
}

ExprFacts facts_of(Node* n) {
    ExprFacts f{};
    facts_walker(n, &f);
    return f;
}

void node_facts(const Walk* w, Plan* p, ExprFacts* tf, ExprFacts* qf) {
    const int id = p->plan_node_id;
    if (id >= 0 && id < kKeptNodes && (w->kept_ids >> id & 1) && w->kept[id].plan == p) {
        *tf = w->kept[id].tf;
        *qf = w->kept[id].qf;
        return;
    }
    // A node the call walk did not reach (or ids it could not keep apart): walk its lists now.
    *tf = facts_of(reinterpret_cast<Node*>(p->targetlist));
    *qf = facts_of(reinterpret_cast<Node*>(p->qual));
}

}  // namespace ot::ext::plan
