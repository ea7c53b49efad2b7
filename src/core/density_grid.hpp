// A multi-resolution count of where a layer's rows are: the density source
// that resolves small dense areas (a 10 m radius in a city centre), where
// column statistics fall back to a flat guess.
//
// A quadtree over an extent, flattened: level l has 2^l × 2^l cells; a cell is
// stored when its parent holds more than `threshold` rows (level 0 always), so
// dense areas are resolved down to the finest level and sparse ones stop early
// (rows are taken as uniform inside a leaf). Serialised into one flat byte
// string (stored by the extension in a table, read without copying).
//
// Each cell stores, besides its key and row count, the index of its first
// child (a box query descends the quadtree without searching: a cell wholly
// inside the box adds its count, only the cells on the box's edge are split)
// and the number of distinct heap blocks its rows lie on (how clustered the
// rows are on disk: the pages a search of the cell reads). Format 5: 16 bytes
// a cell, its fields side by side. Older blobs (formats 2 to 4) are read
// after upgrade_density_grid; the functions below take format 5 only.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace ot::core {

inline constexpr int kDensityMaxLevels = 24;

struct DensityExtent {
    double xmin, ymin, xmax, ymax;
};

// The blob for n rows whose boxes are centred at (x[i], y[i]) over extent;
// points outside are clamped to its edge. mean_w/mean_h: the rows' mean box
// size (0 for points), kept for searches of a row's neighbours; probe_w/
// probe_h: their area-weighted size (density_probe_size). Throws
// std::bad_alloc only. blocks (may be null: unknown): each row's heap block.
// max_cells > 0 bounds the cells stored: the threshold doubles until the
// grid fits (the coarsest levels are always kept).
std::vector<unsigned char> build_density_grid(const double* x, const double* y, std::size_t n, DensityExtent extent,
                                              int levels = 20, int threshold = 32, double mean_w = 0,
                                              double mean_h = 0, double probe_w = 0, double probe_h = 0,
                                              const std::uint32_t* blocks = nullptr, std::size_t max_cells = 0);

// Bytes a format-5 grid of `cells` cells takes (header included).
std::size_t density_grid_bytes(std::size_t cells) noexcept;

// The bytes of the format-5 rewrite of a blob of an older format (2 to 4):
// 0 when it is not such a grid (a format-5 one included).
std::size_t density_grid_upgraded_bytes(const unsigned char* blob, std::size_t len) noexcept;
// Writes that rewrite into out (out_len: density_grid_upgraded_bytes of it),
// which then gives the answers the old blob gave. False when blob is not an
// older grid or out_len differs. No allocation.
bool upgrade_density_grid(const unsigned char* blob, std::size_t len, unsigned char* out,
                          std::size_t out_len) noexcept;

// Rows of a w × h box centred on a dense spot of the layer: on the cell (of
// about half the box's size) where the densest (1 - q) share of the rows
// ends, densest cells first. For probes whose centres are unknown but tend to
// be where things are (LATERAL searches around a city's centre): q = 0.9
// assumes they land where the densest tenth of the rows are.
double density_rows_around_dense(const unsigned char* blob, std::size_t len, double w, double h, double q) noexcept;

// Rows whose boxes meet the box of a probe w × h placed where the layer's
// rows are (a spatial join's inner side probed per outer row): the rows
// around within the probe grown by the layer's mean box size.
double density_rows_probed(const unsigned char* blob, std::size_t len, double w, double h) noexcept;

// Rows of the grid whose boxes meet the box (their centres within it grown by
// half the rows' mean size; fractional cells pro rata); negative when the
// blob is not a density grid. No allocation, no exception.
double density_rows(const unsigned char* blob, std::size_t len, double xmin, double ymin, double xmax, double ymax) noexcept;

// density_rows, and the distinct heap blocks those rows lie on (*pages;
// negative when the grid has no block counts): a cell inside the box adds
// its blocks, a share f of a cell with n rows on B blocks adds
// B·(1 − (1 − f)^(n/B)) (its rows at random over its own blocks).
double density_rows_pages(const unsigned char* blob, std::size_t len, double xmin, double ymin, double xmax,
                          double ymax, double* pages) noexcept;
namespace grid {
struct View;  // density_grid_format.hpp
}
// The same, on a grid opened once with grid::open: a caller that asks one grid
// statement after statement keeps the View and does not read the header again.
double density_rows_pages(const grid::View& v, double xmin, double ymin, double xmax, double ymax,
                          double* pages) noexcept;

// A direct index into a grid's top levels, kept beside an opened View by a
// caller that asks it box after box (View::jump): a box query then starts at
// the cells it spans on the deepest indexed level, not at the root. Entries
// it takes (at most 21 845, 4 bytes each), and filling them: false when the
// View is not a grid this library wrote (then leave View::jump null).
std::size_t density_jump_entries(const grid::View& v) noexcept;
bool density_jump_fill(const grid::View& v, std::uint32_t* out) noexcept;

// Heap blocks that k of r rows lying on B blocks are on, read in no
// particular order: B·(1 − (1 − k/r)^(r/B)) (each row a block of its own at
// first, all B once every row is read); beyond r, B·k/r.
double pages_of_rows(double k, double r, double B) noexcept;

// Rows expected in a w × h box centred where the layer's own rows are (a
// random row's neighbourhood: Σ n_c² / N × box/cell area): for searches whose
// centre is known only during execution (the inner side of a nested loop).
double density_rows_around(const unsigned char* blob, std::size_t len, double w, double h) noexcept;

// The rows' mean box size (false when the blob is not a grid).
bool density_mean_size(const unsigned char* blob, std::size_t len, double* w, double* h) noexcept;
// The rows' area-weighted box size (probe_w/probe_h given to the build, at
// least the mean): the box a join probe by one of these rows covers, on
// average over the rows such probes read.
bool density_probe_size(const unsigned char* blob, std::size_t len, double* w, double* h) noexcept;

// Total rows and stored cells of a blob (negative when it is not a grid).
double density_total(const unsigned char* blob, std::size_t len) noexcept;
long density_cells(const unsigned char* blob, std::size_t len) noexcept;

}  // namespace ot::core
