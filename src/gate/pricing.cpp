#include "gate/pricing.hpp"

#include <cmath>

#include "core/cost_model.hpp"
#include "core/geo.hpp"

namespace ot::gate {
namespace {

Price from(const core::Estimate& e, core::CostClass c, const Pricing& p) {
    // An estimate the model refuses is priced at the top: never cheaper.
    if (e.problem) return {p.model.cost_max, core::cost_class_name(c)};
    return {e.cost, core::cost_class_name(c)};
}

}  // namespace

double request_area_km2(const BboxIn& b, bool latlon_axis) {
    double x0 = b.v[0], y0 = b.v[1], x1 = b.v[2], y1 = b.v[3];
    if (latlon_axis) {
        std::swap(x0, y0);
        std::swap(x1, y1);
    }
    if (x1 < x0) std::swap(x0, x1);
    if (y1 < y0) std::swap(y0, y1);
    if (core::bbox_problem(x0, y0, x1, y1)) return 0;
    core::Srs srs = core::guess_unknown_srs(x0, y0, x1, y1);
    if (crs_is_degrees(b.crs)) srs = core::kDegrees;
    else if (crs_is_metres(b.crs)) srs = core::kMetres;
    return core::bbox_area_km2(srs, x0, y0, x1, y1);
}

Price price(const OgcRequest& r, const CapOutcome& caps, const Pricing& p) {
    using core::CostClass;
    if (caps.fixed_cost >= 0) return {caps.fixed_cost, "other"};
    const double area = r.bbox ? request_area_km2(*r.bbox, r.bbox_axis_latlon) : 0.0;
    switch (r.op) {
        case Op::GetMap:
            return from(core::estimate_map(p.model, caps.width, caps.height, area), CostClass::Map, p);
        case Op::GetFeatureInfo:
            return from(core::estimate_features(p.model, r.feature_info_count), CostClass::Features, p);
        case Op::GetTile: {
            // An unnamed level is priced as the coarsest: the most rows.
            const int z = r.zoom && *r.zoom >= 0 && *r.zoom <= core::kMaxZoom ? static_cast<int>(*r.zoom) : 0;
            return from(core::estimate_tile(p.model, z), CostClass::Tile, p);
        }
        case Op::GetCoverage: {
            double w = caps.width, h = caps.height;
            if (w <= 0 || h <= 0) w = h = std::sqrt(p.coverage_default_megapixels * 1e6);
            return from(core::estimate_coverage(p.model, w, h), CostClass::Coverage, p);
        }
        case Op::GetFeature:
        case Op::Items:
        case Op::Search: {
            if (r.hits_only) return {p.other_cost, "other"};
            const double count = caps.count >= 0 ? caps.count : p.default_limit;
            if (r.bbox) return from(core::estimate_bbox(p.model, area, count), CostClass::Bbox, p);
            return from(core::estimate_features(p.model, count), CostClass::Features, p);
        }
        case Op::Item:
            return from(core::estimate_features(p.model, 1), CostClass::Features, p);
        case Op::Other:
            if (caps.width > 0)  // GetLegendGraphic with a size
                return from(core::estimate_map(p.model, caps.width, caps.height, 0), CostClass::Map, p);
            break;
    }
    return {p.other_cost, "other"};
}

}  // namespace ot::gate
