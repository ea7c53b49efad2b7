// Reading the box of the simplest PostGIS geometries straight from their
// serialisation (PostGIS 3's "gserialized" version 2), without deserialising
// them through PostGIS: a 2-D point, a linestring (ST_TileEnvelope's bounds),
// or a polygon of one ring (an envelope, a tile). Anything else — another type, Z or M, a second ring, an extended
// header, a version-1 serialisation, a NaN — is left to PostGIS (Unknown).
//
// The box is the one PostGIS's box3d(geometry) computes (lwgeom_calculate_gbox:
// the exact min and max of the coordinates, of the outer ring for a polygon),
// not the float-rounded box a serialisation may carry.
#pragma once
#include <cstddef>
#include <cstdint>

namespace ot::core {

enum class GserializedBox { Unknown, Box };

// `p` points at the varlena's first byte (a 4-byte header, uncompressed), `len`
// is its VARSIZE. No allocation, no exception.
GserializedBox gserialized_box(const unsigned char* p, std::size_t len, double* xmin, double* ymin, double* xmax,
                               double* ymax, std::int32_t* srid) noexcept;

}  // namespace ot::core
