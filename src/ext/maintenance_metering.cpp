// Work autovacuum does as a table's owner. Its ANALYZE evaluates the table's
// index expressions, partial-index predicates and expression statistics on
// every sampled row (up to 300 × the statistics target), as the owner, in a
// worker no client waits on: a role that may create a table could have its
// functions run there for as long as they liked, free (an IMMUTABLE function
// that sleeps only when no client backend runs it spent 20 s of a worker on a
// budget of 300 ms). Such work is the owner's: from the first function
// autovacuum is about to run as the owner to the end of that table's
// transaction it is metered as one pass of the owner's identity, under the
// owner's own settings (a worker reads none of a role's ALTER ROLE … SET):
// refused while its bucket is in debt, cut off with 53T01 past what the bucket
// held (plus the server's ogc_throttle.cutoff_grace), and charged what it took.
// Autovacuum reports the error and goes on to its next table. A worker never
// waits for a turn: delay mode is read as reject here.
#include "ext/catalog.hpp"
#include "ext/execution.hpp"
#include "ext/hook.hpp"
#include "ext/role_settings.hpp"
#include "ext/settlement.hpp"
#include "ext/settings.hpp"

#include <cstring>

extern "C" {
#include "access/xact.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/guc.h"
}

namespace ot::ext {
namespace {

bool metering_on = false;  // this transaction's maintenance is metered
IdentityKey meter_id;
core::Budget meter_budget;
instr_time meter_start;
// A pass settled at its transaction's end, until autovacuum's charge of that transaction has read where
// it began (maintenance_pass_forget): at an abort, this module's callback runs first.
bool settled_pass = false;
instr_time settled_start;
bool refusing = false;  // the owner's debt is refusing a pass (until maintenance_pass_forget)
bool callback_registered = false;

void settle_maintenance(bool completed) {
    if (!metering_on) return;
    metering_on = false;
    settled_pass = true;
    settled_start = meter_start;
    if (completed) {
        stage_end(Stage::Maintenance, true);
    } else {
        // A cancel still pending is the second one cutoff_context asks for (for work that catches
        // the first): the table it was for is done with, and the next table is not the owner's.
        if (stage_on == Stage::Maintenance) QueryCancelPending = false;
        stages_aborted(InvalidSubTransactionId);
    }
    const double ms = elapsed_ms(meter_start);
    count_measured(ms);
    settle(meter_id, meter_budget, ms, ms, ms);
    flush_settlements();  // a worker may exit after its last table
}

void on_xact(XactEvent event, void*) {
    if (event == XACT_EVENT_COMMIT || event == XACT_EVENT_PARALLEL_COMMIT)
        settle_maintenance(true);
    else if (event == XACT_EVENT_ABORT || event == XACT_EVENT_PARALLEL_ABORT)
        settle_maintenance(false);
}

const char* context_role = nullptr;
void admission_context(void*) {
    errcontext("ogc_throttle: work autovacuum does as role \"%s\", the table's owner, is charged to identity \"%s\"",
               context_role, meter_id.bytes);
}

}  // namespace

bool owner_payer(Oid owner, OwnerPayer* out) {
    const RoleSettings s = role_settings(owner);
    if (!settings_charge(s)) return false;
    out->role = GetUserNameFromId(owner, false);
    // Another identity only where the owner may choose who pays (as its sessions' check of the
    // setting decides; ALTER ROLE … SET does not check it for the role's own sessions).
    const char* who = s.identity[0] != '\0' && may_spend_for_others() ? s.identity : out->role;
    out->id = make_identity_key(who, std::strlen(who));
    out->budget = s.budget;
    out->cutoff_grace_ms = s.cutoff_grace_ms;
    return true;
}

bool maintenance_pass_start(instr_time* out) {
    if (metering_on) *out = meter_start;
    else if (settled_pass) *out = settled_start;
    return metering_on || settled_pass;
}

void maintenance_pass_forget() {
    settled_pass = false;
    refusing = false;
}

bool maintenance_refused() { return refusing; }

void maintenance_function() {
    // Only work done as the owner of what is maintained: autovacuum's own (its catalog reads, the
    // sampling itself) runs as the bootstrap superuser outside a security-restricted operation.
    if (metering_on || !InSecurityRestrictedOperation() || !IsTransactionState() || !shared_memory_ready() ||
        stage_on != Stage::None)
        return;
    OwnerPayer p;
    if (!owner_payer(GetUserId(), &p)) return;
    const char* role = p.role;
    const IdentityKey id = p.id;
    const core::Budget b = usable_budget_check(p.budget);
    if (!callback_registered) {
        RegisterXactCallback(on_xact, nullptr);
        callback_registered = true;
    }
    meter_id = id;
    meter_budget = b;
    context_role = role;
    ErrorContextCallback cb{error_context_stack, admission_context, nullptr};
    error_context_stack = &cb;
    refusing = true;
    const double tokens = admit_further_pass(id, b, Mode::Reject);  // an ERROR while in debt
    refusing = false;
    error_context_stack = cb.previous;
    // The deadline below is set with the owner's grace, not the superuser's; ANALYZE's own GUC
    // nesting level (or the transaction's end) restores the worker's value after the table.
    if (p.cutoff_grace_ms != cutoff_grace_ms()) {
        char grace[16];
        snprintf(grace, sizeof grace, "%d", p.cutoff_grace_ms);
        (void)set_config_option("ogc_throttle.cutoff_grace", grace, PGC_SUSET, PGC_S_SESSION, GUC_ACTION_LOCAL, true,
                                0, false);
    }
    INSTR_TIME_SET_CURRENT(meter_start);
    metering_on = true;
    settled_pass = false;
    stage_begin(Stage::Maintenance, id, b, Mode::Reject, tokens, &meter_start);
}

}  // namespace ot::ext
