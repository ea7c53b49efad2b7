// POST bodies that carry a feature count: WFS GetFeature XML (pugixml) and
// OGC API search JSON (nlohmann-json). Read into the request model, and
// rewritten when the caps clamp or inject a count.
#pragma once
#include <optional>
#include <string>
#include <string_view>

#include "gate/request.hpp"

namespace ot::gate {

void read_xml_body(std::string_view body, OgcRequest& r);
void read_json_body(std::string_view body, OgcRequest& r);

// The body with the root element's `attr` set to `value`; nullopt if it no
// longer parses.
std::optional<std::string> rewrite_xml_count(std::string_view body, const std::string& attr, const std::string& value);
// The body with "limit" set to `value`.
std::optional<std::string> rewrite_json_limit(std::string_view body, long long value);

}  // namespace ot::gate
