#include "gate/request.hpp"

#include "gate/bodies.hpp"
#include "gate/canonical.hpp"
#include "gate/path.hpp"
#include "gate/request_parts.hpp"
#include "gate/text.hpp"

namespace ot::gate {
namespace detail {

void fail(OgcRequest& r, std::string why, std::string locator, std::string code) {
    if (!r.problem.empty()) return;
    r.problem = std::move(why);
    r.problem_locator = std::move(locator);
    r.problem_code = std::move(code);
}

}  // namespace detail
namespace {
using detail::fail;
using detail::dialect_for;
using detail::parse_bbox;
using detail::parse_path;

const Param* kvp(const OgcRequest& r, std::string_view key) {
    if (r.body_kind == BodyKind::Form)
        if (const Param* p = r.form.find(key)) return p;
    return r.query.find(key);
}

// WMS 1.0 names (map, feature_info, capabilities) are still read by
// MapServer (mapwms.cpp): they are the same operations.
std::string wms_request_name(std::string u) {
    if (u == "MAP") return "GETMAP";
    if (u == "FEATURE_INFO") return "GETFEATUREINFO";
    if (u == "CAPABILITIES") return "GETCAPABILITIES";
    return u;
}

Service service_from_request(std::string_view op) {
    const std::string u = wms_request_name(to_upper(op));
    if (u == "GETMAP" || u == "GETFEATUREINFO" || u == "GETLEGENDGRAPHIC") return Service::Wms;
    if (u == "GETFEATURE" || u == "DESCRIBEFEATURETYPE" || u == "GETPROPERTYVALUE") return Service::Wfs;
    if (u == "GETTILE") return Service::Wmts;
    if (u == "GETCOVERAGE" || u == "DESCRIBECOVERAGE") return Service::Wcs;
    return Service::Unknown;
}

Op op_from_request(Service s, std::string_view op) {
    const std::string u = s == Service::Wms ? wms_request_name(to_upper(op)) : to_upper(op);
    if (s == Service::Wms && u == "GETMAP") return Op::GetMap;
    if (s == Service::Wms && u == "GETFEATUREINFO") return Op::GetFeatureInfo;
    if (s == Service::Wfs && (u == "GETFEATURE" || u == "GETPROPERTYVALUE")) return Op::GetFeature;
    if (s == Service::Wmts && u == "GETTILE") return Op::GetTile;
    if (s == Service::Wmts && u == "GETFEATUREINFO") return Op::GetFeatureInfo;
    if (s == Service::Wcs && u == "GETCOVERAGE") return Op::GetCoverage;
    return Op::Other;
}

}  // namespace
namespace detail {
Dialect dialect_for(Service s, std::string_view version) {
    switch (s) {
        case Service::Wms:
            return (version.empty() || version == "1.3.0") ? Dialect::Wms130 : Dialect::Wms111;
        case Service::Wfs:
            if (version == "1.0.0" || version == "1.0") return Dialect::Wfs100;
            if (version == "1.1.0" || version == "1.1") return Dialect::Wfs110;
            return Dialect::Ows11;
        case Service::Wcs:
            // WCS 1.0 answers with the same report as WFS 1.0 (ogc, 1.2.0).
            return version == "1.0.0" ? Dialect::Wfs100 : Dialect::Ows11;
        case Service::Wmts:
            return Dialect::Ows11;
        case Service::Features:
            return Dialect::OgcApi;
        case Service::Tiles:
        case Service::Unknown:
            break;
    }
    return Dialect::Plain;
}

// "minx,miny,maxx,maxy[,crs]" (WMS, WFS) or 4/6 numbers (OGC API).
bool parse_bbox(std::string_view s, BboxIn& out, bool allow_crs_suffix, bool allow_six) {
    const auto parts = split(s, ',');
    std::size_t n = parts.size();
    std::string crs;
    if (allow_crs_suffix && n == 5) {
        crs = std::string(trim(parts[4]));
        n = 4;
    }
    std::vector<double> nums;
    for (std::size_t i = 0; i < n; ++i) {
        auto v = parse_double(parts[i]);
        if (!v) return false;
        nums.push_back(*v);
    }
    if (nums.size() == 6 && allow_six) nums = {nums[0], nums[1], nums[3], nums[4]};
    if (nums.size() != 4) return false;
    for (int i = 0; i < 4; ++i) out.v[i] = nums[i];
    out.crs = crs;
    return true;
}

}  // namespace detail
namespace {

// Bad escapes kept as written, later duplicates ignored.
Query lenient_query(std::string_view raw_in) {
    Query q;
    q.reserve(3 * raw_in.size());  // as in parse_query: the buffer does not move under `raw`
    const std::string_view raw = q.raw = q.store(raw_in);
    for (std::string_view part : split(raw, '&')) {
        const std::size_t eq = part.find('=');
        const std::string_view k = part.substr(0, eq);
        const std::string_view v = eq == std::string_view::npos ? std::string_view{} : part.substr(eq + 1);
        const std::string_view key = q.upper(trim(q.decode(k, true).value_or(k)));
        if (key.empty() || q.find(key)) continue;
        q.params.push_back({key, q.decode(v, true).value_or(v), key});
    }
    return q;
}

void parse_kvp(OgcRequest& r) {
    const Param* service = kvp(r, "SERVICE");
    const Param* request = kvp(r, "REQUEST");
    const Param* version = kvp(r, "VERSION");
    if (!version) version = kvp(r, "WMTVER");
    r.operation = request ? request->value : "";
    // Compared as MapServer compares them: whole, without trimming.
    r.version = version ? version->value : "";
    if (service) {
        const std::string s = to_upper(service->value);
        r.service = s == "WMS" ? Service::Wms
                  : s == "WFS" ? Service::Wfs
                  : s == "WMTS" ? Service::Wmts
                  : s == "WCS" ? Service::Wcs
                               : Service::Unknown;
        r.known_service_value = r.service != Service::Unknown;
    }
    if (r.service == Service::Unknown && request) r.service = service_from_request(request->value);
    r.dialect = dialect_for(r.service, r.version);
    r.op = op_from_request(r.service, r.operation);

    // WMTS GetFeatureInfo names a point in a tile: no WIDTH/HEIGHT/BBOX.
    const bool wmts_tile = r.op == Op::GetTile || (r.service == Service::Wmts && r.op == Op::GetFeatureInfo);
    if (wmts_tile) {
        const Param* tm = kvp(r, "TILEMATRIX");
        if (!tm) return fail(r, "TILEMATRIX is missing", "TILEMATRIX", "MissingParameterValue");
        r.zoom = trailing_int(tm->value);
        if (const Param* p = kvp(r, "TILEROW")) r.tile_row = parse_int(p->value);
        if (const Param* p = kvp(r, "TILECOL")) r.tile_col = parse_int(p->value);
        if (const Param* p = kvp(r, "TILEMATRIXSET")) r.tile_matrix_set = p->value;
        // Priced by its zoom: a TileMatrix the gate cannot read one from
        // would otherwise pass as the cheapest, zoom 0.
        if (!r.zoom) fail(r, "TILEMATRIX must end in the zoom level (a number)", "TILEMATRIX");
        return;
    }
    switch (r.op) {
        case Op::GetMap:
        case Op::GetFeatureInfo: {
            if (const Param* p = kvp(r, "WIDTH")) r.width = p->value;
            if (const Param* p = kvp(r, "HEIGHT")) r.height = p->value;
            const Param* crs = kvp(r, r.dialect == Dialect::Wms130 ? "CRS" : "SRS");
            if (const Param* b = kvp(r, "BBOX")) {
                BboxIn box{};
                if (!parse_bbox(b->value, box, false, false)) return fail(r, "BBOX must be four numbers", "BBOX");
                box.crs = crs ? crs->value : "";
                r.bbox = box;
                r.bbox_axis_latlon = r.dialect == Dialect::Wms130 && crs_is_latlon_geographic(box.crs);
            }
            if (r.op == Op::GetFeatureInfo)
                if (const Param* fc = kvp(r, "FEATURE_COUNT"))
                    if (auto n = parse_int(fc->value); n && *n > 0) r.feature_info_count = static_cast<double>(*n);
            break;
        }
        case Op::GetFeature: {
            const bool v2 = r.dialect == Dialect::Ows11;
            const Param* count = kvp(r, v2 ? "COUNT" : "MAXFEATURES");
            // MapServer and GeoServer accept either spelling in any version.
            const Param* other = kvp(r, v2 ? "MAXFEATURES" : "COUNT");
            r.count_key = v2 ? "COUNT" : "MAXFEATURES";
            if (count && other) return fail(r, "give only one of COUNT and MAXFEATURES", r.count_key);
            if (!count && other) {
                count = other;
                r.count_key = other->key;
            }
            if (count) r.count = count->value;
            // strcasecmp(value, "hits") in mapwfs.cpp: "hits " is not hits.
            if (const Param* rt = kvp(r, "RESULTTYPE")) r.hits_only = iequals(rt->value, "hits");
            if (const Param* b = kvp(r, "BBOX")) {
                BboxIn box{};
                if (!parse_bbox(b->value, box, true, false)) return fail(r, "BBOX must be four numbers and an optional CRS", "BBOX");
                if (box.crs.empty())
                    if (const Param* s = kvp(r, "SRSNAME")) box.crs = s->value;
                r.bbox = box;
                r.bbox_axis_latlon = r.dialect != Dialect::Wfs100 && crs_is_latlon_geographic(box.crs);
            }
            break;
        }
        case Op::GetCoverage: {
            // The size is judged in coverage.cpp; the box it may need is read here.
            if (const Param* p = kvp(r, "WIDTH")) r.width = p->value;
            if (const Param* p = kvp(r, "HEIGHT")) r.height = p->value;
            const Param* b = kvp(r, "BBOX");
            const bool v11 = !b;
            if (!b) b = kvp(r, "BOUNDINGBOX");
            if (b) {
                BboxIn box{};
                if (!parse_bbox(b->value, box, v11, true)) return fail(r, "the bounding box must be four numbers", std::string(b->key));
                r.bbox = box;
            }
            break;
        }
        default:
            // GetLegendGraphic draws an image of WIDTH x HEIGHT when given.
            if (r.service == Service::Wms && iequals(r.operation, "GetLegendGraphic")) {
                if (const Param* p = kvp(r, "WIDTH")) r.width = p->value;
                if (const Param* p = kvp(r, "HEIGHT")) r.height = p->value;
            }
            break;
    }
}


}  // namespace

const char* service_name(Service s) {
    switch (s) {
        case Service::Wms: return "WMS";
        case Service::Wfs: return "WFS";
        case Service::Wmts: return "WMTS";
        case Service::Wcs: return "WCS";
        case Service::Features: return "OGCAPI-Features";
        case Service::Tiles: return "tiles";
        case Service::Unknown: break;
    }
    return "unknown";
}

const char* op_name(Op o) {
    switch (o) {
        case Op::GetMap: return "GetMap";
        case Op::GetFeatureInfo: return "GetFeatureInfo";
        case Op::GetFeature: return "GetFeature";
        case Op::GetTile: return "GetTile";
        case Op::GetCoverage: return "GetCoverage";
        case Op::Items: return "items";
        case Op::Item: return "item";
        case Op::Search: return "search";
        case Op::Other: break;
    }
    return "other";
}

std::optional<std::int64_t> trailing_int(std::string_view s) {
    std::size_t i = s.size();
    while (i > 0 && s[i - 1] >= '0' && s[i - 1] <= '9') --i;
    if (i == s.size() || s.size() - i > 18) return std::nullopt;
    return parse_int(s.substr(i));
}

bool crs_is_latlon_geographic(std::string_view crs) {
    const std::string u = to_upper(trim(crs));
    return u == "EPSG:4326" || u == "EPSG:4258" || u == "EPSG:4269" || u == "URN:OGC:DEF:CRS:EPSG::4326" ||
           u == "URN:OGC:DEF:CRS:EPSG:6.6:4326" || u == "HTTP://WWW.OPENGIS.NET/DEF/CRS/EPSG/0/4326";
}

bool crs_is_degrees(std::string_view crs) {
    const std::string u = to_upper(trim(crs));
    return crs_is_latlon_geographic(crs) || u == "CRS:84" || u == "URN:OGC:DEF:CRS:OGC:1.3:CRS84" ||
           u == "HTTP://WWW.OPENGIS.NET/DEF/CRS/OGC/1.3/CRS84" || u == "EPSG:4326:LONLAT";
}

bool crs_is_metres(std::string_view crs) {
    const std::string u = to_upper(trim(crs));
    return u == "EPSG:3857" || u == "EPSG:900913" || u == "EPSG:3395" || u == "EPSG:102100" ||
           u == "URN:OGC:DEF:CRS:EPSG::3857" || u == "HTTP://WWW.OPENGIS.NET/DEF/CRS/EPSG/0/3857";
}

namespace {

// UTF-8 byte-order mark and blanks, as XML parsers (libxml2, pugixml) skip them.
std::string_view body_start(std::string_view b) {
    if (b.size() >= 3 && b.substr(0, 3) == "\xEF\xBB\xBF") b.remove_prefix(3);
    return trim(b);
}

void read_body(const HttpIn& in, OgcRequest& r) {
    const std::string_view body = body_start(in.body);
    const std::string ct = to_lower(in.content_type);
    std::string why;
    if (ct.rfind("application/x-www-form-urlencoded", 0) == 0) {
        // MapServer drops trailing blanks of a form body.
        std::string_view f = in.body;
        while (!f.empty() && (f.back() == ' ' || f.back() == '\r' || f.back() == '\n' || f.back() == '\t'))
            f.remove_suffix(1);
        auto q = parse_query(f, &why);
        if (!q) return fail(r, why);
        r.form = std::move(*q);
        r.body_kind = BodyKind::Form;
    } else if (!body.empty() && body.front() == '<') {
        // Sniffed, not trusted from Content-Type: the upstream sniffs too.
        r.body_kind = BodyKind::WfsXml;
        read_xml_body(in.body, r);
    } else if (!body.empty() && body.front() == '{') {
        r.body_kind = BodyKind::SearchJson;
        read_json_body(in.body, r);
        if (r.service == Service::Unknown) {
            r.service = Service::Features;
            r.dialect = Dialect::OgcApi;
            r.op = Op::Search;
        }
    } else if (!body.empty()) {
        // MapServer hands any other body to its XML parser: UTF-16, say,
        // which it may read and the gate would not.
        r.body_kind = BodyKind::Opaque;
        fail(r, "the request body is neither a form, XML in UTF-8 nor JSON");
    }
}

}  // namespace

OgcRequest parse_request(const HttpIn& in) {
    OgcRequest r;
    const std::string_view target = in.target;
    const std::size_t qm = target.find('?');
    const std::string_view raw_query = qm == std::string_view::npos ? std::string_view{} : target.substr(qm + 1);
    std::string why;
    auto path = normalise_path(target.substr(0, qm), &why);
    std::optional<Query> q;
    if (path) q = parse_query(raw_query, &why);
    if (!path || !q) {
        // Still answer in the client's protocol: read SERVICE/REQUEST/VERSION
        // leniently, only to choose the exception format.
        fail(r, why);
        r.path = std::string(target.substr(0, qm));
        r.query = lenient_query(raw_query);
        parse_kvp(r);
        return r;
    }
    r.path = std::move(path->decoded);
    r.query = std::move(*q);

    if (in.method == "POST" || in.method == "PUT") read_body(in, r);
    if (r.body_kind != BodyKind::WfsXml && r.body_kind != BodyKind::SearchJson) {
        r.ogc_kvp = kvp(r, "SERVICE") || kvp(r, "REQUEST");
        if (r.ogc_kvp)
            parse_kvp(r);
        else
            parse_path(r);
    }
    if (r.problem.empty()) canonicalise(r, in, path->encoded);
    return r;
}

}  // namespace ot::gate
