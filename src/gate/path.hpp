// Request paths as one reading: dot segments resolved, empty segments
// merged, encoded separators refused. Matching (public_paths, tiles, OGC
// API) and forwarding both use the result, so "/tiles/../private/x" is
// "/private/x" to the gate as it is to any server behind it.
#pragma once
#include <optional>
#include <string>
#include <string_view>

namespace ot::gate {

struct NormalPath {
    std::string decoded;  // for matching
    std::string encoded;  // for forwarding: percent-encoding chosen by the gate
};

// `raw` is the origin-form path (no query). nullopt, with `why`, when a
// segment hides a separator (%2F, %5C, a backslash), a NUL, a malformed
// escape, or when ".." would climb above the root.
std::optional<NormalPath> normalise_path(std::string_view raw, std::string* why);

}  // namespace ot::gate
