// The OGC request model: what a raw HTTP request asks for, in the terms the
// caps and the cost model need (service, operation, version, size, count,
// bbox, zoom). Parsing is pure and total: malformed input yields a request
// with `problem` set, never an exception.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ot::gate {

enum class Service : std::uint8_t { Unknown, Wms, Wfs, Wmts, Wcs, Features, Tiles };

// Which exception format the client understands (Wfs100 also serves WCS 1.0).
enum class Dialect : std::uint8_t { Plain, Wms111, Wms130, Wfs100, Wfs110, Ows11, OgcApi };

enum class Op : std::uint8_t { Other, GetMap, GetFeatureInfo, GetFeature, GetTile, GetCoverage, Items, Item, Search };

const char* service_name(Service s);
const char* op_name(Op o);

// Views into the Query that holds it (Query::store): valid while that
// Query lives, re-pointed when it is copied or moved.
struct Param {
    std::string_view key;    // upper-cased, decoded: what lookups compare
    std::string_view value;  // decoded
    std::string_view name;   // the spelling forwarded (canonical once classified)
};

// Decoded key=value pairs plus the raw text they came from. The raw text and
// whatever decoding or upper-casing had to write live in one buffer of the
// Query's own (one allocation per query, not up to three per parameter);
// a name or value needing neither is a view of the raw text. Copies and moves
// re-point every view that points into the buffer, so an assigned Query
// (a kept-alive connection's next request) never reads the previous one's.
class Query {
public:
    std::string_view raw;
    std::vector<Param> params;
    const Param* find(std::string_view upper_key) const;

    Query() = default;
    Query(const Query& o) { copy_from(o); }
    Query(Query&& o) noexcept { move_from(o); }
    Query& operator=(const Query& o) {
        if (this != &o) copy_from(o);
        return *this;
    }
    Query& operator=(Query&& o) noexcept {
        if (this != &o) move_from(o);
        return *this;
    }
    // Room for n more bytes without moving the buffer again.
    void reserve(std::size_t n);
    // s copied into the buffer; the view of the copy.
    std::string_view store(std::string_view s);
    // s percent-decoded (plus_is_space: '+' as a blank) into the buffer, or
    // s itself when there is nothing to decode; nullopt for a bad escape.
    std::optional<std::string_view> decode(std::string_view s, bool plus_is_space);
    // s upper-cased: s itself when it has no lower-case letter, else a copy.
    std::string_view upper(std::string_view s);

private:
    void copy_from(const Query& o);
    void move_from(Query& o) noexcept;
    // Views into [from, from + n] now point at the same offsets from `to`.
    void rebase(const char* from, std::size_t n, const char* to) noexcept;
    std::string buf_;
};

// Parses "a=b&c=d" as MapServer would (see kvp.hpp); nullopt (with why) when
// that reading could differ from the gate's: a malformed escape, a name
// hiding a delimiter, blanks or control characters, a NUL in a value, a name
// repeated with another value (except SUBSET), too many pairs.
std::optional<Query> parse_query(std::string_view raw, std::string* why);

struct HttpIn {
    std::string method;  // upper case as sent
    std::string target;  // origin-form path?query
    std::string content_type;
    std::string body;
    std::string cookie{};  // the Cookie header: MapServer reads it as parameters too
};

struct BboxIn {
    double v[4];
    std::string crs;  // as sent (may be empty)
};

enum class BodyKind : std::uint8_t { None, Form, WfsXml, SearchJson, Opaque };

struct OgcRequest {
    Service service = Service::Unknown;
    Dialect dialect = Dialect::Plain;
    Op op = Op::Other;
    std::string version;
    std::string operation;  // REQUEST as sent (for messages)
    std::string path;
    Query query;        // from the target
    BodyKind body_kind = BodyKind::None;
    Query form;         // when body_kind == Form

    std::optional<std::string> width, height;  // raw values; the caps judge them
    std::optional<std::string> count;          // raw requested feature count
    std::string count_key;                     // where it came from / goes (COUNT, MAXFEATURES, limit, count, maxFeatures)
    std::optional<BboxIn> bbox;
    bool bbox_axis_latlon = false;             // first axis is latitude
    std::optional<std::int64_t> zoom;
    // A tile's column and row (row 0 at the top, as WMTS counts; a TMS path's
    // rows count up and are flipped only where the cell is computed) and its
    // tile matrix set ("" for XYZ): what the area budget keys on (cell_request.hpp).
    std::optional<std::int64_t> tile_col, tile_row;
    std::string tile_matrix_set;
    bool tile_rows_up = false;
    bool hits_only = false;                    // RESULTTYPE=hits
    double feature_info_count = 1;

    // What goes upstream is the gate's own serialisation of what it read
    // (canonical.hpp); written only when forwarded, so a refusal never pays for it.
    bool canonical = false;        // read unambiguously: canonical_target() is what goes up
    std::string canonical_path;    // encoded normalised path
    bool ogc_kvp = false;          // SERVICE/REQUEST given: names are case-insensitive
    std::string cgi_param;         // a MapServer CGI-mode parameter that was sent
    bool known_service_value = true;  // SERVICE named one the gate knows (or none)

    std::string problem;  // non-empty: the request cannot be understood
    // The OGC exception code of `problem`; empty means "InvalidParameterValue" (a
    // default string of 21 characters cost every request's reset an allocation).
    std::string problem_code;
    std::string problem_locator;
};

OgcRequest parse_request(const HttpIn& in);

// Exposed for tests.
std::optional<std::int64_t> trailing_int(std::string_view s);
bool crs_is_latlon_geographic(std::string_view crs);
bool crs_is_degrees(std::string_view crs);
bool crs_is_metres(std::string_view crs);

}  // namespace ot::gate
