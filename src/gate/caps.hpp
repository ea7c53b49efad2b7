// Hard limits, judged on the request alone (no shared state): pixels, feature
// counts, zoom. The cheapest check, so it runs first.
#pragma once
#include <optional>
#include <string>

#include "gate/config.hpp"
#include "gate/ogc_error.hpp"
#include "gate/request.hpp"

namespace ot::gate {

struct CapOutcome {
    std::optional<OgcError> error;
    std::optional<std::string> new_target;  // query rewritten (count clamped or injected)
    std::optional<std::string> new_body;    // body rewritten
    double width = 0, height = 0;           // validated, when the operation has a size
    double count = -1;                      // features the upstream may return; -1 unknown
    double fixed_cost = -1;                 // a configured pass-through operation's price
    std::string note;                       // what was rewritten, for the log
};

CapOutcome apply_caps(const OgcRequest& r, const HttpIn& in, const Caps& caps);

}  // namespace ot::gate
