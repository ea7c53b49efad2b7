// Requests named by their path: OGC API Features items and search, WMTS
// REST, OGC API Tiles and XYZ tiles (the zoom read from the path).
#include "gate/path.hpp"
#include "gate/request_parts.hpp"
#include "gate/text.hpp"

namespace ot::gate::detail {
namespace {

// A path segment, not a substring: "/Wmts/..." is WMTS, "/wmts_x/..." is not.
bool wmts_path(const std::vector<std::string_view>& segs) {
    for (auto s : segs)
        if (iequals(s, "wmts")) return true;
    return false;
}

// A tile's format, as a file extension or a MIME type; feature info comes as
// xml, html, txt, json or gml.
bool tile_format(std::string_view f) {
    const std::string l = to_lower(trim(f));
    if (l.rfind("image/", 0) == 0 || l.find("vector-tile") != std::string::npos || l.find("mvt") != std::string::npos ||
        l.find("protobuf") != std::string::npos)
        return true;
    for (std::string_view e : {"png", "png8", "png24", "png32", "jpg", "jpeg", "gif", "webp", "avif", "tif", "tiff", "jp2", "pbf"})
        if (l == e) return true;
    return false;
}

// WMTS REST FeatureInfo, .../{TileMatrix}/{TileRow}/{TileCol}/{J}/{I}.{ext}
// (07-057r7), given a path already ending in two numbers. A GetTile whose
// TileMatrixSet is a number and whose Style ends in one has the same shape
// (.../style1/3857/7/40/50.png), so the format decides when there is one: the
// extension, or GeoWebCache's ?format=.
bool wmts_feature_info(const std::vector<std::string_view>& segs, std::string_view ext, const Query& q) {
    const std::size_t n = segs.size();
    if (n < 5 || !parse_int(segs[n - 3]) || !parse_int(segs[n - 4]) || !trailing_int(segs[n - 5])) return false;
    if (!ext.empty()) return !tile_format(ext);
    const Param* f = q.find("FORMAT");
    return !(f && tile_format(f->value));
}

// OGC API - Tiles: .../tiles/{tileMatrixSetId}/{tileMatrix}/{tileRow}/{tileCol}
// under collections/{id}/ or a map (map/tiles, styles/{id}/map/tiles), or a
// dataset's /tiles/ with a TileMatrixSet from the OGC registry. XYZ servers put a
// layer name there (/tiles/roads/5/10/12.png): without that context or a
// registered id the path stays XYZ.
bool registered_tms(std::string_view id) {
    for (std::string_view t : {"WebMercatorQuad", "WorldCRS84Quad", "WorldMercatorWGS84Quad", "GNOSISGlobalGrid",
                               "EuropeanETRS89_LAEAQuad", "CanadianNAD83_LCC", "UPSArcticWGS84Quad",
                               "UPSAntarcticWGS84Quad", "CDB1GlobalGrid"})
        if (id == t) return true;
    // UTM31WGS84Quad and its siblings for the other zones
    return id.size() == 14 && id.substr(0, 3) == "UTM" && parse_int(id.substr(3, 2)) && id.substr(5) == "WGS84Quad";
}

bool ogcapi_tiles(const std::vector<std::string_view>& segs) {
    const std::size_t n = segs.size();
    if (n < 5 || segs[n - 5] != "tiles") return false;
    return (n >= 6 && segs[n - 6] == "map") || (n >= 7 && segs[n - 7] == "collections") || registered_tms(segs[n - 4]);
}

}  // namespace

void parse_path(OgcRequest& r) {
    std::vector<std::string_view> segs;
    for (auto s : split(r.path, '/'))
        if (!s.empty()) segs.push_back(s);
    const std::size_t n = segs.size();

    for (std::size_t i = 0; i + 1 < n; ++i) {
        if (segs[i] != "collections") continue;
        if (i + 2 < n && segs[i + 2] == "items") {
            r.service = Service::Features;
            r.dialect = Dialect::OgcApi;
            r.op = (i + 3 < n) ? Op::Item : Op::Items;
            r.count_key = "limit";
            if (const Param* l = r.query.find("LIMIT")) r.count = l->value;
            if (const Param* b = r.query.find("BBOX")) {
                BboxIn box{};
                if (!parse_bbox(b->value, box, false, true)) return fail(r, "bbox must be four or six numbers", "bbox");
                if (const Param* c = r.query.find("BBOX-CRS")) box.crs = c->value;
                r.bbox = box;
            }
            return;
        }
    }
    if (n >= 1 && segs[n - 1] == "search") {
        r.service = Service::Features;
        r.dialect = Dialect::OgcApi;
        r.op = Op::Search;
        return;
    }
    // WMTS REST capabilities ({WMTSBaseURL}/1.0.0/WMTSCapabilities.xml; GeoWebCache
    // leaves out the version): refused like a KVP GetCapabilities.
    if (n >= 1 && iequals(segs[n - 1], "WMTSCapabilities.xml")) {
        r.service = Service::Wmts;
        r.dialect = dialect_for(r.service, {});
        return;
    }
    // XYZ (/tiles/z/x/y), WMTS REST (.../TileMatrix/TileRow/TileCol.png) and
    // OGC API Tiles (.../tiles/{tms}/z/y/x): the zoom is third from the end;
    // WMTS REST FeatureInfo adds /J/I after TileCol.
    bool tiled = false;
    for (auto s : segs)
        if (iequals(s, "tiles") || iequals(s, "wmts") || iequals(s, "tms")) tiled = true;
    if (!tiled || n < 3) return;
    std::string_view last = segs[n - 1];
    std::string_view ext;
    if (auto dot = last.find('.'); dot != std::string_view::npos) {
        ext = last.substr(dot + 1);
        last = last.substr(0, dot);
    }
    if (!parse_int(last) || !parse_int(segs[n - 2])) return;
    std::size_t matrix = n - 3;  // index of the TileMatrix / zoom segment
    if (wmts_path(segs)) {
        // WMTS answers errors with an OWS 1.1 report in both encodings
        // (07-057r7), so REST gets what KVP gets.
        r.service = Service::Wmts;
        r.op = Op::GetTile;
        if (wmts_feature_info(segs, ext, r.query)) {
            r.op = Op::GetFeatureInfo;
            matrix = n - 5;
        }
    } else {
        r.service = Service::Tiles;
        r.op = Op::GetTile;
    }
    // XYZ has no OGC error format; OGC API Tiles answers like the rest of OGC API.
    const bool api = r.service == Service::Tiles && ogcapi_tiles(segs);
    r.dialect = api ? Dialect::OgcApi : dialect_for(r.service, {});
    r.zoom = trailing_int(segs[matrix]);
    // Kept for the area budget: WMTS REST and OGC API Tiles name
    // .../{TileMatrixSet}/{TileMatrix}/{TileRow}/{TileCol}, XYZ .../{z}/{x}/{y}
    // and TMS the same with rows counted from the bottom.
    if (r.service == Service::Wmts || api) {
        r.tile_row = parse_int(segs[matrix + 1]);
        r.tile_col = parse_int(matrix + 2 == n - 1 ? last : segs[matrix + 2]);
        if (matrix >= 1) r.tile_matrix_set = std::string(segs[matrix - 1]);
    } else {
        r.tile_col = parse_int(segs[n - 2]);
        r.tile_row = parse_int(last);
        for (auto s : segs) r.tile_rows_up |= iequals(s, "tms");
    }
    if (!r.zoom) fail(r, "the tile matrix (zoom) must end in a number", api ? "tileMatrix" : "TileMatrix");
}

}  // namespace ot::gate::detail
