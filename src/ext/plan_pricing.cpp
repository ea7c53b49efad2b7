#include "ext/plan_pricing.hpp"

#include "ext/plan_pricing_walk.hpp"
#include "ext/settings.hpp"

extern "C" {
#include "lib/stringinfo.h"
#include "utils/syscache.h"
}

namespace ot::ext {
namespace {

const char* rows_source_name(core::RowsSource s) {
    switch (s) {
        case core::RowsSource::Plan: return "the planner's estimate";
        case core::RowsSource::Statistics: return "PostGIS's statistics";
        case core::RowsSource::Grid: return "the density grid";
    }
    return "?";
}

// Where the scans' row counts came from: " (density grid)", or each source's
// share when several counted: " (density grid ~900, planner's estimates ~40)".
void append_rows_by(StringInfo s, const core::PricedCall& c) {
    static const char* const kName[core::kRowsSources] = {"planner's estimates", "PostGIS's statistics",
                                                          "density grid"};
    int n = 0;
    for (double r : c.scan_rows_by) n += r >= 0.5;
    const char* sep = " (";
    for (int i = core::kRowsSources - 1; i >= 0; i--) {
        if (!(c.scan_rows_by[i] >= 0.5)) continue;
        appendStringInfo(s, "%s%s", sep, kName[i]);
        if (n > 1) appendStringInfo(s, " ~%.0f", c.scan_rows_by[i]);
        sep = ", ";
    }
    if (n > 0) appendStringInfoChar(s, ')');
}

}  // namespace

// The planner lists every non-built-in function a plan calls (operators'
// and aggregates' too) among its invalidation items, to replan when one
// changes. No such item: no PostGIS call, and no walk needed.
bool calls_extension_functions(const PlannedStmt* stmt) {
    ListCell* lc;
    foreach (lc, stmt->invalItems)
        if (lfirst_node(PlanInvalItem, lc)->cacheId == PROCOID) return true;
    return false;
}

StatementPricing price_planned_statement(PlannedStmt* stmt, ParamListInfo params) {
    if (!calls_extension_functions(stmt)) return {nullptr, 0, {false, core::kNoLimit, {}}, {}};
    // Not value-initialised: its memo arrays and kept facts (some kilobytes) are read only as far
    // as their counts say.
    plan::Walk w;
    plan::start_walk(&w, params, stmt->rtable);
    plan::walk_plan(stmt->planTree, &w);
    ListCell* lc;
    foreach (lc, stmt->subplans) plan::walk_plan(static_cast<Plan*>(lfirst(lc)), &w);
    // Plan-wide terms for every statement that uses PostGIS.
    core::PlanFeatures plan{};
    // A statement whose dear work is a function no call class recognises (ST_Area(ST_Buffer(…)) in
    // a filter, a user's function) is priced too, by what its functions declare they cost.
    double rows_by[core::kRowsSources];
    plan = plan::plan_features(stmt, &w, rows_by);
    if (w.saw_postgis || w.ncalls > 0 || w.saw_costly_function) {
        core::PricedCall* c = plan::add_call(&w, core::CallKind::Plan, GisRole::None);
        for (int i = 0; i < core::kRowsSources; i++) c->scan_rows_by[i] = rows_by[i];
        c->function = "plan";
        c->known = true;
        c->scans = plan.calls[static_cast<int>(core::CostClass::Scan)];
        c->probes = plan.calls[static_cast<int>(core::CostClass::Join)];
        c->workers = plan.calls[static_cast<int>(core::CostClass::Worker)];
        c->scan_rows = plan.rows[static_cast<int>(core::CostClass::Scan)];
        c->upper_rows = plan.rows[static_cast<int>(core::CostClass::Join)];
        c->encode_rows = plan.rows[static_cast<int>(core::CostClass::Encode)];
        c->output_rows = plan.rows[static_cast<int>(core::CostClass::Output)];
        c->predicate_rows = plan.rows[static_cast<int>(core::CostClass::Distance)];
        c->function_work = plan.rows[static_cast<int>(core::CostClass::Function)];
    }
    // A tile aggregate whose bounds could not be read is a tile of unknown size.
    if (w.asmvt) {
        bool have_tile = false;
        for (int i = 0; i < w.ncalls; i++) have_tile |= w.calls[i].kind == core::CallKind::Tile;
        if (!have_tile) plan::add_call(&w, core::CallKind::Tile, GisRole::AsMVT);
    }
    StatementPricing out{w.calls, w.ncalls, {w.builds_tiles, w.limit, plan}, {}};
    if (w.ncalls > 0) out.price = core::price_statement(current_cost_model(), w.calls, w.ncalls, out.facts);
    return out;
}

char* describe_call(const core::PricedCall& c, int index) {
    StringInfoData s;
    initStringInfo(&s);
    appendStringInfo(&s, "#%d %s", index + 1, c.function);
    if (!c.known) {
        appendStringInfoString(&s, " (argument known only during execution)");
    } else {
        switch (c.kind) {
            case core::CallKind::Radius: appendStringInfo(&s, " radius %g m", c.radius_m); break;
            case core::CallKind::Bbox: appendStringInfo(&s, " box %g km²", c.area_km2); break;
            case core::CallKind::Plan:
                appendStringInfo(&s, ": %g scan(s) reading ~%.0f rows", c.scans, c.scan_rows);
                append_rows_by(&s, c);
                if (c.probes > 0) appendStringInfo(&s, " in ~%.0f nested-loop probes", c.probes);
                if (c.upper_rows > 0) appendStringInfo(&s, ", ~%.0f rows through joins/sorts/aggregates", c.upper_rows);
                if (c.encode_rows > 0) appendStringInfo(&s, ", ~%.0f rows encoded", c.encode_rows);
                if (c.predicate_rows > 0) appendStringInfo(&s, ", ~%.0f exact-predicate rows", c.predicate_rows);
                if (c.workers > 0) appendStringInfo(&s, ", %g parallel worker(s)", c.workers);
                if (c.function_work > 0) appendStringInfo(&s, ", ~%.0f function cost units", c.function_work);
                if (c.output_rows > 0) appendStringInfo(&s, ", ~%.0f rows returned", c.output_rows);
                break;
            case core::CallKind::Tile:
                if (c.zoom >= 0)
                    appendStringInfo(&s, " zoom %d", c.zoom);
                else
                    appendStringInfo(&s, " tile bounds %g km²", c.area_km2);
                break;
        }
    }
    if (c.known && c.rows >= 0 && c.kind != core::CallKind::Tile)
        appendStringInfo(&s, ", ~%.0f rows by %s", c.rows, rows_source_name(c.rows_source));
    if (c.folded_into_tile)
        appendStringInfoString(&s, ": part of the tile, not charged");
    else if (c.same_as >= 0)
        appendStringInfo(&s, ": same box as #%d", c.same_as + 1);
    else
        appendStringInfo(&s, ": %g", c.cost);
    return s.data;
}

char* describe_pricing(const StatementPricing& p) {
    StringInfoData s;
    initStringInfo(&s);
    for (int i = 0; i < p.ncalls; i++) {
        if (i > 0) appendStringInfoString(&s, "; ");
        appendStringInfoString(&s, describe_call(p.calls[i], i));
    }
    if (p.facts.limit >= 0) appendStringInfo(&s, "; rows capped at %g by LIMIT", p.facts.limit);
    if (p.price.clamped) appendStringInfoString(&s, "; total clamped at ogc_throttle.cost_max");
    return s.data;
}

}  // namespace ot::ext
