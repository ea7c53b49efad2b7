// Rows read by each scan node of a plan: what its index condition meets (the
// density grid, else PostGIS's statistics, else the plan's estimate), the
// whole relation for a sequential or whole-index scan, stopped early by a
// LIMIT only as far as the scan streams.
#include "ext/plan_pricing_walk.hpp"

#include <algorithm>
#include <cmath>

#include "ext/density_grid.hpp"

namespace ot::ext::plan {
namespace {

// Rows read, counted under the source of the scan's row count.
void add_scan_rows(PlanCtx* c, double rows) {
    c->f.rows[static_cast<int>(core::CostClass::Scan)] += rows;
    c->rows_by[static_cast<int>(c->source)] += rows;
}

void add_scan(PlanCtx* c, double read, double loops, const ExprFacts& qf) {
    // A scan starts once; a nested loop's inner scan is probed again per outer row (class join, fixed).
    c->f.calls[static_cast<int>(core::CostClass::Scan)] += 1;
    if (loops > 1) c->f.calls[static_cast<int>(core::CostClass::Join)] += loops;
    add_scan_rows(c, read * loops);
    if (qf.geog_pred)
        c->f.rows[static_cast<int>(core::CostClass::Distance)] += read * loops;
    else if (qf.geom_pred)  // a distance to a constant (ST_DWithin to a point) is a fifth of a
                            // geography test, placing a geometry in a constant polygon (ST_Intersects,
                            // ST_Contains, ST_Within of a search box) half of one; a test against
                            // another row's geometry a full one. Measured in CPU time over the ~40 000
                            // rows of one box, against the box's && alone: a spheroid ST_DWithin 1.06 µs
                            // a row, ST_Intersects 0.64, ST_Contains 0.61, ST_Within 0.38, a geometry
                            // ST_DWithin 0.23 (all at a fifth before: ST_Contains(envelope, geom) sat at
                            // 1.4-2.0× the workload's median under-pricing, ST_DWithin at 1.0-1.3).
        c->f.rows[static_cast<int>(core::CostClass::Distance)] +=
            (qf.join_pred ? 1.0 : qf.geom_topo ? 0.5 : 0.2) * read * loops;
    else if (qf.box_filter)  // a box test in a filter (a sequential scan's geometry_overlaps()) is no
                             // index's recheck: every row read is fetched and tested, 1.4 µs a row
                             // measured over 500 000 points against 0.3 µs priced by the scan alone
        c->f.rows[static_cast<int>(core::CostClass::Distance)] += 0.3 * read * loops;
}

// A LIMIT stops a filtered scan in storage (or key) order after its first
// matches; spatial rows are usually stored clustered, so those lie on average
// half-way through what does not match.
void add_clustered_skip(PlanCtx* c, Plan* p, double rows, double out_full, double cap, double loops) {
    if (p->qual == NIL || cap < 0 || !(out_full > cap) || !(rows > 0)) return;
    const double skipped = (1.0 - out_full / rows) * rows / 2;
    add_scan_rows(c, std::min(skipped, rows - rows * cap / out_full) * loops);
}

// Heap pages an index (or bitmap) scan reading `rows` fetches, each loop. Where the scan searched
// a box of a column whose grid counts heap blocks, those: rows stored near one another (loaded city
// by city) share pages, so a dense area reads dozens of rows a page; a sparse one about a page a
// row. Otherwise rows placed at random over the relation's pages, P·(1 − e^(−rows/P)) (Cardenas),
// which errs high in dense clustered areas (5 876 rows: ~4 200 pages estimated, 309 read).
void add_heap_pages(PlanCtx* c, Oid relid, double rows, double loops, const Search* s) {
    if (!(rows > 0)) return;
    double fetched = -1;
    if (s != nullptr && OidIsValid(relid))
        fetched = density_grid_pages(relid, s->attnum, s->box.xmin, s->box.ymin, s->box.xmax, s->box.ymax, rows);
    const double pages = OidIsValid(relid) ? relpages_of(relid) : -1;
    if (fetched < 0) fetched = pages > 0 ? pages * -std::expm1(-rows / pages) : rows;
    if (pages > 0) fetched = std::min(fetched, pages);
    c->f.rows[static_cast<int>(core::CostClass::Page)] += fetched * loops;
}

void remember_box(PlanCtx* c, Oid relid, const Search& s) {
    c->have_last_box = true;
    c->last_box = s.box;
    c->last_rel = relid;
    c->last_att = s.attnum;
}

}  // namespace

// A scan that reads `read_full` rows (or the whole relation) to emit `out_full`.
double price_scan(PlanCtx* c, double read_full, double out_full, double loops, double cap, const ExprFacts& qf) {
    double read = read_full, out = out_full;
    if (cap >= 0 && out_full > cap) {
        read = read_full * cap / out_full;
        out = cap;
    }
    add_scan(c, read, loops, qf);
    return out;
}

double visit_seq_scan(PlanCtx* c, Plan* p, double loops, double cap, double par, const ExprFacts& qf,
                      double* processed) {
    const Oid relid = scan_relation(c, p);
    Search s{};
    double filtered = -1;  // what a box in the filter keeps, by the grid
    if (OidIsValid(relid) && box_search(c, p->qual, reinterpret_cast<Scan*>(p)->scanrelid, &s)) {
        remember_box(c, relid, s);
        filtered = search_rows(c, relid, s, false);
    }
    double rows = OidIsValid(relid) ? reltuples_of(relid) : -1;
    if (rows < 0) rows = planned(p, par);
    const double out_full = std::min(rows, filtered >= 0 ? filtered : planned(p, par));
    c->source = core::RowsSource::Plan;  // the table's size
    const double out = price_scan(c, rows, out_full, loops, cap, qf);
    add_clustered_skip(c, p, rows, out_full, cap, loops);
    *processed = rows;
    return out;
}

double visit_index_scan(PlanCtx* c, Plan* p, double loops, double cap, double par, const ExprFacts& qf,
                        double* processed) {
    const Oid relid = scan_relation(c, p);
    const double read_before = c->f.rows[static_cast<int>(core::CostClass::Scan)];
    const Index rti = reinterpret_cast<Scan*>(p)->scanrelid;
    List* quals = nodeTag(p) == T_IndexScan        ? reinterpret_cast<IndexScan*>(p)->indexqualorig
                  : nodeTag(p) == T_BitmapHeapScan ? reinterpret_cast<BitmapHeapScan*>(p)->bitmapqualorig
                                                   : NIL;
    // The recheck may leave out a condition the filter implies (ST_Contains's @): read the bitmap's own.
    if (nodeTag(p) == T_BitmapHeapScan && p->lefttree != nullptr && IsA(p->lefttree, BitmapIndexScan))
        quals = list_concat_copy(quals, reinterpret_cast<BitmapIndexScan*>(p->lefttree)->indexqualorig);
    double rows = -1;
    core::RowsSource source = core::RowsSource::Grid;
    Search s{};
    AttrNumber join_att;
    const bool joined = OidIsValid(relid) && join_search(c, quals, rti, &join_att);
    const bool found =
        OidIsValid(relid) && (geography_radius_search(c, p->qual, rti, &s) || box_search(c, quals, rti, &s));
    if (joined) {
        // The inner side of a spatial join: over all its loops it reads about the rows in the
        // region searched (its own box, else the outer side's), as the outer rows tile it.
        const GisBox* region = found ? &s.box : c->have_join_box ? &c->join_box : nullptr;
        if (region != nullptr) {
            const double total =
                grid_rows(c->w, relid, join_att, region->xmin, region->ymin, region->xmax, region->ymax);
            if (total >= 0) rows = std::max(1.0, total / std::max(1.0, loops));
        }
        // Large boxes probed by small ones (districts by points): each probe meets the rows
        // around it grown by their mean size, wherever the region says otherwise. (Not the other
        // way round: a probe by a big outer box placed anywhere the inner rows are ignores how
        // sparse the searched region is; the region, grown by the outer rows' size, says it.)
        const double probed = density_grid_rows_probed(relid, join_att, 0, 0);
        if (probed >= 0) rows = std::max(rows, probed);
    } else if (found) {
        // PostGIS is asked when the plan's estimate is blind: a parameter (a generic plan), or an
        // index scan whose exact test (ST_DWithin, ST_Intersects…) the planner multiplied into the
        // box's selectivity a second time, so that its rows say ~10 for a box holding thousands.
        rows = search_rows(c, relid, s, s.from_param || (nodeTag(p) == T_IndexScan && (qf.geom_pred || qf.geog_pred)),
                           &source);
        remember_box(c, relid, s);
    } else if (OidIsValid(relid) && box_search(c, p->qual, rti, &s)) {
        remember_box(c, relid, s);  // a box in the filter still says where a join's outer rows are
    }
    AttrNumber att;
    double sw, sh;
    if (rows < 0 && OidIsValid(relid) && outer_centre_search(c, quals, p->qual, rti, &att, &sw, &sh)) {
        rows = density_grid_rows_around(relid, att, sw, sh);
        source = core::RowsSource::Grid;
        // No grid: the search's share of the column's extent (PostGIS's statistics), as if uniform.
        GisBox ext;
        const double n = reltuples_of(relid);
        if (rows < 0 && n > 0 && estimated_extent(relid, att, &ext)) {
            const double area = (ext.xmax - ext.xmin) * (ext.ymax - ext.ymin);
            if (area > 0) rows = std::max(n * std::min(1.0, sw * sh / area), planned(p, par));
            source = core::RowsSource::Statistics;
        }
    }
    if (rows < 0) source = core::RowsSource::Plan;
    // The bitmap's own estimate is the index condition's; what the heap returns cannot exceed
    // what the bitmap held (PostGIS estimates ST_Contains's @ condition at a flat 100 rows).
    if (rows < 0 && nodeTag(p) == T_BitmapHeapScan && p->lefttree != nullptr)
        rows = std::max(planned(p->lefttree, par), planned(p, par));
    if (rows < 0 && nodeTag(p) == T_IndexScan && quals == NIL && OidIsValid(relid))
        rows = reltuples_of(relid);  // a whole index in order (KNN, ORDER BY): until the consumer stops
    if (rows < 0) rows = planned(p, par);
    // What the filter leaves: the recheck of the searched box keeps most; a box the index
    // does not search (an ordered scan over another key) keeps what the grid says; otherwise
    // the planner's share.
    Search fs{};
    double filtered = -1;
    if (!found && !joined && OidIsValid(relid) && box_search(c, p->qual, rti, &fs))
        filtered = search_rows(c, relid, fs, false);
    double out_full = p->qual == NIL                       ? rows
                      : filtered >= 0                      ? std::min(rows, filtered)
                      : found && (qf.geog_pred || qf.geom_pred) ? 0.8 * rows
                                                           : std::min(rows, planned(p, par));
    c->source = source;
    const double out = price_scan(c, rows, out_full, loops, cap, qf);
    if (!found && !joined && quals == NIL) add_clustered_skip(c, p, rows, out_full, cap, loops);
    // A bitmap is built whole before the first row, whatever stops the heap scan early.
    if (nodeTag(p) == T_BitmapHeapScan && out < out_full)
        add_scan_rows(c, (rows - rows * out / std::max(out_full, 1.0)) * loops);
    // An ordered (KNN) scan computes a distance and keeps a queue per row read.
    if (nodeTag(p) == T_IndexScan && reinterpret_cast<IndexScan*>(p)->indexorderby != NIL)
        c->f.rows[static_cast<int>(core::CostClass::Distance)] += std::min(rows, out * rows / std::max(out_full, 1.0)) * loops;
    add_heap_pages(c, relid, (c->f.rows[static_cast<int>(core::CostClass::Scan)] - read_before) / std::max(1.0, loops),
                   loops, found && !joined && source == core::RowsSource::Grid ? &s : nullptr);
    *processed = rows;
    return out;
}

}  // namespace ot::ext::plan
