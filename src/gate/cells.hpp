// Which coarse cell of the map a request is about (issue 15: a second budget
// keyed on the client address and the cell, so that a scraper walking one
// area is slowed while a user panning across many cells is not). The cell is
// the one of a coarse grid that holds the centre of the requested area; the
// grid is either degrees of longitude and latitude or the tiles of one Web
// Mercator zoom level. One grid serves maps, features and tiles alike, so a
// scraper that mixes WMS boxes and XYZ tiles over one area fills one cell.
// Not yet used by the request path: see the closing note of session 4.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

namespace ot::gate {

struct CellGrid {
    double degrees = 0.1;  // cell size when zoom < 0
    int zoom = -1;         // >= 0: the tiles of this zoom level are the cells
};

// The cell holding (lon, lat), in degrees; longitudes wrap, latitudes are
// clamped to the poles (and to Web Mercator's ±85.0511° for a tile grid).
// nullopt for a non-finite point.
std::optional<std::string> cell_of_point(double lon, double lat, const CellGrid& g);

// The cell of a box's centre. Boxes in degrees (lon/lat order: a WMS 1.3.0
// EPSG:4326 box is given as lat/lon and must be swapped by the caller) may
// cross the antimeridian (minx > maxx); boxes in Web Mercator metres are
// converted. nullopt when the box is not finite or its CRS is neither.
std::optional<std::string> cell_of_box(double minx, double miny, double maxx, double maxy, bool metres,
                                       const CellGrid& g);

// The cell of an XYZ / WMTS GoogleMapsCompatible tile's centre (row 0 at the top).
std::optional<std::string> cell_of_tile(int z, std::int64_t x, std::int64_t y, const CellGrid& g);

}  // namespace ot::gate
