#include "gate/coverage.hpp"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "gate/text.hpp"

namespace ot::gate {
namespace {

OgcError bad(std::string locator, std::string text) {
    return {ErrorKind::BadRequest, "InvalidParameterValue", std::move(locator), std::move(text)};
}

const Param* kv(const OgcRequest& r, std::string_view key) {
    if (const Param* p = r.form.find(key)) return p;
    return r.query.find(key);
}

// "x(100),y(200)" -> {100, 200}; "x(0:100),y(0:50)" -> {100, 50} (extent);
// "x(1.5)" for SCALEAXES. nullopt-like empty on anything else.
std::vector<double> axis_values(std::string_view v, bool extent) {
    std::vector<double> out;
    std::size_t i = 0;
    while (i < v.size()) {
        const std::size_t open = v.find('(', i);
        const std::size_t close = v.find(')', open == std::string_view::npos ? i : open);
        if (open == std::string_view::npos || close == std::string_view::npos || open == i) return {};
        const std::string_view inner = v.substr(open + 1, close - open - 1);
        if (extent) {
            const std::size_t colon = inner.find(':');
            if (colon == std::string_view::npos) return {};
            auto lo = parse_double(inner.substr(0, colon)), hi = parse_double(inner.substr(colon + 1));
            if (!lo || !hi) return {};
            out.push_back(*hi - *lo);
        } else {
            auto n = parse_double(inner);
            if (!n) return {};
            out.push_back(*n);
        }
        i = close + 1;
        if (i < v.size()) {
            if (v[i] != ',') return {};
            ++i;
        }
    }
    return out;
}

void set_size(double w, double h, const char* locator, const Caps& caps, CapOutcome& out, bool capped = true) {
    if (!(w >= 1) || !(h >= 1) || !std::isfinite(w) || !std::isfinite(h)) {
        out.error = bad(locator, std::string("The output size given by ") + locator + " is not at least one pixel.");
        return;
    }
    w = std::ceil(w);
    h = std::ceil(h);
    const double side = static_cast<double>(caps.max_side);
    if (capped && ((caps.max_side > 0 && (w > side || h > side)) || w * h > static_cast<double>(caps.max_pixels))) {
        char buf[64];
        std::snprintf(buf, sizeof buf, "%.0fx%.0f", w, h);
        out.error = {ErrorKind::OverCap, "InvalidParameterValue", locator,
                     std::string("GetCoverage asked (through ") + locator + ") for " + buf +
                         " pixels; this service allows at most " + std::to_string(caps.max_pixels) +
                         " pixels per coverage. Ask for a smaller size or a coarser resolution."};
        return;
    }
    out.width = w;
    out.height = h;
}

}  // namespace

void check_coverage(const OgcRequest& r, const Caps& caps, CapOutcome& out) {
    const char* forms[] = {"WIDTH", "RESX", "GRIDOFFSETS", "SCALESIZE", "SCALEEXTENT", "SCALEFACTOR", "SCALEAXES"};
    const char* given = nullptr;
    for (const char* f : forms) {
        const bool has = kv(r, f) || (std::string_view(f) == "WIDTH" && kv(r, "HEIGHT")) ||
                         (std::string_view(f) == "RESX" && kv(r, "RESY"));
        if (!has) continue;
        if (given) {
            out.error = bad(f, std::string("Give the output size one way only: ") + given + " and " + f + " were both given.");
            return;
        }
        given = f;
    }
    const std::string_view g = given ? given : "";
    if (!given) {
        // WCS 1.0 makes one of the two mandatory (OGC 03-065r6, table 9).
        if (r.version.rfind("1.0", 0) == 0) {
            out.error = {ErrorKind::BadRequest, "MissingParameterValue", "WIDTH",
                         "GetCoverage 1.0 needs WIDTH and HEIGHT, or RESX and RESY."};
            return;
        }
        // The native grid (or the part SUBSET cuts out): bounded by the map
        // server's own MAXSIZE, priced here at the assumed size, not capped
        // on a guess.
        const double side = std::sqrt(caps.coverage_default_megapixels * 1e6);
        return set_size(side, side, "the native grid", caps, out, false);
    }
    if (g == "WIDTH") {
        const Param *w = kv(r, "WIDTH"), *h = kv(r, "HEIGHT");
        const auto wv = w ? parse_int(w->value) : std::nullopt, hv = h ? parse_int(h->value) : std::nullopt;
        if (!wv || !hv || *wv <= 0 || *hv <= 0) {
            out.error = bad(wv ? "HEIGHT" : "WIDTH", "WIDTH and HEIGHT must both be positive whole numbers of pixels.");
            return;
        }
        return set_size(static_cast<double>(*wv), static_cast<double>(*hv), "WIDTH", caps, out);
    }
    if (g == "RESX" || g == "GRIDOFFSETS") {
        std::optional<double> rx, ry;
        if (g == "RESX") {
            const Param *x = kv(r, "RESX"), *y = kv(r, "RESY");
            if (x) rx = parse_double(x->value);
            if (y) ry = parse_double(y->value);
        } else {
            const auto parts = split(kv(r, "GRIDOFFSETS")->value, ',');
            if (parts.size() == 2) {
                // MapServer takes their absolute values.
                rx = parse_double(parts[0]);
                ry = parse_double(parts[1]);
                if (rx) *rx = std::fabs(*rx);
                if (ry) *ry = std::fabs(*ry);
            }
        }
        if (!rx || !ry || !(*rx > 0) || !(*ry > 0)) {
            out.error = bad(given, std::string(given) + " must be two positive resolutions.");
            return;
        }
        if (!r.bbox) {
            out.error = {ErrorKind::BadRequest, "MissingParameterValue", "BBOX",
                         std::string("A resolution (") + given + ") needs a BBOX to give a size."};
            return;
        }
        const double w = std::fabs(r.bbox->v[2] - r.bbox->v[0]) / *rx, h = std::fabs(r.bbox->v[3] - r.bbox->v[1]) / *ry;
        return set_size(w, h, given, caps, out);
    }
    if (g == "SCALESIZE" || g == "SCALEEXTENT") {
        const auto v = axis_values(kv(r, given)->value, g == "SCALEEXTENT");
        // One axis leaves the other to the native grid, which the gate cannot see.
        if (v.size() != 2) {
            out.error = bad(given, std::string(given) + " must give both axes, as x(n),y(n)" +
                                       (g == "SCALEEXTENT" ? " with n as lo:hi." : "."));
            return;
        }
        return set_size(v[0], v[1], given, caps, out);
    }
    // SCALEFACTOR=f, SCALEAXES=x(f),y(f): relative to the native grid.
    double fx = 0, fy = 0;
    if (g == "SCALEFACTOR") {
        auto f = parse_double(kv(r, "SCALEFACTOR")->value);
        if (f) fx = fy = *f;
    } else {
        const auto v = axis_values(kv(r, "SCALEAXES")->value, false);
        if (v.size() == 2) {
            fx = v[0];
            fy = v[1];
        }
    }
    if (!(fx > 0) || !(fy > 0)) {
        out.error = bad(given, std::string(given) + " must give positive factors (SCALEAXES: both axes).");
        return;
    }
    // Up-sampling multiplies a grid the gate cannot see: ask for a size.
    if (fx > 1 || fy > 1) {
        out.error = {ErrorKind::OverCap, "InvalidParameterValue", given,
                     std::string(given) + " above 1 enlarges the coverage beyond its native grid, which this gate "
                     "cannot measure. Ask for an explicit size with SCALESIZE=x(w),y(h) instead."};
        return;
    }
    const double side = std::sqrt(caps.coverage_default_megapixels * 1e6);
    set_size(std::max(1.0, side * fx), std::max(1.0, side * fy), given, caps, out, false);
}

}  // namespace ot::gate
