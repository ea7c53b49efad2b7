// Key-value pairs read the way the map server reads them, and written back
// in one canonical spelling. MapServer (cgiutil.c loadParams) splits a query
// at '&', percent-decodes each pair as a whole and only then splits it at
// the first '='; names are compared without regard to case, the last of a
// repeated name wins for most parameters and the first for SERVICE/REQUEST.
// Wherever that reading and a textbook one could differ, the gate refuses:
// what it forwards is then, by construction, what it checked.
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace ot::gate {

struct Param;
struct Query;

// Names an OGC KVP request may carry, upper case. Their canonical spelling
// upstream is this one.
bool known_ogc_name(std::string_view upper);
// Names only MapServer's own CGI modes read (mode=map, mapsize=, map.*
// overrides, ...): they draw maps without any OGC parameter.
bool mapserver_cgi_name(std::string_view upper);
// Names that may legally repeat with different values (WCS 2.0 SUBSET).
bool multi_valued_name(std::string_view upper);
// OGC API query parameters, in the spelling the standards give them; the
// servers compare them case-sensitively.
const char* ogcapi_spelling(std::string_view upper);

// Why a decoded parameter name cannot be read unambiguously; empty if fine.
std::string bad_name(std::string_view decoded);

// Percent-encodes everything but RFC 3986 unreserved characters and a few
// that are safe and common in OGC values (",:/").
void append_encoded(std::string& out, std::string_view s);

// "NAME=value&..." from the params, names as given in Param::name, and with
// `set_key` (upper case) replaced by or given `set_value` when set_key is
// not empty. One value per name, except multi-valued names.
std::string serialise_query(const std::vector<Param>& params, std::string_view set_key = {},
                            std::string_view set_name = {}, std::string_view set_value = {});

// The Cookie header read as MapServer reads it (pairs at ';', a name's
// leading blanks skipped): MapServer appends these pairs after the query's,
// so a cookie named WIDTH would override the query's WIDTH.
std::vector<std::string> cookie_names(std::string_view header);

}  // namespace ot::gate
