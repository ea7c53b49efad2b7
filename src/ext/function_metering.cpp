#include "ext/execution.hpp"
#include "ext/hook.hpp"
#include "ext/sql_args.hpp"

extern "C" {
#include "access/parallel.h"
#include "access/xact.h"
#include "catalog/objectaccess.h"
#include "catalog/pg_language.h"
#include "catalog/pg_proc.h"
#include "catalog/pg_type.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "utils/backend_status.h"
#include "utils/fmgroids.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"
}

// Function calls that run when no statement is being metered, and would
// otherwise be free (a PL/pgSQL loop of simple expressions never reaches the
// executor hooks):
// - trigger functions: deferred (constraint) triggers fired at COMMIT or by
//   SET CONSTRAINTS, event triggers around DDL that is not metered itself. An
//   INSERT charged 0.2 ms had its COMMIT burn 75 ms for nothing.
// - the fast-path function call protocol (libpq's PQfn): a function called
//   by OID, outside any statement. A 500 ms PL/pgSQL function cost nothing.
// Each such call of a SQL, PL or C function is a metered pass of its own:
// refused while the bucket is in debt (a COMMIT whose deferred triggers are
// refused fails and rolls back), timed, charged, cut off at its deadline.
// Built-in functions never reach the function manager hook, so a fast-path
// call of one is refused outright, except the large-object functions that
// libpq's lo_* interface calls this way: their time is charged with the rest
// of the message (message_metering.cpp), after the fact.
// Calls inside a metered statement (its own AFTER triggers) are on its clock
// already and pass through untouched. Client backends only: a logical
// replication worker's triggers are not a client's work to refuse.
namespace ot::ext {
namespace {

needs_fmgr_hook_type prev_needs = nullptr;
fmgr_hook_type prev_fmgr = nullptr;
object_access_hook_type prev_access = nullptr;

// What needs_fmgr_hook answered per function: it is asked at every lookup of
// every non-built-in function (PostGIS's included), each statement. A
// function's return type never changes; the memo is dropped on any pg_proc
// invalidation, which also covers an OID reused after DROP FUNCTION.
struct Memo {
    Oid fn;
    bool trigger;
};
constexpr int kMemo = 64;
Memo memo[kMemo];
bool memo_callback = false;

void forget_memo(Datum, int, uint32) {
    for (auto& m : memo) m.fn = InvalidOid;
}

bool returns_trigger(Oid fn) {
    Memo& m = memo[fn % kMemo];
    if (m.fn == fn) return m.trigger;
    if (!memo_callback) {
        CacheRegisterSyscacheCallback(PROCOID, forget_memo, 0);
        memo_callback = true;
    }
    bool trigger = false;
    if (HeapTuple tup = SearchSysCache1(PROCOID, ObjectIdGetDatum(fn)); HeapTupleIsValid(tup)) {
        const Oid rettype = reinterpret_cast<Form_pg_proc>(GETSTRUCT(tup))->prorettype;
        trigger = rettype == TRIGGEROID || rettype == EVENT_TRIGGEROID;
        ReleaseSysCache(tup);
    }
    m = {fn, trigger};
    return trigger;
}

// The backend is serving a fast-path call message (PostgresMain reports
// STATE_FASTPATH before it; with track_activities off nothing tells).
bool in_fastpath() {
    return MyBEEntry != nullptr && MyBEEntry->st_state == STATE_FASTPATH && MyBackendType == B_BACKEND;
}

// No meter holds the clock: no pass, no planning, no pricing, and (tested
// first, by the callers) no executor start, which initializes the plan's
// functions before any pass of its statement has begun.
inline bool outside_every_meter() {
    return metering_idle() && !planning_in_progress() && !pricing_in_progress() && MyBackendType == B_BACKEND;
}

// Parse analysis runs a literal's input function before any hook of ours
// (a 200 000-point geometry's: ~55 ms), and a Bind converts its text
// parameters the same way, outside every meter: a client in debt was refused
// each such statement only after that work (charged, but done). While the
// identity's bucket may be in debt, a non-built-in function looked up there is
// hooked, and its call admitted before it runs (call_outside_meters).
// Out of debt this is the debt board's quick look: no hook, no call cost.
// Where an admission may refuse or delay: reject or delay mode with true-up,
// in a transaction, in a client's own backend.
inline bool admissions_apply() {
    const Mode mode = current_mode();
    return (mode == Mode::Reject || mode == Mode::Delay) && true_up_enabled() && IsTransactionState() &&
           !IsParallelWorker() && shared_memory_ready();
}

bool may_owe_outside_meters() {
    if (executor_starting() || !outside_every_meter() || !admissions_apply()) return false;
    const IdentityKey& id = own_identity();
    return bucket_quick_admit_inline(id, usable_budget(), identity_serial(id)) < 0;
}

// Every non-built-in function looked up while a fast-path message is served
// is watched: the called function, its arguments' input functions, what runs
// at the commit that ends the message.
bool needs_hook(Oid fn) {
    return (prev_needs != nullptr && prev_needs(fn)) || in_fastpath() || returns_trigger(fn) ||
           may_owe_outside_meters();
}

// The call being metered (its FmgrInfo: START, END and ABORT of one call
// name the same one; the calls it makes in turn have their own) and its pass.
// Nothing here uses fmgr_hook's private datum: a chained hook owns it.
const FmgrInfo* metered_call = nullptr;
Execution* call_exec = nullptr;
ErrorContextCallback call_cb;

bool meters_here(Oid fn) {
    return metered_call == nullptr && MyBackendType == B_BACKEND && metering_idle() && current_mode() != Mode::Off &&
           true_up_enabled() && !IsParallelWorker() && shared_memory_ready() && (in_fastpath() || returns_trigger(fn));
}

// A call hooked by may_owe_outside_meters (or any hooked call that runs
// outside every meter and is not metered itself): admitted as a further pass
// is, so refused (53T01) in debt in reject mode, waited for in delay mode,
// before the function runs. Its time stays the message's, charged at its answer.
__attribute__((noinline, cold)) void call_outside_meters() {
    if (!admissions_apply()) return;
    const IdentityKey& id = own_identity();
    admit_unless_in_debt(id, usable_budget(), identity_serial(id), current_mode());
}

void start(const FmgrInfo* call) {
    if (metered_call == nullptr && !executor_starting() && outside_every_meter() && !in_fastpath() &&
        !returns_trigger(call->fn_oid))
        return call_outside_meters();
    if (!meters_here(call->fn_oid)) return;
    const IdentityKey id = own_identity();
    const core::Budget b = usable_budget();
    const Mode mode = current_mode();
    // Nothing to estimate: admitted unless the bucket is in debt (a refusal is an ERROR from here).
    const double tokens_left = admit_further_pass(id, b, mode);
    Execution* e = open_execution(nullptr, id, b, mode, 0.0, 0.0, tokens_left, nullptr, 0);
    meter_begin(e, &call_cb);
    call_exec = e;
    metered_call = call;
}

// END and ABORT of the call start() metered. At ABORT, fmgr_security_definer
// has restored error_context_stack to what it was at START: our callback is
// still on it, and comes off here.
void stop(const FmgrInfo* call, bool completed) {
    if (call != metered_call) return;
    Execution* e = call_exec;
    metered_call = nullptr;
    call_exec = nullptr;
    if (completed) {
        meter_end(e, &call_cb);
        close_execution(e, true);
    } else {
        error_context_stack = call_cb.previous;
        meter_failed(e);
    }
}

void on_fmgr(FmgrHookEventType event, FmgrInfo* flinfo, Datum* priv) {
    if (prev_fmgr != nullptr) prev_fmgr(event, flinfo, priv);
    switch (event) {
        case FHET_START: start(flinfo); break;
        case FHET_END: stop(flinfo, true); break;
        case FHET_ABORT: stop(flinfo, false); break;
    }
}

bool large_object_function(Oid fn) {
    switch (fn) {
        case F_LO_OPEN:
        case F_LO_CLOSE:
        case F_LOREAD:
        case F_LOWRITE:
        case F_LO_LSEEK:
        case F_LO_LSEEK64:
        case F_LO_CREAT:
        case F_LO_CREATE:
        case F_LO_TELL:
        case F_LO_TELL64:
        case F_LO_TRUNCATE:
        case F_LO_TRUNCATE64:
        case F_LO_UNLINK: return true;
        default: return false;
    }
}

bool is_builtin(Oid fn) {
    bool internal = false;
    if (HeapTuple tup = SearchSysCache1(PROCOID, ObjectIdGetDatum(fn)); HeapTupleIsValid(tup)) {
        internal = reinterpret_cast<Form_pg_proc>(GETSTRUCT(tup))->prolang == INTERNALlanguageId;
        ReleaseSysCache(tup);
    }
    return internal;
}

// The fast-path message whose own function was judged: each message sets a
// new statement start time, and its first execute check is for the function
// it calls (its arguments' input functions and the commit come after).
TimestampTz judged_message = 0;

__attribute__((noinline, cold)) void judge_fastpath_call(Oid fn) {
    const TimestampTz message = GetCurrentStatementStartTimestamp();
    if (message == judged_message) return;
    judged_message = message;
    const Mode mode = current_mode();
    if (mode == Mode::Off || !metering_idle() || large_object_function(fn) || !is_builtin(fn)) return;
    const char* name = get_func_name(fn);
    ereport(mode == Mode::Log ? LOG : ERROR,
            (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
             errmsg(mode == Mode::Log ? "ogc_throttle: would refuse a fast-path call of built-in function %s (log mode)"
                                      : "ogc_throttle: fast-path call of built-in function %s refused",
                    name ? name : "?"),
             errdetail("A built-in function called through the fast-path protocol runs outside any statement, where "
                       "ogc_throttle cannot measure it; only the large-object functions are served this way."),
             errhint("Call it in a statement: SELECT %s(...).", name ? name : "the function")));
}

// A function is about to run outside any statement: a fast-path call's own is
// judged; what runs outside every meter gets a deadline (begin_conversion_stage).
__attribute__((noinline, cold)) void function_outside_statement(Oid fn) {
    if (MyBackendType == B_AUTOVAC_WORKER) return maintenance_function();
    if (in_fastpath()) judge_fastpath_call(fn);
    if (!executor_starting() && outside_every_meter()) begin_conversion_stage();
}

__attribute__((noinline)) void on_access_chained(ObjectAccessType access, Oid classId, Oid objectId, int subId,
                                                  void* arg) {
    prev_access(access, classId, objectId, subId, arg);
    if (unlikely(objectId == F_PG_NOTIFY) && access == OAT_FUNCTION_EXECUTE) notify_queued = true;
    if (access == OAT_FUNCTION_EXECUTE && !executor_starting() &&
        (in_fastpath() || outside_every_meter() || MyBackendType == B_AUTOVAC_WORKER))
        function_outside_statement(objectId);
}

// Every function a plan calls passes here (ExecInitFunc, in the executor's
// start), and every function about to run outside a plan (a domain's CHECK, a
// utility statement's expressions): with no hook before ours, a few tests and
// a tail call, without a frame.
OT_HOT void on_access(ObjectAccessType access, Oid classId, Oid objectId, int subId, void* arg) {
    if (unlikely(prev_access != nullptr)) return on_access_chained(access, classId, objectId, subId, arg);
    // (a plan of pg_notify(), or a call of it: its commit may write the notification queue)
    if (unlikely(objectId == F_PG_NOTIFY) && access == OAT_FUNCTION_EXECUTE) notify_queued = true;
    if (access == OAT_FUNCTION_EXECUTE && likely(!executor_starting()) &&
        unlikely(in_fastpath() || outside_every_meter() || MyBackendType == B_AUTOVAC_WORKER))
        function_outside_statement(objectId);
}

}  // namespace

void install_function_metering() {
    prev_needs = needs_fmgr_hook;
    needs_fmgr_hook = needs_hook;
    prev_fmgr = fmgr_hook;
    fmgr_hook = on_fmgr;
    prev_access = object_access_hook;
    object_access_hook = on_access;
}

}  // namespace ot::ext
