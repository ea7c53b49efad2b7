// throttle_cost_*: SQL faces of the core cost model, weighted by the GUCs.
#include "core/cost_model.hpp"
#include "core/geo.hpp"
#include "ext/boundary.hpp"
#include "ext/settings.hpp"
#include "ext/sql_args.hpp"
#include "ext/srs_units.hpp"

namespace {

Datum cost_or_raise(const ot::core::Estimate& e) {
    if (e.problem != nullptr)
        ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE), errmsg("ogc_throttle: %s", e.problem),
                        errhint("Estimators take finite, non-negative sizes; see doc/sql-api.md.")));
    PG_RETURN_FLOAT8(e.cost);
}

double optional_max_rows(FunctionCallInfo fcinfo, int n) {
    if (PG_NARGS() <= n) return ot::core::kNoLimit;
    const int64 rows = ot::ext::arg_int64(fcinfo, n, "max_rows");
    if (rows < 0)
        ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE), errmsg("ogc_throttle: max_rows is negative"),
                        errhint("Pass the query's LIMIT, or call the form without max_rows.")));
    return static_cast<double>(rows);
}

}  // namespace

using namespace ot;
using namespace ot::ext;

// (xmin, ymin, xmax, ymax, srid [, max_rows])
OT_SQL_FUNCTION(throttle_cost_bbox) {
    const double xmin = arg_float8(fcinfo, 0, "xmin");
    const double ymin = arg_float8(fcinfo, 1, "ymin");
    const double xmax = arg_float8(fcinfo, 2, "xmax");
    const double ymax = arg_float8(fcinfo, 3, "ymax");
    const int32 srid = arg_int32(fcinfo, 4, "srid");
    const double max_rows = optional_max_rows(fcinfo, 5);
    if (const char* p = core::bbox_problem(xmin, ymin, xmax, ymax))
        ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE), errmsg("ogc_throttle: %s", p),
                        errdetail("The box was (%g %g, %g %g).", xmin, ymin, xmax, ymax)));
    const core::Srs srs = srs_for_box(srid, xmin, ymin, xmax, ymax);
    const double area = core::bbox_area_km2(srs, xmin, ymin, xmax, ymax);
    return cost_or_raise(core::estimate_bbox(current_cost_model(), area, max_rows));
}

// (radius_m)
OT_SQL_FUNCTION(throttle_cost_radius) {
    const double r = arg_float8(fcinfo, 0, "radius");
    return cost_or_raise(core::estimate_radius(current_cost_model(), r));
}

// (radius, srid): the radius in the units of srid
OT_SQL_FUNCTION(throttle_cost_radius_srid) {
    const double r = arg_float8(fcinfo, 0, "radius");
    const int32 srid = arg_int32(fcinfo, 1, "srid");
    const core::Srs srs = srs_for(srid);
    const double metres = core::radius_metres(srs, r);
    // A bad radius keeps its own message: the estimator sees the original value.
    return cost_or_raise(core::estimate_radius(current_cost_model(), metres < 0 ? r : metres));
}

OT_SQL_FUNCTION(throttle_cost_features) {
    const int64 n = arg_int64(fcinfo, 0, "count");
    return cost_or_raise(core::estimate_features(current_cost_model(), static_cast<double>(n)));
}

// (zoom [, max_rows])
OT_SQL_FUNCTION(throttle_cost_tile) {
    const int32 zoom = arg_int32(fcinfo, 0, "zoom");
    const double max_rows = optional_max_rows(fcinfo, 1);
    return cost_or_raise(core::estimate_tile(current_cost_model(), zoom, max_rows));
}
