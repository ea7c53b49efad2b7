// The PostGIS functions the pricing hook recognises, found by OID among the
// functions that belong to the installed postgis extension (whatever schema
// it lives in), cached per backend and dropped whenever pg_proc changes.
#pragma once
#include "ext/pg.hpp"

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

// SRID from a geometry column's typmod, 0 when the typmod says nothing.
int32 srid_from_typmod(int32 typmod);

}  // namespace ot::ext
