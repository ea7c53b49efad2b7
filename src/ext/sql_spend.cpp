// throttle_spend and friends: charge, inspect and reset buckets.
#include <cmath>

#include "ext/boundary.hpp"
#include "ext/bucket_table.hpp"
#include "ext/settings.hpp"
#include "ext/sqlstates.hpp"
#include "ext/sql_args.hpp"

extern "C" {
#include "access/htup_details.h"
#include "funcapi.h"
#include "utils/builtins.h"
}

namespace ot::ext {
namespace {

double checked_cost(FunctionCallInfo fcinfo, int n) {
    const double cost = arg_float8(fcinfo, n, "cost");
    if (const char* p = core::cost_problem(cost))
        ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE), errmsg("ogc_throttle: invalid cost: %s", p),
                        errhint("Costs are finite numbers of at least zero, as the throttle_cost_* estimators return.")));
    return cost;
}

// Estimates are clamped at cost_max so that any request fits a full bucket; a
// capacity below it breaks that promise. Said once per backend and setting.
void warn_if_cost_max_exceeds(double capacity) {
    static double warned_capacity = -1, warned_cost_max = -1;
    const double cost_max = current_cost_max();
    if (cost_max <= capacity || (capacity == warned_capacity && cost_max == warned_cost_max)) return;
    warned_capacity = capacity;
    warned_cost_max = cost_max;
    ereport(WARNING, (errmsg("ogc_throttle.cost_max (%g) exceeds ogc_throttle.capacity (%g)", cost_max, capacity),
                      errdetail("The largest estimates can never be admitted for this role."),
                      errhint("Set ogc_throttle.cost_max at or below the smallest capacity of any role or tier.")));
}

core::Budget checked_budget() {
    // The settings rarely change between calls (a spend per row of one
    // statement meets the same pair each time): validated once per pair.
    static core::Budget valid{-1, -1};
    static double valid_cost_max = -1;
    const core::Budget b = current_budget();
    if (b.capacity == valid.capacity && b.rate == valid.rate && current_cost_max() == valid_cost_max) return b;
    if (const char* p = core::budget_problem(b))
        ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE), errmsg("ogc_throttle: invalid budget: %s", p),
                        errhint("Check ogc_throttle.capacity and ogc_throttle.rate.")));
    warn_if_cost_max_exceeds(b.capacity);
    valid = b;
    valid_cost_max = current_cost_max();
    return b;
}

void raise_refusal(const IdentityKey& id, double cost, core::Budget b, const core::SpendResult& r) {
    if (r.outcome == core::SpendOutcome::NeverFits)
        ereport(ERROR,
                (errcode(kCostExceedsCapacity),
                 errmsg("ogc_throttle: cost %g exceeds the capacity of identity \"%s\"", cost, id.bytes),
                 errdetail("Identity \"%s\" has a capacity of %g; a request costing more is refused however long "
                           "it waits.",
                           id.bytes, b.capacity),
                 errhint("Make the request smaller (a smaller area, fewer features, a higher zoom), or ask an "
                         "administrator for a larger ogc_throttle.capacity.")));
    ereport(ERROR, (errcode(kBudgetExhausted), errmsg("ogc_throttle: budget exhausted for identity \"%s\"", id.bytes),
                    errdetail("Identity \"%s\" asked for %g cost units with %.2f of %g left; the bucket refills %g "
                              "per second.",
                              id.bytes, cost, r.remaining, b.capacity, b.rate),
                    errhint("Retry after %d second(s).", retry_seconds(r.retry_after_s))));
}

Datum spend_or_raise(const IdentityKey& id, double cost) {
    require_shared_memory();
    const core::Budget b = checked_budget();
    const core::SpendResult r = bucket_spend(id, cost, b);
    if (r.outcome != core::SpendOutcome::Allowed) raise_refusal(id, cost, b, r);
    PG_RETURN_FLOAT8(r.remaining);
}

TupleDesc result_desc(FunctionCallInfo fcinfo) {
    TupleDesc desc;
    if (get_call_result_type(fcinfo, nullptr, &desc) != TYPEFUNC_COMPOSITE)
        ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED), errmsg("ogc_throttle: function must return a row")));
    return BlessTupleDesc(desc);
}

}  // namespace

HeapTuple bucket_row(TupleDesc desc, const BucketView& v) {
    Datum values[7];
    bool nulls[7] = {false, false, false, false, false, false, false};
    values[0] = CStringGetTextDatum(v.identity.bytes);
    values[1] = Float8GetDatum(v.tokens);
    values[2] = Float8GetDatum(v.capacity);
    values[3] = Float8GetDatum(v.rate);
    values[4] = BoolGetDatum(v.throttled);
    values[5] = TimestampTzGetDatum(v.last_request);
    nulls[5] = !v.found;
    values[6] = TimestampTzGetDatum(v.full_at);
    return heap_form_tuple(desc, values, nulls);
}

}  // namespace ot::ext

using namespace ot;
using namespace ot::ext;

OT_SQL_FUNCTION(throttle_spend) {
    const IdentityKey id = arg_identity(fcinfo, 0);
    return spend_or_raise(id, checked_cost(fcinfo, 1));
}

OT_SQL_FUNCTION(throttle_spend_own) {
    const double cost = checked_cost(fcinfo, 0);
    return spend_or_raise(own_identity(), cost);
}

OT_SQL_FUNCTION(throttle_try_spend) {
    const IdentityKey id = arg_identity(fcinfo, 0);
    const double cost = checked_cost(fcinfo, 1);
    require_shared_memory();
    TupleDesc desc = result_desc(fcinfo);
    const core::SpendResult r = bucket_spend(id, cost, checked_budget());

    Datum values[4];
    bool nulls[4] = {false, false, false, false};
    values[0] = BoolGetDatum(r.outcome == ot::core::SpendOutcome::Allowed);
    values[1] = Float8GetDatum(r.remaining);
    // A cost above capacity never fits: no retry time would be honest.
    values[2] = Float8GetDatum(r.retry_after_s);
    nulls[2] = r.outcome == ot::core::SpendOutcome::NeverFits;
    values[3] = Float8GetDatum(r.reset_after_s);
    PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(desc, values, nulls)));
}

static Datum peek(FunctionCallInfo fcinfo, const IdentityKey& id) {
    require_shared_memory();
    TupleDesc desc = result_desc(fcinfo);
    PG_RETURN_DATUM(HeapTupleGetDatum(bucket_row(desc, bucket_peek(id, checked_budget()))));
}

OT_SQL_FUNCTION(throttle_peek) {
    const IdentityKey id = arg_identity(fcinfo, 0);
    return peek(fcinfo, id);
}

OT_SQL_FUNCTION(throttle_peek_own) { return peek(fcinfo, own_identity()); }

OT_SQL_FUNCTION(throttle_reset) {
    const IdentityKey id = arg_identity(fcinfo, 0);
    require_shared_memory();
    PG_RETURN_BOOL(bucket_reset(id));
}

OT_SQL_FUNCTION(throttle_reset_all) {
    require_shared_memory();
    PG_RETURN_INT64(bucket_reset_all());
}
