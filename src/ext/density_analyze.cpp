// An explicit ANALYZE (or VACUUM ANALYZE) of a table also rebuilds the density
// grids registered for its columns, when ogc_throttle.density_on_analyze is on.
//
// Opt-in, because a grid build reads the whole column (7 s for 500 000 points
// here) where ANALYZE reads a sample, and because PostgreSQL 15 has no hook
// after autovacuum's ANALYZE: only the explicit command passes the utility hook
// (doc/cost-model.md, "Grids and ANALYZE"). The rebuild runs as the user who
// typed ANALYZE, through throttle_density_build, and only when that user may
// run it (EXECUTE on the function, write access to throttle_density): anyone
// else's ANALYZE is left as it was. Plain C-style code: ereport may longjmp
// through here, so nothing below holds an object with a destructor.
#include "ext/catalog.hpp"
#include "ext/density_grid.hpp"

extern "C" {
#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "commands/defrem.h"
#include "commands/extension.h"
#include "executor/spi.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "parser/parse_func.h"
#include "tcop/utility.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/snapmgr.h"
}

namespace ot::ext {
namespace {

bool density_on_analyze = false;
ProcessUtility_hook_type prev_utility = nullptr;

bool analyzes(const VacuumStmt* v) {
    if (!v->is_vacuumcmd) return true;  // ANALYZE itself
    ListCell* lc;
    foreach (lc, v->options) {
        DefElem* opt = lfirst_node(DefElem, lc);
        if (strcmp(opt->defname, "analyze") == 0) return defGetBoolean(opt);
    }
    return false;
}

// The statement names relid, or names no table at all (every table is analysed).
bool names(const VacuumStmt* v, Oid relid) {
    if (v->rels == NIL) return true;
    ListCell* lc;
    foreach (lc, v->rels) {
        const VacuumRelation* r = lfirst_node(VacuumRelation, lc);
        const Oid o = OidIsValid(r->oid) ? r->oid : RangeVarGetRelid(r->relation, NoLock, true);
        if (o == relid) return true;
    }
    return false;
}

// May the current user rebuild grids: run throttle_density_build and write its table?
bool may_rebuild(Oid schema, Oid* table) {
    *table = get_relname_relid("throttle_density", schema);
    if (!OidIsValid(*table)) return false;
    Oid args[2] = {REGCLASSOID, NAMEOID};
    List* name = list_make2(makeString(get_namespace_name(schema)), makeString(pstrdup("throttle_density_build")));
    const Oid fn = LookupFuncName(name, 2, args, true);
    return OidIsValid(fn) && pg_proc_aclcheck(fn, GetUserId(), ACL_EXECUTE) == ACLCHECK_OK &&
           pg_class_aclcheck(*table, GetUserId(), ACL_SELECT | ACL_INSERT | ACL_DELETE) == ACLCHECK_OK;
}

void rebuild_grids(const VacuumStmt* v) {
    const Oid ext = get_extension_oid("ogc_throttle", true);
    if (!OidIsValid(ext)) return;
    const Oid schema = extension_schema(ext);
    Oid table;
    if (!may_rebuild(schema, &table)) {
        ereport(DEBUG1, (errmsg("ogc_throttle: density grids not rebuilt: the user may not run throttle_density_build")));
        return;
    }
    const char* qschema = quote_identifier(get_namespace_name(schema));
    PushActiveSnapshot(GetTransactionSnapshot());
    if (SPI_connect() != SPI_OK_CONNECT) ereport(ERROR, (errmsg("ogc_throttle: SPI_connect failed")));
    StringInfoData q;
    initStringInfo(&q);
    appendStringInfo(&q,
                     "SELECT d.relid, a.attname FROM %s.throttle_density d JOIN pg_attribute a "
                     "ON a.attrelid = d.relid AND a.attnum = d.attnum AND NOT a.attisdropped ORDER BY 1, 2",
                     qschema);
    if (SPI_execute(q.data, true, 0) != SPI_OK_SELECT) ereport(ERROR, (errmsg("ogc_throttle: could not read the density grids")));
    const uint64 n = SPI_processed;
    SPITupleTable* grids = SPI_tuptable;
    resetStringInfo(&q);
    appendStringInfo(&q, "SELECT %s.throttle_density_build($1, $2)", qschema);
    Oid types[2] = {REGCLASSOID, NAMEOID};
    for (uint64 i = 0; i < n; i++) {
        bool null_rel, null_att;
        const Datum rel = SPI_getbinval(grids->vals[i], grids->tupdesc, 1, &null_rel);
        const Datum att = SPI_getbinval(grids->vals[i], grids->tupdesc, 2, &null_att);
        if (null_rel || null_att || !names(v, DatumGetObjectId(rel))) continue;
        Datum vals[2] = {rel, att};
        // Read-write: the build replaces the grid's row.
        if (SPI_execute_with_args(q.data, 2, types, vals, nullptr, false, 0) != SPI_OK_SELECT)
            ereport(ERROR, (errmsg("ogc_throttle: could not rebuild the density grid of %s", get_rel_name(DatumGetObjectId(rel)))));
        ereport(DEBUG1, (errmsg("ogc_throttle: density grid of %s.%s rebuilt", get_rel_name(DatumGetObjectId(rel)),
                                NameStr(*DatumGetName(att)))));
    }
    SPI_finish();
    PopActiveSnapshot();
}

void on_utility(PlannedStmt* pstmt, const char* query, bool read_only_tree, ProcessUtilityContext context,
                ParamListInfo params, QueryEnvironment* env, DestReceiver* dest, QueryCompletion* qc) {
    if (prev_utility)
        prev_utility(pstmt, query, read_only_tree, context, params, env, dest, qc);
    else
        standard_ProcessUtility(pstmt, query, read_only_tree, context, params, env, dest, qc);
    density_after_utility(pstmt);
}

}  // namespace

void density_after_utility(const PlannedStmt* pstmt) {
    // VACUUM has committed its own transactions and started the one the caller ends.
    if (density_on_analyze && IsA(pstmt->utilityStmt, VacuumStmt) &&
        analyzes(castNode(VacuumStmt, pstmt->utilityStmt)))
        rebuild_grids(castNode(VacuumStmt, pstmt->utilityStmt));
}

void install_density_analyze_hook() {
    DefineCustomBoolVariable("ogc_throttle.density_on_analyze",
                             "An explicit ANALYZE of a table also rebuilds its columns' density grids.",
                             "Autovacuum's ANALYZE does not; a build reads the whole column.", &density_on_analyze,
                             density_on_analyze, PGC_SUSET, 0, nullptr, nullptr, nullptr);
    // Preloaded, the metering's utility hook calls density_after_utility: one
    // hook less for every utility statement (an EXECUTE of a prepared one too).
    if (process_shared_preload_libraries_in_progress) return;
    prev_utility = ProcessUtility_hook;
    ProcessUtility_hook = on_utility;
}

}  // namespace ot::ext
