// Internal to plan pricing (src/ext/plan_pricing*.cpp): the state of one
// statement's walk and the pieces the files share. plan_pricing.hpp is the
// interface the rest of the extension uses.
//
//   plan_pricing_eval.cpp    evaluating arguments before execution
//   plan_pricing_calls.cpp   recording the priced PostGIS calls (radius, box, tile), in the
//                            same pass over each node's lists as its facts
//   plan_pricing_facts.cpp   what a node's expressions compute (ExprFacts), kept for the visit
//   plan_pricing_search.cpp  scan selectivity: what an index condition searches, rows it meets
//   plan_pricing_scans.cpp   rows read by each scan node
//   plan_pricing_nodes.cpp   joins and loops, per-row operators, LIMIT, parallel workers
//   plan_pricing.cpp         the statement's price and its explanation
#pragma once
#include "ext/pg.hpp"

#include "core/statement_cost.hpp"
#include "ext/postgis_functions.hpp"

extern "C" {
#include "nodes/params.h"
#include "nodes/plannodes.h"
}

namespace ot::ext::plan {

// Answers the walk asks for more than once: a call's rows and its scan's rows
// read are the same density-grid box, and the same argument expression is
// read by the call walk and the scan walk. Kept for one statement's pricing.
struct GridAnswer {
    Oid relid;
    AttrNumber attnum;
    double box[4];
    double rows;
};
struct EvalAnswer {
    Node* expr;
    Datum value;
    bool ok;
};
// A geometry's box (PostGIS's box3d, ST_SRID and four ST_XMin-style calls): the call
// walk and the scan walk read the box of the same evaluated value. Keyed by the
// value itself: every value a walk reads stays allocated until the walk ends.
struct BoxAnswer {
    Datum geometry;
    GisBox box;
};
constexpr int kWalkMemo = 4;
constexpr int kKnownBoxes = 4;  // a tile statement's two envelopes, a search's expanded point

// What an expression list computes, for the per-row classes.
struct ExprFacts {
    bool geog_pred;
    bool geom_pred;
    bool geom_topo;  // ... and one of them places a geometry in another (ST_Intersects, ST_Contains, ST_Within)
    bool join_pred;  // a geometry test against another row's geometry (a join's, or an outer row's)
    bool box_filter;  // a box operator (&&, ~, @, geometry_overlaps()) evaluated as a filter, row by row
    int encode;  // encoding functions per row (ST_AsMVTGeom(ST_Transform(g)) is two: a reprojection, a clip)
    int mvt_columns;   // columns ST_AsMVT encodes per row, when its row is a ROW(…) of known width
    bool mvt_row_var;  // ST_AsMVT of a whole row of its input (ST_AsMVT(t.*)): as wide as that row
    int nsub;
    int sub[8];      // plan_ids of correlated SubPlans
    double procost;  // declared cost (pg_proc.procost) of each evaluation, of the functions no other class
                     // prices and declared dearer than an operator (procost > 1)
    bool costly;     // one of them is not built in
};
// A node's facts, as the call walk gathered them for the visit.
struct NodeFacts {
    Plan* plan;
    ExprFacts tf, qf;  // of its targetlist and its qual
};
// Nodes kept, by plan_node_id: OGC services' statements have a handful; a
// larger plan's further nodes have their lists walked again by the visit.
constexpr int kKeptNodes = 16;

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
    bool saw_costly_function;    // ... or a non-built-in function declared dearer than an operator
    int ngrid, neval;            // answers kept (round robin past kWalkMemo)
    GridAnswer grid[kWalkMemo];
    EvalAnswer evals[kWalkMemo];
    int nbox;
    BoxAnswer boxes[kWalkMemo];
    int nexpanded;  // known_box's answers: the call walk and the scan walk read the same index condition
    struct {
        Node* expr;
        GisBox box;
    } expanded[kKnownBoxes];
    ExprFacts* facts;  // where the call walk adds the facts of the list it walks (none: an index condition)
    uint32 kept_ids;   // which of kept[] hold a node's facts (the rest is not initialised)
    NodeFacts kept[kKeptNodes];
};
// A walk ready to start (its memo arrays are left uninitialised: counts guard them).
void start_walk(Walk* w, ParamListInfo params, List* rtable);

// density_grid_rows, asked once per distinct box of a walk.
double grid_rows(Walk* w, Oid relid, AttrNumber attnum, double xmin, double ymin, double xmax, double ymax);

// Nodes without subexpressions, which expression_tree_walker would be called on
// only to return false: the walkers stop at them (most nodes of a plan's
// expressions are such leaves, and each call also checked the stack depth).
inline bool is_leaf(const Node* n) { return IsA(n, Const) || IsA(n, Var) || IsA(n, Param); }

// PostgreSQL 15 declares tree walkers K&R-style, as bool (*)(); the detour
// through void (*)() is the sanctioned generic function-pointer cast.
using Walker = bool (*)();
template <class F>
Walker as_walker(F* f) {
    return reinterpret_cast<Walker>(reinterpret_cast<void (*)()>(f));
}

