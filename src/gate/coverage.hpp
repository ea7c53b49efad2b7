// The output size of a WCS GetCoverage, for every way the versions let a
// client ask for it: WIDTH/HEIGHT or RESX/RESY over BBOX (1.0),
// GRIDOFFSETS over BOUNDINGBOX (1.1), SCALESIZE, SCALEEXTENT, SCALEFACTOR or
// SCALEAXES over the coverage (2.0, SUBSET repeated freely). The gate does
// not know a coverage's native grid: a scale factor is applied to
// caps.coverage_default_megapixels, the size assumed for a coverage asked
// for at its native resolution.
#pragma once
#include "gate/caps.hpp"
#include "gate/request.hpp"

namespace ot::gate {

// Sets out.width/out.height (pixels) or out.error.
void check_coverage(const OgcRequest& r, const Caps& caps, CapOutcome& out);

}  // namespace ot::gate
