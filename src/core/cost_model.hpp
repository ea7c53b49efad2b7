// The one price list shared by the extension and the gate.
//
// A request costs a fixed per-class term plus a per-row term; rows come from
// the searched area times the local density, capped by whatever LIMIT (or
// maximum) bounds the answer. Weights are data so that they can be fitted from
// measured times instead of guessed.
#pragma once
#include <cstdint>

namespace ot::core {

// Append only: the gate's configuration names classes and Map/Coverage are its own.
//  Scan:     rows read by a heap/index scan anywhere in a plan (plan-wide pricing)
//  Join:     rows produced by a join, per outer row of a nested loop
//  Encode:   rows encoded as MVT (ST_AsMVTGeom/ST_AsMVT) or GeoJSON/text
//  Distance: exact spatial predicates per candidate row (geography in full, geometry at a tenth
//            against a search box, in full against another row's geometry)
//  Worker:   fixed: each parallel worker a statement launches
//  Function: per row and unit of declared cost (pg_proc.procost) of the functions a plan's
//            expressions call that no other class prices (ST_Buffer, ST_Area, user functions)
//  Statement: fixed: every priced statement once (executor start-up and shut-down, which no
//            other class carries); per "row": each node of its plan (initialised and ended once)
//  Page:     per "row": each heap page an index or bitmap scan fetches (a random page costs
//            as much as many rows on it: a sparse search reads about a page a row)
//  Output:   per "row": each row a statement returns (its columns' output functions and the
//            bytes sent: a WFS page of 10 000 features is ten times its scan's per-row work)
enum class CostClass : std::uint8_t { Bbox, Radius, Features, Tile, Map, Coverage, Scan, Join, Encode, Distance, Worker,
                                     Function, Statement, Page, Output };
inline constexpr int kCostClasses = 15;
const char* cost_class_name(CostClass c) noexcept;
// "bbox, radius, …, worker": every class name, for error messages.
const char* cost_class_list() noexcept;

struct ClassWeights {
    double fixed;          // per request
    double per_row;        // per estimated feature / row
    double per_megapixel;  // per rendered or delivered megapixel
};

struct CostModel {
    ClassWeights weights[kCostClasses];
    double density_per_km2;  // rows per km² where nothing better is known
    double tile_max_rows;    // rows a tile can hold when its query has no LIMIT
    double cost_max;         // every estimate is clamped here
    const ClassWeights& of(CostClass c) const noexcept { return weights[static_cast<int>(c)]; }
    ClassWeights& of(CostClass c) noexcept { return weights[static_cast<int>(c)]; }
};

CostModel default_cost_model() noexcept;
// nullptr when every weight is finite and non-negative and cost_max > 0.
const char* cost_model_problem(const CostModel& m) noexcept;

struct Estimate {
    const char* problem;  // nullptr on success; otherwise why the input is unusable
    double cost;
    double rows;
    bool clamped;  // cost hit cost_max
};

// "No limit" is any negative limit.
inline constexpr double kNoLimit = -1.0;

Estimate estimate_bbox(const CostModel& m, double area_km2, double limit = kNoLimit) noexcept;
Estimate estimate_radius(const CostModel& m, double radius_m, double limit = kNoLimit) noexcept;
Estimate estimate_features(const CostModel& m, double count) noexcept;
Estimate estimate_tile(const CostModel& m, int zoom, double limit = kNoLimit) noexcept;
// A search of class c whose rows are known (from column statistics), capped by limit.
Estimate estimate_known_rows(const CostModel& m, CostClass c, double rows, double limit = kNoLimit) noexcept;
Estimate estimate_map(const CostModel& m, double width, double height, double area_km2) noexcept;
Estimate estimate_coverage(const CostModel& m, double width, double height) noexcept;

inline constexpr int kMaxZoom = 31;

}  // namespace ot::core
