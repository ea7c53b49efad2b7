#include "gate/caps.hpp"

#include <cstdint>
#include <tuple>

#include "gate/bodies.hpp"
#include "gate/canonical.hpp"
#include "gate/coverage.hpp"
#include "gate/kvp.hpp"
#include "gate/text.hpp"

namespace ot::gate {
namespace {

OgcError bad(std::string code, std::string locator, std::string text) {
    return {ErrorKind::BadRequest, std::move(code), std::move(locator), std::move(text)};
}

OgcError over(std::string locator, std::string text) {
    return {ErrorKind::OverCap, "InvalidParameterValue", std::move(locator), std::move(text)};
}

// Operations that only describe the service: cheap, and known by name.
bool metadata_op(Service s, const std::string& u) {
    if (u.empty() || u == "GETCAPABILITIES") return true;  // no REQUEST: the server answers an exception
    switch (s) {
        case Service::Wms:
            return u == "CAPABILITIES" || u == "DESCRIBELAYER" || u == "GETSTYLES" || u == "GETLEGENDGRAPHIC";
        case Service::Wfs:
            return u == "DESCRIBEFEATURETYPE" || u == "LISTSTOREDQUERIES" || u == "DESCRIBESTOREDQUERIES";
        case Service::Wcs:
            return u == "DESCRIBECOVERAGE";
        default:
            return false;
    }
}

const PassThrough* passthrough(const Caps& caps, const std::string& service, const std::string& request) {
    for (const PassThrough& p : caps.passthrough)
        if (p.service == service && (p.request == "*" || p.request == request)) return &p;
    return nullptr;
}

// Unknown operations of a known service, and unknown services, are refused
// unless configured: "other" at cost 1 was a free pass for REQUEST=map.
void check_operation(const OgcRequest& r, const Caps& caps, CapOutcome& out) {
    const std::string req = to_upper(r.operation);
    const bool ogc = r.service == Service::Wms || r.service == Service::Wfs || r.service == Service::Wcs ||
                     r.service == Service::Wmts;
    if (!r.known_service_value) {
        const Param* s = r.query.find("SERVICE");
        if (!s) s = r.form.find("SERVICE");
        const std::string svc = s ? to_upper(s->value) : std::string();
        if (const PassThrough* p = passthrough(caps, svc, req)) {
            out.fixed_cost = p->cost;
            return;
        }
        out.error = bad("InvalidParameterValue", "SERVICE",
                        "SERVICE='" + echo_value(svc, 40) + "' is not served through this gate.");
        return;
    }
    if (!ogc || r.op != Op::Other || metadata_op(r.service, req)) return;
    if (const PassThrough* p = passthrough(caps, service_name(r.service), req)) {
        out.fixed_cost = p->cost;
        return;
    }
    out.error = {ErrorKind::BadRequest, "OperationNotSupported", "REQUEST",
                 "REQUEST='" + echo_value(r.operation, 40) + "' is not an operation this gate lets through for " +
                     service_name(r.service) + "."};
}

void check_size(const OgcRequest& r, const Caps& caps, CapOutcome& out) {
    if (!r.width || !r.height) {
        out.error = bad("MissingParameterValue", r.width ? "HEIGHT" : "WIDTH",
                        std::string(op_name(r.op)) + " needs both WIDTH and HEIGHT.");
        return;
    }
    const auto w = parse_int(*r.width);
    const auto h = parse_int(*r.height);
    for (const auto& [v, raw, name] : {std::tuple{w, *r.width, "WIDTH"}, std::tuple{h, *r.height, "HEIGHT"}}) {
        if (!v || *v <= 0) {
            out.error = bad("InvalidParameterValue", name,
                            std::string(name) + "='" + echo_value(raw, 40) + "' is not a positive whole number of pixels.");
            return;
        }
    }
    if (caps.max_side > 0 && (*w > caps.max_side || *h > caps.max_side)) {
        const bool wide = *w > caps.max_side;
        out.error = over(wide ? "WIDTH" : "HEIGHT",
                         std::string(op_name(r.op)) + " asked for " + std::to_string(*w) + "x" + std::to_string(*h) +
                             " pixels; this service allows at most " + std::to_string(caps.max_side) +
                             " pixels per side. Lower WIDTH and HEIGHT, or request the area in several tiles.");
        return;
    }
    // w*h > max, without ever forming a product that could overflow.
    if (*w > caps.max_pixels / *h) {
        const std::string asked = *w <= INT64_MAX / *h ? std::to_string(*w * *h) : std::string("more than 9.2e18");
        out.error = over("WIDTH",
                         std::string(op_name(r.op)) + " asked for " + std::to_string(*w) + "x" + std::to_string(*h) + " = " +
                             asked + " pixels; this service allows at most " + std::to_string(caps.max_pixels) +
                             " pixels per image. Lower WIDTH and HEIGHT, or request the area in several tiles.");
        return;
    }
    out.width = static_cast<double>(*w);
    out.height = static_cast<double>(*h);
}

// Puts `value` where the count lives: query, form body or XML body.
void place_count(const OgcRequest& r, const HttpIn& in, const std::string& key, std::int64_t value, CapOutcome& out) {
    const std::string v = std::to_string(value);
    switch (r.body_kind) {
        case BodyKind::WfsXml:
            if (auto b = rewrite_xml_count(in.body, key, v)) out.new_body = std::move(*b);
            else out.error = bad("InvalidParameterValue", key, "The request body could not be rewritten.");
            return;
        case BodyKind::SearchJson:
            if (auto b = rewrite_json_limit(in.body, value)) out.new_body = std::move(*b);
            else out.error = bad("InvalidParameterValue", key, "The request body could not be rewritten.");
            return;
        case BodyKind::Form:
            // Where the request's parameters are: an empty form leaves them in the query.
            if (!r.form.params.empty()) {
                const std::string u = to_upper(key);
                out.new_body = serialise_query(r.form.params, u, u, v);
                return;
            }
            [[fallthrough]];
        default: {
            // OGC API spells its parameters in lower case, KVP in upper.
            const std::string u = to_upper(key);
            out.new_target = canonical_target_with(r, u, r.dialect == Dialect::OgcApi ? key : u, v);
        }
    }
}

void check_wfs_count(const OgcRequest& r, const HttpIn& in, const Caps& caps, CapOutcome& out) {
    const std::string max = std::to_string(caps.max_features);
    const bool paging = r.dialect != Dialect::Wfs100;
    if (!r.count) {
        if (r.hits_only) return;
        // Unbounded: the cap goes in the parameter this version understands.
        place_count(r, in, r.count_key, caps.max_features, out);
        out.count = static_cast<double>(caps.max_features);
        out.note = "injected " + r.count_key + "=" + max;
        return;
    }
    const auto n = parse_int(*r.count);
    if (!n || *n <= 0) {
        out.error = bad("InvalidParameterValue", r.count_key,
                        r.count_key + "='" + echo_value(*r.count, 40) + "' is not a positive whole number.");
        return;
    }
    if (*n <= caps.max_features) {
        out.count = static_cast<double>(*n);
        return;
    }
    if (caps.clamp_features) {
        place_count(r, in, r.count_key, caps.max_features, out);
        out.count = static_cast<double>(caps.max_features);
        out.note = "clamped " + r.count_key + " " + std::to_string(*n) + "->" + max;
        return;
    }
    std::string text = "GetFeature asked for " + r.count_key + "=" + std::to_string(*n) +
                       " features; this service returns at most " + max + " features per request. ";
    text += paging ? "Page through the results: " + r.count_key + "=" + max + " with STARTINDEX=0, " + max +
                         ", " + std::to_string(2 * caps.max_features) + ", ..."
                   : "Ask for " + r.count_key + "=" + max + " or fewer, narrowed with a BBOX or FILTER.";
    out.error = over(r.count_key, text);
}

void check_api_limit(const OgcRequest& r, const HttpIn& in, const Caps& caps, CapOutcome& out) {
    if (!r.count) return;
    const auto n = parse_int(*r.count);
    if (!n || *n <= 0) {
        out.error = bad("InvalidParameterValue", "limit", "limit='" + echo_value(*r.count, 40) + "' is not a positive whole number.");
        return;
    }
    out.count = static_cast<double>(*n);
    if (*n > caps.max_features) {
        // OGC API - Features: a limit above the maximum is not an error.
        place_count(r, in, "limit", caps.max_features, out);
        out.count = static_cast<double>(caps.max_features);
        out.note = "clamped limit " + std::to_string(*n) + "->" + std::to_string(caps.max_features);
    }
}

void check_zoom(const OgcRequest& r, const Caps& caps, CapOutcome& out) {
    if (!r.zoom || (*r.zoom >= 0 && *r.zoom <= caps.max_zoom)) return;
    const char* locator = r.service == Service::Wmts ? "TILEMATRIX" : r.dialect == Dialect::OgcApi ? "tileMatrix" : "z";
    out.error = over(locator, "Tile zoom level " + std::to_string(*r.zoom) + " is outside this service's levels 0 to " +
                                  std::to_string(caps.max_zoom) + ". Request a zoom level in that range.");
}

}  // namespace

CapOutcome apply_caps(const OgcRequest& r, const HttpIn& in, const Caps& caps) {
    CapOutcome out;
    if (!r.problem.empty()) {
        out.error = bad(r.problem_code.empty() ? std::string("InvalidParameterValue") : r.problem_code,
                        r.problem_locator, r.problem + ".");
        return out;
    }
    if (!r.cgi_param.empty() && !caps.mapserver_cgi) {
        out.error = bad("InvalidParameterValue", r.cgi_param,
                        "The parameter " + r.cgi_param +
                            " belongs to MapServer's own CGI interface, which is not open through this gate; "
                            "use WMS, WFS or WCS.");
        return out;
    }
    check_operation(r, caps, out);
    if (out.error) return out;
    switch (r.op) {
        case Op::GetFeatureInfo:
            // WMTS feature info is a point in a tile: it has a level, no size.
            if (r.service == Service::Wmts) check_zoom(r, caps, out);
            else check_size(r, caps, out);
            // FEATURE_COUNT is a feature count like any other.
            if (!out.error && r.feature_info_count > static_cast<double>(caps.max_features))
                out.error = over("FEATURE_COUNT", "GetFeatureInfo asked for FEATURE_COUNT=" +
                                                      std::to_string(static_cast<long long>(r.feature_info_count)) +
                                                      "; this service returns at most " +
                                                      std::to_string(caps.max_features) + " features per request.");
            break;
        case Op::GetMap:
            check_size(r, caps, out);
            break;
        case Op::GetCoverage:
            check_coverage(r, caps, out);
            break;
        case Op::GetFeature:
            check_wfs_count(r, in, caps, out);
            break;
        case Op::Items:
        case Op::Search:
            check_api_limit(r, in, caps, out);
            break;
        case Op::GetTile:
            check_zoom(r, caps, out);
            break;
        default:
            // GetLegendGraphic: an image as large as WIDTH x HEIGHT say.
            if (r.width || r.height) check_size(r, caps, out);
            break;
    }
    return out;
}

}  // namespace ot::gate
