// throttle_features(query): the quantities a statement is priced from, per
// cost class, so that weights can be fitted from measured times (the price is
// linear in them: Σ fixed·calls + per_row·rows + cost_max·unpriced).
#include "ext/boundary.hpp"
#include "ext/plan_pricing.hpp"

extern "C" {
#include "access/htup_details.h"
#include "executor/executor.h"
#include "funcapi.h"
#include "tcop/tcopprot.h"
#include "utils/builtins.h"
#include "utils/tuplestore.h"
}

using namespace ot;
using namespace ot::ext;

OT_SQL_FUNCTION(throttle_features) {
    const char* sql = text_to_cstring(PG_GETARG_TEXT_PP(0));
    InitMaterializedSRF(fcinfo, 0);
    auto* rsinfo = reinterpret_cast<ReturnSetInfo*>(fcinfo->resultinfo);
    core::PlanFeatures total{};
    ListCell* lc;
    foreach (lc, pg_parse_query(sql)) {
        List* queries = pg_analyze_and_rewrite_fixedparams(lfirst_node(RawStmt, lc), sql, nullptr, 0, nullptr);
        ListCell* pc;
        foreach (pc, pg_plan_queries(queries, sql, CURSOR_OPT_PARALLEL_OK, nullptr)) {
            PlannedStmt* stmt = lfirst_node(PlannedStmt, pc);
            if (stmt->commandType == CMD_UTILITY) continue;
            ExecCheckRTPerms(stmt->rtable, true);
            const StatementPricing p = price_planned_statement(stmt, nullptr);
            if (p.ncalls > 0) core::add_features(total, p.price.features);
        }
    }
    for (int i = 0; i < core::kCostClasses; i++) {
        if (total.calls[i] == 0 && total.rows[i] == 0) continue;
        Datum values[3] = {CStringGetTextDatum(core::cost_class_name(static_cast<core::CostClass>(i))),
                           Float8GetDatum(total.calls[i]), Float8GetDatum(total.rows[i])};
        bool nulls[3] = {false, false, false};
        tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
    }
    if (total.unpriced > 0) {
        Datum values[3] = {CStringGetTextDatum("unpriced"), Float8GetDatum(total.unpriced), Float8GetDatum(0)};
        bool nulls[3] = {false, false, false};
        tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
    }
    return (Datum)0;
}
