// throttle_calibrate() and the throttle_calibration view: weights fitted from
// the sample store, beside the administrator's, and how well each ranks the
// measured times.
#include "ext/boundary.hpp"
#include "ext/bucket_table.hpp"
#include "ext/samples.hpp"
#include "ext/settings.hpp"

#include <cmath>

extern "C" {
#include "funcapi.h"
#include "lib/stringinfo.h"
#include "utils/builtins.h"
#include "utils/tuplestore.h"
}

using namespace ot;
using namespace ot::ext;

namespace {

core::Calibration fit_all(size_t* kept) {
    size_t n = 0;
    core::Sample* s = samples_snapshot(&n);
    *kept = n;
    const core::Calibration c = core::calibrate(configured_cost_model(), s, n);
    if (s != nullptr) pfree(s);
    return c;
}

void put_rows(FunctionCallInfo fcinfo, const core::Calibration& c) {
    InitMaterializedSRF(fcinfo, 0);
    auto* rsinfo = reinterpret_cast<ReturnSetInfo*>(fcinfo->resultinfo);
    const core::CostModel m = configured_cost_model();
    for (int i = 0; i < core::kCostClasses; i++) {
        if (c.samples_of[i] == 0) continue;
        const bool ok = c.problem == nullptr && c.fitted_class[i];
        Datum values[] = {CStringGetTextDatum(core::cost_class_name(static_cast<core::CostClass>(i))),
                          Int64GetDatum(c.samples_of[i]),
                          Float8GetDatum(m.weights[i].fixed),
                          Float8GetDatum(m.weights[i].per_row),
                          Float8GetDatum(c.fitted.weights[i].fixed),
                          Float8GetDatum(c.fitted.weights[i].per_row),
                          BoolGetDatum(ok),
                          Int64GetDatum(c.samples_used),
                          Float8GetDatum(c.spearman_before),
                          Float8GetDatum(c.spearman_after),
                          Float8GetDatum(c.median_ratio_after)};
        bool nulls[lengthof(values)] = {};
        nulls[4] = nulls[5] = !ok;
        for (int k = 8; k < 11; k++) nulls[k] = c.problem != nullptr || std::isnan(DatumGetFloat8(values[k]));
        tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
    }
}

// JSON has no NaN or infinity; such a quantity (the fit skips its sample) shows as null.
void append_json_number(StringInfo out, double x) {
    if (std::isfinite(x))
        appendStringInfo(out, "%.17g", x);
    else
        appendStringInfoString(out, "null");
}

}  // namespace

// The view: never an error, no rows while nothing is known.
OT_SQL_FUNCTION(throttle_calibration_all) {
    require_shared_memory();
    size_t kept = 0;
    const core::Calibration c = fit_all(&kept);
    put_rows(fcinfo, c);
    return (Datum)0;
}

// The store itself, for an administrator checking what a fit learns from.
OT_SQL_FUNCTION(throttle_samples) {
    require_shared_memory();
    InitMaterializedSRF(fcinfo, 0);
    auto* rsinfo = reinterpret_cast<ReturnSetInfo*>(fcinfo->resultinfo);
    const core::CostModel m = configured_cost_model();
    size_t n = 0;
    core::Sample* s = samples_snapshot(&n);
    StringInfoData classes, features;
    initStringInfo(&classes);
    initStringInfo(&features);
    for (size_t i = 0; i < n; i++) {
        resetStringInfo(&classes);
        resetStringInfo(&features);
        const core::PlanFeatures& f = s[i].features;
        // The fit's own input, in throttle_features' shape ({"class": [calls, rows]}), so that a fit
        // can be checked outside the server (bench/fidelity/fitcheck).
        appendStringInfoChar(&features, '{');
        for (int c = 0; c < core::kCostClasses; c++) {
            const char* name = core::cost_class_name(static_cast<core::CostClass>(c));
            if (f.calls[c] > 0) appendStringInfo(&classes, "%s%s", classes.len > 0 ? "," : "", name);
            if (!(f.calls[c] > 0 || f.rows[c] > 0)) continue;
            appendStringInfo(&features, "%s\"%s\": [", features.len > 1 ? ", " : "", name);
            append_json_number(&features, f.calls[c]);
            appendStringInfoString(&features, ", ");
            append_json_number(&features, f.rows[c]);
            appendStringInfoChar(&features, ']');
        }
        if (f.unpriced > 0) {
            appendStringInfo(&features, "%s\"unpriced\": [", features.len > 1 ? ", " : "");
            append_json_number(&features, f.unpriced);
            appendStringInfoString(&features, ", 0]");
        }
        appendStringInfoChar(&features, '}');
        Datum values[] = {Float8GetDatum(s[i].measured_ms), Float8GetDatum(core::price_of(m, f)),
                          CStringGetTextDatum(classes.data), CStringGetTextDatum(features.data)};
        bool nulls[lengthof(values)] = {};
        tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
    }
    return (Datum)0;
}

OT_SQL_FUNCTION(throttle_calibrate) {
    require_shared_memory();
    const bool apply = !PG_ARGISNULL(0) && PG_GETARG_BOOL(0);
    if (!samples_enabled())
        ereport(ERROR, (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
                        errmsg("ogc_throttle: no calibration samples are kept"),
                        errdetail("ogc_throttle.max_samples is 0."),
                        errhint("Set ogc_throttle.max_samples above 0 and restart the server.")));
    size_t kept = 0;
    const core::Calibration c = fit_all(&kept);
    if (c.problem != nullptr)
        ereport(ERROR, (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
                        errmsg("ogc_throttle: cannot calibrate: %s", c.problem),
                        errdetail("%lld usable samples among the %zu kept; at least 20 are needed.",
                                  static_cast<long long>(c.samples_used), kept),
                        errhint("A sample is kept when a statement the pricing hook priced completes (any mode but "
                                "off); statements with an argument known only at run time are not used.")));
    if (apply) {
        fitted_store(c);
        if (!calibration_applies())
            ereport(NOTICE, (errmsg("ogc_throttle: fitted weights stored; they are used once ogc_throttle.calibration "
                                    "= apply")));
    }
    put_rows(fcinfo, c);
    return (Datum)0;
}
