// What request.cpp and request_path.cpp share (not for other callers).
#pragma once
#include <string>
#include <string_view>

#include "gate/request.hpp"

namespace ot::gate::detail {

// Records the first problem only.
void fail(OgcRequest& r, std::string why, std::string locator = {}, std::string code = "InvalidParameterValue");
Dialect dialect_for(Service s, std::string_view version);
// "minx,miny,maxx,maxy[,crs]" (WMS, WFS) or 4/6 numbers (OGC API).
bool parse_bbox(std::string_view s, BboxIn& out, bool allow_crs_suffix, bool allow_six);
// Service, operation and zoom from a path (no SERVICE/REQUEST given).
void parse_path(OgcRequest& r);

}  // namespace ot::gate::detail
