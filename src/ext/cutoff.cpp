#include "ext/execution.hpp"

#include <algorithm>
#include <cmath>

#include "ext/sqlstates.hpp"

extern "C" {
#include "miscadmin.h"
#include "nodes/plannodes.h"
#include "storage/latch.h"
#include "utils/timeout.h"
}

// A pass that runs past what its bucket could pay when it started (plus
// ogc_throttle.cutoff_grace) is cancelled with PostgreSQL's own query cancel,
// which an error-context callback turns into SQLSTATE 53T01.
namespace ot::ext {
namespace {

TimeoutId cutoff_timeout = MAX_TIMEOUTS;  // registered on first use, per backend
volatile sig_atomic_t cutoff_fired = 0;

// Workers every Gather of the plan may launch (an upper bound: they need not
// all run at once, or at all). Read from the plan, not from its pricing, which
// skips statements that call no extension function.
int plan_workers(const Plan* p) {
    if (p == nullptr) return 0;
    int n = plan_workers(p->lefttree) + plan_workers(p->righttree);
    const auto each = [&n](const List* plans) {
        const ListCell* lc;
        foreach (lc, plans) n += plan_workers(static_cast<const Plan*>(lfirst(lc)));
    };
    switch (nodeTag(p)) {
        case T_Gather: return n + reinterpret_cast<const Gather*>(p)->num_workers;
        case T_GatherMerge: return n + reinterpret_cast<const GatherMerge*>(p)->num_workers;
        case T_Append: each(reinterpret_cast<const Append*>(p)->appendplans); break;
        case T_MergeAppend: each(reinterpret_cast<const MergeAppend*>(p)->mergeplans); break;
        case T_BitmapAnd: each(reinterpret_cast<const BitmapAnd*>(p)->bitmapplans); break;
        case T_BitmapOr: each(reinterpret_cast<const BitmapOr*>(p)->bitmapplans); break;
        case T_SubqueryScan: n += plan_workers(reinterpret_cast<const SubqueryScan*>(p)->subplan); break;
        case T_CustomScan: each(reinterpret_cast<const CustomScan*>(p)->custom_plans); break;
        default: break;
    }
    return n;
}

void on_cutoff_timeout() {
    cutoff_fired = 1;
    InterruptPending = true;
    QueryCancelPending = true;
    SetLatch(MyLatch);
}

// The leader's timer watches wall time while each planned parallel worker
// spends the same budget as fast: the budget runs out that many times sooner.
double spenders(const Execution& e) { return 1 + std::min(e.workers, max_parallel_workers); }

// How long a pass may run: what the bucket held (tokens left plus the unused
// deposit), growing by the refill while it runs, plus the grace. Negative: no limit.
double pass_allowance_ms(const Execution& e) {
    const int grace = cutoff_grace_ms();
    if (grace < 0 || e.mode == Mode::Log) return -1;
    const double n = spenders(e);
    const double per_ms = e.budget.rate / 1000.0;  // refill per millisecond of wall time
    if (per_ms >= n) return -1;                     // the refill keeps up with every spender
    if (!std::isfinite(e.tokens_left)) return -1;  // admitted for free
    const double have = std::max(0.0, e.tokens_left) + e.deposit;
    return have / (n - per_ms) + grace;
}

}  // namespace

int planned_workers(const PlannedStmt* stmt) {
    if (stmt == nullptr || !stmt->parallelModeNeeded) return 0;  // no Gather anywhere: skip the walk
    int n = plan_workers(stmt->planTree);
    const ListCell* lc;
    foreach (lc, stmt->subplans) n += plan_workers(static_cast<const Plan*>(lfirst(lc)));
    return n;
}

void arm_cutoff(Execution* e) {
    e->allowed_ms = pass_allowance_ms(*e);
    if (e->allowed_ms < 0) return;
    if (cutoff_timeout == MAX_TIMEOUTS) cutoff_timeout = RegisterTimeout(USER_TIMEOUT, on_cutoff_timeout);
    cutoff_fired = 0;
    enable_timeout_after(cutoff_timeout, static_cast<int>(std::min(std::ceil(e->allowed_ms), 2e9)));
}

void disarm_cutoff(bool completed) {
    if (cutoff_timeout == MAX_TIMEOUTS) return;
    disable_timeout(cutoff_timeout, false);
    // Fired as the pass was completing: the cancel it requested is no longer ours to deliver.
    if (completed && cutoff_fired) QueryCancelPending = false;
    cutoff_fired = 0;
}

// Turns the cancel our timer requested into the refusal it is. Runs inside
// errfinish for every error raised under a metered pass: C only.
void cutoff_context(void* arg) {
    auto* e = static_cast<Execution*>(arg);
    if (!cutoff_fired || geterrcode() != ERRCODE_QUERY_CANCELED) return;
    e->cutoff = true;
    const double used = elapsed_ms(e->pass_start);
    const double over = used - std::max(0.0, e->tokens_left) - e->deposit;
    errcode(kBudgetExhausted);
    errmsg("ogc_throttle: statement cancelled: identity \"%s\" ran past its budget", e->id.bytes);
    if (spenders(*e) > 1)
        errdetail("It ran %.0f ms with up to %.0f parallel workers, each spending the same budget; its budget allowed "
                  "%.0f ms of running when it started (tokens left, the unused estimate and ogc_throttle.cutoff_grace, "
                  "shared by the leader and its workers); capacity %g, refilling %g per second.",
                  used, spenders(*e) - 1, e->allowed_ms, e->budget.capacity, e->budget.rate);
    else
        errdetail("It used %.0f ms of server time; its budget allowed %.0f ms when it started (tokens left, the "
                  "unused estimate and ogc_throttle.cutoff_grace); capacity %g, refilling %g per second.",
                  used, e->allowed_ms, e->budget.capacity, e->budget.rate);
    errhint("Ask for less (a smaller area, a LIMIT, a higher zoom); the time used is charged, so retry after %d "
            "second(s).",
            retry_seconds(over > 0 ? over / e->budget.rate : 0));
    // Caught below us (an EXCEPTION block), the statement goes on: cancel it again soon.
    if (cutoff_timeout != MAX_TIMEOUTS) enable_timeout_after(cutoff_timeout, 10);
}

}  // namespace ot::ext
