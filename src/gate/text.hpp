// Small string helpers the parsers share. Everything here is total: any byte
// sequence in, a value or "no" out, never an exception or UB (it is fuzzed).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ot::gate {

// RFC 3986 percent-decoding; with plus_is_space also the form-encoding '+'.
// A '%' not followed by two hex digits makes the whole input invalid:
// guessing would let the gate and the upstream read different values.
std::optional<std::string> percent_decode(std::string_view in, bool plus_is_space);

std::string to_upper(std::string_view s);
std::string to_lower(std::string_view s);
bool iequals(std::string_view a, std::string_view b);
bool istarts_with(std::string_view s, std::string_view prefix);

// Strict decimal integer: optional sign, digits, nothing else; nullopt on
// overflow or junk.
std::optional<std::int64_t> parse_int(std::string_view s);
// Strict finite floating point number.
std::optional<double> parse_double(std::string_view s);

std::vector<std::string_view> split(std::string_view s, char sep);
std::string_view trim(std::string_view s);

// A client's value echoed in a message: at most max_bytes, cut only between
// whole UTF-8 characters, with bytes that are not well-formed UTF-8 (and
// control characters XML 1.0 cannot carry) as '?', so the report stays
// well-formed XML and JSON.
std::string echo_value(std::string_view s, std::size_t max_bytes);

// For XML text and attribute values.
std::string xml_escape(std::string_view s);
// For element text: quotes stay as they are (readable where a client prints
// the raw report); &, <, > and control characters as in xml_escape.
std::string xml_escape_text(std::string_view s);

}  // namespace ot::gate
