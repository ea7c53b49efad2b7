#include "gate/cell_request.hpp"

#include <cmath>

#include "gate/text.hpp"

namespace ot::gate {
namespace {

enum class Matrix : std::uint8_t { Mercator, Geographic, Unknown };

// The tile matrix sets whose level z is the 2^z × 2^z Web Mercator pyramid
// (XYZ names none), and the geographic ones with two 180° tiles at level 0.
Matrix matrix_kind(const std::string& set) {
    const std::string u = to_upper(trim(set));
    if (u.empty() || u.find("GOOGLEMAPSCOMPATIBLE") != std::string::npos || u.find("WEBMERCATOR") != std::string::npos ||
        u == "EPSG:3857" || u == "EPSG:900913" || u == "3857" || u == "900913" || u == "GOOGLE")
        return Matrix::Mercator;
    if (u == "WORLDCRS84QUAD" || u == "EPSG:4326" || u == "4326" || u == "WGS84")
        return Matrix::Geographic;
    return Matrix::Unknown;
}

// A pyramid the gate does not know: the tile's ancestor at the grid's level,
// assuming each level halves the one above (true of every common one).
std::string quad_cell(int z, std::int64_t x, std::int64_t y, const CellGrid& g) {
    const int level = g.zoom >= 0 ? g.zoom
                                  : static_cast<int>(std::lround(std::log2(360.0 / (g.degrees > 0 ? g.degrees : 0.1))));
    const int up = z > level ? z - level : 0;
    return "q" + std::to_string(z - up) + "/" + std::to_string(x >> up) + "/" + std::to_string(y >> up);
}

std::string tile_cell(const OgcRequest& r, const CellGrid& g) {
    const std::int64_t z = *r.zoom, x = *r.tile_col;
    std::int64_t y = *r.tile_row;
    if (z < 0 || z > 30 || x < 0 || y < 0) return "x";
    if (r.tile_rows_up) y = (std::int64_t{1} << z) - 1 - y;
    std::optional<std::string> c;
    switch (matrix_kind(r.tile_matrix_set)) {
        case Matrix::Mercator: c = cell_of_tile(static_cast<int>(z), x, y, g); break;
        case Matrix::Geographic: c = cell_of_geo_tile(static_cast<int>(z), x, y, g); break;
        case Matrix::Unknown: {
            // No pyramid is wider than two tiles per tile of the level above.
            const std::int64_t wide = std::int64_t{2} << z;
            return y < 0 || x >= wide || y >= wide ? "x" : quad_cell(static_cast<int>(z), x, y, g);
        }
    }
    return c ? *c : "x";
}

std::string box_cell(const OgcRequest& r, const CellGrid& g) {
    const BboxIn& b = *r.bbox;
    // OGC API boxes are CRS84 unless bbox-crs says otherwise; an EPSG:4326
    // one is then latitude first, as in WMS 1.3.0 and WFS 1.1/2.0.
    const bool api = r.dialect == Dialect::OgcApi;
    const bool degrees = crs_is_degrees(b.crs) || (api && trim(b.crs).empty());
    if (degrees) {
        const bool latlon = r.bbox_axis_latlon || (api && crs_is_latlon_geographic(b.crs));
        const auto c = latlon ? cell_of_box(b.v[1], b.v[0], b.v[3], b.v[2], false, g)
                              : cell_of_box(b.v[0], b.v[1], b.v[2], b.v[3], false, g);
        return c ? *c : "x";
    }
    if (crs_is_metres(b.crs)) {
        const auto c = cell_of_box(b.v[0], b.v[1], b.v[2], b.v[3], true, g);
        return c ? *c : "x";
    }
    // Any spelling of one EPSG code is one key space: a scraper cannot mint
    // cells by respelling the CRS, only by naming CRSs the server offers.
    return cell_of_unplaced_box(trailing_int(b.crs).value_or(0), b.v[0], b.v[1], b.v[2], b.v[3]);
}

}  // namespace

std::string request_cell(const OgcRequest& r, const CellGrid& g) {
    const bool tile = r.op == Op::GetTile || (r.service == Service::Wmts && r.op == Op::GetFeatureInfo);
    if (tile) return r.zoom && r.tile_col && r.tile_row ? tile_cell(r, g) : "x";
    if (r.bbox) return box_cell(r, g);
    return "x";
}

std::optional<std::string> cell_for(const Assessment& a, const Identity& id, const Tier& t) {
    if (!t.cells) return std::nullopt;
    const CellPolicy& p = *t.cells;
    if (!p.keyed_clients && id.key.compare(0, 3, "ip:") != 0) return std::nullopt;
    bool listed = false;
    for (const std::string& c : p.classes) listed |= c == a.price.cost_class;
    if (!listed) return std::nullopt;
    return request_cell(a.req, p.grid);
}

std::string cell_bucket_key(const std::string& identity_key, const std::string& cell) {
    std::string k;
    k.reserve(identity_key.size() + 1 + cell.size());
    k += identity_key;
    k += '@';
    k += cell;
    return k;
}

CellSpend spend_cell(BucketTable& cells, BucketTable& addresses, const std::string& identity_key,
                     const std::string& cell, double cost, const Tier& t, std::int64_t now_us) {
    CellSpend s{cell, cells.spend(cell_bucket_key(identity_key, cell), cost, t.cells->budget, now_us)};
    if (s.spent.outcome != core::SpendOutcome::Allowed) addresses.refund(identity_key, cost, t.budget, now_us);
    return s;
}

}  // namespace ot::gate
