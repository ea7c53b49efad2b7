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
#include "ext/settlement.hpp"
#include "ext/settings.hpp"

#include <cstring>

extern "C" {
#include "access/genam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/xact.h"
#include "catalog/indexing.h"
#include "catalog/pg_db_role_setting.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/guc.h"
#include "utils/rel.h"
}

namespace ot::ext {
namespace {

// The settings a session of the role would start with, as far as metering
// reads them; what neither the role nor the database sets is the server's.
struct RoleSettings {
    Mode mode;
    core::Budget budget;
    bool true_up;
    int cutoff_grace_ms;
    char identity[NAMEDATALEN * 2];  // empty: the role's name
};

void apply(RoleSettings* s, const char* name, const char* value) {
    if (pg_strncasecmp(name, "ogc_throttle.", 13) != 0) return;
    const char* n = name + 13;
    double d;
    bool b;
    int i;
    Mode m;
    // A value the role's session would refuse too: the server's stays (its sessions fail at SET time).
    if (pg_strcasecmp(n, "mode") == 0 && mode_named(value, &m))
        s->mode = m;
    else if (pg_strcasecmp(n, "capacity") == 0 && parse_real(value, &d, 0, nullptr))
        s->budget.capacity = d;
    else if (pg_strcasecmp(n, "rate") == 0 && parse_real(value, &d, 0, nullptr))
        s->budget.rate = d;
    else if (pg_strcasecmp(n, "true_up") == 0 && parse_bool(value, &b))
        s->true_up = b;
    else if (pg_strcasecmp(n, "cutoff_grace") == 0 && parse_int(value, &i, GUC_UNIT_MS, nullptr) && i >= -1 &&
             i <= 3600 * 1000)
        s->cutoff_grace_ms = i;
    else if (pg_strcasecmp(n, "identity") == 0)
        strlcpy(s->identity, value, sizeof s->identity);
}

// One row of pg_db_role_setting (database 0: every database).
void apply_row(Relation rel, Oid db, Oid role, RoleSettings* s) {
    ScanKeyData keys[2];
    ScanKeyInit(&keys[0], Anum_pg_db_role_setting_setdatabase, BTEqualStrategyNumber, F_OIDEQ, ObjectIdGetDatum(db));
    ScanKeyInit(&keys[1], Anum_pg_db_role_setting_setrole, BTEqualStrategyNumber, F_OIDEQ, ObjectIdGetDatum(role));
    SysScanDesc scan = systable_beginscan(rel, DbRoleSettingDatidRolidIndexId, true, nullptr, 2, keys);
    HeapTuple tup;
    while (HeapTupleIsValid(tup = systable_getnext(scan))) {
        bool isnull;
        const Datum d = heap_getattr(tup, Anum_pg_db_role_setting_setconfig, RelationGetDescr(rel), &isnull);
        if (isnull) continue;
        Datum* elems;
        int n;
        deconstruct_array(DatumGetArrayTypeP(d), TEXTOID, -1, false, TYPALIGN_INT, &elems, nullptr, &n);
        for (int i = 0; i < n; i++) {
            char* name;
            char* value;
            ParseLongOption(TextDatumGetCString(elems[i]), &name, &value);
            if (value != nullptr) apply(s, name, value);
        }
    }
    systable_endscan(scan);
}

// As a session of the role in this database would read them: ALTER ROLE … IN DATABASE over
// ALTER ROLE over ALTER DATABASE over ALTER ROLE ALL over the server's. The server's are the
// postmaster's, not this worker's own: PostgreSQL gave the worker the settings of the role it
// runs as, the bootstrap superuser, whose own mode = off would otherwise exempt every role
// that only the configuration file throttles.
RoleSettings role_settings(Oid role) {
    const ServerSettings& server = server_settings();
    RoleSettings s{server.mode, server.budget, server.true_up, server.cutoff_grace_ms, {}};
    Relation rel = table_open(DbRoleSettingRelationId, AccessShareLock);
    apply_row(rel, InvalidOid, InvalidOid, &s);
    apply_row(rel, MyDatabaseId, InvalidOid, &s);
    apply_row(rel, InvalidOid, role, &s);
    apply_row(rel, MyDatabaseId, role, &s);
    table_close(rel, AccessShareLock);
    return s;
}

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
    if (s.mode == Mode::Off || s.mode == Mode::Log || !s.true_up) return false;
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
