// The PostGIS functions the pricing hook recognises, found by OID among the
// functions that belong to the installed postgis extension (whatever schema
// it lives in), cached per backend and dropped whenever pg_proc changes.
#pragma once
#include "ext/pg.hpp"

extern "C" {
#include "access/attnum.h"
}

namespace ot::ext {

enum class GisRole : uint8 {
    None,
    DWithinGeometry,
    DWithinGeography,
    DWithinText,
    AsMVT,
    AsMVTGeom,
    TileEnvelope,
    MakeEnvelope,
    OverlapsGeometry,  // the && operator on geometry
    IntersectsGeometry,
    // Only for plan-wide pricing (not priced as calls):
    ContainsGeometryOp,   // ~ (the index condition of ST_Contains(a, b))
    WithinGeometryOp,     // @ (of ST_Within)
    OverlapsGeography,    // && on geography
    Knn,                  // <-> (geometry or geography)
    PredicateGeometry,    // exact tests per row: ST_Distance, _st_dwithin, ST_DFullyWithin… on geometry
    TopologyGeometry,     // exact tests per row that place a geometry in another: ST_Contains, ST_Within,
                          // ST_Covers, ST_CoveredBy, _st_intersects… (a point in a polygon, not a distance)
    PredicateGeography,   // the same on geography (spheroid maths, ~10x dearer)
    Encode,               // per-row output work: ST_AsGeoJSON, ST_AsText, ST_AsBinary, ST_Transform
};

// GisRole::None for any function that is not priced (and when PostGIS is absent).
GisRole gis_role(Oid function);
const char* gis_role_name(GisRole r);

// Reading a geometry or box2d value through PostGIS itself. False when the
// value has no box (an empty geometry).
struct GisBox {
    double xmin, ymin, xmax, ymax;
    int32 srid;
};
bool geometry_box(Datum geometry, GisBox* out);
bool box2d_box(Datum box, GisBox* out);
int32 geometry_srid(Datum geometry);

// Rows of a table's geometry column that a search over the bounding box of
// `geometry` meets, from PostGIS's own column statistics
// (_postgis_selectivity × reltuples). Negative when the table has none (never
// analysed) or PostGIS cannot say; a PostGIS error here is swallowed (in a
// subtransaction) rather than failing the statement being priced.
double estimated_rows(Oid relid, AttrNumber attnum, Datum geometry);
// Whether ANALYZE has left statistics for the column (without them the
// planner's row estimates are guesses).
bool has_statistics(Oid relid, AttrNumber attnum);
// The column's extent from its statistics (ST_EstimatedExtent), false when
// there are none or PostGIS cannot say (errors swallowed in a subtransaction).
bool estimated_extent(Oid relid, AttrNumber attnum, GisBox* out);
// ST_Expand(geometry, d), or false when PostGIS cannot.
bool expand_geometry(Datum geometry, double d, Datum* out);

// Whether fn is ST_Expand(geometry, float8).
bool is_st_expand(Oid fn);
// ... and not declared volatile: its value (and box) is known before execution.
bool is_foldable_st_expand(Oid fn);
// Whether fn is box2d(geometry): its box is the geometry's box (LWGEOM_to_BOX2D).
bool is_box2d_of_geometry(Oid fn);
// ST_MakePoint of nargs float8 (2 to 4), ST_SetSRID(geometry, int4): a search's point, read
// without PostGIS when its arguments are known (known_box).
bool is_make_point(Oid fn, int nargs);
bool is_set_srid(Oid fn);
bool is_point_call(Oid fn, int nargs);  // either of the two

// geometry(geography): the same shape in lon/lat, or false when PostGIS cannot.
bool geography_as_geometry(Datum geography, Datum* out);

// SRID from a geometry column's typmod, 0 when the typmod says nothing.
int32 srid_from_typmod(int32 typmod);

}  // namespace ot::ext
