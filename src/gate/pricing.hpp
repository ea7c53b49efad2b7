// What a request costs, from the shared model in src/core: tiles by zoom,
// GetMap by pixels and area, features by count and area, coverages heavy.
#pragma once
#include <string>

#include "gate/caps.hpp"
#include "gate/config.hpp"
#include "gate/request.hpp"

namespace ot::gate {

struct Price {
    double cost = 0;
    std::string cost_class;  // core class name, or "other"
};

// Ground area of a request bbox in km², using its CRS (or a guess that errs
// towards the higher price).
double request_area_km2(const BboxIn& b, bool latlon_axis);

Price price(const OgcRequest& r, const CapOutcome& caps, const Pricing& p);

}  // namespace ot::gate
