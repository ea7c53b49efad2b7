// Turning coordinates in some spatial reference into km² and metres.
#pragma once

namespace ot::core {

enum class Units { Degrees, Linear };

struct Srs {
    Units units;
    double metres_per_unit;  // for Linear; ignored for Degrees
};

inline constexpr Srs kMetres{Units::Linear, 1.0};
inline constexpr Srs kDegrees{Units::Degrees, 0.0};

// Length of one degree along the equator, the longest a degree gets: a radius
// given in degrees is converted with it so that it is never under-priced.
inline constexpr double kMetresPerDegree = 111319.49079327357;

// nullptr when the box is usable: finite, non-negative sizes.
const char* bbox_problem(double xmin, double ymin, double xmax, double ymax) noexcept;

// Area of the box on the ground. Degrees use the exact spherical area of a
// lon/lat rectangle (latitudes clamped to ±90, a longitude span to 360).
double bbox_area_km2(Srs srs, double xmin, double ymin, double xmax, double ymax) noexcept;

// Radius in metres, or a negative value when the input is unusable.
double radius_metres(Srs srs, double radius) noexcept;

// For SRID 0 (unknown): a box that fits in lon/lat range is taken as degrees,
// the reading that prices it higher.
Srs guess_unknown_srs(double xmin, double ymin, double xmax, double ymax) noexcept;

// Ground area covered by one Web Mercator tile at zoom z (as projected: the
// inflation towards the poles is what the renderer really draws).
double tile_area_km2(int zoom) noexcept;

}  // namespace ot::core
