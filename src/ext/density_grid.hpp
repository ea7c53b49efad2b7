// Density grids per indexed geometry/geography column: built by
// throttle_density_build(regclass, name) into the table throttle_density,
// read by the pricing walk (cached per backend, dropped on a relcache
// invalidation of the table the grid describes).
#pragma once
#include "ext/pg.hpp"

extern "C" {
#include "access/attnum.h"
}

struct PlannedStmt;

namespace ot::ext {

// Rows of relid.attnum inside the box (in the column's coordinates: lon/lat
// degrees for geography), or negative when the column has no grid.
double density_grid_rows(Oid relid, AttrNumber attnum, double xmin, double ymin, double xmax, double ymax);

// Heap blocks an index scan reading rows_read of the box's rows fetches
// (core::pages_of_rows over the blocks the grid counts under the box), or
// negative when the grid has no block counts (built before format 4, or not
// a table). The last box asked is remembered: asking rows then pages of one
// box descends the grid once.
double density_grid_pages(Oid relid, AttrNumber attnum, double xmin, double ymin, double xmax, double ymax,
                          double rows_read);

// Rows expected in a w × h box centred where the densest tenth of the
// column's rows are (core::density_rows_around_dense, q = 0.9), or negative
// without a grid.
double density_grid_rows_around(Oid relid, AttrNumber attnum, double w, double h);

// Rows of relid.attnum a probe of size w × h meets, placed where the column's
// rows are (core::density_rows_probed); negative without a grid.
double density_grid_rows_probed(Oid relid, AttrNumber attnum, double w, double h);

// The mean box size of relid.attnum's rows, false without a grid.
bool density_grid_mean_size(Oid relid, AttrNumber attnum, double* w, double* h);
// Their area-weighted box size (core::density_probe_size), false without a grid.
bool density_grid_probe_size(Oid relid, AttrNumber attnum, double* w, double* h);

// ogc_throttle.density_on_analyze and the utility hook behind it (density_analyze.cpp):
// an explicit ANALYZE rebuilds the grids of the tables it analyses. Preloaded,
// there is no hook of its own: the metering's utility hook calls
// density_after_utility after every utility statement.
void install_density_analyze_hook();
void density_after_utility(const PlannedStmt* pstmt);

}  // namespace ot::ext
