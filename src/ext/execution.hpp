// The metering's own record of a top-level statement, shared by the files
// that meter it (metering.cpp), cut it off (cutoff.cpp) and meter utility
// statements (utility_metering.cpp). Not for the rest of the extension.
#pragma once
#include "ext/hot.hpp"
#include <algorithm>
#include <cmath>
#include <csignal>
#include "ext/pg.hpp"
#include "core/gcra.hpp"
#include "core/statement_cost.hpp"
#include "ext/bucket_table.hpp"
#include "ext/settings.hpp"

extern "C" {
#include "access/xact.h"
#include "catalog/pg_class.h"
#include "miscadmin.h"
#include "executor/execdesc.h"
#include "portability/instr_time.h"
#include "utils/timeout.h"
}

namespace ot::ext {

// A top-level statement between its admission and its end. Slots never move
// (a function may CLOSE another cursor while a pass runs), so pointers into
// the array stay valid.
struct Execution {
    bool in_use;
    bool ran;     // a pass has finished: the next one is a further FETCH
    bool cutoff;  // cancelled for running past its budget
    bool settled;  // no deposit, nothing priced, every pass settled as it ended: its end has nothing to settle
    Mode mode;
    QueryDesc* qd;
    SubTransactionId subid;
    IdentityKey id;
    std::uint64_t id_serial;  // identity_serial() of the key id was copied from
    core::Budget budget;
    double estimate;
    double deposit;      // estimates charged and not yet consumed by measured time
    double tokens_left;  // in the bucket after the last admission
    double measured;
    double charged;
    double unowed;       // measured beyond the deposit, not yet handed to the settlement
    double allowed_ms;   // the running pass's budget, for the cancellation's DETAIL
    int workers;         // parallel workers its plan may launch: they spend its budget too
    instr_time pass_start;
    double stats_charge;          // change to the charge not yet in the identity's statistics
    double stats_measured;        // measured ms not yet in the identity's statistics
    bool priced;                  // features hold something: a calibration sample at the end
    core::PlanFeatures features;  // of its estimate, nested statements' included
};

// In whole nanoseconds, one conversion (INSTR_TIME_SUBTRACT's carry and
// INSTR_TIME_GET_MILLISEC's two were a tenth of a pass's own instructions).
inline double elapsed_ms(const instr_time& start) {
    instr_time now;
    INSTR_TIME_SET_CURRENT(now);
    const int64 ns = static_cast<int64>(now.tv_sec - start.tv_sec) * 1000000000 + (now.tv_nsec - start.tv_nsec);
    return static_cast<double>(ns) * 1e-6;
}

// Opens the record of a top-level statement just admitted (never null: as
// many as the session has open; out of memory for one is an ERROR). qd may be
// null (a utility statement).
Execution* open_execution(QueryDesc* qd, const IdentityKey& id, core::Budget b, Mode mode, double estimate,
                          double deposit, double tokens_left, const core::PlanFeatures* features, int workers);
// Runs body(arg) as one metered pass of e: timed, cut off at its deadline,
// settled (also when body throws, which it then rethrows).
void meter_pass(Execution* e, void (*body)(void*), void* arg);
// The same pass begun and ended by two calls (a function manager hook's START
// and END), cb living as long as the pass. meter_failed: the pass died (the
// caller has taken cb off error_context_stack); e is closed.
void meter_begin(Execution* e, ErrorContextCallback* cb);
void meter_end(Execution* e, ErrorContextCallback* cb);
void meter_failed(Execution* e);
// The statement is over: refunds the unused deposit, records statistics.
void close_execution(Execution* e, bool completed);
// The top-level statement whose metered pass is on the stack (null: none), and
// the executor passes on the stack (metering.cpp's, read inline).
extern OT_LOCAL Execution* running;
extern OT_LOCAL int run_depth;
// No metered pass on the stack, no executor pass either.
inline bool metering_idle() { return running == nullptr && run_depth == 0; }
// The subtransaction the executor's start on the stack began in (Invalid:
// none is); an abort of that subtransaction clears it. The functions a start
// initializes are its statement's, though no pass of it runs yet.
extern OT_LOCAL SubTransactionId start_subid;
inline bool executor_starting() { return start_subid != InvalidSubTransactionId; }

// commit_metering.cpp: the deferred-trigger phase of a commit, metered as a
// whole. Its passes report their start and end; the transaction's end closes it.
extern OT_LOCAL bool commit_phase_on;
void commit_phase_pass_begin(const Execution* e);  // also: no portal active, may open the phase
void commit_phase_pass_end();
void commit_phase_waited(double ms);
void commit_phase_over();
// The commit of a transaction that wrote: from its pre-commit callbacks to its
// commit (or abort) callbacks, the commit record's flush. commit_flush_on: begun
// and not ended (a read-only transaction's callbacks test it and go on).
extern OT_LOCAL bool commit_flush_on;
void commit_flush_begin();
void commit_flush_end();
// A commit outside every statement's text (a Sync's, a fast-path call's) without an xid at its
// pre-commit callback: timed from there (late_xid_begin) to the end of its cleanup, and charged, if
// its pre-commit work gave it one (seen at the commit callback, late_xid_end): PreCommit_Notify
// writing the notification queue. Watched only when the transaction may have queued a notification
// (notify_queued: a NOTIFY statement, or a plan or call of pg_notify(), at any depth), which is all
// that gives a transaction its xid there; the clock read it takes was one statement's fifth.
extern OT_LOCAL bool late_xid_watch;
extern OT_LOCAL bool notify_queued;
void late_xid_begin();
void late_xid_end();
// COMMIT PREPARED / ROLLBACK PREPARED: run(arg) timed and charged to the caller
// like a commit (never refused: a role in debt must be able to release what a
// prepared transaction holds).
void meter_finish_prepared(void (*run)(void*), void* arg);
// The first pre-commit of a backend ends its set-up (ogc_throttle.charge_connection).
extern OT_LOCAL bool session_setup_charged;
void charge_session_setup();

// cutoff.cpp: the deadline of a pass, and turning its cancel into 53T01.
// Set by the timer's handler when it cancelled the running pass; the running
// pass's deadline (monotonic ns, 0: none), which the handler reads.
extern OT_LOCAL volatile sig_atomic_t cutoff_fired;
extern OT_LOCAL volatile int64 pass_deadline_ns;
// The timer is left armed between passes: arming and disarming a timeout per
// statement was the largest part of what the hook cost a select-only
// statement. timer_due_ns is the earliest time the armed timer can fire (0:
// not known to be armed). A pass whose deadline is no earlier than that
// leaves the timer as it is; when it fires, the handler cancels the pass if
// its deadline has come, re-targets the timer at the deadline if it has not,
// and does nothing between passes.
extern OT_LOCAL volatile int64 timer_due_ns;
extern OT_LOCAL TimeoutId cutoff_timeout;  // registered by the first arm_timer()
// Still armed (error recovery may have cleared every timeout).
inline bool timer_armed() { return get_timeout_active(cutoff_timeout); }
void arm_timer(int64 start_ns, double capped_ms);  // due capped_ms (rounded up) after start_ns
inline int64 mono_ns(const instr_time& t) { return static_cast<int64>(t.tv_sec) * 1000000000 + t.tv_nsec; }
// The leader's timer watches wall time while each planned parallel worker
// spends the same budget as fast: the budget runs out that many times sooner.
inline double spenders(const Execution& e) {
    return e.workers == 0 ? 1.0 : 1 + std::min(e.workers, max_parallel_workers);
}
// How long a pass may run: what the bucket held (tokens left plus the unused
// deposit), growing by the refill while it runs, plus the grace. Negative: no limit.
inline double pass_allowance_ms(const Execution& e) {
    const int grace = cutoff_grace_ms();
    if (grace < 0 || e.mode == Mode::Log) return -1;
    const double n = spenders(e);
    const double per_ms = e.budget.rate / 1000.0;  // refill per millisecond of wall time
    if (per_ms >= n) return -1;                     // the refill keeps up with every spender
    if (!std::isfinite(e.tokens_left)) return -1;  // admitted for free
    const double have = std::max(0.0, e.tokens_left) + e.deposit;
    return have / (n - per_ms) + grace;
}
// Planning and pricing run before the statement they prepare is admitted, and
// both can run what the user wrote (an immutable function the planner folds,
// a function in a pricing argument, for as long as it likes): each is a
// stage with a deadline of its own, set as a pass's is from what the bucket
// held when it began. The deadline of the stage on the stack (0: none) holds
// under the statements it runs: a pass there ends at the earlier of the two,
// and leaves the stage's deadline in force when it ends.
extern OT_LOCAL volatile int64 stage_deadline_ns;
// Sets the deadline of the pass e begins (its pass_start read), inline in the
// passes (a call and its frame were a sixth of its cost).
inline void arm_cutoff(Execution* e) {
    cutoff_fired = 0;
    const double allowed = pass_allowance_ms(*e);
    e->allowed_ms = allowed;
    const int64 outer = stage_deadline_ns;
    if (likely(allowed < 0 && outer == 0)) {
        pass_deadline_ns = 0;
        return;
    }
    const int64 start_ns = mono_ns(e->pass_start);
    int64 deadline = outer;
    if (allowed >= 0) {
        const int64 own = start_ns + static_cast<int64>((allowed < 2e9 ? allowed : 2e9) * 1e6);
        if (outer == 0 || own < outer) deadline = own;
    }
    pass_deadline_ns = deadline;  // before the test below: a timer firing now re-targets itself at it
    // Armed no later than this deadline: it stays.
    const int64 due = timer_due_ns;
    if (due != 0 && due <= deadline && timer_armed()) return;
    arm_timer(start_ns, deadline > start_ns ? static_cast<double>(deadline - start_ns) * 1e-6 : 0.0);
}
inline void disarm_cutoff(bool completed) {
    pass_deadline_ns = stage_deadline_ns;  // the timer stays armed for the next pass, and lapses if there is none
    if (likely(!cutoff_fired)) return;
    // Fired as the pass was completing: the cancel it requested is no longer ours to deliver.
    if (completed) QueryCancelPending = false;
    cutoff_fired = 0;
}
void cutoff_context(void* execution);
// A stage (above) begins: its deadline from tokens_left, what the bucket holds.
// Nothing when another stage or a metered pass is on the stack (its deadline
// holds already), in log mode or without a limit. Stages end by stage_end()
// (its caller's PG_TRY has restored error_context_stack on an error) or, when
// an error leaves one without a PG_TRY, when (sub)transaction `from` (Invalid:
// the whole one) that it began in, or an ancestor of it, aborts.
// Start: the executor's start (its initial partition pruning runs the plan's
// functions) and the pricing after it, up to the admission.
// Conversion: work a message does outside every meter (hook.hpp,
// begin_conversion_stage), up to its answer or a wait for a turn. It begins
// deep inside that work, where a callback pushed on error_context_stack
// would be popped by its callers' own (a Bind pops its per-parameter
// callback as the top of the stack): its callback goes to the bottom.
// Maintenance: what autovacuum runs as a table's owner (maintenance_metering.cpp),
// up to the end of that table's transaction; it too begins deep inside.
enum class Stage { None, Planning, Start, Conversion, Maintenance };
inline bool stage_at_bottom(Stage s) { return s == Stage::Conversion || s == Stage::Maintenance; }
extern OT_LOCAL Stage stage_on;
void stage_begin(Stage which, const IdentityKey& id, core::Budget b, Mode mode, double tokens_left,
                 const instr_time* start = nullptr);  // (null: now)
void stage_end(Stage which, bool completed);
void stages_aborted(SubTransactionId from);
// A function autovacuum is about to run (maintenance_metering.cpp).
void maintenance_function();
// Who pays for work on a table owner's behalf, as the owner's sessions would be charged (their
// settings, read from the catalog); false where nothing is charged (mode off or log, true-up
// off). The identity is the one the current user may choose: call it as the owner.
struct OwnerPayer {
    IdentityKey id;
    core::Budget budget;
    int cutoff_grace_ms;
    const char* role;
};
bool owner_payer(Oid owner, OwnerPayer* out);
// The start of this transaction's metered maintenance pass (maintenance_function's), if one is on or
// was settled at this transaction's end; forgotten at the next pass or by maintenance_pass_forget().
bool maintenance_pass_start(instr_time* out);
void maintenance_pass_forget();
// This transaction was aborted by the refusal of such a pass (the owner in debt).
bool maintenance_refused();
// A metered session's statement that would give a table to an owner whose settings charge nothing is
// refused (upkeep_owner.cpp): that owner pays for the table's upkeep.
void check_upkeep_owner(const Node* stmt);
// Autovacuum's own work on a table, charged to its owner (autovacuum_metering.cpp): started in a
// worker at its first commit.
void autovacuum_metering_start();
inline void end_conversion_stage() {
    if (unlikely(stage_on == Stage::Conversion)) stage_end(Stage::Conversion, true);
}
// Parallel workers the plan's Gather nodes may launch (0 without any).
int planned_workers_walk(const PlannedStmt* stmt);
inline int planned_workers(const PlannedStmt* stmt) {
    if (stmt == nullptr || !stmt->parallelModeNeeded) return 0;  // no Gather anywhere: skip the walk
    return planned_workers_walk(stmt);
}
// The executor's start evaluates a partition pruning step's expressions with
// the execution's parameters (a generic plan's initial pruning): built-in
// functions there, or a domain's CHECK, which may call anything (pg_sleep,
// volatile, is never a pruning step itself; hidden in a domain, it runs).
// Only a partitioned table prunes, and most statements read none: their
// range table says so without the walk.
bool prunes_at_start_walk(const PlannedStmt* stmt);
inline bool prunes_at_start(const PlannedStmt* stmt) {
    const ListCell* lc;
    foreach (lc, stmt->rtable)
        if (static_cast<const RangeTblEntry*>(lfirst(lc))->relkind == RELKIND_PARTITIONED_TABLE)
            return prunes_at_start_walk(stmt);
    return false;
}

}  // namespace ot::ext
