#include "core/statement_cost.hpp"

#include <algorithm>
#include <cmath>

namespace ot::core {
namespace {

bool close(double a, double b) noexcept {
    return a == b || std::fabs(a - b) <= 1e-9 * std::max(std::fabs(a), std::fabs(b));
}

double price_one(const CostModel& m, const PricedCall& c, StatementFacts f, double filter_rows) noexcept {
    if (!c.known) return m.cost_max;
    if (c.rows >= 0 && c.kind != CallKind::Tile) {
        Estimate e = estimate_known_rows(m, c.kind == CallKind::Radius ? CostClass::Radius : CostClass::Bbox, c.rows,
                                         f.limit >= 0 ? f.limit : (f.builds_tiles ? m.tile_max_rows : kNoLimit));
        return e.problem ? m.cost_max : e.cost;
    }
    switch (c.kind) {
        case CallKind::Radius: {
            Estimate e = estimate_radius(m, c.radius_m, f.limit);
            return e.problem ? m.cost_max : e.cost;
        }
        case CallKind::Bbox: {
            Estimate e = estimate_bbox(m, c.area_km2, f.limit);
            return e.problem ? m.cost_max : e.cost;
        }
        case CallKind::Tile: {
            if (filter_rows >= 0) {
                // The tile's own box filter knows, from the column's statistics, what the tile holds.
                Estimate e = estimate_known_rows(m, CostClass::Tile, filter_rows, f.limit >= 0 ? f.limit : m.tile_max_rows);
                return e.problem ? m.cost_max : e.cost;
            }
            if (c.zoom >= 0) {
                Estimate e = estimate_tile(m, c.zoom, f.limit);
                return e.problem ? m.cost_max : e.cost;
            }
            // Priced by its bounds: a tile of that area, rows capped like a tile.
            const double cap = f.limit >= 0 ? f.limit : m.tile_max_rows;
            Estimate e = estimate_bbox(m, c.area_km2, cap);
            if (e.problem) return m.cost_max;
            const ClassWeights& w = m.of(CostClass::Tile);
            return std::min(m.cost_max, w.fixed + w.per_row * e.rows);
        }
    }
    return m.cost_max;
}

// A tile's envelope with and without a margin, or its clip box and its
// envelope: one tile, whose search the envelopes only frame.
bool same_tile(const Box& a, const Box& b) noexcept {
    if (a.srid != b.srid) return false;
    const double cx = (b.xmin + b.xmax) / 2, cy = (b.ymin + b.ymax) / 2;
    const double ax = (a.xmin + a.xmax) / 2, ay = (a.ymin + a.ymax) / 2;
    return (a.xmin <= cx && cx <= a.xmax && a.ymin <= cy && cy <= a.ymax) ||
           (b.xmin <= ax && ax <= b.xmax && b.ymin <= ay && ay <= b.ymax);
}

bool merges(const PricedCall& first, const PricedCall& c) noexcept {
    if (first.kind == CallKind::Tile && c.kind == CallKind::Tile) return same_tile(first.box, c.box);
    return same_box(first.box, c.box);
}

}  // namespace

bool same_box(const Box& a, const Box& b) noexcept {
    return a.srid == b.srid && close(a.xmin, b.xmin) && close(a.ymin, b.ymin) && close(a.xmax, b.xmax) &&
           close(a.ymax, b.ymax);
}

StatementPrice price_statement(const CostModel& m, PricedCall* calls, std::size_t n, StatementFacts facts) {
    StatementPrice out{0.0, false, 0};
    // In a tile statement, the largest statistics estimate among its box
    // filters prices its tile terms.
    double filter_rows = -1;
    for (std::size_t i = 0; i < n; i++)
        if (facts.builds_tiles && calls[i].kind == CallKind::Bbox && calls[i].known)
            filter_rows = std::max(filter_rows, calls[i].rows);
    for (std::size_t i = 0; i < n; i++) {
        PricedCall& c = calls[i];
        c.same_as = -1;
        c.folded_into_tile = facts.builds_tiles && c.kind == CallKind::Bbox;
        c.cost = c.folded_into_tile ? 0.0 : price_one(m, c, facts, filter_rows);
    }
    // Same box (or same tile) twice: keep the dearer appearance, zero the other.
    for (std::size_t i = 0; i < n; i++) {
        PricedCall& c = calls[i];
        if (c.folded_into_tile || !c.has_box || !c.known) continue;
        for (std::size_t j = 0; j < i; j++) {
            PricedCall& first = calls[j];
            if (first.folded_into_tile || !first.has_box || !first.known || first.same_as >= 0) continue;
            if (!merges(first, c)) continue;
            // A price made from the table's statistics beats one from area ×
            // density; between equals, the dearer.
            const bool c_informed = c.rows >= 0, first_informed = first.rows >= 0;
            if ((c_informed && !first_informed) || (c_informed == first_informed && c.cost > first.cost)) {
                first.cost = c.cost;
                first.rows = c.rows;
            }
            c.cost = 0.0;
            c.same_as = static_cast<int>(j);
            break;
        }
    }
    for (std::size_t i = 0; i < n; i++) {
        out.total += calls[i].cost;
        if (calls[i].cost > 0) out.charged_calls++;
    }
    if (out.total > m.cost_max) {
        out.total = m.cost_max;
        out.clamped = true;
    }
    return out;
}

}  // namespace ot::core
