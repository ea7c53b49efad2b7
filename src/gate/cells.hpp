// Which coarse cell of the map a request is about (issue 15: a second budget
// keyed on the client address and the cell, so that a scraper walking one
// area is slowed while a user panning across many cells is not). The cell is
// the one of a coarse grid that holds the centre of the requested area; the
// grid is either degrees of longitude and latitude or the tiles of one Web
// Mercator zoom level. One grid serves maps, features and tiles alike, so a
// scraper that mixes WMS boxes and XYZ tiles over one area fills one cell.
//
// A box larger than a cell is keyed on a coarser cell (the grid doubled until
// one cell is at least as large as the box): otherwise a scraper taking giant
// boxes whose centres step by less than a box width would get a fresh cell,
// and a fresh budget, for every request.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/gcra.hpp"

namespace ot::gate {

struct CellGrid {
    double degrees = 0.1;  // cell size when zoom < 0
    int zoom = -1;         // >= 0: the tiles of this zoom level are the cells
};

// A tier's second budget (tiers[].cells; see doc/gate.md "Area budgets").
struct CellPolicy {
    CellGrid grid;
    core::Budget budget{60, 1};
    std::vector<std::string> classes = {"map", "tile"};  // cost classes it applies to
    bool keyed_clients = false;                           // also for API keys and JWTs
};

// "0.1" or "z12": how /buckets and messages name a grid.
std::string grid_name(const CellGrid& g);

// The cell holding (lon, lat), in degrees; longitudes wrap, latitudes are
// clamped to the poles (and to Web Mercator's ±85.0511° for a tile grid).
// nullopt for a non-finite point.
std::optional<std::string> cell_of_point(double lon, double lat, const CellGrid& g);

// The cell of a box's centre. Boxes in degrees (lon/lat order: a WMS 1.3.0
// EPSG:4326 box is given as lat/lon and must be swapped by the caller) may
// cross the antimeridian (minx > maxx); boxes in Web Mercator metres are
// converted. nullopt when the box is not finite. A box larger than a cell
// gets the coarser cell that holds it (see above).
std::optional<std::string> cell_of_box(double minx, double miny, double maxx, double maxy, bool metres,
                                       const CellGrid& g);

// The cell of an XYZ / WMTS GoogleMapsCompatible tile (row 0 at the top);
// nullopt outside the tile matrix.
std::optional<std::string> cell_of_tile(int z, std::int64_t x, std::int64_t y, const CellGrid& g);

// The same for a geographic quad tile matrix (WorldCRS84Quad, GeoWebCache's
// EPSG:4326: two tiles of 180° at level 0, row 0 at the top).
std::optional<std::string> cell_of_geo_tile(int z, std::int64_t x, std::int64_t y, const CellGrid& g);

// A box in a CRS the gate cannot place on the globe: a coarse cell of the
// CRS's own units (10 000 of them, doubled until the box fits), named by its
// EPSG code (0 when it has none) — never a cell of its own per request.
std::string cell_of_unplaced_box(std::int64_t epsg, double minx, double miny, double maxx, double maxy);

}  // namespace ot::gate
