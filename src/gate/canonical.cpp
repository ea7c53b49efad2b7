#include "gate/canonical.hpp"

#include "gate/kvp.hpp"
#include "gate/text.hpp"

namespace ot::gate {
namespace {

void fail(OgcRequest& r, std::string why, std::string locator = {}) {
    if (!r.problem.empty()) return;
    r.problem = std::move(why);
    r.problem_locator = std::move(locator);
    r.problem_code = "InvalidParameterValue";
}

// WCS 2.0 in MapServer matches SIZE*, RESOLUTION* and SUBSET* by prefix
// (mapwcs20.cpp, EQUALN): SIZEX=... is a size the gate would not see.
bool prefix_read(std::string_view k) {
    if (istarts_with(k, "SIZE") || istarts_with(k, "RESOLUTION")) return k != "RESOLUTION";
    return istarts_with(k, "SUBSET") && k != "SUBSET" && k != "SUBSETTINGCRS";
}

void check_names(OgcRequest& r, const Query& q) {
    for (const Param& p : q.params) {
        if (prefix_read(p.key))
            return fail(r, "the map server reads the parameter " + std::string(p.name.substr(0, 40)) +
                               " as a WCS size or subset the gate does not price; use SUBSET and SCALESIZE",
                        std::string(p.name.substr(0, 40)));
        if (r.cgi_param.empty() && mapserver_cgi_name(p.key)) r.cgi_param = p.name.substr(0, 40);
    }
}

void canonical_names(OgcRequest& r, Query& q) {
    const bool api = r.dialect == Dialect::OgcApi;
    for (Param& p : q.params) {
        if (r.ogc_kvp) {
            if (known_ogc_name(p.key)) p.name = p.key;
        } else if (api) {
            // OGC API servers compare names exactly (MapServer: strcmp).
            const char* s = ogcapi_spelling(p.key);
            if (s && p.name != s) return fail(r, "the parameter " + std::string(p.name) + " is spelt " + s, s);
        }
    }
}

}  // namespace

void canonicalise(OgcRequest& r, const HttpIn& in, const std::string& encoded_path) {
    if (!in.cookie.empty()) {
        for (const std::string& n : cookie_names(in.cookie)) {
            const std::string u = to_upper(n);
            if (known_ogc_name(u) || mapserver_cgi_name(u) || r.query.find(u) || r.form.find(u))
                return fail(r, "a cookie named " + n.substr(0, 40) +
                                   " would be read by the map server as a request parameter");
        }
    }
    if (r.body_kind == BodyKind::Form && !r.form.params.empty()) {
        // MAP (the mapfile) in the URL beside a form is MapServer's own idiom.
        for (const Param& p : r.query.params)
            if ((known_ogc_name(p.key) && p.key != "MAP") || r.form.find(p.key))
                return fail(r, "give the request's parameters either in the form body or in the query string, not both",
                            std::string(p.name.substr(0, 40)));
    }
    // The gate prices the body; MapServer reads the query string beside it.
    if (r.body_kind == BodyKind::WfsXml || r.body_kind == BodyKind::SearchJson) {
        for (const Param& p : r.query.params)
            if (known_ogc_name(p.key) && p.key != "MAP" && !(r.body_kind == BodyKind::SearchJson && ogcapi_spelling(p.key)))
                return fail(r, "a request with an XML or JSON body takes no OGC parameters in the query string",
                            std::string(p.name.substr(0, 40)));
    }
    check_names(r, r.query);
    check_names(r, r.form);
    canonical_names(r, r.query);
    canonical_names(r, r.form);
    if (!r.problem.empty()) return;
    r.canonical_path = encoded_path;
    r.canonical = true;
}

std::string canonical_target(const OgcRequest& r) {
    if (r.query.params.empty()) return r.canonical_path;
    return r.canonical_path + "?" + serialise_query(r.query.params);
}

std::string canonical_form(const OgcRequest& r) { return serialise_query(r.form.params); }

std::string canonical_target_with(const OgcRequest& r, const std::string& upper_key, const std::string& name,
                                  const std::string& value) {
    return r.canonical_path + "?" + serialise_query(r.query.params, upper_key, name, value);
}

}  // namespace ot::gate
