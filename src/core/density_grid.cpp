#include "core/density_grid.hpp"
#include "core/density_grid_format.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>

namespace ot::core {
using grid::View;
namespace {

// One box query: the box in units of the extent ([0, 1] each way), the level
// whose cells are priced pro rata, and what it found.
struct Query {
    double x0, y0, x1, y1;
    std::uint32_t target;
    bool pages;  // also count blocks
    double rows, blocks;
};

// Adds what the stored cell i at level l (cell (cx, cy), side s) holds inside the box: all of it when
// the box covers it; a share by area on the target level or at a leaf; else its children's.
void descend(const View& v, Query& q, std::uint32_t l, std::size_t i, std::uint32_t cx, std::uint32_t cy,
             double s) noexcept {
    const double ax = cx * s, ay = cy * s, bx = ax + s, by = ay + s;
    if (ax > q.x1 || ay > q.y1 || bx <= q.x0 || by <= q.y0) return;
    const grid::Cell cell = grid::cell_at(v.cells[l], i);
    const double n = cell.count;
    const double b = q.pages ? cell.blocks : 0;
    if (q.x0 <= ax && bx <= q.x1 && q.y0 <= ay && by <= q.y1) {
        q.rows += n, q.blocks += b;
        return;
    }
    std::size_t c0 = 0, c1 = 0;  // children
    if (l < q.target) {
        const std::size_t next = v.h.ncells[l + 1];
        c0 = cell.first_child;
        c1 = i + 1 < v.h.ncells[l] ? grid::cell_at(v.cells[l], i + 1).first_child : next;
        c1 = std::min(c1, next);
        // The children lie side by side, usually far from anything this statement has touched (the
        // grid sits in shared memory, the box is anywhere): ask for their line now, so that its miss
        // overlaps the tests below (four arrays took four lines in format 4). A hint only: nothing
        // read changes.
        if (c0 < c1) {
            __builtin_prefetch(v.cells[l + 1] + sizeof(grid::Cell) * c0);
            __builtin_prefetch(v.cells[l + 1] + sizeof(grid::Cell) * (c1 - 1));  // when they straddle two
        }
    }
    if (c0 >= c1) {  // the target level, or a leaf above it (rows uniform inside)
        const double fx = (std::min(q.x1, bx) - std::max(q.x0, ax)) / s;
        const double fy = (std::min(q.y1, by) - std::max(q.y0, ay)) / s;
        // A degenerate box (a point) still meets the rows of its cell's share.
        const double f = std::min(1.0, std::max(fx, 1e-9) * std::max(fy, 1e-9));
        q.rows += n * f;
        if (b > 0) q.blocks += b * -std::expm1(n / b * std::log1p(-f));
        return;
    }
    const double cs = s / 2;
    for (std::size_t c = c0; c < c1; c++) {
        const std::uint32_t k = grid::cell_at(v.cells[l + 1], c).key_lo;
        const std::uint32_t kx = 2 * cx + static_cast<std::uint32_t>(k & 1),
                            ky = 2 * cy + static_cast<std::uint32_t>((k >> 1) & 1);
        // The child's own first test, made here: most children of an edge cell lie outside the box,
        // and a call each to find that out was a third of the descent's instructions.
        const double kax = kx * cs, kay = ky * cs;
        if (kax > q.x1 || kay > q.y1 || kax + cs <= q.x0 || kay + cs <= q.y0) continue;
        descend(v, q, l + 1, c, kx, ky, cs);
    }
}

// The descent from the root, started at level S instead: the stored cells of
// the positions the box spans there (or the leaves above that cover them), in
// Morton order, which is the order the root's descent reaches them in (a leaf
// covering several positions once). The root's descent follows S dependent
// loads down to them, each a miss when the grid has gone cold in shared memory
// since the last statement: this is one load per position, all independent.
// S is at most three levels above the target: the box spans at most 64 target
// cells, so it cannot hold a whole cell of a coarser level, which the root's
// descent would have added at once (its distinct blocks are fewer than its
// children's summed). The same cells are added in the same order: the same
// rows and pages to the bit. False (nothing added) past 64 positions.
bool descend_from_jump(const View& v, Query& q) noexcept {
    const std::uint32_t S = std::min(v.jump_levels, q.target >= 3 ? q.target - 3 : 0);
    const double side = grid::pow2(static_cast<int>(S));
    const auto at = [&](double t) {
        return static_cast<std::uint32_t>(std::clamp(std::floor(t * side), 0.0, side - 1));
    };
    const std::uint32_t x0 = at(q.x0), x1 = at(q.x1), y0 = at(q.y0), y1 = at(q.y1);
    if (static_cast<std::uint64_t>(x1 - x0 + 1) * (y1 - y0 + 1) > 64) return false;
    struct Start {
        std::uint64_t key;
        std::uint32_t entry, cx, cy;
    } starts[64];
    int n = 0;
    const std::uint32_t* row = v.jump + grid::jump_offset(S);
    for (std::uint32_t cy = y0; cy <= y1; cy++)
        for (std::uint32_t cx = x0; cx <= x1; cx++) {
            const std::uint32_t e = row[(static_cast<std::size_t>(cy) << S) + cx];
            if (e == grid::kJumpNone) continue;
            const Start st{grid::morton(cx, cy), e, cx, cy};
            int j = n++;
            for (; j > 0 && starts[j - 1].key > st.key; j--) starts[j] = starts[j - 1];
            starts[j] = st;
        }
    for (int k = 0; k < n; k++) {
        const std::uint32_t e = starts[k].entry;
        if (k > 0 && starts[k - 1].entry == e) continue;  // the same leaf above S
        const std::uint32_t l = e >> 24, up = S - l;
        descend(v, q, l, e & 0xffffffu, starts[k].cx >> up, starts[k].cy >> up, grid::pow2(-static_cast<int>(l)));
    }
    return true;
}

// Cell i of level l has cells below it (else it is a leaf: rows uniform inside).
bool has_children(const View& v, std::uint32_t l, std::size_t i) noexcept {
    if (l >= v.h.levels) return false;
    const std::size_t next = v.h.ncells[l + 1];
    const std::size_t c0 = grid::cell_at(v.cells[l], i).first_child;
    const std::size_t c1 = i + 1 < v.h.ncells[l] ? grid::cell_at(v.cells[l], i + 1).first_child : next;
    return c0 < std::min(c1, next);
}

// Cells of level c the box [x0, x1] × [y0, y1] (extent units) spans.
double spanned(double x0, double y0, double x1, double y1, std::uint32_t c) noexcept {
    const double s = grid::pow2(static_cast<int>(c));
    return (std::floor(x1 * s) - std::floor(x0 * s) + 1) * (std::floor(y1 * s) - std::floor(y0 * s) + 1);
}

double query_box(const View& v, double xmin, double ymin, double xmax, double ymax, double* pages) noexcept {
    if (pages != nullptr) *pages = v.h.has_blocks ? 0 : -1;
    if (!(xmax >= xmin) || !(ymax >= ymin)) return 0;
    const grid::Header& h = v.h;
    // Rows are counted by their box's centre: one whose box meets the query
    // has its centre within the query grown by half the rows' mean size.
    xmin -= h.mean_w / 2, xmax += h.mean_w / 2;
    ymin -= h.mean_h / 2, ymax += h.mean_h / 2;
    xmin = std::max(xmin, h.xmin), ymin = std::max(ymin, h.ymin);
    xmax = std::min(xmax, h.xmax), ymax = std::min(ymax, h.ymax);
    if (xmax < xmin || ymax < ymin || h.ncells[0] == 0) return 0;
    const double W = h.xmax - h.xmin, H = h.ymax - h.ymin;
    Query q{(xmin - h.xmin) / W, (ymin - h.ymin) / H, (xmax - h.xmin) / W, (ymax - h.ymin) / H, 0,
            pages != nullptr && h.has_blocks != 0, 0, 0};
    // The finest level at which the box spans at most 64 cells (monotone in the level: start from
    // the box's size and step).
    const double big = std::max(q.x1 - q.x0, q.y1 - q.y0);
    std::uint32_t l = big > 0 ? static_cast<std::uint32_t>(std::clamp(2 - std::ilogb(big), 0, static_cast<int>(h.levels)))
                              : h.levels;
    while (l > 0 && spanned(q.x0, q.y0, q.x1, q.y1, l) > 64) l--;
    while (l < h.levels && spanned(q.x0, q.y0, q.x1, q.y1, l + 1) <= 64) l++;
    q.target = l;
    if (v.jump == nullptr || !descend_from_jump(v, q)) descend(v, q, 0, 0, 0, 0, 1.0);
    // Cells of the edge share blocks the sum counts twice: never more than the rows at random over
    // all the layer's blocks (the root cell's) would touch.
    if (pages != nullptr && q.pages)
        *pages = std::min(q.blocks, pages_of_rows(q.rows, h.total, grid::cell_at(v.cells[0], 0).blocks));
    return q.rows;
}

}  // namespace

double density_rows(const unsigned char* blob, std::size_t len, double xmin, double ymin, double xmax,
                    double ymax) noexcept {
    View v;
    if (!grid::open(blob, len, &v)) return -1;
    return query_box(v, xmin, ymin, xmax, ymax, nullptr);
}

double density_rows_pages(const unsigned char* blob, std::size_t len, double xmin, double ymin, double xmax,
                          double ymax, double* pages) noexcept {
    View v;
    *pages = -1;
    if (!grid::open(blob, len, &v)) return -1;
    return query_box(v, xmin, ymin, xmax, ymax, pages);
}

double density_rows_pages(const View& v, double xmin, double ymin, double xmax, double ymax, double* pages) noexcept {
    return query_box(v, xmin, ymin, xmax, ymax, pages);
}

std::size_t density_jump_entries(const grid::View& v) noexcept {
    return grid::jump_offset(std::min(v.h.levels, grid::kJumpMaxLevels) + 1);
}

bool density_jump_fill(const grid::View& v, std::uint32_t* out) noexcept {
    const std::uint32_t J = std::min(v.h.levels, grid::kJumpMaxLevels);
    for (std::uint32_t l = 0; l <= J; l++)
        if (v.h.ncells[l] > (std::size_t{1} << (2 * l))) return false;  // not a grid this library wrote
    std::fill(out, out + density_jump_entries(v), grid::kJumpNone);
    for (std::uint32_t l = 0; l <= J; l++) {
        std::uint32_t* row = out + grid::jump_offset(l);
        if (l > 0) {
            // Below a leaf: that leaf. Below a cell with children: none until a stored child says otherwise.
            const std::uint32_t* up = out + grid::jump_offset(l - 1);
            for (std::uint32_t cy = 0; cy < (1u << l); cy++)
                for (std::uint32_t cx = 0; cx < (1u << l); cx++) {
                    const std::uint32_t p = up[(static_cast<std::size_t>(cy >> 1) << (l - 1)) + (cx >> 1)];
                    if (p != grid::kJumpNone && !has_children(v, p >> 24, p & 0xffffffu))
                        row[(static_cast<std::size_t>(cy) << l) + cx] = p;
                }
        }
        for (std::uint32_t i = 0; i < v.h.ncells[l]; i++) {
            const std::uint64_t key = grid::key_of(v, l, i);
            const std::uint32_t cx = grid::compact(key), cy = grid::compact(key >> 1);
            if (cx >= (1u << l) || cy >= (1u << l)) return false;
            row[(static_cast<std::size_t>(cy) << l) + cx] = (l << 24) | i;
        }
    }
    return true;
}

double pages_of_rows(double k, double r, double B) noexcept {
    if (!(B > 0) || !(k > 0)) return 0;
    if (!(r > k)) return r > 0 ? B * k / r : B;
    return B * -std::expm1(r / B * std::log1p(-k / r));
}

namespace {

// The finest level whose cells are at least a w × h box, and the box's share of such a cell.
std::uint32_t level_for(const grid::Header& hd, double w, double h, double* frac) noexcept {
    const double W = hd.xmax - hd.xmin, H = hd.ymax - hd.ymin;
    std::uint32_t l = 0;
    while (l < hd.levels && W / grid::pow2(static_cast<int>(l + 1)) >= w &&
           H / grid::pow2(static_cast<int>(l + 1)) >= h)
        l++;
    const double cell_area = (W / grid::pow2(static_cast<int>(l))) * (H / grid::pow2(static_cast<int>(l)));
    *frac = std::min(1.0, std::max(w, 0.0) * std::max(h, 0.0) / cell_area);
    return l;
}

// Calls f(rows per level-l cell, rows the stored cell holds) for each stored
// cell that stands for level l: itself, or a leaf above it spread evenly.
template <class F>
void for_each_cell_at(const View& v, std::uint32_t l, F f) noexcept {
    for (std::uint32_t la = 0; la <= l; la++) {
        for (std::uint32_t i = 0; i < v.h.ncells[la]; i++) {
            const std::uint32_t c = grid::count_at(v.cells[la], i);
            if (la == l)
                f(static_cast<double>(c), static_cast<double>(c));
            else if (c <= v.h.threshold)  // a leaf above l: uniform over its 4^d cells at l
                f(c / grid::pow2(2 * static_cast<int>(l - la)), static_cast<double>(c));
        }
    }
}

}  // namespace

double density_rows_around(const unsigned char* blob, std::size_t len, double w, double h) noexcept {
    View v;
    if (!grid::open(blob, len, &v)) return -1;
    if (!(v.h.total > 0)) return 0;
    double frac;
    const std::uint32_t l = level_for(v.h, w, h, &frac);
    // Σ over rows of the rows in their cell: Σ_cells density × rows.
    double sum = 0;
    if (v.h.has_self_sum)
        sum = v.h.self_sum[l];  // summed at build time
    else
        for_each_cell_at(v, l, [&](double d, double rows) { sum += d * rows; });
    return sum / v.h.total * frac;
}

double density_rows_around_dense(const unsigned char* blob, std::size_t len, double w, double h, double q) noexcept {
    View v;
    if (!grid::open(blob, len, &v)) return -1;
    const grid::Header& hd = v.h;
    if (!(hd.total > 0)) return 0;
    w = std::max(w, 0.0), h = std::max(h, 0.0);
    q = std::clamp(q, 0.0, 1.0);
    // A box centred on a dense spot, not a dense cell's average: a city's
    // core is far denser than the coarse cell holding the box (a 0.05° box on
    // a city of σ 0.013° held 44 000 rows; its 0.18° × 0.09° cell, spread
    // evenly, said 4 800). Cells of about half the box's size, densest first;
    // the box is centred on the one where the densest (1 - q) share of the
    // rows ends, and counted with density_rows.
    const double W = hd.xmax - hd.xmin, H = hd.ymax - hd.ymin;
    std::uint32_t l = 0;
    while (l < hd.levels && (W / grid::pow2(static_cast<int>(l)) > w / 2 ||
                             H / grid::pow2(static_cast<int>(l)) > h / 2))
        l++;
    while (l > 0 && hd.ncells[l] == 0) l--;  // the finest level stored
    constexpr int kTop = 256;
    std::uint32_t top[kTop], counts[kTop];  // indices and counts of the densest cells at l, densest first
    int ntop = 0;
    for (std::uint32_t i = 0; i < hd.ncells[l]; i++) {
        const std::uint32_t c = grid::count_at(v.cells[l], i);
        if (ntop == kTop && c <= counts[kTop - 1]) continue;
        int j = ntop < kTop ? ntop++ : kTop - 1;
        for (; j > 0 && counts[j - 1] < c; j--) top[j] = top[j - 1], counts[j] = counts[j - 1];
        top[j] = i, counts[j] = c;
    }
    if (ntop == 0) return 0;
    int pick = 0;
    double seen = 0;
    for (; pick < ntop - 1; pick++) {
        seen += counts[pick];
        if (seen >= (1.0 - q) * hd.total) break;
    }
    const std::uint64_t key = grid::key_of(v, l, top[pick]);
    const double cw = W / grid::pow2(static_cast<int>(l)), ch = H / grid::pow2(static_cast<int>(l));
    const double cx = hd.xmin + (grid::compact(key) + 0.5) * cw, cy = hd.ymin + (grid::compact(key >> 1) + 0.5) * ch;
    // density_rows grows a box by the rows' mean size; a probe around a row does not.
    const double gw = std::max(0.0, w - hd.mean_w) / 2, gh = std::max(0.0, h - hd.mean_h) / 2;
    return density_rows(blob, len, cx - gw, cy - gh, cx + gw, cy + gh);
}

double density_rows_probed(const unsigned char* blob, std::size_t len, double w, double h) noexcept {
    View v;
    if (!grid::open(blob, len, &v)) return -1;
    return density_rows_around(blob, len, std::max(w, 0.0) + v.h.mean_w, std::max(h, 0.0) + v.h.mean_h);
}

bool density_mean_size(const unsigned char* blob, std::size_t len, double* w, double* h) noexcept {
    View v;
    if (!grid::open(blob, len, &v)) return false;
    *w = v.h.mean_w;
    *h = v.h.mean_h;
    return true;
}

bool density_probe_size(const unsigned char* blob, std::size_t len, double* w, double* h) noexcept {
    View v;
    if (!grid::open(blob, len, &v)) return false;
    *w = v.h.probe_w;
    *h = v.h.probe_h;
    return true;
}

double density_total(const unsigned char* blob, std::size_t len) noexcept {
    View v;
    return grid::open(blob, len, &v) ? v.h.total : -1;
}

long density_cells(const unsigned char* blob, std::size_t len) noexcept {
    View v;
    if (!grid::open(blob, len, &v)) return -1;
    long n = 0;
    for (std::uint32_t l = 0; l <= v.h.levels; l++) n += v.h.ncells[l];
    return n;
}

}  // namespace ot::core
