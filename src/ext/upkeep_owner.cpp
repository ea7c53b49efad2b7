// Who a metered session may give a table to. Autovacuum's upkeep of a table, and the functions of its
// indexes that autovacuum runs, are charged to the table's owner (autovacuum_metering.cpp,
// maintenance_metering.cpp). A throttled role that is a member of a group role whose settings charge
// nothing (a NOLOGIN group has no settings of its own, and mode is off by default) could give its table
// to the group (ALTER TABLE … OWNER TO, REASSIGN OWNED, or SET ROLE and CREATE TABLE or EXPLAIN ANALYZE
// CREATE TABLE … AS, or CREATE TABLE in a SECURITY DEFINER function of the group's) and have its upkeep done free. A metered session may not
// give a table to a role its login role is a member of (one it could have given it to itself) whose
// settings charge nothing: such a statement is refused, before it runs, with the role to fix named in the
// HINT. An administrator's SECURITY DEFINER function that creates a table as a role the session's login
// role is not a member of is the administrator's design, and goes on.
#include "ext/execution.hpp"
#include "ext/settings.hpp"

extern "C" {
#include "catalog/pg_class.h"
#include "commands/defrem.h"
#include "miscadmin.h"
#include "nodes/parsenodes.h"
#include "utils/acl.h"
#include "utils/builtins.h"
}

namespace ot::ext {
namespace {

bool session_metered() { return current_mode() != Mode::Off && current_mode() != Mode::Log && true_up_enabled(); }

void refuse(const char* what, Oid owner) {
    const char* role = GetUserNameFromId(owner, false);
    ereport(ERROR, (errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
                    errmsg("ogc_throttle: %s would be owned by role \"%s\", whose settings charge nothing", what, role),
                    errdetail("Autovacuum's upkeep of a table and the work of its index functions are charged to the "
                              "table's owner; this session is metered, and would put that work on no budget."),
                    errhint("Give role \"%s\" a mode of its own (ALTER ROLE %s SET ogc_throttle.mode = 'reject'), "
                            "or have a role that is not throttled create or give the table.",
                            role, quote_identifier(role))));
}

void check(const char* what, Oid owner) {
    if (!OidIsValid(owner) || owner == GetSessionUserId() || !is_member_of_role(GetSessionUserId(), owner)) return;
    OwnerPayer p;
    if (!owner_payer(owner, &p)) refuse(what, owner);
}

const char* relation_named(const RangeVar* r) { return psprintf("table \"%s\"", r->relname); }

bool analyzes(const ExplainStmt* x) {
    ListCell* lc;
    foreach (lc, x->options) {
        DefElem* opt = static_cast<DefElem*>(lfirst(lc));
        if (strcmp(opt->defname, "analyze") == 0) return defGetBoolean(opt);
    }
    return false;
}

}  // namespace

void check_upkeep_owner(const Node* stmt) {
    // (a superuser may own anything anyway)
    if (!session_metered() || !shared_memory_ready() || superuser_arg(GetSessionUserId())) return;
    switch (nodeTag(stmt)) {
        case T_CreateStmt: {  // (current_user may be a role set by SET ROLE or a SECURITY DEFINER function)
            const auto* c = reinterpret_cast<const CreateStmt*>(stmt);
            if (c->relation->relpersistence != RELPERSISTENCE_TEMP) check(relation_named(c->relation), GetUserId());
            break;
        }
        case T_CreateTableAsStmt: {
            const auto* c = reinterpret_cast<const CreateTableAsStmt*>(stmt);
            if (c->into != nullptr && c->into->rel->relpersistence != RELPERSISTENCE_TEMP)
                check(relation_named(c->into->rel), GetUserId());
            break;
        }
        case T_ExplainStmt: {  // EXPLAIN ANALYZE CREATE TABLE … AS creates the table, through no CreateTableAsStmt
            const auto* x = reinterpret_cast<const ExplainStmt*>(stmt);
            const auto* q = reinterpret_cast<const Query*>(x->query);
            if (q == nullptr || !IsA(q, Query) || q->commandType != CMD_UTILITY || q->utilityStmt == nullptr ||
                !IsA(q->utilityStmt, CreateTableAsStmt) || !analyzes(x))
                break;
            return check_upkeep_owner(q->utilityStmt);
        }
        case T_AlterTableStmt: {
            const auto* a = reinterpret_cast<const AlterTableStmt*>(stmt);
            // (a view, a sequence or a foreign table has no upkeep: ALTER VIEW … OWNER TO goes on. ALTER TABLE
            // may name one too, and is checked all the same: a look-up here, before ALTER TABLE's own under its
            // lock, could be made to see a view while ALTER TABLE then finds a table renamed to its name.)
            if (a->objtype != OBJECT_TABLE && a->objtype != OBJECT_MATVIEW) break;
            ListCell* lc;
            foreach (lc, a->cmds) {
                const auto* cmd = static_cast<const AlterTableCmd*>(lfirst(lc));
                if (cmd->subtype == AT_ChangeOwner)
                    check(relation_named(a->relation), get_rolespec_oid(cmd->newowner, false));
            }
            break;
        }
        case T_ReassignOwnedStmt: {
            const auto* r = reinterpret_cast<const ReassignOwnedStmt*>(stmt);
            check("what REASSIGN OWNED gives", get_rolespec_oid(r->newrole, false));
            break;
        }
        default: break;
    }
}

}  // namespace ot::ext