// ---- plan_pricing_eval.cpp
MemoryContext walk_context(Walk* w);
// geometry_box, asked once per distinct value of a walk.
bool box_of(Walk* w, Datum geometry, GisBox* out);
// The box of ST_Expand(g, d)'s, ST_TileEnvelope(…)'s or a point's (ST_SetSRID(ST_MakePoint(…)))
// value, known without computing the value; false when e is no such call (then eval and box_of).
bool known_box(Walk* w, Node* e, GisBox* out);
// A column of this row, or of the outer row of a nested loop.
bool column_walker(Node* node, Walk* w);
// Any parameter (a generic plan's estimates are blind to its value).
bool param_walker(Node* node, void*);
// A Var-free, non-volatile expression's value with this execution's
// parameters (allocated in walk_context); false when unknown or NULL.
bool eval(Walk* w, Node* e, Datum* out);
bool eval_float8(Walk* w, Node* e, double* out);
bool eval_int(Walk* w, Node* e, int64* out);
// LIMIT n OFFSET m: n + m rows read, or negative when either is unknown.
double limit_rows(Walk* w, Limit* l, int64* count);
// Rows a previous call of this statement already asked PostGIS for, for the same box; negative if none.
double rows_asked_before(const Walk* w, const core::Box& box, int ncalls);

// ---- plan_pricing_calls.cpp
core::PricedCall* add_call(Walk* w, core::CallKind kind, GisRole role);
// Records every priced call of the plan tree below p.
void walk_plan(Plan* p, Walk* w);

// ---- plan-wide pricing (search, scans, nodes)
constexpr int kMaxSubplans = 64;

struct PlanCtx {
    Walk* w;
    core::PlanFeatures f;
    double subplan_loops[kMaxSubplans];  // by plan_id - 1
    bool have_last_box;                  // the box the last spatial scan walked searched
    GisBox last_box;
    Oid last_rel;  // ... of this relation's column
    AttrNumber last_att;
    bool have_join_box;  // the outer side's search box, for the inner side of a spatial join
    GisBox join_box;
    Oid join_rel;  // ... of this relation's column
    AttrNumber join_att;
    core::RowsSource source;             // of the scan being priced
    double rows_by[core::kRowsSources];  // scan rows read, by where the number came from
};


// ---- plan_pricing_facts.cpp
// The facts of one function call, aggregate or SubPlan met in a walk (role: gis_role of its function).
void add_function_facts(ExprFacts* f, GisRole role, Oid fn, List* args);
void add_aggregate_facts(ExprFacts* f, Aggref* a, GisRole role);
void add_subplan_facts(ExprFacts* f, SubPlan* sp);
ExprFacts facts_of(Node* n);
// The facts the call walk kept for p, else p's lists walked now.
void node_facts(const Walk* w, Plan* p, ExprFacts* tf, ExprFacts* qf);

// A spatial index condition's search of this scan's column.
struct Search {
    AttrNumber attnum;
    GisBox box;
    bool geography;
    Datum geometry;   // the searched box as a geometry (0 for geography)
    Node* geometry_expr;  // ... or, when only its box was read (known_box), what evaluates to it
    bool from_param;  // the searched value is a parameter: the (generic) plan's estimates are blind to it
};

double reltuples_of(Oid relid);
double relpages_of(Oid relid);  // pg_class.relpages, negative when unknown
Oid scan_relation(PlanCtx* c, Plan* p);
inline double planned(Plan* p, double par) { return p->plan_rows > 0 ? p->plan_rows * par : 0.0; }

bool geography_radius_search(PlanCtx* c, List* quals, Index scanrelid, Search* out);
bool box_search(PlanCtx* c, List* quals, Index scanrelid, Search* out);
bool outer_centre_search(PlanCtx* c, List* quals, List* filter, Index scanrelid, AttrNumber* attnum, double* w,
                         double* h);
bool join_search(PlanCtx* c, List* quals, Index scanrelid, AttrNumber* attnum);
// Rows a scan's index condition meets: the density grid, else PostGIS's
// statistics (geometry only), else negative; *source says which.
double search_rows(PlanCtx* c, Oid relid, const Search& s, bool may_ask_postgis, core::RowsSource* source = nullptr);

// ---- plan_pricing_scans.cpp: a scan node's rows read and rows returned.
double visit_seq_scan(PlanCtx* c, Plan* p, double loops, double cap, double par, const ExprFacts& qf,
                      double* processed);
double visit_index_scan(PlanCtx* c, Plan* p, double loops, double cap, double par, const ExprFacts& qf,
                        double* processed);
// A scan that reads `read_full` rows to emit `out_full`, stopped at `cap`.
double price_scan(PlanCtx* c, double read_full, double out_full, double loops, double cap, const ExprFacts& qf);

// ---- plan_pricing_nodes.cpp
// Rows p returns (per loop), adding what it costs to c->f.
double visit(PlanCtx* c, Plan* p, double loops, double cap, double par);
core::PlanFeatures plan_features(PlannedStmt* stmt, Walk* w, double rows_by[core::kRowsSources]);

}  // namespace ot::ext::plan
