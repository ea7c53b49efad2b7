// Set-returning functions behind the throttle_buckets and throttle_stats views.
#include <cmath>

#include "ext/boundary.hpp"
#include "ext/bucket_table.hpp"
#include "ext/identity_stats.hpp"
#include "ext/metering.hpp"
#include "ext/settlement.hpp"
#include "ext/sql_args.hpp"

extern "C" {
#include "access/htup_details.h"
#include "funcapi.h"
#include "utils/builtins.h"
#include "utils/tuplestore.h"
}


using namespace ot::ext;

OT_SQL_FUNCTION(throttle_buckets) {
    require_shared_memory();
    InitMaterializedSRF(fcinfo, 0);
    auto* rsinfo = reinterpret_cast<ReturnSetInfo*>(fcinfo->resultinfo);
    int64 n = 0;
    BucketView* all = bucket_snapshot(&n);
    for (int64 i = 0; i < n; i++) {
        HeapTuple t = bucket_row(rsinfo->setDesc, all[i]);
        tuplestore_puttuple(rsinfo->setResult, t);
        heap_freetuple(t);
    }
    pfree(all);
    return (Datum)0;
}

OT_SQL_FUNCTION(throttle_stats) {
    require_shared_memory();
    TupleDesc desc;
    if (get_call_result_type(fcinfo, nullptr, &desc) != TYPEFUNC_COMPOSITE)
        ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED), errmsg("ogc_throttle: function must return a row")));
    desc = BlessTupleDesc(desc);
    const TableStats s = table_stats();
    Datum values[] = {Int64GetDatum(s.spends),
                      Int64GetDatum(s.refusals),
                      Int64GetDatum(s.never_fits),
                      Float8GetDatum(s.cost_charged),
                      Int64GetDatum(s.identities),
                      Int64GetDatum(s.max_identities),
                      Int64GetDatum(s.evicted_full),
                      Int64GetDatum(s.evicted_lossy),
                      Int64GetDatum(s.statements_priced),
                      Int64GetDatum(s.statements_delayed),
                      Float8GetDatum(s.delay_seconds),
                      Int64GetDatum(s.shadow_refusals),
                      TimestampTzGetDatum(s.stats_reset),
                      Float8GetDatum(s.measured_ms),
                      Int64GetDatum(s.cutoffs)};
    // Columns 0.2 added come last: a 0.1 declaration (before ALTER EXTENSION
    // UPDATE) reads the prefix it knows.
    if (desc->natts > static_cast<int>(lengthof(values)))
        ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED), errmsg("ogc_throttle: unexpected row shape"),
                        errhint("Run ALTER EXTENSION ogc_throttle UPDATE.")));
    bool nulls[lengthof(values)] = {};
    PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(desc, values, nulls)));
}

OT_SQL_FUNCTION(throttle_identity_stats) {
    require_shared_memory();
    InitMaterializedSRF(fcinfo, 0);
    auto* rsinfo = reinterpret_cast<ReturnSetInfo*>(fcinfo->resultinfo);
    flush_pending_stats();  // the caller's own statements, admitted ones batched
    int64 n = 0;
    IdentityStatsRow* rows = identity_stats_snapshot(&n);
    for (int64 i = 0; i < n; i++) {
        const IdentityStatsRow& r = rows[i];
        Datum values[] = {CStringGetTextDatum(r.identity.bytes), Int64GetDatum(r.statements), Int64GetDatum(r.refused),
                          Int64GetDatum(r.delayed),             Float8GetDatum(r.delay_seconds),
                          Float8GetDatum(r.cost_charged),       TimestampTzGetDatum(r.last_statement),
                          Float8GetDatum(r.measured_ms)};
        bool nulls[lengthof(values)] = {};
        if (rsinfo->setDesc->natts > static_cast<int>(lengthof(values)))
            ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED), errmsg("ogc_throttle: unexpected row shape"),
                            errhint("Run ALTER EXTENSION ogc_throttle UPDATE.")));
        tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
    }
    return (Datum)0;
}

OT_SQL_FUNCTION(throttle_stats_reset) {
    require_shared_memory();
    flush_pending_stats();  // the caller's statements before the reset stay before it
    table_stats_reset();
    identity_stats_reset();
    PG_RETURN_VOID();
}

OT_SQL_FUNCTION(throttle_last_statement) {
    TupleDesc desc;
    if (get_call_result_type(fcinfo, nullptr, &desc) != TYPEFUNC_COMPOSITE)
        ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED), errmsg("ogc_throttle: function must return a row")));
    desc = BlessTupleDesc(desc);
    const LastStatement l = last_statement();
    Datum values[] = {Float8GetDatum(l.estimate), Float8GetDatum(l.measured), Float8GetDatum(l.charged),
                      BoolGetDatum(l.cutoff)};
    // NaN: admitted unpriced (ogc_throttle.lazy_pricing).
    bool nulls[lengthof(values)] = {!l.valid || std::isnan(l.estimate), !l.valid, !l.valid, !l.valid};
    PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(desc, values, nulls)));
}
