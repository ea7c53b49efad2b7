// Plan-wide pricing, node by node: every scan from the rows it reads (see
// plan_pricing_scans.cpp), times the times it runs (the inner side of a
// nested loop runs once per outer row), summed over parallel workers; a LIMIT
// bounds a scan only through nodes that stream (no sort, hash or aggregate
// between). Per-row work of dear operators is counted apart: exact spatial
// predicates (geography ones in full, geometry ones at a tenth), output
// encoding (MVT geometry, GeoJSON, text, reprojection), and rows through
// joins, sorts and aggregates.
#include "ext/plan_pricing_walk.hpp"

#include <algorithm>

#include "ext/density_grid.hpp"

extern "C" {
#include "miscadmin.h"
}

namespace ot::ext::plan {
namespace {

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

// Columns of the rows a node returns (a subquery scan's whole row: its subquery's columns).
int row_width(Plan* p) {
    if (p != nullptr && IsA(p, SubqueryScan)) p = reinterpret_cast<SubqueryScan*>(p)->subplan;
    if (p == nullptr) return 1;
    int n = 0;
    ListCell* lc;
    foreach (lc, p->targetlist) n += !lfirst_node(TargetEntry, lc)->resjunk;
    return std::max(1, n);
}

double visit_list(PlanCtx* c, List* plans, double loops, double cap, double par) {
    double out = 0;
    ListCell* lc;
    foreach (lc, plans) out += visit(c, static_cast<Plan*>(lfirst(lc)), loops, cap, par);
    return out;
}

// Functions no class prices, by their declared cost: a filter runs on every row
// a scan reads (what it added to the scan class, LIMIT and loops included) or
// a node looks at; an output list on every row returned, an aggregate's on
// every row aggregated.
void add_function_work(PlanCtx* c, Plan* p, const ExprFacts& tf, const ExprFacts& qf, double scan_rows_before,
                       double processed, double out, double loops) {
    c->w->saw_costly_function |= tf.costly || qf.costly;
    if (tf.procost <= 0 && qf.procost <= 0) return;
    const double read = c->f.rows[static_cast<int>(core::CostClass::Scan)] - scan_rows_before;
    const bool scan = IsA(p, SeqScan) || IsA(p, SampleScan) || IsA(p, IndexScan) || IsA(p, IndexOnlyScan) ||
                      IsA(p, BitmapHeapScan);
    const bool aggregates = IsA(p, Agg) || IsA(p, WindowAgg) || IsA(p, Group);
    const double filtered = scan && read > 0 ? read : processed * loops;
    const double emitted = (aggregates ? processed : out) * loops;
    c->f.rows[static_cast<int>(core::CostClass::Function)] += qf.procost * filtered + tf.procost * emitted;
}

}  // namespace

// The grid's count is a pure function of the grid and the box; the grid cannot
// change under one statement's pricing.
double grid_rows(Walk* w, Oid relid, AttrNumber attnum, double xmin, double ymin, double xmax, double ymax) {
    const int known = std::min(w->ngrid, kWalkMemo);
    for (int i = 0; i < known; i++) {
        const GridAnswer& a = w->grid[i];
        if (a.relid == relid && a.attnum == attnum && a.box[0] == xmin && a.box[1] == ymin && a.box[2] == xmax &&
            a.box[3] == ymax)
            return a.rows;
    }
    const double rows = density_grid_rows(relid, attnum, xmin, ymin, xmax, ymax);
    w->grid[w->ngrid++ % kWalkMemo] = {relid, attnum, {xmin, ymin, xmax, ymax}, rows};
    return rows;
}

double visit(PlanCtx* c, Plan* p, double loops, double cap, double par) {
    if (p == nullptr) return 0;
    check_stack_depth();
    // A node to initialise and end, once (a bitmap scan's index scan is priced with it).
    c->f.rows[static_cast<int>(core::CostClass::Statement)] += IsA(p, BitmapHeapScan) && p->lefttree ? 2 : 1;
    ExprFacts tf, qf;
    node_facts(c->w, p, &tf, &qf);
    double out = 0;
    double processed = 0;  // rows this node looks at (for correlated subplans in its expressions)
    const double scan_rows_before = c->f.rows[static_cast<int>(core::CostClass::Scan)];
    switch (nodeTag(p)) {
        case T_SeqScan:
        case T_SampleScan: out = visit_seq_scan(c, p, loops, cap, par, qf, &processed); break;
        case T_IndexScan:
        case T_IndexOnlyScan:
        case T_BitmapHeapScan: out = visit_index_scan(c, p, loops, cap, par, qf, &processed); break;
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
            c->source = core::RowsSource::Plan;
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
            const Oid saved_rel = c->join_rel;
            const AttrNumber saved_att = c->join_att;
            c->have_join_box = c->have_last_box;
            c->join_box = c->last_box;
            c->join_rel = c->last_rel;
            c->join_att = c->last_att;
            // The outer rows found in a box reach out of it by their own size: the big ones, which
            // hold most of what the inner side reads, by the rows' area-weighted size.
            double mw, mh;
            if (c->have_last_box && density_grid_probe_size(c->last_rel, c->last_att, &mw, &mh)) {
                c->join_box.xmin -= mw / 2, c->join_box.xmax += mw / 2;
                c->join_box.ymin -= mh / 2, c->join_box.ymax += mh / 2;
            }
            const double inner = visit(c, p->righttree, loops * std::max(1.0, outer), one ? 1 : -1, 1.0);
            c->have_join_box = saved_have;
            c->join_box = saved_box;
            c->join_rel = saved_rel;
            c->join_att = saved_att;
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
            // ST_AsMVT(ROW(…, ST_AsMVTGeom(…))) encodes every input row, each of its columns once:
            // on 40 600 points of a tile (CPU time), 3.0 µs a row for id, kind and geometry, 1.0 µs
            // for the geometry alone, against 1.0 µs for ST_Transform and ST_AsMVTGeom together.
            {
                const int mvt = tf.mvt_columns + (tf.mvt_row_var ? row_width(p->lefttree) : 0);
                c->f.rows[static_cast<int>(core::CostClass::Encode)] += (tf.encode + mvt) * in * loops;
            }
            break;
        }
        case T_Limit: {
            int64 count;
            const double lim = limit_rows(c->w, reinterpret_cast<Limit*>(p), &count);
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
    if (tf.encode > 0 && !IsA(p, Agg) && !IsA(p, WindowAgg) && !IsA(p, Group) && !IsA(p, SetOp) && !IsA(p, Unique))
        c->f.rows[static_cast<int>(core::CostClass::Encode)] += tf.encode * out * loops;
    add_function_work(c, p, tf, qf, scan_rows_before, processed, out, loops);
    for (const ExprFacts* f : {&tf, &qf})
        for (int i = 0; i < f->nsub; i++)
            if (f->sub[i] >= 1 && f->sub[i] <= kMaxSubplans)
                c->subplan_loops[f->sub[i] - 1] = std::max(c->subplan_loops[f->sub[i] - 1], loops * std::max(1.0, processed));
    return out;
}

core::PlanFeatures plan_features(PlannedStmt* stmt, Walk* w, double rows_by[core::kRowsSources]) {
    PlanCtx c{};
    c.w = w;
    // Executor start-up and shut-down: what the smallest statements mostly spend.
    c.f.calls[static_cast<int>(core::CostClass::Statement)] = 1;
    const double out = visit(&c, stmt->planTree, 1, -1, 1);
    // The rows it returns: each through its columns' output functions and onto the socket, work that
    // EXPLAIN ANALYZE leaves out and a WFS page of thousands of features does not.
    if (stmt->commandType == CMD_SELECT || stmt->hasReturning)
        c.f.rows[static_cast<int>(core::CostClass::Output)] += out;
    int id = 0;
    ListCell* lc;
    foreach (lc, stmt->subplans) {
        const double loops = id < kMaxSubplans && c.subplan_loops[id] > 0 ? c.subplan_loops[id] : 1;
        visit(&c, static_cast<Plan*>(lfirst(lc)), loops, -1, 1);
        id++;
    }
    for (int i = 0; i < core::kRowsSources; i++) rows_by[i] = c.rows_by[i];
    return c.f;
}

}  // namespace ot::ext::plan
