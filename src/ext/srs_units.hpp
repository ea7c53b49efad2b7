// What a coordinate unit of an SRID is on the ground, read from PostGIS's
// spatial_ref_sys and cached per backend.
#pragma once
#include "ext/pg.hpp"

#include "core/geo.hpp"

namespace ot::ext {

// SRID 0 uses the box to guess (see core::guess_unknown_srs). An SRID missing
// from spatial_ref_sys is an ERROR.
core::Srs srs_for_box(int32 srid, double xmin, double ymin, double xmax, double ymax);
core::Srs srs_for(int32 srid);

}  // namespace ot::ext
