#include "ext/execution.hpp"
#include "ext/hot.hpp"

#include <algorithm>
#include <cmath>

#include "ext/sqlstates.hpp"

extern "C" {
#include "access/xact.h"
#include "miscadmin.h"
#include "nodes/plannodes.h"
#include "storage/latch.h"
#include "utils/timeout.h"
}

// A pass that runs past what its bucket could pay when it started (plus
// ogc_throttle.cutoff_grace) is cancelled with PostgreSQL's own query cancel,
// which an error-context callback turns into SQLSTATE 53T01.
namespace ot::ext {

volatile sig_atomic_t cutoff_fired = 0;
volatile int64 pass_deadline_ns = 0;
volatile int64 timer_due_ns = 0;  // (execution.hpp says how the timer is kept)
volatile int64 stage_deadline_ns = 0;

// pass_deadline_ns (monotonic clock, the clock of pass_start) is the running
// pass's deadline, 0 between passes and for a pass with no limit.
TimeoutId cutoff_timeout = MAX_TIMEOUTS;  // registered on first use, per backend

namespace {

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

bool initial_steps(const PartitionPruneInfo* info) {
    if (info == nullptr) return false;
    const ListCell* lc;
    foreach (lc, info->prune_infos) {
        const ListCell* rel;
        foreach (rel, static_cast<const List*>(lfirst(lc)))
            if (static_cast<const PartitionedRelPruneInfo*>(lfirst(rel))->initial_pruning_steps != NIL) return true;
    }
    return false;
}

bool prunes(const Plan* p) {
    if (p == nullptr) return false;
    if (prunes(p->lefttree) || prunes(p->righttree)) return true;
    const auto any = [](const List* plans) {
        const ListCell* lc;
        foreach (lc, plans)
            if (prunes(static_cast<const Plan*>(lfirst(lc)))) return true;
        return false;
    };
    switch (nodeTag(p)) {
        case T_Append: {
            const auto* a = reinterpret_cast<const Append*>(p);
            return initial_steps(a->part_prune_info) || any(a->appendplans);
        }
        case T_MergeAppend: {
            const auto* m = reinterpret_cast<const MergeAppend*>(p);
            return initial_steps(m->part_prune_info) || any(m->mergeplans);
        }
        case T_BitmapAnd: return any(reinterpret_cast<const BitmapAnd*>(p)->bitmapplans);
        case T_BitmapOr: return any(reinterpret_cast<const BitmapOr*>(p)->bitmapplans);
        case T_SubqueryScan: return prunes(reinterpret_cast<const SubqueryScan*>(p)->subplan);
        case T_CustomScan: return any(reinterpret_cast<const CustomScan*>(p)->custom_plans);
        default: return false;
    }
}

// Runs in the SIGALRM handler, as every timeout handler does (PostgreSQL's
// handler holds off its own alarm meanwhile, so re-arming from here is safe;
// clock_gettime is async-signal-safe).
void on_cutoff_timeout() {
    const int64 deadline = pass_deadline_ns;
    timer_due_ns = 0;
    if (deadline == 0) return;  // between passes, or a pass without a limit: the timer lapses
    instr_time now;
    INSTR_TIME_SET_CURRENT(now);
    const int64 left_ns = deadline - mono_ns(now);
    if (left_ns > 500000) {  // armed for an earlier pass: on to this one's deadline
        const int ms = static_cast<int>(std::min<int64>((left_ns + 999999) / 1000000, 2000000000));
        timer_due_ns = mono_ns(now) + static_cast<int64>(ms) * 1000000;
        enable_timeout_after(cutoff_timeout, ms);
        return;
    }
    cutoff_fired = 1;
    InterruptPending = true;
    QueryCancelPending = true;
    SetLatch(MyLatch);
}

}  // namespace

bool prunes_at_start_walk(const PlannedStmt* stmt) {
    if (prunes(stmt->planTree)) return true;
    const ListCell* lc;
    foreach (lc, stmt->subplans)
        if (prunes(static_cast<const Plan*>(lfirst(lc)))) return true;
    return false;
}

int planned_workers_walk(const PlannedStmt* stmt) {
    int n = plan_workers(stmt->planTree);
    const ListCell* lc;
    foreach (lc, stmt->subplans) n += plan_workers(static_cast<const Plan*>(lfirst(lc)));
    return n;
}

void arm_timer(int64 start_ns, double capped_ms) {
    if (cutoff_timeout == MAX_TIMEOUTS) cutoff_timeout = RegisterTimeout(USER_TIMEOUT, on_cutoff_timeout);
    // Whole milliseconds, rounded up by a cast and a compare (std::ceil is a libm call here).
    int64 whole_ms = static_cast<int64>(capped_ms);
    if (static_cast<double>(whole_ms) < capped_ms) whole_ms++;
    timer_due_ns = 0;  // a firing in between finds no due time to keep
    enable_timeout_after(cutoff_timeout, static_cast<int>(whole_ms));
    timer_due_ns = start_ns + whole_ms * 1000000;  // no earlier than the deadline
}



Stage stage_on = Stage::None;

namespace {
SubTransactionId stage_subid = InvalidSubTransactionId;  // the one the stage began in
Execution stage_rec;  // what cutoff_context reports of the stage (in no slot: no statement's record)
ErrorContextCallback stage_cb;

// stage_cb out of the chain, wherever it is (an abort may have restored a
// chain that still holds a conversion's: linked twice, it would loop).
void unlink_stage_cb() {
    for (ErrorContextCallback** p = &error_context_stack; *p != nullptr; p = &(*p)->previous)
        if (*p == &stage_cb) {
            *p = stage_cb.previous;
            return;
        }
}
}  // namespace

// Turns the cancel our timer requested into the refusal it is. Runs inside
// errfinish for every error raised under a metered pass: C only.
// Only the first: 53T01 is an error like any other to an exception handler
// (PL/pgSQL's WHEN OTHERS catches it, where it leaves a cancel alone), and a
// statement that catches it and goes on is cancelled again as PostgreSQL
// cancels (57014, which only a handler naming query_canceled catches, as it
// could defeat statement_timeout), in a message that says so. Within a stage,
// the statements it runs count as one.
void cutoff_context(void* arg) {
    auto* e = static_cast<Execution*>(arg);
    if (!cutoff_fired || geterrcode() != ERRCODE_QUERY_CANCELED) return;
    const bool in_stage = stage_on != Stage::None;
    const bool again = e->cutoff || (in_stage && stage_rec.cutoff);
    e->cutoff = true;
    if (in_stage) stage_rec.cutoff = true;
    const double used = elapsed_ms(e->pass_start);
    const double over = used - std::max(0.0, e->tokens_left) - e->deposit;
    if (!again) errcode(kBudgetExhausted);
    if (in_stage && stage_on == Stage::Maintenance) {
        errmsg("ogc_throttle: work autovacuum does as a table's owner cancelled: identity \"%s\" ran past its budget",
               e->id.bytes);
        errdetail("It used %.0f ms of server time; its budget allowed %.0f ms when it started (tokens left and "
                  "ogc_throttle.cutoff_grace); capacity %g, refilling %g per second.",
                  used, e->allowed_ms, e->budget.capacity, e->budget.rate);
        errhint("Autovacuum ran the table's index expressions, partial-index predicates or expression statistics "
                "(in ANALYZE, or summarizing a BRIN index's range) as its owner, who pays for them; what was cut "
                "off stays undone until autovacuum comes back to it with the owner's bucket out of debt.");
        return;
    }
    errmsg(again ? "ogc_throttle: statement cancelled again: identity \"%s\" ran past its budget and caught the "
                   "first cancellation (53T01)"
                 : "ogc_throttle: statement cancelled: identity \"%s\" ran past its budget",
           e->id.bytes);
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
    if (cutoff_timeout != MAX_TIMEOUTS) {
        instr_time now;
        INSTR_TIME_SET_CURRENT(now);
        timer_due_ns = 0;
        pass_deadline_ns = mono_ns(now);  // past already: the next firing cancels
        enable_timeout_after(cutoff_timeout, 10);
        timer_due_ns = mono_ns(now) + 10000000;
    }
}

void stage_begin(Stage which, const IdentityKey& id, core::Budget b, Mode mode, double tokens_left,
                 const instr_time* start) {
    if (stage_on != Stage::None || !metering_idle() || mode == Mode::Log) return;
    stage_rec.id = id;
    stage_rec.budget = b;
    stage_rec.mode = mode;
    stage_rec.tokens_left = tokens_left;
    stage_rec.deposit = 0;
    stage_rec.workers = 0;
    stage_rec.cutoff = false;
    if (start != nullptr)
        stage_rec.pass_start = *start;
    else
        INSTR_TIME_SET_CURRENT(stage_rec.pass_start);
    arm_cutoff(&stage_rec);
    if (pass_deadline_ns == 0) return;  // no limit
    stage_deadline_ns = pass_deadline_ns;
    stage_on = which;
    stage_subid = GetCurrentSubTransactionId();
    stage_cb.callback = cutoff_context;
    stage_cb.arg = &stage_rec;
    if (stage_at_bottom(which)) {
        unlink_stage_cb();
        ErrorContextCallback** bottom = &error_context_stack;
        while (*bottom != nullptr) bottom = &(*bottom)->previous;
        stage_cb.previous = nullptr;
        *bottom = &stage_cb;
        return;
    }
    stage_cb.previous = error_context_stack;
    error_context_stack = &stage_cb;
}

void stage_end(Stage which, bool completed) {
    if (stage_on != which) return;
    stage_on = Stage::None;
    // (Under a PG_TRY begun before the stage, its end has restored the stack already.)
    if (stage_at_bottom(which))
        unlink_stage_cb();
    else if (error_context_stack == &stage_cb)
        error_context_stack = stage_cb.previous;
    stage_deadline_ns = 0;
    if (stage_rec.cutoff) count_hook_event(HookEvent::Cutoff);
    disarm_cutoff(completed);
}

void stages_aborted(SubTransactionId from) {
    if (stage_on == Stage::None || (from != InvalidSubTransactionId && from > stage_subid)) return;
    // (The error's handler has reset error_context_stack, or restored one
    // that may hold a conversion's callback, linked at its bottom.)
    if (stage_at_bottom(stage_on)) unlink_stage_cb();
    stage_on = Stage::None;
    stage_deadline_ns = 0;
    if (stage_rec.cutoff) count_hook_event(HookEvent::Cutoff);
    disarm_cutoff(false);
}

}  // namespace ot::ext
