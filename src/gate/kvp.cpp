#include "gate/kvp.hpp"

#include <algorithm>
#include <cstdint>
#include <array>
#include <cstring>
#include <optional>
#include <unordered_map>

#include "gate/request.hpp"
#include "gate/text.hpp"

namespace ot::gate {
namespace {

using namespace std::string_view_literals;

// Sorted, for readers and to catch duplicates at compile time.
constexpr std::array kOgcNames = {
    "ACCEPTFORMATS"sv, "ACCEPTLANGUAGES"sv, "ACCEPTVERSIONS"sv, "ALIASES"sv, "BBOX"sv, "BGCOLOR"sv, "BOUNDINGBOX"sv, "COUNT"sv,
    "COVERAGE"sv, "COVERAGEID"sv, "CRS"sv, "DIMENSION"sv, "ELEVATION"sv, "EXCEPTIONS"sv, "FEATUREID"sv, "FEATURETYPE"sv,
    "FEATURE_COUNT"sv, "FILTER"sv, "FILTER_LANGUAGE"sv, "FORMAT"sv, "FORMAT_OPTIONS"sv, "GRIDBASECRS"sv, "GRIDCS"sv,
    "GRIDOFFSETS"sv, "GRIDORIGIN"sv, "GRIDTYPE"sv, "HEIGHT"sv, "I"sv, "IDENTIFIER"sv, "IDENTIFIERS"sv, "INFOFORMAT"sv,
    "INFO_FORMAT"sv, "INTERPOLATION"sv, "J"sv, "LANGUAGE"sv, "LAYER"sv, "LAYERS"sv, "MAP"sv, "MAP_RESOLUTION"sv, "MAXFEATURES"sv,
    "MEDIATYPE"sv, "NAMESPACE"sv, "NAMESPACES"sv, "OUTPUTCRS"sv, "OUTPUTFORMAT"sv, "PROPERTYNAME"sv, "QUERY_LAYERS"sv,
    "RANGESUBSET"sv, "REQUEST"sv, "RESOLVE"sv, "RESOLVEDEPTH"sv, "RESOLVETIMEOUT"sv, "RESOURCEID"sv, "RESPONSE_CRS"sv,
    "RESULTTYPE"sv, "RESX"sv, "RESY"sv, "RULE"sv, "SCALE"sv, "SCALEAXES"sv, "SCALEEXTENT"sv, "SCALEFACTOR"sv, "SCALESIZE"sv,
    "SECTIONS"sv, "SERVICE"sv, "SLD"sv, "SLD_BODY"sv, "SLD_VERSION"sv, "SORTBY"sv, "SRS"sv, "SRSNAME"sv, "STARTINDEX"sv,
    "STOREDQUERY_ID"sv, "STYLE"sv, "STYLES"sv, "SUBSET"sv, "SUBSETTINGCRS"sv, "TILECOL"sv, "TILEMATRIX"sv, "TILEMATRIXSET"sv,
    "TILEROW"sv, "TIME"sv, "TRANSPARENT"sv, "TYPENAME"sv, "TYPENAMES"sv, "UPDATESEQUENCE"sv, "VALUEREFERENCE"sv, "VERSION"sv,
    "WIDTH"sv, "WMTVER"sv, "X"sv, "Y"sv};

constexpr std::array kCgiNames = {
    "BUFFER"sv, "CLASSGROUP"sv, "CONTEXT"sv, "ICON"sv, "ID"sv, "IMAGETYPE"sv, "IMG.X"sv, "IMG.Y"sv, "IMGBOX"sv, "IMGEXT"sv, "IMGSHAPE"sv,
    "IMGSIZE"sv, "IMGXY"sv, "KEYSIZE"sv, "MAPEXT"sv, "MAPSHAPE"sv, "MAPSIZE"sv, "MAPXY"sv, "MAXX"sv, "MAXY"sv, "MINX"sv, "MINY"sv,
    "MODE"sv, "QFORMAT"sv, "QITEM"sv, "QLAYER"sv, "QSTRING"sv, "QUERYFILE"sv, "REF.X"sv, "REF.Y"sv, "REFXY"sv, "RESOLUTION"sv,
    "SAVEQUERY"sv, "SCALEDENOM"sv, "SEARCHMAP"sv, "SHAPEINDEX"sv, "SLAYER"sv, "TEMPLATE"sv, "TILE"sv, "TILEINDEX"sv, "TILEMODE"sv,
    "TILESIZE"sv, "ZOOM"sv, "ZOOMDIR"sv, "ZOOMSIZE"sv};

template <std::size_t N>
constexpr bool sorted(const std::array<std::string_view, N>& a) {
    for (std::size_t i = 1; i < N; ++i)
        if (!(a[i - 1] < a[i])) return false;
    return true;
}
static_assert(sorted(kOgcNames) && sorted(kCgiNames), "name tables are kept sorted (and so free of duplicates)");

// One hash lookup per name instead of two binary searches: this runs for
// every pair of every request, refusals included.
enum : std::uint8_t { kOgc = 1, kCgi = 2 };
const std::unordered_map<std::string_view, std::uint8_t>& name_classes() {
    static const auto* m = [] {
        auto* t = new std::unordered_map<std::string_view, std::uint8_t>();
        t->reserve(kOgcNames.size() + kCgiNames.size());
        for (std::string_view n : kOgcNames) (*t)[n] |= kOgc;
        for (std::string_view n : kCgiNames) (*t)[n] |= kCgi;
        return t;
    }();
    return *m;
}

std::uint8_t name_class(std::string_view upper) {
    const auto& m = name_classes();
    const auto it = m.find(upper);
    return it == m.end() ? 0 : it->second;
}

constexpr std::array kApiNames = {"bbox", "bbox-crs", "crs", "datetime", "f", "filter", "filter-crs",
                                  "filter-lang", "lang", "limit", "offset", "properties", "skipGeometry", "sortby"};

constexpr bool unreserved(unsigned char c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.' ||
           c == '_' || c == '~' || c == ',' || c == ':' || c == '/';
}

// Every forwarded name and value goes through append_encoded: one table
// lookup per byte, and runs of plain bytes appended at once.
struct ByteTable {
    bool plain[256];
};
constexpr ByteTable make_plain_table() {
    ByteTable t{};
    for (int c = 0; c < 256; ++c) t.plain[c] = unreserved(static_cast<unsigned char>(c));
    return t;
}
constexpr ByteTable kPlain = make_plain_table();

}  // namespace

bool known_ogc_name(std::string_view upper) { return name_class(upper) & kOgc; }

bool mapserver_cgi_name(std::string_view upper) {
    // map.* and map_* rewrite the mapfile from the URL (msUpdateMapFromURL);
    // MAP_RESOLUTION is WMS's documented vendor parameter (DPI, not size).
    if (upper.size() >= 4 && upper.compare(0, 3, "MAP") == 0 && (upper[3] == '.' || upper[3] == '_') &&
        upper != "MAP_RESOLUTION")
        return true;
    return name_class(upper) & kCgi;
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
    std::size_t i = 0;
    while (i < s.size()) {
        std::size_t j = i;
        while (j < s.size() && kPlain.plain[static_cast<unsigned char>(s[j])]) ++j;
        out.append(s.data() + i, j - i);
        if (j == s.size()) break;
        const auto c = static_cast<unsigned char>(s[j]);
        const char esc[3] = {'%', kHex[c >> 4], kHex[c & 15]};
        out.append(esc, 3);
        i = j + 1;
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

void Query::copy_from(const Query& o) {
    buf_ = o.buf_;
    raw = o.raw;
    params = o.params;
    rebase(o.buf_.data(), o.buf_.size(), buf_.data());
}

void Query::move_from(Query& o) noexcept {
    // A heap buffer keeps its address when moved; a short (in-place) one does not.
    const char* old = o.buf_.data();
    const std::size_t n = o.buf_.size();
    buf_ = std::move(o.buf_);
    raw = o.raw;
    params = std::move(o.params);
    rebase(old, n, buf_.data());
    o.buf_.clear();
    o.params.clear();
    o.raw = {};
}

void Query::rebase(const char* from, std::size_t n, const char* to) noexcept {
    if (from == to) return;
    const auto lo = reinterpret_cast<std::uintptr_t>(from);
    auto fix = [&](std::string_view& v) {
        const auto at = reinterpret_cast<std::uintptr_t>(v.data());
        if (v.data() && at >= lo && at + v.size() <= lo + n) v = std::string_view(to + (at - lo), v.size());
    };
    fix(raw);
    for (Param& p : params) {
        fix(p.key);
        fix(p.value);
        fix(p.name);
    }
}

void Query::reserve(std::size_t n) {
    if (buf_.capacity() - buf_.size() >= n) return;
    const char* old = buf_.data();
    const std::size_t size = buf_.size();
    buf_.reserve(std::max(size + n, 2 * buf_.capacity()));
    rebase(old, size, buf_.data());
}

namespace {
// s may be a view into buf: its offset survives the buffer's growth.
struct Anchor {
    std::size_t off;
    bool inside;
};
Anchor anchor(const std::string& buf, std::string_view s) {
    const auto lo = reinterpret_cast<std::uintptr_t>(buf.data()), at = reinterpret_cast<std::uintptr_t>(s.data());
    const bool inside = s.data() && at >= lo && at + s.size() <= lo + buf.size();
    return {inside ? static_cast<std::size_t>(at - lo) : 0, inside};
}
std::string_view reanchor(const std::string& buf, std::string_view s, Anchor a) {
    return a.inside ? std::string_view(buf.data() + a.off, s.size()) : s;
}
int hex_digit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}
}  // namespace

std::string_view Query::store(std::string_view s) {
    const Anchor a = anchor(buf_, s);
    reserve(s.size());
    s = reanchor(buf_, s, a);
    const std::size_t at = buf_.size();
    buf_.append(s.data(), s.size());
    return {buf_.data() + at, s.size()};
}

// The same reading as text.hpp's percent_decode (tested against it), written
// into the buffer instead of a string of its own.
std::optional<std::string_view> Query::decode(std::string_view s, bool plus_is_space) {
    if (s.find('%') == std::string_view::npos && (!plus_is_space || s.find('+') == std::string_view::npos)) return s;
    const Anchor a = anchor(buf_, s);
    reserve(s.size());
    s = reanchor(buf_, s, a);
    const std::size_t at = buf_.size();
    for (std::size_t i = 0; i < s.size(); ++i) {
        const char c = s[i];
        if (c == '%') {
            const int hi = s.size() - i >= 3 ? hex_digit(s[i + 1]) : -1;
            const int lo = hi >= 0 ? hex_digit(s[i + 2]) : -1;
            if (lo < 0) {
                buf_.resize(at);
                return std::nullopt;
            }
            buf_.push_back(static_cast<char>(hi * 16 + lo));
            i += 2;
        } else {
            buf_.push_back(c == '+' && plus_is_space ? ' ' : c);
        }
    }
    return std::string_view(buf_.data() + at, buf_.size() - at);
}

std::string_view Query::upper(std::string_view s) {
    std::size_t i = 0;
    while (i < s.size() && !(s[i] >= 'a' && s[i] <= 'z')) ++i;
    if (i == s.size()) return s;
    const Anchor a = anchor(buf_, s);
    reserve(s.size());
    s = reanchor(buf_, s, a);
    const std::size_t at = buf_.size();
    for (char c : s) buf_.push_back((c >= 'a' && c <= 'z') ? static_cast<char>(c - 'a' + 'A') : c);
    return {buf_.data() + at, s.size()};
}

std::optional<Query> parse_query(std::string_view raw_in, std::string* why) {
    // Enough for any OGC request; bounds the repeated-name check.
    constexpr std::size_t kMaxPairs = 512;
    auto refuse = [why](std::string w) -> std::optional<Query> {
        if (why) *why = std::move(w);
        return std::nullopt;
    };
    Query q;
    if (raw_in.empty()) return q;
    const std::size_t pairs = static_cast<std::size_t>(std::count(raw_in.begin(), raw_in.end(), '&')) + 1;
    if (pairs > kMaxPairs) return refuse("the request has more than 512 parameters");
    // A pair's decoded name, its upper-cased key and its decoded value are
    // each at most as long as the text they come from: with room for the raw
    // text three times over, the buffer never moves while the views below
    // point into it.
    q.reserve(3 * raw_in.size());
    const std::string_view raw = q.raw = q.store(raw_in);
    q.params.reserve(pairs);
    for (std::size_t start = 0; start <= raw.size();) {
        std::size_t amp = raw.find('&', start);
        if (amp == std::string_view::npos) amp = raw.size();
        const std::string_view part = raw.substr(start, amp - start);
        start = amp + 1;
        if (part.empty()) continue;
        const std::size_t eq = part.find('=');
        const auto name = q.decode(part.substr(0, eq), true);
        const auto value = q.decode(eq == std::string_view::npos ? std::string_view{} : part.substr(eq + 1), true);
        if (!name || !value) return refuse("the query string has a malformed percent-escape");
        if (std::string b = bad_name(*name); !b.empty()) return refuse(b);
        // C strings end at a NUL: the map server would read less than we do.
        if (value->find('\0') != std::string_view::npos)
            return refuse(std::string("the parameter ").append(*name).append(" contains a NUL byte"));
        const std::string_view k = q.upper(*name);
        if (const Param* prev = q.find(k)) {
            if (multi_valued_name(k)) {
                q.params.push_back({k, *value, *name});
                continue;
            }
            if (prev->value == *value) continue;  // said twice alike: one value
            return refuse(std::string("the parameter ").append(k).append(" is given more than once with different values"));
        }
        q.params.push_back({k, *value, *name});
    }
    return q;
}

}  // namespace ot::gate
