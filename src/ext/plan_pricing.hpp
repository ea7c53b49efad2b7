// Finds the priced PostGIS calls in a planned statement, reads their
// arguments with this execution's parameter values, and prices the statement
// with core::price_statement.
#pragma once
#include "ext/pg.hpp"

#include "core/statement_cost.hpp"

extern "C" {
#include "nodes/params.h"
#include "nodes/plannodes.h"
}

namespace ot::ext {

struct StatementPricing {
    core::PricedCall* calls;  // palloc'd
    int ncalls;
    core::StatementFacts facts;
    core::StatementPrice price;
};

// Whether the plan calls any non-built-in function (operators' and
// aggregates' included): without one there is nothing to price.
bool calls_extension_functions(const PlannedStmt* stmt);

// Next to free for statements that call no extension function (the plan's
// invalidation items say so); one walk, no allocation, for the rest.
StatementPricing price_planned_statement(PlannedStmt* stmt, ParamListInfo params);

// "ST_DWithin radius 5000 m: 8.85; ..." (palloc'd), for DETAILs, logs and throttle_explain.
char* describe_call(const core::PricedCall& c, int index);
char* describe_pricing(const StatementPricing& p);

}  // namespace ot::ext
