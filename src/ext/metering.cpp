#include "ext/metering.hpp"
#include "ext/hot.hpp"

#include "ext/execution.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "ext/boundary.hpp"
#include "ext/hook.hpp"
#include "ext/plan_pricing.hpp"
#include "ext/identity_stats.hpp"
#include "ext/samples.hpp"
#include "ext/statement_samples.hpp"
#include "ext/settlement.hpp"
#include "ext/sqlstates.hpp"
#include "ext/sql_args.hpp"

extern "C" {
#include "access/parallel.h"
#include "access/xact.h"
#include "executor/executor.h"
#include "miscadmin.h"
#include "portability/instr_time.h"
#include "storage/ipc.h"
#include "storage/proc.h"
#include "tcop/pquery.h"
#include "tcop/tcopprot.h"
#include "utils/memutils.h"
}

namespace ot::ext {

Execution* running = nullptr;  // the top-level execution whose pass is on the stack
int run_depth = 0;             // executor passes on the stack (ExecutorRun/ExecutorFinish)
SubTransactionId start_subid = InvalidSubTransactionId;  // (execution.hpp)

namespace {

// Records live in blocks of 64 that never move or shrink: the first static,
// the rest allocated as a session opens more cursors at once. A bounded store
// was a way out of the metering: with every slot taken by an idle cursor, the
// next statement ran unmetered (never cut off, charged its estimate or after
// the fact).
constexpr int kBlock = 64;
Execution open_execs[kBlock];
Execution** blocks = nullptr;  // blocks[k] holds slots [k * kBlock, (k + 1) * kBlock); [0] is open_execs
int n_slots = kBlock;
int open_high = 0;  // slots [0, open_high) may be in use

__attribute__((always_inline)) inline Execution* slot(int i) {
    return likely(i < kBlock) ? &open_execs[i] : &blocks[i / kBlock][i % kBlock];
}

LastStatement last = {false, 0, 0, 0, false};

// What each hook passes on to: the hook before ours, or PostgreSQL's own
// (set once at install: a call through one pointer instead of a test and a
// branch every time).
ExecutorRun_hook_type run_next = standard_ExecutorRun;
ExecutorFinish_hook_type finish_next = standard_ExecutorFinish;
ExecutorEnd_hook_type end_next = standard_ExecutorEnd;

bool refit_due = false;  // a calibration refit is due, run from ExecutorEnd

// A top-level executor pass runs without a PG_TRY of its own (a setjmp per
// pass, and one more for ExecutorFinish, were a tenth of what the hook cost a
// select-only statement). An error that leaves it is followed, before anything
// else runs, by the abort of the subtransaction it started in or of an
// ancestor (a plan's functions run atomically: no pass ends its own
// transaction), and the abort callbacks below settle it, exactly once — also
// when the backend exits (FATAL, a client gone) with the pass on the stack.
// Utility passes (CALL, DO may commit and roll back as they go) keep their
// PG_TRY (meter_pass).
// The subtransaction an unguarded top-level pass on the stack began in
// (Invalid: none is; a pass's is never Invalid).
SubTransactionId top_subid = InvalidSubTransactionId;

// A statement's passes and end ask for the record just opened. Never null (a
// slot at first): a free slot's qd is null (release_slot), so a record whose
// qd is the caller's (never null) is in use, without a test of its own.
Execution* last_opened = &open_execs[0];

// The current subtransaction's id, kept by the callbacks below (a
// subtransaction's start, commit and abort each name it and its parent; every
// transaction begins at the top one) instead of asking
// GetCurrentSubTransactionId() at each statement's start and first pass.
// The hooks are installed at preload, before any transaction.
SubTransactionId current_subid = TopSubTransactionId;
__attribute__((always_inline)) inline SubTransactionId current_subtransaction() {
#ifdef OT_CHECK_SUBID
    if (current_subid != GetCurrentSubTransactionId())
        elog(ERROR, "ogc_throttle: kept subtransaction id %u, current %u", current_subid, GetCurrentSubTransactionId());
#endif
    return current_subid;
}

__attribute__((always_inline)) inline Execution* find_open(QueryDesc* qd) {
    if (qd != nullptr && last_opened->qd == qd) return last_opened;
    for (int i = 0; i < open_high; i++)
        if (Execution* e = slot(i); e->in_use && e->qd == qd) return e;
    return nullptr;
}

OT_HOT bool charges(const Execution& e) { return e.mode != Mode::Log && true_up_enabled(); }

// Measured time first consumes the deposit; the rest is charged. A statement
// with no deposit and no sample to leave (nothing priced: most statements)
// settles each pass as it ends, charge and statistics in one settlement, so
// that its end has nothing left to do. Otherwise a pass's charge waits in the
// record for the statement's end, where it goes out with the refund and the
// statistics in one settlement (a settlement per pass and another per
// statement were a tenth of a select-only statement's overhead). It goes out
// at once when it is large (a long pass is in the bucket as soon as it ends)
// and before a cursor's further pass is admitted (hand_over).
constexpr double kHoldMs = 10;  // settlement.cpp writes to the bucket from 10 ms on

OT_HOT void hand_over(Execution* e) {
    if (e->unowed == 0) return;
    owe(e->id, e->budget, e->unowed, e->id_serial);
    e->unowed = 0;
}

void settle_pass_held(Execution* e, double ms);

__attribute__((always_inline)) inline void settle_pass(Execution* e, double ms) {
    e->measured += ms;
    if (likely(e->settled)) {
        // No deposit, nothing priced (a nested statement that brings either
        // clears settled: metering_admitted); e->unowed, e->stats_charge and
        // e->stats_measured are 0 here: every earlier pass settled the same way.
        const double extra = charges(*e) ? ms : 0;
        e->charged += extra;
        settle_measured(e->id, e->budget, extra, ms, e->id_serial);
        return;
    }
    settle_pass_held(e, ms);
}

// The rest of settle_pass, out of line (fewer registers for the usual pass to save).
__attribute__((noinline)) void settle_pass_held(Execution* e, double ms) {
    count_measured(ms);
    e->settled = false;
    e->stats_measured += ms;
    const double consumed = std::min(e->deposit, ms);
    e->deposit -= consumed;
    const double extra = charges(*e) ? ms - consumed : 0;
    if (extra > 0) {
        e->unowed += extra;
        e->charged += extra;
        if (e->unowed >= kHoldMs) hand_over(e);
    }
    e->stats_charge += extra;
}

// The record's last figures for throttle_last_statement(), and its slot free.
__attribute__((always_inline)) inline void release_slot(Execution* e) {
    last = {true, e->estimate, e->measured, e->charged, e->cutoff};
    e->in_use = false;
    e->qd = nullptr;
    if (likely(open_high == 1)) {  // the one open statement (e) closes
        open_high = 0;
        return;
    }
    while (open_high > 0 && !slot(open_high - 1)->in_use) open_high--;
}

// The statement is over: what is left of the deposit was not used. Only a
// statement that completed is a calibration sample (an error or a cut-off
// leaves its time unknown).
__attribute__((always_inline)) inline void finish_inline(Execution* e, bool completed) {
    if (completed && e->priced && !e->cutoff && e->measured > 0)
        refit_due |= statement_sample(e, e->features, e->measured);
    double owed = e->unowed;
    if (e->deposit > 0 && charges(*e)) {
        owed -= e->deposit;
        e->charged -= e->deposit;
        e->stats_charge -= e->deposit;
    }
    e->deposit = 0;
    e->unowed = 0;
    // (nothing left when every pass settled as it ended)
    if (owed != 0 || e->stats_charge != 0 || e->stats_measured != 0)
        settle(e->id, e->budget, owed, e->stats_charge, e->stats_measured, e->id_serial);
    e->stats_charge = 0;
    e->stats_measured = 0;
    release_slot(e);
}

void finish(Execution* e, bool completed) { finish_inline(e, completed); }

// The index of a free slot while another is in use: the lowest free one, or a
// new block's first. Memory for a record is small beside the portal it
// meters; a session that cannot get it gets an error, not an unmetered
// statement.
__attribute__((noinline)) int free_slot() {
    for (int i = 0; i < n_slots; i++)
        if (!slot(i)->in_use) return i;
    const int nblocks = n_slots / kBlock;
    auto* table = static_cast<Execution**>(MemoryContextAllocExtended(
        TopMemoryContext, sizeof(Execution*) * (nblocks + 1), MCXT_ALLOC_NO_OOM));
    auto* block = static_cast<Execution*>(
        MemoryContextAllocExtended(TopMemoryContext, sizeof(Execution) * kBlock, MCXT_ALLOC_NO_OOM | MCXT_ALLOC_ZERO));
    if (table == nullptr || block == nullptr) {
        if (table != nullptr) pfree(table);
        if (block != nullptr) pfree(block);
        ereport(ERROR, (errcode(ERRCODE_OUT_OF_MEMORY),
                        errmsg("ogc_throttle: out of memory for the record of statement number %d open in this session",
                               n_slots + 1),
                        errhint("Close cursors this session no longer reads.")));
    }
    if (blocks == nullptr)
        table[0] = open_execs;
    else
        for (int k = 0; k < nblocks; k++) table[k] = blocks[k];
    table[nblocks] = block;
    Execution** old = blocks;
    blocks = table;  // (the records stay where they are; only the table of blocks moves)
    n_slots += kBlock;
    if (old != nullptr) pfree(old);
    return n_slots - kBlock;
}

// Opens the record of a top-level statement just admitted: inlined into the
// unpriced statement's fast path, where most of its arguments are constants.
__attribute__((always_inline)) inline Execution* open_record(QueryDesc* qd, const IdentityKey& id, core::Budget b,
                                                             Mode mode, double estimate, double deposit,
                                                             double tokens_left, const core::PlanFeatures* features,
                                                             int workers, std::uint64_t serial) {
    Execution* e = nullptr;
    if (likely(open_high == 0)) {
        e = &open_execs[0];  // nothing open: the first slot, as the scan below would find
        open_high = 1;
    } else {
        const int i = free_slot();
        e = slot(i);
        open_high = std::max(open_high, i + 1);
    }
    // Field by field: zeroing the whole record (its features are most of it)
    // was a tenth of an unpriced statement's admission. features is read
    // only while priced is set.
    e->in_use = true;
    e->ran = false;
    e->cutoff = false;
    e->settled = deposit == 0 && features == nullptr;
    e->mode = mode;
    e->qd = qd;
    e->subid = current_subtransaction();
    // A slot reused by the same identity (the same nonzero serial: the same
    // key) holds its 64 bytes already.
    if (serial == 0 || serial != e->id_serial) e->id = id;
    e->id_serial = serial;
    e->budget = b;
    e->estimate = estimate;
    // A free slot's deposit, unowed and statistics are 0 (finish_inline,
    // and a settled record never had any): written only when not.
    if (deposit != 0) e->deposit = deposit;
    e->tokens_left = tokens_left;
    e->measured = 0;
    e->charged = deposit;
    e->priced = features != nullptr;
    if (features != nullptr) e->features = *features;
    e->workers = workers;
    last_opened = e;
    return e;
}

// ---- the executor hooks ---------------------------------------------------

enum class Pass { Run, Finish };

OT_HOT void call_prev(Pass pass, QueryDesc* qd, ScanDirection dir, uint64 count, bool once) {
    if (pass == Pass::Run)
        run_next(qd, dir, count, once);
    else
        finish_next(qd);
}

// A nested pass nobody meters: only the depth is kept.
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
    worker_ran_query_pass = true;
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

// ---- a pass of an admitted statement: start, normal end, error ------------

// elapsed_ms() with the clock read into a static (see top_cb below): passes
// do not nest their ends, and no signal handler reads it.
instr_time pass_clock;
__attribute__((always_inline)) inline double pass_elapsed_ms(const instr_time& start) {
    INSTR_TIME_SET_CURRENT(pass_clock);
    const int64 ns =
        static_cast<int64>(pass_clock.tv_sec - start.tv_sec) * 1000000000 + (pass_clock.tv_nsec - start.tv_nsec);
    return static_cast<double>(ns) * 1e-6;
}

// set_callback false: cb->callback is cutoff_context already (top_cb).
template <bool set_callback = true>
__attribute__((always_inline)) inline void pass_begin(Execution* e, ErrorContextCallback* cb) {
    INSTR_TIME_SET_CURRENT(e->pass_start);
    if (unlikely(ActivePortal == nullptr || commit_phase_on))
        commit_phase_pass_begin(e);
    else
        note_pass_portal(ActivePortal);
    arm_cutoff(e);
    running = e;
    run_depth++;
    if (set_callback) cb->callback = cutoff_context;
    cb->arg = e;
    cb->previous = error_context_stack;
    error_context_stack = cb;
}

__attribute__((always_inline)) inline void pass_end(Execution* e, ErrorContextCallback* cb) {
    error_context_stack = cb->previous;
    disarm_cutoff(true);
    running = nullptr;
    run_depth--;
    settle_pass(e, pass_elapsed_ms(e->pass_start));
    if (unlikely(commit_phase_on)) commit_phase_pass_end();
}

// The statement is dead: charge what it used, give back what it did not.
// Whoever caught the error has restored error_context_stack.
void pass_failed(Execution* e) {
    disarm_cutoff(false);
    running = nullptr;
    run_depth--;
    if (e->cutoff) count_hook_event(HookEvent::Cutoff);
    settle_pass(e, elapsed_ms(e->pass_start));
    if (commit_phase_on) commit_phase_pass_end();
    finish(e, false);
}

// A top-level pass of e (null: a pass nobody meters), unguarded.
OT_HOT void top_level(Execution* e, Pass pass, QueryDesc* qd, ScanDirection dir, uint64 count, bool once) {
    top_subid = current_subtransaction();
    if (e == nullptr) {
        run_depth = 1;
        call_prev(pass, qd, dir, count, once);
        run_depth = 0;
    } else {
        if (pass == Pass::Run && e->ran) {
            hand_over(e);  // the earlier passes' time, before this one is admitted
            e->tokens_left = admit_further_pass(e->id, e->budget, e->mode);
        }
        ErrorContextCallback cb;
        pass_begin(e, &cb);
        call_prev(pass, qd, dir, count, once);
        pass_end(e, &cb);
        if (pass == Pass::Run) e->ran = true;
    }
    top_subid = InvalidSubTransactionId;
}

// (Sub)transaction `from` (Invalid: the whole transaction) aborts: a
// top-level pass begun in it, or in a subtransaction of it, died.
void top_level_aborted(SubTransactionId from) {
    if (top_subid == InvalidSubTransactionId || (from != InvalidSubTransactionId && from > top_subid)) return;
    top_subid = InvalidSubTransactionId;
    if (running != nullptr) pass_failed(running);
    run_depth = 0;
    if (proc_exit_inprogress) flush_settlements();  // the exit's own flush may have run already
}

// A portal whose executor started inside another statement (a cursor that a
// function opened and returned: its ExecutorStart was on the outer clock and
// opened no record) and now runs at the top level, from a FETCH: it gets a
// record of its own here, so that, as a DECLAREd cursor's passes, each pass is
// admitted against a debt, cut off at its deadline and charged. It had none:
// its FETCHes ran whatever their length while the bucket was in debt, and
// paid only after the fact, as the FETCH message's unmetered time.
Execution* adopt_portal(QueryDesc* qd) {
    const Mode mode = current_mode();
    if (mode == Mode::Off || !true_up_enabled() || MyBackendType != B_BACKEND || !shared_memory_ready() ||
        pricing_in_progress() || planning_in_progress())  // (the planning meter's clock is on)
        return nullptr;
    const IdentityKey& id = own_identity();
    const core::Budget b = usable_budget();
    const double tokens_left = admit_further_pass(id, b, mode);  // refused while in debt
    return open_execution(qd, id, b, mode, 0.0, 0.0, tokens_left, nullptr, 0);
}

OT_HOT void dispatch(Pass pass, QueryDesc* qd, ScanDirection dir, uint64 count, bool once) {
    if (run_depth == 0) {
        Execution* e = find_open(qd);
        if (e == nullptr) {
            if (IsParallelWorker()) {
                if (current_mode() != Mode::Off && shared_memory_ready()) return worker_pass(pass, qd, dir, count, once);
            } else if (pass == Pass::Run) {
                e = adopt_portal(qd);
            }
        }
        return top_level(e, pass, qd, dir, count, once);
    }
    unmetered(pass, qd, dir, count, once);
}

// The first pass of the statement just admitted, at the top level: the common
// case, straight to top_level's metered branch.
// (Static, not a local: one top-level pass is on the stack at a time, and a
// local whose address is taken costs the frame a stack-protector canary.)
ErrorContextCallback top_cb = {nullptr, cutoff_context, nullptr};  // (its callback set once)

// The run's arguments wait here while the pass begins (its clock and timer
// calls), instead of in six saved registers: nothing the beginning calls
// runs a statement.
struct RunArgs {
    QueryDesc* qd;
    uint64 count;
    ScanDirection dir;
    bool once;
} run_args;

OT_HOT void on_run(QueryDesc* qd, ScanDirection dir, uint64 count, bool once) {
    if (likely(run_depth == 0)) {
        Execution* e = last_opened;
        if (likely(e->qd == qd && !e->ran)) {
            run_args = {qd, count, dir, once};
            top_subid = current_subtransaction();
            pass_begin<false>(e, &top_cb);
            run_next(run_args.qd, run_args.dir, run_args.count, run_args.once);
            pass_end(e, &top_cb);
            e->ran = true;
            top_subid = InvalidSubTransactionId;
            return;
        }
    }
    dispatch(Pass::Run, qd, dir, count, once);
}

// A SELECT without data-modifying CTEs has no AFTER triggers: its finish
// does nothing worth a clock, and runs no statement that a depth would place.
OT_HOT void on_finish(QueryDesc* qd) {
    if (qd->operation == CMD_SELECT && !qd->plannedstmt->hasModifyingCTE)
        finish_next(qd);
    else
        dispatch(Pass::Finish, qd, NoMovementScanDirection, 0, false);
}

void end_and_refit(QueryDesc* qd);

// Any other statement's end, out of line (the usual end keeps no frame).
__attribute__((noinline)) void end_open(QueryDesc* qd) {
    if (Execution* e = find_open(qd)) finish_inline(e, e->ran);
}

OT_HOT void on_end(QueryDesc* qd) {
    if (run_depth == 0) {
        Execution* e = last_opened;
        if (likely(e->qd == qd && e->settled)) {
            // Nothing priced, every pass settled as it ended (settle_pass):
            // finish_inline with nothing to give back, sample or settle.
            release_slot(e);
        } else {
            end_open(qd);
        }
    }
    if (likely(!refit_due)) return end_next(qd);  // a tail call, no frame
    end_and_refit(qd);
}

// A calibration refit became due (finish_inline): after the executor's end.
// (A nested statement's end that ExecutorEnd may run finds it due too, and
// runs it at its own end when no pass is on the stack.)
__attribute__((noinline)) void end_and_refit(QueryDesc* qd) {
    end_next(qd);
    if (refit_due && run_depth == 0) {
        refit_due = false;
        guard([] { refit_if_due(); });
    }
}

// Portals of an aborted (sub)transaction never reach ExecutorEnd; the
// statements they ran were settled when their error passed through us, so
// what is left is deposits of cursors that never ran.
// A utility statement that commits as it goes (VACUUM, CREATE INDEX
// CONCURRENTLY) keeps its own record: it is on the stack, its pass settles it.
void finish_from(SubTransactionId from) {
    for (int i = 0; i < open_high; i++)
        if (Execution* e = slot(i); e->in_use && e->subid >= from && e != running) finish(e, false);
}

void on_xact_other(XactEvent event);

// A read-only transaction's commit passes PRE_COMMIT and COMMIT with nothing
// to do: those two are tested first, the rest is on_xact_other's.
OT_HOT void on_xact(XactEvent event, void*) {
    if (event == XACT_EVENT_PRE_COMMIT) {
        // MyProc->xid: the top transaction's id once it has one (as
        // GetTopTransactionIdIfAny() would say, without its call).
        if (likely(session_setup_charged) && likely(!commit_phase_on) && MyProc->xid == InvalidTransactionId) {
            // nothing to flush: commit_flush_begin() would find no xid (unless the pre-commit gives one)
            if (debug_query_string == nullptr && unlikely(notify_queued)) return late_xid_begin();
            late_xid_watch = false;
            return;
        }
    } else if (event == XACT_EVENT_COMMIT) {
        current_subid = TopSubTransactionId;  // (every subtransaction has ended already)
        end_conversion_stage();               // (never past its transaction, whose subtransactions it names)
        notify_queued = false;
        // (an xid: a write, or notifications queued, whose listeners find the payer published)
        if (likely(!commit_flush_on) && open_high == 0 && GetTopTransactionIdIfAny() == InvalidTransactionId) {
            late_xid_watch = false;
            if (unlikely(listening_session)) idle_transaction_ended();
            return;
        }
    }
    on_xact_other(event);
}

__attribute__((noinline)) void on_xact_other(XactEvent event) {
    if (event == XACT_EVENT_ABORT || event == XACT_EVENT_PREPARE) current_subid = TopSubTransactionId;
    if (event == XACT_EVENT_PREPARE) end_conversion_stage();
    if (event == XACT_EVENT_ABORT || event == XACT_EVENT_PARALLEL_ABORT) {
        top_level_aborted(InvalidSubTransactionId);
        // A utility pass (DO, CALL, CREATE INDEX, ...) settles in its PG_CATCH, which a FATAL never
        // reaches: a session terminated by its own role within such a statement paid nothing for it.
        if (unlikely(proc_exit_inprogress) && running != nullptr) {
            pass_failed(running);
            flush_settlements();
        }
        start_subid = InvalidSubTransactionId;
        pricing_aborted(InvalidSubTransactionId);
        stages_aborted(InvalidSubTransactionId);
    }
    if (event == XACT_EVENT_PARALLEL_PRE_COMMIT || event == XACT_EVENT_PARALLEL_ABORT)
        parallel_worker_ended(event == XACT_EVENT_PARALLEL_PRE_COMMIT);
    switch (event) {
        case XACT_EVENT_PRE_COMMIT:
            if (unlikely(!session_setup_charged)) charge_session_setup();
            exit_metering_commit();
            if (MyProc->xid == InvalidTransactionId && debug_query_string == nullptr && notify_queued)
                late_xid_begin();
            else
                late_xid_watch = false;
            [[fallthrough]];
        case XACT_EVENT_PRE_PREPARE:
            if (unlikely(commit_phase_on)) commit_phase_over();
            commit_flush_begin();
            break;
        case XACT_EVENT_COMMIT:
            if (late_xid_watch) late_xid_end();
            if (GetTopTransactionIdIfAny() != InvalidTransactionId) publish_payer();
            commit_flush_end();
            if (unlikely(listening_session)) idle_transaction_ended();
            break;
        case XACT_EVENT_PREPARE:
            notify_queued = false;
            commit_flush_end();
            break;
        case XACT_EVENT_ABORT:
            late_xid_watch = false;
            notify_queued = false;
            if (unlikely(commit_phase_on)) commit_phase_over();
            commit_flush_end();
            if (unlikely(listening_session)) idle_transaction_ended();
            break;
        default: break;
    }
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

void on_subxact(SubXactEvent event, SubTransactionId mySubid, SubTransactionId parentSubid, void*) {
    switch (event) {
        case SUBXACT_EVENT_START_SUB: current_subid = mySubid; return;
        case SUBXACT_EVENT_COMMIT_SUB: current_subid = parentSubid; return;
        case SUBXACT_EVENT_ABORT_SUB: break;
        default: return;
    }
    current_subid = parentSubid;  // (its clean-up follows; no statement runs in the aborted one)
    top_level_aborted(mySubid);
    if (start_subid != InvalidSubTransactionId && start_subid >= mySubid) start_subid = InvalidSubTransactionId;
    pricing_aborted(mySubid);
    stages_aborted(mySubid);
    if (open_high > 0) finish_from(mySubid);
}

}  // namespace

void meter_pass(Execution* e, void (*body)(void*), void* arg) {
    ErrorContextCallback cb;
    pass_begin(e, &cb);
    PG_TRY();
    { body(arg); }
    PG_CATCH();
    {
        error_context_stack = cb.previous;
        pass_failed(e);
        PG_RE_THROW();
    }
    PG_END_TRY();
    pass_end(e, &cb);
}

void meter_begin(Execution* e, ErrorContextCallback* cb) { pass_begin(e, cb); }
void meter_end(Execution* e, ErrorContextCallback* cb) { pass_end(e, cb); }
void meter_failed(Execution* e) { pass_failed(e); }

void close_execution(Execution* e, bool completed) { finish(e, completed); }

bool metering_nested() { return running != nullptr; }

const void* open_priced_record() {
    return last_opened->in_use && last_opened->priced ? last_opened : nullptr;
}
bool record_open(const void* record) { return static_cast<const Execution*>(record)->in_use; }
void request_refit() { refit_due = true; }


OT_HOT Execution* open_execution(QueryDesc* qd, const IdentityKey& id, core::Budget b, Mode mode, double estimate,
                          double deposit, double tokens_left, const core::PlanFeatures* features, int workers) {
    return open_record(qd, id, b, mode, estimate, deposit, tokens_left, features, workers, identity_serial(id));
}

OT_HOT void metering_admitted(QueryDesc* qd, const IdentityKey& id, core::Budget b, Mode mode, double estimate,
                       double deposit, double tokens_left, const core::PlanFeatures* features) {
    if (running != nullptr) {
        // Inside a metered pass, whose clock covers this statement's work.
        if (deposit != 0 || features != nullptr) running->settled = false;  // its passes hold their charge
        if (features != nullptr) {
            if (running->priced)
                core::add_features(running->features, *features);
            else
                running->features = *features;
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
    open_execution(qd, id, b, mode, estimate, deposit, tokens_left, features, planned_workers(qd->plannedstmt));
}


LastStatement last_statement() { return last; }

namespace {

ExecutorStart_hook_type start_next = standard_ExecutorStart;  // (as run_next)

// A statement with nothing to price, started in reject mode: admitted against
// its bucket's debt by the lock-free board and its record opened in one step,
// as admit_unpriced() -> admit() -> metering_admitted() would (the calls and
// their arguments were a sixth of what the hook added to a select-only
// statement). False: the general path decides (inside a pass nobody meters,
// true-up off, or a board that cannot prove the bucket out of debt).
__attribute__((always_inline)) inline bool start_unpriced(QueryDesc* qd) {
    const IdentityKey& id = own_identity();
    const core::Budget b = usable_budget();
    if (running != nullptr) return true;  // on the outer statement's clock
    if (run_depth != 0 || !true_up_enabled()) return false;
    const std::uint64_t serial = identity_serial(id);
    const double tokens_left = bucket_quick_admit_inline(id, b, serial);
    if (tokens_left < 0) return false;
    open_record(qd, id, b, Mode::Reject, 0.0, 0.0, tokens_left, nullptr, planned_workers(qd->plannedstmt), serial);
    return true;
}

// Parallel workers run a fragment of a statement the leader already paid
// for; queries that pricing itself runs (spatial_ref_sys) are part of it.
__attribute__((always_inline)) inline bool metered_start(Mode mode, int eflags) {
    return mode != Mode::Off && (eflags & EXEC_FLAG_EXPLAIN_ONLY) == 0 && !IsParallelWorker() &&
           !pricing_in_progress() && shared_memory_ready();
}

// A plan without invalidation items calls no function outside the core (the
// planner records an item for each such function), so its start runs nothing
// a role wrote and nothing calls_extension_functions() would price, unless it
// prunes partitions there (execution.hpp). The usual select is answered
// without a call.
__attribute__((always_inline)) inline bool starts_plainly(const PlannedStmt* stmt) {
    return stmt->invalItems == NIL && !prunes_at_start(stmt);
}

// The executor's start, marked as such (executor_starting()): the functions
// it initializes are the statement's, not work outside every meter, though
// no pass of the statement has begun (an abort clears the mark).
__attribute__((always_inline)) inline void run_start(QueryDesc* qd, int eflags) {
    const SubTransactionId outer = start_subid;
    if (outer == InvalidSubTransactionId) start_subid = current_subid;
    start_next(qd, eflags);
    start_subid = outer;
}

// Pricing, the other modes, and an unpriced statement the board could not
// prove out of debt: after the executor's own start, which has checked the
// privileges on every relation and function of the plan by then, so pricing
// never reads the statistics of a table, or calls a function, that the user
// may not, and a refusal never comes before a privilege error.
// Only a plan that calls a function outside PostgreSQL's own (the user's, or
// an extension's) or prunes partitions at its start has something in its
// start or its pricing that could run long: it alone starts under a stage.
__attribute__((noinline)) void start_then_admit(QueryDesc* qd, int eflags) {
    const Mode mode = current_mode();
    const bool metered = metered_start(mode, eflags);
    const bool calls_extension = metered && calls_extension_functions(qd->plannedstmt);
    if (metered && !starts_plainly(qd->plannedstmt)) begin_start_stage(mode);
    run_start(qd, eflags);
    if (metered) executor_started(qd, mode, calls_extension);
}

// The usual statement (nothing to price, reject mode, a board that proves its
// bucket out of debt) is admitted and its record opened before the executor's
// start, which then runs marked (run_start): neither reads what the executor's
// start checks or builds (the plan's invalidation items, its workers, the
// board). Should the start fail, the (sub)transaction's abort closes the
// record, as it closes any. The rest is hook.cpp's executor_started(), after
// the start (start_then_admit).

// (The flags wait in a static while the admission calls out, instead of on
// the stack around each call: nothing it calls starts a statement.)
int start_eflags;
OT_HOT void on_executor_start(QueryDesc* qd, int eflags) {
    start_eflags = eflags;
    if (likely(metered_start(Mode::Reject, eflags) && current_mode() == Mode::Reject &&
               starts_plainly(qd->plannedstmt) && start_unpriced(qd)))
        return run_start(qd, start_eflags);
    start_then_admit(qd, start_eflags);
}

}  // namespace

void install_metering_hooks() {
    if (ExecutorStart_hook) start_next = ExecutorStart_hook;
    ExecutorStart_hook = on_executor_start;
    if (ExecutorRun_hook) run_next = ExecutorRun_hook;
    ExecutorRun_hook = on_run;
    if (ExecutorFinish_hook) finish_next = ExecutorFinish_hook;
    ExecutorFinish_hook = on_finish;
    if (ExecutorEnd_hook) end_next = ExecutorEnd_hook;
    ExecutorEnd_hook = on_end;
    RegisterXactCallback(on_xact, nullptr);
    RegisterSubXactCallback(on_subxact, nullptr);
}

}  // namespace ot::ext
