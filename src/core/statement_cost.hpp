// How the priced calls found in one SQL statement combine into its price.
//
// The rule (documented in doc/pricing-hook.md):
//  1. Each call is priced as its class: a radius search by πr², a box by its
//     area, a tile by its zoom (or bounds); rows are the column statistics'
//     estimate where the caller has one, else area × density; they are capped
//     by the statement's LIMIT, or for tile statements without one by
//     tile_max_rows.
//  2. A call whose arguments cannot be known before execution costs cost_max.
//  3. Calls with the same box (an envelope used twice, the index condition
//     ST_DWithin derives) are charged once: at the price made from the
//     table's statistics if one is, else at the highest price among them;
//     so are tile terms framing the same tile (clip box, envelope with and
//     without margin: one contains the other's centre).
//  4. In a statement that builds tiles, bbox filters are the tile's own filter
//     and are not charged besides the tile; when a filter has a statistics
//     estimate, the largest such estimate is the tile's rows.
//  5. The statement pays the sum, clamped at cost_max; no priced call, no charge.
//  6. When the caller priced the plan as a whole (a CallKind::Plan entry, its
//     quantities in StatementFacts::plan), the plan's scans carry the rows and
//     each call keeps only its class's fixed term (an unknown argument still
//     costs cost_max).
#pragma once
#include <cstddef>
#include <cstdint>

#include "core/cost_model.hpp"

namespace ot::core {

// Plan: one entry standing for the plan-wide terms (StatementFacts::plan), so
// that a statement priced only by its plan (a disguised search) shows and pays.
enum class CallKind : std::uint8_t { Radius, Bbox, Tile, Plan };

// Where a row count came from, for explanations: the planner's own estimate
// (PostGIS's selectivity for a literal search), PostGIS's statistics asked
// for this execution's value, or the extension's density grid.
enum class RowsSource : std::uint8_t { Plan, Statistics, Grid };
inline constexpr int kRowsSources = 3;

struct Box {
    double xmin, ymin, xmax, ymax;
    std::int32_t srid;
};

struct PricedCall {
    CallKind kind;
    const char* function;  // for explanations, e.g. "st_dwithin"; static storage
    bool known;            // false: an argument is only known during execution
    bool has_box;          // box is set (used to recognise the same box twice)
    Box box;
    double radius_m;  // Radius
    double area_km2;  // Bbox, and Tile when priced by its bounds
    double rows;      // rows the search meets per the table's statistics; < 0 unknown (area × density then)
    RowsSource rows_source;  // where `rows` came from
    int zoom;         // Tile when priced by zoom; -1 otherwise
    // Plan: what the plan-wide terms count, for explanations.
    double scans, probes, scan_rows, upper_rows, encode_rows, predicate_rows, workers, function_work, output_rows;
    double scan_rows_by[kRowsSources];  // scan_rows split by where each scan's count came from
    // Filled by price_statement:
    double cost;
    int same_as;  // index of the call this one was merged into, or -1
    bool folded_into_tile;
};

// What a statement is charged for, as quantities per cost class: its price
// is linear in the weights, Σ_c fixed_c·calls[c] + per_row_c·rows[c]
// (+ cost_max for each term that could not be priced), before the cost_max
// clamp. Samples of (features, measured time) fit the weights.
struct PlanFeatures {
    double calls[kCostClasses];  // requests / calls charged the class's fixed term
    double rows[kCostClasses];   // rows charged the class's per-row term
    double unpriced;             // terms priced at cost_max (an argument known only at run time)
};

// Σ fixed·calls + per_row·rows + cost_max·unpriced, unclamped.
double price_of(const CostModel& m, const PlanFeatures& f) noexcept;
void add_features(PlanFeatures& into, const PlanFeatures& f) noexcept;

struct StatementFacts {
    bool builds_tiles;  // ST_AsMVT / ST_AsMVTGeom / ST_TileEnvelope present
    double limit;       // kNoLimit when there is none (or it is unknown)
    // Terms the caller priced itself from the plan as a whole (scans, joins,
    // per-row operators); added to the calls' features. Zero-initialised by
    // aggregate initialisation when not given.
    PlanFeatures plan;
};

struct StatementPrice {
    double total;
    bool clamped;
    int charged_calls;
    PlanFeatures features;  // total == min(cost_max, price_of(m, features))
};

StatementPrice price_statement(const CostModel& m, PricedCall* calls, std::size_t n, const StatementFacts& facts);

bool same_box(const Box& a, const Box& b) noexcept;

}  // namespace ot::core
