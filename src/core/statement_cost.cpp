#include "core/statement_cost.hpp"

#include <algorithm>
#include <cmath>

namespace ot::core {
namespace {

bool close(double a, double b) noexcept {
    return a == b || std::fabs(a - b) <= 1e-9 * std::max(std::fabs(a), std::fabs(b));
}

// One call as features: its class's fixed term once and its rows, or, when
// an argument is unknown, one unpriced (cost_max) term.
struct Term {
    CostClass cls;
    double rows;
    bool unpriced;
};

double cost_of(const CostModel& m, Term t) noexcept {
    if (t.unpriced) return m.cost_max;
    const ClassWeights& w = m.of(t.cls);
    return w.fixed + (w.per_row == 0 ? 0.0 : w.per_row * t.rows);
}

// Rows or fail: a problem with the input prices the call at cost_max.
Term term_of(CostClass c, const Estimate& e) noexcept { return e.problem ? Term{c, 0, true} : Term{c, e.rows, false}; }

Term price_one(const CostModel& m, const PricedCall& c, const StatementFacts& f, double filter_rows) noexcept {
    const CostClass cls = c.kind == CallKind::Radius ? CostClass::Radius
                          : c.kind == CallKind::Bbox ? CostClass::Bbox
                          : c.kind == CallKind::Tile ? CostClass::Tile
                                                     : CostClass::Scan;
    if (!c.known) return {cls, 0, true};
    if (c.kind == CallKind::Plan) return {CostClass::Scan, 0, false};  // its terms are StatementFacts::plan
    if (c.rows >= 0 && c.kind != CallKind::Tile)
        return term_of(cls, estimate_known_rows(m, cls, c.rows,
                                                f.limit >= 0 ? f.limit : (f.builds_tiles ? m.tile_max_rows : kNoLimit)));
    switch (c.kind) {
        case CallKind::Radius: return term_of(cls, estimate_radius(m, c.radius_m, f.limit));
        case CallKind::Bbox: return term_of(cls, estimate_bbox(m, c.area_km2, f.limit));
        case CallKind::Plan: return {cls, 0, false};
        case CallKind::Tile: {
            if (filter_rows >= 0)  // the tile's own box filter knows, from the column's statistics, what the tile holds
                return term_of(cls, estimate_known_rows(m, cls, filter_rows, f.limit >= 0 ? f.limit : m.tile_max_rows));
            if (c.zoom >= 0) return term_of(cls, estimate_tile(m, c.zoom, f.limit));
            // Priced by its bounds: a tile of that area, rows capped like a tile.
            return term_of(cls, estimate_bbox(m, c.area_km2, f.limit >= 0 ? f.limit : m.tile_max_rows));
        }
    }
    return {cls, 0, true};
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

double price_of(const CostModel& m, const PlanFeatures& f) noexcept {
    double total = 0;
    for (int i = 0; i < kCostClasses; i++) {
        const ClassWeights& w = m.weights[i];
        if (w.fixed != 0) total += w.fixed * f.calls[i];
        if (w.per_row != 0) total += w.per_row * f.rows[i];
    }
    if (f.unpriced > 0) total += m.cost_max * f.unpriced;
    return total;
}

void add_features(PlanFeatures& into, const PlanFeatures& f) noexcept {
    for (int i = 0; i < kCostClasses; i++) {
        into.calls[i] += f.calls[i];
        into.rows[i] += f.rows[i];
    }
    into.unpriced += f.unpriced;
}

StatementPrice price_statement(const CostModel& m, PricedCall* calls, std::size_t n, const StatementFacts& facts) {
    StatementPrice out{0.0, false, 0, facts.plan};
    // In a tile statement, the largest statistics estimate among its box
    // filters prices its tile terms.
    double filter_rows = -1;
    for (std::size_t i = 0; i < n; i++)
        if (facts.builds_tiles && calls[i].kind == CallKind::Bbox && calls[i].known)
            filter_rows = std::max(filter_rows, calls[i].rows);
    // The term each call stands for; a call merged into another keeps none.
    Term terms_small[16];
    Term* terms = n <= 16 ? terms_small : new Term[n];
    // With the plan priced as a whole, its scans carry the rows: the calls
    // keep only their fixed (per request) terms.
    bool plan_wide = false;
    for (std::size_t i = 0; i < n; i++) plan_wide |= calls[i].kind == CallKind::Plan;
    for (std::size_t i = 0; i < n; i++) {
        PricedCall& c = calls[i];
        c.same_as = -1;
        c.folded_into_tile = facts.builds_tiles && c.kind == CallKind::Bbox;
        terms[i] = c.folded_into_tile ? Term{CostClass::Bbox, 0, false} : price_one(m, c, facts, filter_rows);
        if (plan_wide) terms[i].rows = 0;
        c.cost = c.folded_into_tile            ? 0.0
                 : c.kind == CallKind::Plan ? std::min(m.cost_max, price_of(m, facts.plan))
                                            : std::min(m.cost_max, cost_of(m, terms[i]));
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
                terms[j] = terms[i];
            }
            c.cost = 0.0;
            c.same_as = static_cast<int>(j);
            break;
        }
    }
    for (std::size_t i = 0; i < n; i++) {
        const PricedCall& c = calls[i];
        if (c.folded_into_tile || c.same_as >= 0) continue;
        if (c.kind == CallKind::Plan) {  // already in out.features (facts.plan)
            if (c.cost > 0) out.charged_calls++;
            continue;
        }
        const Term& t = terms[i];
        if (t.unpriced) {
            out.features.unpriced += 1;
        } else {
            out.features.calls[static_cast<int>(t.cls)] += 1;
            out.features.rows[static_cast<int>(t.cls)] += t.rows;
        }
        if (c.cost > 0) out.charged_calls++;
    }
    if (terms != terms_small) delete[] terms;
    out.total = price_of(m, out.features);
    if (!(out.total <= m.cost_max)) {  // NaN too
        out.total = m.cost_max;
        out.clamped = true;
    }
    return out;
}

}  // namespace ot::core
