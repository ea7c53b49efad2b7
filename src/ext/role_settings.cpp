#include "ext/role_settings.hpp"

#include "ext/boundary.hpp"
#include "ext/settings.hpp"

extern "C" {
#include "access/genam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "catalog/indexing.h"
#include "catalog/pg_db_role_setting.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/guc.h"
#include "utils/rel.h"
}

namespace ot::ext {
namespace {

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

}  // namespace

// As a session of the role in this database would read them: ALTER ROLE … IN DATABASE over
// ALTER ROLE over ALTER DATABASE over ALTER ROLE ALL over the server's. The server's are the
// postmaster's, not this process's own: PostgreSQL gives an autovacuum worker the settings of the
// role it runs as, the bootstrap superuser, whose own mode = off would otherwise exempt every role
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

}  // namespace ot::ext

using namespace ot::ext;

namespace {
const char* mode_text(ot::ext::Mode m) {
    switch (m) {
        case ot::ext::Mode::Off: return "off";
        case ot::ext::Mode::Log: return "log";
        case ot::ext::Mode::Delay: return "delay";
        case ot::ext::Mode::Reject: return "reject";
    }
    return "off";
}
}  // namespace

// throttle_role_settings(role): how the role's sessions are metered in this database as they start.
OT_SQL_FUNCTION(throttle_role_settings) {
    TupleDesc desc;
    if (get_call_result_type(fcinfo, nullptr, &desc) != TYPEFUNC_COMPOSITE)
        ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED), errmsg("ogc_throttle: function must return a row")));
    desc = BlessTupleDesc(desc);
    const Oid role = PG_GETARG_OID(0);
    const RoleSettings s = role_settings(role);
    Datum values[] = {CStringGetTextDatum(mode_text(s.mode)),
                      BoolGetDatum(s.true_up),
                      Float8GetDatum(s.budget.capacity),
                      Float8GetDatum(s.budget.rate),
                      Int32GetDatum(s.cutoff_grace_ms),
                      s.identity[0] != '\0' ? CStringGetTextDatum(s.identity) : Datum(0),
                      BoolGetDatum(settings_charge(s))};
    bool nulls[lengthof(values)] = {};
    nulls[5] = s.identity[0] == '\0';  // the role's own name
    PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(desc, values, nulls)));
}
