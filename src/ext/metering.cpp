#include "ext/metering.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "ext/boundary.hpp"
#include "ext/hook.hpp"
#include "ext/identity_stats.hpp"
#include "ext/samples.hpp"
#include "ext/settlement.hpp"
#include "ext/sqlstates.hpp"
#include "ext/sql_args.hpp"

extern "C" {
#include "access/parallel.h"
#include "access/xact.h"
#include "executor/executor.h"
#include "miscadmin.h"
#include "portability/instr_time.h"
#include "storage/latch.h"
#include "utils/timeout.h"
}

namespace ot::ext {
namespace {

// A top-level statement between its admission and its end. Slots never move
// (a function may CLOSE another cursor while a pass runs), so pointers into
// the array stay valid.
struct Execution {
    bool in_use;
    bool ran;     // a pass has finished: the next one is a further FETCH
    bool cutoff;  // cancelled for running past its budget
    Mode mode;
    QueryDesc* qd;
    SubTransactionId subid;
    IdentityKey id;
    core::Budget budget;
    double estimate;
    double deposit;      // estimates charged and not yet consumed by measured time
    double tokens_left;  // in the bucket after the last admission
    double measured;
    double charged;
    double allowed_ms;   // the running pass's budget, for the cancellation's DETAIL
    int workers;         // parallel workers its plan may launch: they spend its budget too
    instr_time pass_start;
    double stats_charge;          // change to the charge not yet in the identity's statistics
    bool priced;                  // features hold something: a calibration sample at the end
    core::PlanFeatures features;  // of its estimate, nested statements' included
};

constexpr int kMaxOpen = 64;
Execution open_execs[kMaxOpen];
int open_high = 0;  // slots [0, open_high) may be in use

Execution* running = nullptr;  // the top-level execution whose pass is on the stack
int run_depth = 0;             // executor passes on the stack (ExecutorRun/ExecutorFinish)
LastStatement last = {false, 0, 0, 0, false};

ExecutorRun_hook_type prev_run = nullptr;
ExecutorFinish_hook_type prev_finish = nullptr;
ExecutorEnd_hook_type prev_end = nullptr;

bool refit_due = false;  // a calibration refit is due, run from ExecutorEnd

TimeoutId cutoff_timeout = MAX_TIMEOUTS;  // registered on first use, per backend
volatile sig_atomic_t cutoff_fired = 0;

Execution* find_open(QueryDesc* qd) {
    for (int i = 0; i < open_high; i++)
        if (open_execs[i].in_use && open_execs[i].qd == qd) return &open_execs[i];
    return nullptr;
}

bool charges(const Execution& e) { return e.mode != Mode::Log && true_up_enabled(); }

double elapsed_ms(const instr_time& start) {
    instr_time now;
    INSTR_TIME_SET_CURRENT(now);
    INSTR_TIME_SUBTRACT(now, start);
    return INSTR_TIME_GET_MILLISEC(now);
}

// Measured time first consumes the deposit; the rest is charged.
void settle_pass(Execution* e, double ms) {
    e->measured += ms;
    count_measured(ms);
    const double consumed = std::min(e->deposit, ms);
    e->deposit -= consumed;
    const double extra = charges(*e) ? ms - consumed : 0;
    if (extra > 0) {
        owe(e->id, e->budget, extra);
        e->charged += extra;
    }
    e->stats_charge += extra;
}

// The statement is over: what is left of the deposit was not used. Only a
// statement that completed is a calibration sample (an error or a cut-off
// leaves its time unknown).
void finish(Execution* e, bool completed) {
    if (completed && e->priced && !e->cutoff && e->measured > 0)
        refit_due |= sample_record(e->features, e->measured);
    if (e->deposit > 0 && charges(*e)) {
        owe(e->id, e->budget, -e->deposit);
        e->charged -= e->deposit;
        e->stats_charge -= e->deposit;
    }
    e->deposit = 0;
    note_stats(e->id, e->stats_charge, e->measured);
    last = {true, e->estimate, e->measured, e->charged, e->cutoff};
    e->in_use = false;
    e->qd = nullptr;
    while (open_high > 0 && !open_execs[open_high - 1].in_use) open_high--;
}

// ---- cancelling a pass that runs past its budget --------------------------

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

int planned_workers(const PlannedStmt* stmt) {
    if (stmt == nullptr || !stmt->parallelModeNeeded) return 0;  // no Gather anywhere: skip the walk
    int n = plan_workers(stmt->planTree);
    const ListCell* lc;
    foreach (lc, stmt->subplans) n += plan_workers(static_cast<const Plan*>(lfirst(lc)));
    return n;
}

void on_cutoff_timeout() {
    cutoff_fired = 1;
    InterruptPending = true;
    QueryCancelPending = true;
    SetLatch(MyLatch);
}

// How long a pass may run: what the bucket held (tokens left plus the unused
// deposit), growing by the refill while it runs, plus the grace. Negative: no limit.
// The leader's timer watches wall time while each planned parallel worker
// spends the same budget as fast: the budget runs out that many times sooner.
double spenders(const Execution& e) { return 1 + std::min(e.workers, max_parallel_workers); }

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

// ---- the executor hooks ---------------------------------------------------

enum class Pass { Run, Finish };

void call_prev(Pass pass, QueryDesc* qd, ScanDirection dir, uint64 count, bool once) {
    if (pass == Pass::Run) {
        if (prev_run)
            prev_run(qd, dir, count, once);
        else
            standard_ExecutorRun(qd, dir, count, once);
    } else {
        if (prev_finish)
            prev_finish(qd);
        else
            standard_ExecutorFinish(qd);
    }
}

// A pass nobody meters: only the depth is kept.
void unmetered(Pass pass, QueryDesc* qd, ScanDirection dir, uint64 count, bool once) {
    run_depth++;
    PG_TRY();
    { call_prev(pass, qd, dir, count, once); }
    PG_FINALLY();
    { run_depth--; }
    PG_END_TRY();
}

// A parallel worker's own share of a statement its leader admitted.
void worker_pass(Pass pass, QueryDesc* qd, ScanDirection dir, uint64 count, bool once) {
    instr_time start;
    INSTR_TIME_SET_CURRENT(start);
    unmetered(pass, qd, dir, count, once);
    const double ms = elapsed_ms(start);
    count_measured(ms);
    if (current_mode() == Mode::Log || !true_up_enabled()) return;
    const core::Budget b = current_budget();
    if (core::budget_problem(b) != nullptr) return;  // the leader refused the statement already
    bucket_charge(own_identity(), ms, b);
}

void metered(Execution* e, Pass pass, QueryDesc* qd, ScanDirection dir, uint64 count, bool once) {
    if (pass == Pass::Run && e->ran) e->tokens_left = admit_further_pass(e->id, e->budget, e->mode);
    INSTR_TIME_SET_CURRENT(e->pass_start);
    arm_cutoff(e);
    running = e;
    run_depth++;
    ErrorContextCallback cb;
    cb.callback = cutoff_context;
    cb.arg = e;
    cb.previous = error_context_stack;
    error_context_stack = &cb;
    PG_TRY();
    { call_prev(pass, qd, dir, count, once); }
    PG_CATCH();
    {
        // The statement is dead: charge what it used, give back what it did not.
        error_context_stack = cb.previous;
        disarm_cutoff(false);
        running = nullptr;
        run_depth--;
        if (e->cutoff) count_hook_event(HookEvent::Cutoff);
        settle_pass(e, elapsed_ms(e->pass_start));
        finish(e, false);
        PG_RE_THROW();
    }
    PG_END_TRY();
    error_context_stack = cb.previous;
    disarm_cutoff(true);
    running = nullptr;
    run_depth--;
    settle_pass(e, elapsed_ms(e->pass_start));
    if (pass == Pass::Run) e->ran = true;
}

void dispatch(Pass pass, QueryDesc* qd, ScanDirection dir, uint64 count, bool once) {
    if (run_depth == 0) {
        if (Execution* e = find_open(qd)) return metered(e, pass, qd, dir, count, once);
        if (IsParallelWorker() && current_mode() != Mode::Off && shared_memory_ready())
            return worker_pass(pass, qd, dir, count, once);
    }
    unmetered(pass, qd, dir, count, once);
}

void on_run(QueryDesc* qd, ScanDirection dir, uint64 count, bool once) { dispatch(Pass::Run, qd, dir, count, once); }

// A SELECT without data-modifying CTEs has no AFTER triggers: its finish
// does nothing worth a clock.
void on_finish(QueryDesc* qd) {
    if (qd->operation == CMD_SELECT && !qd->plannedstmt->hasModifyingCTE)
        unmetered(Pass::Finish, qd, NoMovementScanDirection, 0, false);
    else
        dispatch(Pass::Finish, qd, NoMovementScanDirection, 0, false);
}

void on_end(QueryDesc* qd) {
    if (run_depth == 0)
        if (Execution* e = find_open(qd)) finish(e, e->ran);
    if (prev_end)
        prev_end(qd);
    else
        standard_ExecutorEnd(qd);
    if (refit_due && run_depth == 0) {
        refit_due = false;
        guard([] { refit_if_due(); });
    }
}

// Portals of an aborted (sub)transaction never reach ExecutorEnd; the
// statements they ran were settled when their error passed through us, so
// what is left is deposits of cursors that never ran.
void finish_from(SubTransactionId from) {
    for (int i = 0; i < open_high; i++)
        if (open_execs[i].in_use && open_execs[i].subid >= from) finish(&open_execs[i], false);
}

void on_xact(XactEvent event, void*) {
    if (open_high == 0) return;
    switch (event) {
        case XACT_EVENT_ABORT:
        case XACT_EVENT_PARALLEL_ABORT:
        case XACT_EVENT_COMMIT:
        case XACT_EVENT_PARALLEL_COMMIT:
        case XACT_EVENT_PREPARE: finish_from(InvalidSubTransactionId); break;
        default: break;
    }
}

void on_subxact(SubXactEvent event, SubTransactionId mySubid, SubTransactionId, void*) {
    if (event == SUBXACT_EVENT_ABORT_SUB && open_high > 0) finish_from(mySubid);
}

}  // namespace

bool metering_nested() { return running != nullptr; }

void metering_admitted(QueryDesc* qd, const IdentityKey& id, core::Budget b, Mode mode, double estimate,
                       double deposit, double tokens_left, const core::PlanFeatures* features) {
    if (running != nullptr) {
        // Inside a metered pass, whose clock covers this statement's work.
        if (features != nullptr) {
            core::add_features(running->features, *features);
            running->priced = true;
        }
        running->estimate += estimate;
        running->deposit += deposit;
        running->charged += deposit;
        running->tokens_left = tokens_left;
        return;
    }
    if (run_depth > 0) {
        // Inside a pass nobody meters (mode was off when it started): give the deposit back.
        if (deposit > 0) bucket_refund(id, deposit, b);
        return;
    }
    Execution* e = nullptr;
    for (int i = 0; i < kMaxOpen && e == nullptr; i++)
        if (!open_execs[i].in_use) e = &open_execs[i];
    if (e == nullptr) return;  // 64 open cursors: this one keeps its estimate as its charge
    *e = Execution{};
    e->in_use = true;
    e->mode = mode;
    e->qd = qd;
    e->subid = GetCurrentSubTransactionId();
    e->id = id;
    e->budget = b;
    e->estimate = estimate;
    e->deposit = deposit;
    e->tokens_left = tokens_left;
    e->charged = deposit;
    e->priced = features != nullptr;
    if (features != nullptr) e->features = *features;
    e->workers = planned_workers(qd->plannedstmt);
    open_high = std::max(open_high, static_cast<int>(e - open_execs) + 1);
}

LastStatement last_statement() { return last; }

void install_metering_hooks() {
    prev_run = ExecutorRun_hook;
    ExecutorRun_hook = on_run;
    prev_finish = ExecutorFinish_hook;
    ExecutorFinish_hook = on_finish;
    prev_end = ExecutorEnd_hook;
    ExecutorEnd_hook = on_end;
    RegisterXactCallback(on_xact, nullptr);
    RegisterSubXactCallback(on_subxact, nullptr);
}

}  // namespace ot::ext
