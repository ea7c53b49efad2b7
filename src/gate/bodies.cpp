#include "gate/bodies.hpp"

#include <cstring>
#include <nlohmann/json.hpp>
#include <pugixml.hpp>
#include <sstream>

#include "gate/text.hpp"

namespace ot::gate {
namespace {

std::string_view local_name(const char* qname) {
    const char* colon = std::strrchr(qname, ':');
    return colon ? std::string_view(colon + 1) : std::string_view(qname);
}

// MapServer strips every namespace prefix (CPLStripXMLNamespace) and then
// looks names up without regard to case, attributes and child elements
// alike (CPLGetXMLValue): x:COUNT="9" and <count>9</count> are both a count.
// So the gate matches local names case-insensitively, and refuses a name
// given more than once, or as an element, rather than guess which one wins.
struct Found {
    pugi::xml_attribute attr;
    int n = 0;  // attributes and child elements with that local name
};

Found find_named(const pugi::xml_node& n, std::string_view name) {
    Found f;
    for (pugi::xml_attribute a : n.attributes())
        if (iequals(local_name(a.name()), name)) {
            if (!f.attr) f.attr = a;
            f.n++;
        }
    for (pugi::xml_node c : n.children())
        if (c.type() == pugi::node_element && iequals(local_name(c.name()), name)) f.n += 2;
    return f;
}

pugi::xml_attribute find_attr(const pugi::xml_node& n, std::string_view name) { return find_named(n, name).attr; }

// No DOCTYPE: pugixml does not expand entities but the upstream's parser may,
// so a count hidden in an entity would be read differently on each side.
constexpr unsigned kParseFlags = pugi::parse_default & ~pugi::parse_doctype;

bool has_doctype(std::string_view body) {
    return body.find("<!DOCTYPE") != std::string_view::npos || body.find("<!doctype") != std::string_view::npos ||
           body.find("<!ENTITY") != std::string_view::npos;
}

void fail(OgcRequest& r, std::string why, std::string locator = {}) {
    r.problem = std::move(why);
    r.problem_locator = std::move(locator);
    r.problem_code = "InvalidParameterValue";
}

}  // namespace

void read_xml_body(std::string_view body, OgcRequest& r) {
    r.service = Service::Wfs;
    r.dialect = Dialect::Ows11;
    if (has_doctype(body)) return fail(r, "XML requests with a DOCTYPE or entities are not accepted");
    pugi::xml_document doc;
    if (!doc.load_buffer(body.data(), body.size(), kParseFlags)) return fail(r, "the request body is not well-formed XML");
    const pugi::xml_node root = doc.document_element();
    const std::string_view name = local_name(root.name());
    r.operation = std::string(name);

    if (pugi::xml_attribute s = find_attr(root, "service")) {
        const std::string svc = to_upper(s.value());
        if (svc == "WMS") r.service = Service::Wms;
        if (svc == "WCS") r.service = Service::Wcs;
    }
    std::string version = find_attr(root, "version").value();
    if (version.empty()) {
        const std::string ns = find_attr(root, "xmlns").value();
        for (pugi::xml_attribute a : root.attributes())
            if (std::string_view(a.value()).find("/wfs/2.0") != std::string_view::npos) version = "2.0.0";
        if (version.empty()) version = ns.find("/wfs") != std::string::npos ? "1.1.0" : "";
    }
    r.version = version;
    if (r.service == Service::Wfs)
        r.dialect = version == "1.0.0" ? Dialect::Wfs100 : version == "1.1.0" ? Dialect::Wfs110 : Dialect::Ows11;
    else if (r.service == Service::Wms)
        r.dialect = version == "1.3.0" || version.empty() ? Dialect::Wms130 : Dialect::Wms111;

    // The server compares operation names without regard to case.
    if (r.service == Service::Wfs && (iequals(name, "GetFeature") || iequals(name, "GetPropertyValue"))) {
        r.op = Op::GetFeature;
        const bool v2 = r.dialect == Dialect::Ows11;
        const Found c = find_named(root, v2 ? "count" : "maxFeatures");
        const Found other = find_named(root, v2 ? "maxFeatures" : "count");
        const Found rt = find_named(root, "resultType");
        r.count_key = v2 ? "count" : "maxFeatures";
        if (c.n > 1 || other.n > 1 || rt.n > 1)
            return fail(r, "count, maxFeatures and resultType must each be one attribute of the request", r.count_key);
        if (c.n && other.n) return fail(r, "give only one of count and maxFeatures", r.count_key);
        const pugi::xml_attribute a = c.attr ? c.attr : other.attr;
        if (a) {
            r.count = a.value();
            r.count_key = a.name();
        }
        // strcasecmp(value, "hits"): "hits " is not hits.
        if (iequals(rt.attr.value(), "hits")) r.hits_only = true;
    } else if (r.service == Service::Wms && iequals(name, "GetMap")) {
        // SLD-POST GetMap: the size is inside; too rare to price, too big to allow blind.
        return fail(r, "XML-encoded GetMap is not supported by this gate; use KVP");
    } else if (r.service == Service::Wcs && iequals(name, "GetCoverage")) {
        // WCS 1.1 sizes by GridOffsets over a BoundingBox, 2.0 by a scaling extension: not read here.
        return fail(r, "XML-encoded GetCoverage is not supported by this gate; use KVP");
    }
}

void read_json_body(std::string_view body, OgcRequest& r) {
    r.service = Service::Features;
    r.dialect = Dialect::OgcApi;
    r.op = Op::Search;
    r.count_key = "limit";
    nlohmann::json j = nlohmann::json::parse(body.begin(), body.end(), nullptr, false);
    if (j.is_discarded() || !j.is_object()) return fail(r, "the request body is not a JSON object");
    if (auto it = j.find("limit"); it != j.end()) {
        if (it->is_number_integer())
            r.count = std::to_string(it->get<long long>());
        else if (it->is_number_unsigned())
            r.count = std::to_string(it->get<unsigned long long>());
        else
            return fail(r, "limit must be an integer", "limit");
    }
    if (auto it = j.find("bbox"); it != j.end()) {
        if (!it->is_array() || (it->size() != 4 && it->size() != 6)) return fail(r, "bbox must be four or six numbers", "bbox");
        std::vector<double> v;
        for (const auto& e : *it) {
            if (!e.is_number()) return fail(r, "bbox must be four or six numbers", "bbox");
            v.push_back(e.get<double>());
        }
        BboxIn box{};
        if (v.size() == 6) v = {v[0], v[1], v[3], v[4]};
        for (int i = 0; i < 4; ++i) box.v[i] = v[i];
        r.bbox = box;
    }
}

std::optional<std::string> rewrite_xml_count(std::string_view body, const std::string& attr, const std::string& value) {
    pugi::xml_document doc;
    if (!doc.load_buffer(body.data(), body.size(), kParseFlags | pugi::parse_declaration)) return std::nullopt;
    pugi::xml_node root = doc.document_element();
    pugi::xml_attribute a = find_attr(root, local_name(attr.c_str()));
    if (!a) a = root.append_attribute(attr.c_str());
    a.set_value(value.c_str());
    std::ostringstream out;
    doc.save(out, "", pugi::format_raw | pugi::format_no_declaration);
    return out.str();
}

std::optional<std::string> rewrite_json_limit(std::string_view body, long long value) {
    nlohmann::json j = nlohmann::json::parse(body.begin(), body.end(), nullptr, false);
    if (j.is_discarded() || !j.is_object()) return std::nullopt;
    j["limit"] = value;
    return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace ot::gate
