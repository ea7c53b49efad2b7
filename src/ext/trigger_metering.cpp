#include "ext/execution.hpp"
#include "ext/hook.hpp"
#include "ext/sql_args.hpp"

extern "C" {
#include "access/parallel.h"
#include "catalog/pg_proc.h"
#include "catalog/pg_type.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "utils/inval.h"
#include "utils/syscache.h"
}

// Trigger functions that run when no statement is being metered: deferred
// (constraint) triggers fired at COMMIT or by SET CONSTRAINTS, event triggers
// around DDL that does no metered work. A PL/pgSQL loop of simple expressions
// never reaches the executor hooks, so without this a deferred trigger's work
// was free: an INSERT that cost 0.2 ms was charged 0.2 ms and its commit ran
// 75 ms for nothing. Each such call is a metered pass of its own: refused
// while the bucket is in debt (the COMMIT then fails and rolls back, with the
// refusal's SQLSTATE), timed, charged, cut off at its deadline. Trigger
// functions called inside a metered statement (its own AFTER triggers, at
// ExecutorFinish) are on its clock already and pass through untouched.
//
// PostgreSQL's function manager hook sees only functions it was told to
// watch at lookup (needs_fmgr_hook, never asked for built-in functions): here,
// those returning trigger or event_trigger. Client backends only: a logical
// replication worker's triggers are not a client's work to refuse.
namespace ot::ext {
namespace {

needs_fmgr_hook_type prev_needs = nullptr;
fmgr_hook_type prev_fmgr = nullptr;

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

bool needs_hook(Oid fn) { return (prev_needs != nullptr && prev_needs(fn)) || returns_trigger(fn); }

// The trigger call being metered (its FmgrInfo: START, END and ABORT of one
// call name the same one; the calls it makes in turn have their own) and its
// pass. Nothing here uses fmgr_hook's private datum: a chained hook owns it.
const FmgrInfo* metered_call = nullptr;
Execution* trigger_exec = nullptr;
ErrorContextCallback trigger_cb;

bool meters_here(Oid fn) {
    return metered_call == nullptr && MyBackendType == B_BACKEND && metering_idle() && current_mode() != Mode::Off &&
           true_up_enabled() && !IsParallelWorker() && shared_memory_ready() && returns_trigger(fn);
}

void start(const FmgrInfo* call) {
    if (!meters_here(call->fn_oid)) return;
    const IdentityKey id = own_identity();
    const core::Budget b = usable_budget();
    const Mode mode = current_mode();
    // Nothing to estimate: admitted unless the bucket is in debt (a refusal is an ERROR from here).
    const double tokens_left = admit_further_pass(id, b, mode);
    Execution* e = open_execution(nullptr, id, b, mode, 0.0, 0.0, tokens_left, nullptr, 0);
    if (e == nullptr) return;  // 64 open cursors: unmetered, as their own statements would be
    meter_begin(e, &trigger_cb);
    trigger_exec = e;
    metered_call = call;
}

// END and ABORT of the call start() metered. At ABORT, fmgr_security_definer
// has restored error_context_stack to what it was at START: our callback is
// still on it, and comes off here.
void stop(const FmgrInfo* call, bool completed) {
    if (call != metered_call) return;
    Execution* e = trigger_exec;
    metered_call = nullptr;
    trigger_exec = nullptr;
    if (completed) {
        meter_end(e, &trigger_cb);
        close_execution(e, true);
    } else {
        error_context_stack = trigger_cb.previous;
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

}  // namespace

void install_trigger_metering() {
    prev_needs = needs_fmgr_hook;
    needs_fmgr_hook = needs_hook;
    prev_fmgr = fmgr_hook;
    fmgr_hook = on_fmgr;
}

}  // namespace ot::ext
