#include "gate/kvp.hpp"

#include <algorithm>
#include <array>
#include <cstring>
#include <optional>

#include "gate/request.hpp"
#include "gate/text.hpp"

namespace ot::gate {
namespace {

// Sorted, so that lookup is a binary search: this runs for every pair.
constexpr std::array kOgcNames = {
    "ACCEPTFORMATS", "ACCEPTLANGUAGES", "ACCEPTVERSIONS", "ALIASES", "BBOX", "BGCOLOR", "BOUNDINGBOX", "COUNT",
    "COVERAGE", "COVERAGEID", "CRS", "DIMENSION", "ELEVATION", "EXCEPTIONS", "FEATUREID", "FEATURETYPE",
    "FEATURE_COUNT", "FILTER", "FILTER_LANGUAGE", "FORMAT", "FORMAT_OPTIONS", "GRIDBASECRS", "GRIDCS",
    "GRIDOFFSETS", "GRIDORIGIN", "GRIDTYPE", "HEIGHT", "I", "IDENTIFIER", "IDENTIFIERS", "INFOFORMAT",
    "INFO_FORMAT", "INTERPOLATION", "J", "LANGUAGE", "LAYER", "LAYERS", "MAP", "MAP_RESOLUTION", "MAXFEATURES",
    "MEDIATYPE", "NAMESPACE", "NAMESPACES", "OUTPUTCRS", "OUTPUTFORMAT", "PROPERTYNAME", "QUERY_LAYERS",
    "RANGESUBSET", "REQUEST", "RESOLVE", "RESOLVEDEPTH", "RESOLVETIMEOUT", "RESOURCEID", "RESPONSE_CRS",
    "RESULTTYPE", "RESX", "RESY", "RULE", "SCALE", "SCALEAXES", "SCALEEXTENT", "SCALEFACTOR", "SCALESIZE",
    "SECTIONS", "SERVICE", "SLD", "SLD_BODY", "SLD_VERSION", "SORTBY", "SRS", "SRSNAME", "STARTINDEX",
    "STOREDQUERY_ID", "STYLE", "STYLES", "SUBSET", "SUBSETTINGCRS", "TILECOL", "TILEMATRIX", "TILEMATRIXSET",
    "TILEROW", "TIME", "TRANSPARENT", "TYPENAME", "TYPENAMES", "UPDATESEQUENCE", "VALUEREFERENCE", "VERSION",
    "WIDTH", "WMTVER", "X", "Y"};

constexpr std::array kCgiNames = {
    "BUFFER", "CLASSGROUP", "CONTEXT", "ICON", "ID", "IMAGETYPE", "IMG.X", "IMG.Y", "IMGBOX", "IMGEXT", "IMGSHAPE",
    "IMGSIZE", "IMGXY", "KEYSIZE", "MAPEXT", "MAPSHAPE", "MAPSIZE", "MAPXY", "MAXX", "MAXY", "MINX", "MINY",
    "MODE", "QFORMAT", "QITEM", "QLAYER", "QSTRING", "QUERYFILE", "REF.X", "REF.Y", "REFXY", "RESOLUTION",
    "SAVEQUERY", "SCALEDENOM", "SEARCHMAP", "SHAPEINDEX", "SLAYER", "TEMPLATE", "TILE", "TILEINDEX", "TILEMODE",
    "TILESIZE", "ZOOM", "ZOOMDIR", "ZOOMSIZE"};

bool in_sorted(const char* const* b, const char* const* e, std::string_view s) {
    const auto it = std::lower_bound(b, e, s, [](const char* a, std::string_view v) { return std::string_view(a) < v; });
    return it != e && std::string_view(*it) == s;
}

constexpr std::array kApiNames = {"bbox", "bbox-crs", "crs", "datetime", "f", "filter", "filter-crs",
                                  "filter-lang", "lang", "limit", "offset", "properties", "skipGeometry", "sortby"};

bool unreserved(unsigned char c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.' ||
           c == '_' || c == '~' || c == ',' || c == ':' || c == '/';
}

}  // namespace

bool known_ogc_name(std::string_view upper) { return in_sorted(kOgcNames.begin(), kOgcNames.end(), upper); }

bool mapserver_cgi_name(std::string_view upper) {
    // map.* and map_* rewrite the mapfile from the URL (msUpdateMapFromURL);
    // MAP_RESOLUTION is WMS's documented vendor parameter (DPI, not size).
    if ((istarts_with(upper, "MAP.") || istarts_with(upper, "MAP_")) && upper != "MAP_RESOLUTION") return true;
    return in_sorted(kCgiNames.begin(), kCgiNames.end(), upper);
}

bool multi_valued_name(std::string_view upper) { return upper == "SUBSET"; }

const char* ogcapi_spelling(std::string_view upper) {
    for (const char* n : kApiNames)
        if (iequals(n, upper)) return n;
    return nullptr;
}

std::string bad_name(std::string_view d) {
    if (d.empty()) return "a parameter has an empty name";
    for (char ch : d) {
        const auto c = static_cast<unsigned char>(ch);
        if (c == '=' || c == '&' || c == ';')
            return "a parameter name contains an encoded delimiter ('" + std::string(1, ch) + "')";
        if (c <= 0x20 || c == 0x7f) return "a parameter name contains blanks or control characters";
        if (c >= 0x80) return "a parameter name contains non-ASCII characters";
        if (c == '%' || c == '+') return "a parameter name is encoded twice";
    }
    return {};
}

void append_encoded(std::string& out, std::string_view s) {
    static constexpr char kHex[] = "0123456789ABCDEF";
    for (char ch : s) {
        const auto c = static_cast<unsigned char>(ch);
        if (unreserved(c)) {
            out.push_back(ch);
        } else {
            out.push_back('%');
            out.push_back(kHex[c >> 4]);
            out.push_back(kHex[c & 15]);
        }
    }
}

std::string serialise_query(const std::vector<Param>& params, std::string_view set_key, std::string_view set_name,
                            std::string_view set_value) {
    std::string out;
    std::size_t n = set_value.size() + set_name.size() + 2;
    for (const Param& p : params) n += p.name.size() + p.value.size() + 2;
    out.reserve(n + n / 4);
    bool placed = false;
    for (const Param& p : params) {
        if (!out.empty()) out.push_back('&');
        append_encoded(out, p.name);
        out.push_back('=');
        if (!set_key.empty() && p.key == set_key) {
            append_encoded(out, set_value);
            placed = true;
        } else {
            append_encoded(out, p.value);
        }
    }
    if (!set_key.empty() && !placed) {
        if (!out.empty()) out.push_back('&');
        append_encoded(out, set_name);
        out.push_back('=');
        append_encoded(out, set_value);
    }
    return out;
}

std::vector<std::string> cookie_names(std::string_view header) {
    std::vector<std::string> names;
    for (std::string_view part : split(header, ';')) {
        std::string pair(part);
        for (char& c : pair)
            if (c == '+') c = ' ';
        // MapServer decodes before it splits: an escape can hide a name.
        std::string decoded = percent_decode(pair, false).value_or(pair);
        std::size_t i = 0;
        while (i < decoded.size() && decoded[i] == ' ') ++i;
        const std::size_t eq = decoded.find('=', i);
        names.push_back(decoded.substr(i, eq == std::string::npos ? std::string::npos : eq - i));
    }
    return names;
}

}  // namespace ot::gate

