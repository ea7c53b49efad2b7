#include "ext/execution.hpp"
#include "ext/hook.hpp"
#include "ext/settlement.hpp"
#include "ext/sql_args.hpp"

#include <sys/resource.h>

extern "C" {
#include "access/parallel.h"
#include "access/xact.h"
#include "miscadmin.h"
#include "utils/backend_status.h"
#include "tcop/pquery.h"
#include "utils/memutils.h"
}

// The deferred-trigger phase of a commit, paid as a whole. A deferred foreign
// key queues one check per row; COMMIT runs them after every statement's
// executor is done. Each check's own executor pass is metered, but the work
// around it (the trigger queue, the RI trigger itself, SPI, executor start
// and end: built-in code no hook sees) was not: 200 000 deferred checks took
// 1 460 ms at COMMIT and 540 ms were charged.
//
// The phase begins with the first metered pass that runs with no portal
// active in a client backend: only CommitTransaction (and PrepareTransaction)
// run the executor there, since every statement runs inside PortalRun. It ends
// at XACT_EVENT_PRE_COMMIT (PRE_PREPARE), which follows the deferred triggers
// and the holdable cursors' materialisation, or at the abort of a commit that
// failed. Between the metered passes inside it, each gap is charged when the
// next pass begins, so debt builds up as the phase goes and the admission of
// the next check refuses a commit the bucket cannot pay for. Time spent
// waiting for a turn in delay mode is not work and is left out.
//
// What runs outside the passes and gaps here (queue set-up before the first
// pass, deferrable UNIQUE rechecks, which run no executor pass at all) is the
// COMMIT message's own unmetered work (message_metering.cpp), and a fast-path
// call's implicit commit is its message's too; a Sync's is charged by CPU
// time there.
//
// The commit itself, from the pre-commit callbacks to the commit callbacks,
// is charged too when the transaction wrote (it has an xid): that is where the
// commit record is flushed and, with synchronous replication, acknowledged.
// A one-row INSERT ran 0.1 ms and its commit waited 2.7 ms for the disk here:
// a client of tiny write transactions used the disk for a few percent of
// their price. It is measured and charged after the fact (debt refuses what
// comes next); a commit cannot be refused once it is being written.
//
// COMMIT PREPARED and ROLLBACK PREPARED write and flush the prepared
// transaction's own commit or abort record inside the statement (their own
// transaction has no xid): the statement is timed and charged to whoever runs
// it, never refused.
//
// A transaction that queued notifications and wrote nothing else is given its xid by
// PreCommit_Notify, after the pre-commit callbacks, and writes the notification queue there:
// 10 000 notifications of 7.9 kB took some 150 ms of a 550 ms session. Inside a message's
// statement text (a simple Query's commit, a COMMIT statement) that is in the message's span; a
// Sync's commit (the extended protocol's implicit transaction) was free. Such a commit is timed
// from its pre-commit callback to the end of its cleanup when it got an xid in between.
//
// A session's set-up is charged as the commit that ends it begins: the first
// commit of a client backend is InitPostgres's own, after authentication and the
// role's settings (so the budget is the role's). What is charged is the
// backend's CPU time so far, not its wall time: a client slow to send its
// password, or far away, is not charged for the round trips.
namespace ot::ext {

bool commit_phase_on = false;
bool commit_flush_on = false;
bool session_setup_charged = false;
bool late_xid_watch = false;
bool notify_queued = false;

namespace {

struct Phase {
    bool charges;  // mode is not log and true-up is on, as for the first pass
    IdentityKey id;
    core::Budget budget;
    instr_time last_end;  // of the last metered pass inside the phase (its start, before that)
    double waited_ms;     // waiting for a turn since last_end
};
Phase phase;

struct Flush {
    bool on;
    bool charges;
    IdentityKey id;
    core::Budget budget;
    instr_time start;
};
Flush flush;

instr_time late_xid_start;

bool in_commit() {
    return ActivePortal == nullptr && MyBackendType == B_BACKEND &&
           !(MyBEEntry != nullptr && MyBEEntry->st_state == STATE_FASTPATH);
}

// Time measured outside any statement: counted, charged unless in log mode, and
// in the identity's statistics.
void charge_measured(const IdentityKey& id, const core::Budget& b, bool charges, double ms) {
    count_measured(ms);
    settle(id, b, charges ? ms : 0, charges ? ms : 0, ms);
}

// Where a commit's own time is metered: a client backend, outside any metered
// pass, metering on, with a budget (set in b) the spend path can represent.
bool commit_time_metered(core::Budget& b) {
    if (MyBackendType != B_BACKEND || !metering_idle() || IsParallelWorker() || current_mode() == Mode::Off ||
        !true_up_enabled() || !shared_memory_ready())
        return false;
    b = current_budget();
    return core::budget_problem(b) == nullptr;
}

void charge_gap(const instr_time& until) {
    instr_time gap = until;
    INSTR_TIME_SUBTRACT(gap, phase.last_end);
    const double ms = INSTR_TIME_GET_MILLISEC(gap) - phase.waited_ms;
    phase.waited_ms = 0;
    if (ms <= 0) return;
    charge_measured(phase.id, phase.budget, phase.charges, ms);
}

}  // namespace

void commit_phase_pass_begin(const Execution* e) {
    if (commit_phase_on) {
        charge_gap(e->pass_start);
        return;
    }
    if (!in_commit()) return;
    phase = {e->mode != Mode::Log && true_up_enabled(), e->id, e->budget, e->pass_start, 0.0};
    commit_phase_on = true;
}

void commit_phase_pass_end() {
    INSTR_TIME_SET_CURRENT(phase.last_end);
    phase.waited_ms = 0;
}

void commit_phase_waited(double ms) {
    if (commit_phase_on) phase.waited_ms += ms;
}

void commit_phase_over() {
    if (!commit_phase_on) return;
    commit_phase_on = false;
    instr_time now;
    INSTR_TIME_SET_CURRENT(now);
    charge_gap(now);
}

void commit_flush_begin() {
    // (a budget it cannot represent: its statements were refused already)
    core::Budget b{};
    if (GetTopTransactionIdIfAny() == InvalidTransactionId || !commit_time_metered(b)) return;
    flush = {true, current_mode() != Mode::Log, own_identity(), b, {}};
    commit_flush_on = true;
    INSTR_TIME_SET_CURRENT(flush.start);
}

void commit_flush_end() {
    if (!flush.on) return;
    flush.on = false;
    commit_flush_on = false;
    const double ms = elapsed_ms(flush.start);
    charge_measured(flush.id, flush.budget, flush.charges, ms);
}

void late_xid_begin() {
    late_xid_watch = true;
    INSTR_TIME_SET_CURRENT(late_xid_start);
}

namespace {
Flush late_xid;

// (the transaction's memory is the last of its cleanup: after AtCommit_Notify, which signals the
// listeners and may truncate the queue's old segments)
void late_xid_over(void*) {
    if (!late_xid.on) return;
    late_xid.on = false;
    charge_measured(late_xid.id, late_xid.budget, late_xid.charges, elapsed_ms(late_xid.start));
}
}  // namespace

void late_xid_end() {
    late_xid_watch = false;
    core::Budget b{};
    if (GetTopTransactionIdIfAny() == InvalidTransactionId || !commit_time_metered(b)) return;
    // (no catalog now: the identity a statement of the transaction looked up)
    const IdentityKey* id = own_identity_if_known();
    if (id == nullptr) return;
    late_xid = {true, current_mode() != Mode::Log, *id, b, late_xid_start};
    auto* cb =
        static_cast<MemoryContextCallback*>(MemoryContextAlloc(TopTransactionContext, sizeof(MemoryContextCallback)));
    cb->func = late_xid_over;
    cb->arg = nullptr;
    MemoryContextRegisterResetCallback(TopTransactionContext, cb);
}

void meter_finish_prepared(void (*run)(void*), void* arg) {
    core::Budget b{};
    if (!commit_time_metered(b)) return run(arg);
    // Only plain values live across run(): an ERROR in it longjmps past this
    // frame and nothing is charged (a failed one did not flush).
    instr_time start;
    INSTR_TIME_SET_CURRENT(start);
    run(arg);
    charge_measured(own_identity(), b, current_mode() != Mode::Log, elapsed_ms(start));
}

void charge_session_setup() {
    session_setup_charged = true;
    if (MyBackendType == B_AUTOVAC_WORKER) autovacuum_metering_start();
    // Looked up now, inside a transaction: a session's first message may fail
    // before any statement asks, and what it did is charged after the abort.
    if (MyBackendType == B_BACKEND && !IsParallelWorker()) (void)own_identity();
    if (!setting_charge_connection || MyBackendType != B_BACKEND || IsParallelWorker() ||
        current_mode() == Mode::Off || !true_up_enabled() || !shared_memory_ready())
        return;
    const core::Budget b = current_budget();
    if (core::budget_problem(b) != nullptr) return;
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0) return;
    const double ms = (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e3 + (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e3;
    charge_measured(own_identity(), b, current_mode() != Mode::Log, ms);
}

}  // namespace ot::ext
