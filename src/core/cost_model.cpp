#include "core/cost_model.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/geo.hpp"

namespace ot::core {
namespace {

constexpr double kPi = 3.14159265358979323846;

Estimate fail(const char* why) noexcept { return {why, 0.0, 0.0, false}; }

double capped(double rows, double limit) noexcept { return limit >= 0 ? std::min(rows, limit) : rows; }

// A zero weight or density switches a term off even against an infinite
// quantity (0 × inf would otherwise be NaN).
double term(double weight, double quantity) noexcept { return weight == 0 ? 0.0 : weight * quantity; }

Estimate priced(const CostModel& m, CostClass c, double rows, double megapixels) noexcept {
    const ClassWeights& w = m.of(c);
    const double raw = w.fixed + term(w.per_row, rows) + term(w.per_megapixel, megapixels);
    // Written so that anything not provably below the clamp (+inf, and NaN
    // should a bug ever produce one) is priced at the clamp, never below it.
    if (!(raw < m.cost_max)) return {nullptr, m.cost_max, rows, true};
    return {nullptr, raw, rows, false};
}

const char* limit_problem(double limit) noexcept {
    return std::isnan(limit) ? "limit is NaN" : nullptr;
}

}  // namespace

const char* cost_class_name(CostClass c) noexcept {
    switch (c) {
        case CostClass::Bbox: return "bbox";
        case CostClass::Radius: return "radius";
        case CostClass::Features: return "features";
        case CostClass::Tile: return "tile";
        case CostClass::Map: return "map";
        case CostClass::Coverage: return "coverage";
        case CostClass::Scan: return "scan";
        case CostClass::Join: return "join";
        case CostClass::Encode: return "encode";
        case CostClass::Distance: return "distance";
        case CostClass::Worker: return "worker";
        case CostClass::Function: return "function";
        case CostClass::Statement: return "statement";
        case CostClass::Page: return "page";
        case CostClass::Output: return "output";
    }
    return "unknown";
}

const char* cost_class_list() noexcept {
    // Built once (thread-safe static initialisation) from the names above.
    static const struct List {
        char text[256];
        List() noexcept : text{} {
            for (int i = 0; i < kCostClasses; i++) {
                if (i > 0) std::strncat(text, ", ", sizeof text - std::strlen(text) - 1);
                std::strncat(text, cost_class_name(static_cast<CostClass>(i)), sizeof text - std::strlen(text) - 1);
            }
        }
    } list;
    return list.text;
}

CostModel default_cost_model() noexcept {
    CostModel m{};
    // One cost unit is one millisecond of executor time, fitted on the
    // reference machine with bench/fidelity (doc/cost-model.md, "Units and
    // default weights"). The database prices a statement from its plan (scan,
    // join, encode, distance, worker) plus the fixed term of each priced call;
    // the per-row terms of bbox/radius/features/tile serve the gate and the
    // throttle_cost_* estimators, which only know an area or a count.
    m.of(CostClass::Bbox) = {0.025, 0.002, 0.0};
    m.of(CostClass::Radius) = {0.037, 0.003, 0.0};
    m.of(CostClass::Features) = {0.025, 0.002, 0.0};
    m.of(CostClass::Tile) = {0.022, 0.005, 0.0};
    m.of(CostClass::Map) = {2.0, 0.005, 4.0};
    m.of(CostClass::Coverage) = {2.0, 0.0, 8.0};
    m.of(CostClass::Scan) = {0.017, 0.0003, 0.0};      // per scan started; per row read
    m.of(CostClass::Join) = {0.034, 0.0025, 0.0};      // per nested-loop probe; per row through joins/sorts/aggregates
    m.of(CostClass::Encode) = {0.0, 0.001, 0.0};       // per row encoded (MVT geometry and columns, GeoJSON, text, reprojection)
    m.of(CostClass::Distance) = {0.0, 0.0039, 0.0};    // per exact geography predicate (geometry: a tenth counted against a box, in full against another row)
    m.of(CostClass::Worker) = {32.0, 0.0, 0.0};        // per parallel worker launched
    m.of(CostClass::Function) = {0.0, 0.000005, 0.0};  // per row and unit of procost of an otherwise unpriced function
    m.of(CostClass::Statement) = {0.05, 0.0036, 0.0};   // per statement (executor start-up); per plan node
    m.of(CostClass::Page) = {0.0, 0.0011, 0.0};        // per heap page an index or bitmap scan fetches
    m.of(CostClass::Output) = {0.0, 0.0004, 0.0};      // per row returned (output functions, sending; doc/cost-model.md)
    m.density_per_km2 = 10.0;
    m.tile_max_rows = 50000.0;
    m.cost_max = 500.0;
    return m;
}

const char* cost_model_problem(const CostModel& m) noexcept {
    for (const ClassWeights& w : m.weights) {
        for (double v : {w.fixed, w.per_row, w.per_megapixel})
            if (!std::isfinite(v) || v < 0) return "cost weights must be finite and non-negative";
    }
    if (!std::isfinite(m.density_per_km2) || m.density_per_km2 < 0) return "density must be finite and non-negative";
    if (!std::isfinite(m.tile_max_rows) || m.tile_max_rows < 0) return "tile_max_rows must be finite and non-negative";
    if (!std::isfinite(m.cost_max) || m.cost_max <= 0) return "cost_max must be finite and above zero";
    return nullptr;
}

Estimate estimate_bbox(const CostModel& m, double area_km2, double limit) noexcept {
    if (std::isnan(area_km2) || area_km2 < 0) return fail("area must be a non-negative number");
    if (const char* p = limit_problem(limit)) return fail(p);
    return priced(m, CostClass::Bbox, capped(term(m.density_per_km2, area_km2), limit), 0.0);
}

Estimate estimate_radius(const CostModel& m, double radius_m, double limit) noexcept {
    if (std::isnan(radius_m)) return fail("radius is NaN");
    if (std::isinf(radius_m)) return fail("radius is infinite");
    if (radius_m < 0) return fail("radius is negative");
    if (const char* p = limit_problem(limit)) return fail(p);
    const double area_km2 = kPi * (radius_m / 1000.0) * (radius_m / 1000.0);
    return priced(m, CostClass::Radius, capped(term(m.density_per_km2, area_km2), limit), 0.0);
}

Estimate estimate_known_rows(const CostModel& m, CostClass c, double rows, double limit) noexcept {
    if (std::isnan(rows) || rows < 0) return fail("rows must be a non-negative number");
    if (const char* p = limit_problem(limit)) return fail(p);
    return priced(m, c, capped(rows, limit), 0.0);
}

Estimate estimate_features(const CostModel& m, double count) noexcept {
    if (std::isnan(count)) return fail("feature count is NaN");
    if (std::isinf(count)) return fail("feature count is infinite");
    if (count < 0) return fail("feature count is negative");
    return priced(m, CostClass::Features, count, 0.0);
}

Estimate estimate_tile(const CostModel& m, int zoom, double limit) noexcept {
    if (zoom < 0 || zoom > kMaxZoom) return fail("zoom must be between 0 and 31");
    if (const char* p = limit_problem(limit)) return fail(p);
    const double rows = term(m.density_per_km2, tile_area_km2(zoom));
    return priced(m, CostClass::Tile, capped(rows, limit >= 0 ? limit : m.tile_max_rows), 0.0);
}

Estimate estimate_map(const CostModel& m, double width, double height, double area_km2) noexcept {
    if (!std::isfinite(width) || !std::isfinite(height) || width <= 0 || height <= 0)
        return fail("width and height must be positive numbers");
    if (std::isnan(area_km2) || area_km2 < 0) return fail("area must be a non-negative number");
    const double mp = width * height / 1e6;
    return priced(m, CostClass::Map, capped(term(m.density_per_km2, area_km2), m.tile_max_rows), mp);
}

Estimate estimate_coverage(const CostModel& m, double width, double height) noexcept {
    if (!std::isfinite(width) || !std::isfinite(height) || width <= 0 || height <= 0)
        return fail("width and height must be positive numbers");
    return priced(m, CostClass::Coverage, 0.0, width * height / 1e6);
}

}  // namespace ot::core
