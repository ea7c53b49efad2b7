// throttle_explain(query): what a statement would cost, call by call, without
// running or charging it — the answer to "why was this refused?".
#include "ext/boundary.hpp"
#include "ext/plan_pricing.hpp"

extern "C" {
#include "access/htup_details.h"
#include "executor/executor.h"
#include "funcapi.h"
#include "tcop/tcopprot.h"
#include "tcop/dest.h"
#include "utils/snapmgr.h"
#include "utils/builtins.h"
#include "utils/tuplestore.h"
}

using namespace ot;
using namespace ot::ext;

namespace {

void put_row(ReturnSetInfo* rsinfo, int statement, const char* call, double cost, bool cost_null) {
    Datum values[3] = {Int32GetDatum(statement), CStringGetTextDatum(call), Float8GetDatum(cost)};
    bool nulls[3] = {false, false, cost_null};
    tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
}

}  // namespace

OT_SQL_FUNCTION(throttle_explain) {
    if (PG_ARGISNULL(0))
        ereport(ERROR, (errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED), errmsg("ogc_throttle: query must not be NULL")));
    const char* sql = text_to_cstring(PG_GETARG_TEXT_PP(0));
    InitMaterializedSRF(fcinfo, 0);
    auto* rsinfo = reinterpret_cast<ReturnSetInfo*>(fcinfo->resultinfo);

    int statement = 0;
    ListCell* lc;
    foreach (lc, pg_parse_query(sql)) {
        statement++;
        List* queries = pg_analyze_and_rewrite_fixedparams(lfirst_node(RawStmt, lc), sql, nullptr, 0, nullptr);
        ListCell* pc;
        foreach (pc, pg_plan_queries(queries, sql, CURSOR_OPT_PARALLEL_OK, nullptr)) {
            PlannedStmt* stmt = lfirst_node(PlannedStmt, pc);
            if (stmt->commandType == CMD_UTILITY) continue;
            // Started as EXPLAIN starts a plan: the executor checks every
            // privilege (tables, functions) before anything is priced.
            QueryDesc* qd = CreateQueryDesc(stmt, sql, GetActiveSnapshot(), InvalidSnapshot, None_Receiver, nullptr,
                                            nullptr, 0);
            ExecutorStart(qd, EXEC_FLAG_EXPLAIN_ONLY);
            const StatementPricing p = price_planned_statement(stmt, nullptr);
            ExecutorEnd(qd);
            FreeQueryDesc(qd);
            for (int i = 0; i < p.ncalls; i++) {
                const core::PricedCall& c = p.calls[i];
                put_row(rsinfo, statement, describe_call(c, i), c.cost, false);
            }
            if (p.facts.limit >= 0) {
                char line[96];
                snprintf(line, sizeof line, "rows capped at %g by LIMIT", p.facts.limit);
                put_row(rsinfo, statement, line, 0, true);
            }
            put_row(rsinfo, statement,
                    p.ncalls == 0      ? "total: no priced PostGIS call, not charged"
                    : p.price.clamped ? "total (clamped at ogc_throttle.cost_max)"
                                      : "total",
                    p.price.total, false);
        }
    }
    return (Datum)0;
}
