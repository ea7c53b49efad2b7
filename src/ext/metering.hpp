// Measured true-up: the estimate admits a statement, the clock settles it.
//
// Every top-level executor pass (ExecutorRun, ExecutorFinish; each FETCH of a
// cursor is a pass) of a statement the pricing hook admitted is timed. The
// estimate charged at admission is a deposit: measured time first consumes
// it, anything beyond is charged (the bucket may go into debt), and what is
// left of it when the statement ends — normally, with an error, or by abort —
// is refunded. Nested statements (inside functions) pay their estimates into
// the deposit of the statement that runs them, whose clock already covers
// them. Parallel workers charge their own executor time to the same identity.
// A pass that runs past what the bucket could pay when it started (plus
// ogc_throttle.cutoff_grace) is cancelled with SQLSTATE 53T01.
#pragma once
#include "ext/pg.hpp"

#include "core/gcra.hpp"
#include "core/statement_cost.hpp"
#include "ext/bucket_table.hpp"
#include "ext/settings.hpp"

extern "C" {
#include "executor/execdesc.h"
#include "utils/portal.h"
}

namespace ot::ext {

// The executor's hooks: ExecutorStart (then hook.cpp's executor_started), Run, Finish, End.
void install_metering_hooks();

// Whether a statement being started now runs inside a metered pass (its
// estimate then joins that pass's deposit instead of opening its own).
bool metering_nested();


// The ExecutorStart hook admitted qd: `deposit` was charged to id (0 in log
// mode), leaving tokens_left in the bucket.
// features: what the estimate was made of (null: nothing priced); kept with
// the measured time as a calibration sample when the statement completes.
void metering_admitted(QueryDesc* qd, const IdentityKey& id, core::Budget b, Mode mode, double estimate,
                       double deposit, double tokens_left, const core::PlanFeatures* features);


// A parallel worker's transaction ends (committing: XACT_EVENT_PARALLEL_PRE_COMMIT, else its
// abort). A worker that ran no query pass (one of a parallel index build's or a parallel
// VACUUM's) charges the leader's identity the whole of its life (parallel_maintenance.cpp);
// query workers charge their passes.
void parallel_worker_ended(bool committing);
extern bool worker_ran_query_pass;


// The session's exit, timed and charged (exit_metering.cpp): registered with the first message's
// answer (exit_metering_start), and again at a write transaction's commit once a temporary schema
// exists (exit_metering_commit).
void exit_metering_start();
void exit_metering_commit();


// Who pays for the work this backend causes in others (payer_slots.cpp): published in shared
// memory at a commit that has an xid and as a metered utility statement begins; read by PID
// (a listener delivering this backend's notifications) or by a parallel worker for its leader.
struct Payer {
    bool metered;  // not mode off, true-up on, a budget the spend path takes
    bool charges;  // ... and not log mode
    core::Budget budget;
    IdentityKey key;
};
void publish_payer();
bool find_payer(int32 pid, Payer& out);
bool leader_payer(Payer& out);

// Notifications (notify_metering.cpp): a listener's delivery time gathered per sender (its PID)
// and charged to the sender's identity when the sender changes and when the delivering
// transaction ends. false: no such sender is found, and the time is the listener's own.
bool delivery_charge(int32 sender, double ms);
void delivery_flush();
// A delivering transaction's first notification is about to go out: the listener's channels are counted.
void delivery_begin();
// Of ms of a listener's CPU up to a notification of len bytes it delivers, the sender's part.
double delivery_senders_part(double ms, size_t len);
// A session that ran LISTEN reads every entry its database queues; what it does not deliver (entries
// on other channels) names no sender, so it pays for that reading itself (message_metering.cpp):
// from its last answer to its ReadyForQuery, and from there to the end of each transaction it runs
// while idle.
extern OT_LOCAL bool listening_session;
void note_listening();
void idle_transaction_ended();
// A metered pass ran in the unnamed portal a simple Query runs its statements in (named "" and kept
// out of pg_cursors; a Bind's unnamed portal is listed, an EXECUTE's is named): up to its
// ReadyForQuery, the backend reads nothing from the client (message_metering.cpp).
extern OT_LOCAL bool simple_query_message;
inline void note_pass_portal(const PortalData* portal) {
    if (!portal->visible && portal->name[0] == '\0') simple_query_message = true;
}


// A wait for a turn (delay mode) of ms: not work, should it fall inside a
// span that is charged as a whole (a commit's deferred-trigger phase, a
// message's unmetered work).
void admission_waited(double ms);

struct LastStatement {
    bool valid;
    double estimate;  // estimates admitted (the statement's own and its nested statements')
    double measured;  // executor milliseconds, every pass
    double charged;   // net charged to the bucket (0 in log mode)
    bool cutoff;      // cancelled for running past its budget
};
// This backend's last finished top-level metered statement.
LastStatement last_statement();

}  // namespace ot::ext
