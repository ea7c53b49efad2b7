#include "ext/execution.hpp"

#include <algorithm>
#include "ext/hook.hpp"
#include "ext/identity_stats.hpp"
#include "ext/settlement.hpp"
#include "ext/sql_args.hpp"

extern "C" {
#include "access/parallel.h"
#include "optimizer/planner.h"
}

// Planning is server time too: a statement that is only ever planned (EXPLAIN
// without ANALYZE, a Parse and Bind that is never executed, a prepared
// statement's custom plans) would otherwise cost nothing, and the planner can
// be made to work for seconds (many-way joins). The planning of a top-level
// statement is refused while the bucket is in debt and its measured time is
// charged, as an executor pass's is, and it is cut off as a pass is when it
// runs past what the bucket held (a function the planner folds runs here, an
// immutable one the user wrote included: execution.hpp's stages).
namespace ot::ext {

int planning_depth = 0;  // the planner evaluating functions plans their queries too
double planning_ms_total = 0;

namespace {

planner_hook_type prev_planner = nullptr;

PlannedStmt* call_planner(Query* parse, const char* query, int options, ParamListInfo params) {
    return prev_planner ? prev_planner(parse, query, options, params)
                        : standard_planner(parse, query, options, params);
}

bool metered_here() {
    return planning_depth == 0 && metering_idle() && !pricing_in_progress() && current_mode() != Mode::Off &&
           true_up_enabled() && !IsParallelWorker() && shared_memory_ready();
}

// What the settlement after planning needs: one object, kept in memory
// across the planner's setjmp (a register copy could be lost to its longjmp).
struct Planning {
    IdentityKey id;
    std::uint64_t serial;  // identity_serial() of the key id was copied from
    core::Budget b;
    Mode mode;
    instr_time start;
    double metered_before;
};

PlannedStmt* on_planner(Query* parse, const char* query, int options, ParamListInfo params) {
    if (!metered_here()) return call_planner(parse, query, options, params);
    const IdentityKey& own = own_identity();
    Planning pl;
    pl.serial = identity_serial(own);
    pl.id = own;
    pl.b = usable_budget();
    pl.mode = current_mode();
    // Refused while in debt.
    const double tokens = admit_unless_in_debt(pl.id, pl.b, pl.serial, pl.mode);
    INSTR_TIME_SET_CURRENT(pl.start);
    pl.metered_before = measured_so_far_ms();
    PlannedStmt* out = nullptr;
    volatile bool planned = false;  // (read after a longjmp)
    planning_depth++;
    PG_TRY();
    {
        // Begun inside the PG_TRY, whose end restores error_context_stack to what it was before.
        stage_begin(Stage::Planning, pl.id, pl.b, pl.mode, tokens, &pl.start);
        out = call_planner(parse, query, options, params);
        planned = true;
    }
    PG_FINALLY();
    {
        planning_depth--;
        stage_end(Stage::Planning, planned);
        // Queries the planner runs (a function folded at plan time) are
        // statements of their own, admitted, cut off at their deadline and
        // charged: what they measured is not planning's to charge again.
        const double wall = elapsed_ms(pl.start);
        const double ms = std::max(0.0, wall - (measured_so_far_ms() - pl.metered_before));
        planning_ms_total += wall;
        // Counted and settled with the executor passes' batch: a write of the
        // shared measured-time counter per planning was most of a settle's cost.
        settle_measured(pl.id, pl.b, pl.mode != Mode::Log ? ms : 0.0, ms, pl.serial);
    }
    PG_END_TRY();
    return out;
}

}  // namespace


void install_planning_metering() {
    prev_planner = planner_hook;
    planner_hook = on_planner;
}

}  // namespace ot::ext