namespace ot::gate {

const Param* Query::find(std::string_view upper_key) const {
    for (const Param& p : params)
        if (p.key == upper_key) return &p;
    return nullptr;
}

std::optional<Query> parse_query(std::string_view raw, std::string* why) {
    // Enough for any OGC request; bounds the repeated-name check.
    constexpr std::size_t kMaxPairs = 512;
    auto refuse = [why](std::string w) -> std::optional<Query> {
        if (why) *why = std::move(w);
        return std::nullopt;
    };
    Query q;
    q.raw = std::string(raw);
    if (raw.empty()) return q;
    const auto parts = split(raw, '&');
    if (parts.size() > kMaxPairs) return refuse("the request has more than 512 parameters");
    q.params.reserve(parts.size());
    for (std::string_view part : parts) {
        if (part.empty()) continue;
        const std::size_t eq = part.find('=');
        auto name = percent_decode(part.substr(0, eq), true);
        auto value = percent_decode(eq == std::string_view::npos ? std::string_view{} : part.substr(eq + 1), true);
        if (!name || !value) return refuse("the query string has a malformed percent-escape");
        if (std::string b = bad_name(*name); !b.empty()) return refuse(b);
        // C strings end at a NUL: the map server would read less than we do.
        if (value->find('\0') != std::string::npos) return refuse("the parameter " + *name + " contains a NUL byte");
        std::string k = to_upper(*name);
        if (const Param* prev = q.find(k)) {
            if (multi_valued_name(k)) {
                q.params.push_back({std::move(k), std::move(*value), std::move(*name)});
                continue;
            }
            if (prev->value == *value) continue;  // said twice alike: one value
            return refuse("the parameter " + k + " is given more than once with different values");
        }
        q.params.push_back({std::move(k), std::move(*value), std::move(*name)});
    }
    return q;
}

}  // namespace ot::gate
