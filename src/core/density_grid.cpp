#include "core/density_grid.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>

namespace ot::core {
namespace {

constexpr std::uint32_t kMagic = 0x4f544447;  // "OTDG"
constexpr std::uint32_t kVersion = 3;  // 3 adds probe_w/probe_h; 2 is still read

struct Header {
    std::uint32_t magic, version, levels, threshold;
    double xmin, ymin, xmax, ymax;
    double total;
    double mean_w, mean_h;  // mean box size of the rows
    std::uint32_t ncells[kDensityMaxLevels + 1];
    // The rows' box size weighted by their area (sqrt of E[w·h], in the mean
    // aspect): what a probe by one of them covers on average. Few big polygons
    // among many small ones dominate the rows a join through them reads,
    // which the plain mean hides. Version 2 blobs end before these.
    double probe_w, probe_h;
};
constexpr std::size_t kHeaderV2 = offsetof(Header, probe_w);

std::uint64_t spread(std::uint64_t v) noexcept {  // 32 bits -> even bits of 64
    v &= 0xffffffffULL;
    v = (v | (v << 16)) & 0x0000ffff0000ffffULL;
    v = (v | (v << 8)) & 0x00ff00ff00ff00ffULL;
    v = (v | (v << 4)) & 0x0f0f0f0f0f0f0f0fULL;
    v = (v | (v << 2)) & 0x3333333333333333ULL;
    v = (v | (v << 1)) & 0x5555555555555555ULL;
    return v;
}

std::uint64_t morton(std::uint32_t cx, std::uint32_t cy) noexcept { return spread(cx) | (spread(cy) << 1); }

std::uint32_t compact(std::uint64_t v) noexcept {  // even bits of 64 -> 32 bits
    v &= 0x5555555555555555ULL;
    v = (v | (v >> 1)) & 0x3333333333333333ULL;
    v = (v | (v >> 2)) & 0x0f0f0f0f0f0f0f0fULL;
    v = (v | (v >> 4)) & 0x00ff00ff00ff00ffULL;
    v = (v | (v >> 8)) & 0x0000ffff0000ffffULL;
    v = (v | (v >> 16)) & 0x00000000ffffffffULL;
    return static_cast<std::uint32_t>(v);
}

struct View {
    Header h;
    const unsigned char* keys[kDensityMaxLevels + 1];
    const unsigned char* counts[kDensityMaxLevels + 1];
};

bool open(const unsigned char* blob, std::size_t len, View* v) noexcept {
    if (blob == nullptr || len < kHeaderV2) return false;
    std::memcpy(&v->h, blob, kHeaderV2);
    std::size_t off = sizeof(Header);
    if (v->h.version == 2) {
        v->h.probe_w = v->h.mean_w, v->h.probe_h = v->h.mean_h;
        off = kHeaderV2;
    } else if (v->h.version != kVersion || len < sizeof(Header)) {
        return false;
    } else {
        std::memcpy(&v->h, blob, sizeof(Header));
    }
    if (v->h.magic != kMagic || v->h.levels > static_cast<std::uint32_t>(kDensityMaxLevels)) return false;
    if (!(v->h.xmax > v->h.xmin) || !(v->h.ymax > v->h.ymin)) return false;
    for (std::uint32_t l = 0; l <= v->h.levels; l++) {
        const std::size_t n = v->h.ncells[l];
        if (n > (len - off) / 12) return false;
        v->keys[l] = blob + off;
        v->counts[l] = blob + off + 8 * n;
        off += 12 * n;
    }
    return true;
}

// Count of the stored cell `key` at level l, or -1 when it is not stored.
double stored(const View& v, std::uint32_t l, std::uint64_t key) noexcept {
    std::size_t lo = 0, hi = v.h.ncells[l];
    while (lo < hi) {
        const std::size_t mid = (lo + hi) / 2;
        std::uint64_t k;
        std::memcpy(&k, v.keys[l] + 8 * mid, 8);
        if (k < key)
            lo = mid + 1;
        else if (k > key)
            hi = mid;
        else {
            std::uint32_t c;
            std::memcpy(&c, v.counts[l] + 4 * mid, 4);
            return c;
        }
    }
    return -1;
}

// Rows in cell (cx, cy) of level l: stored, or a share of the leaf above it.
double cell_rows(const View& v, std::uint32_t l, std::uint32_t cx, std::uint32_t cy) noexcept {
    for (std::uint32_t up = 0; up <= l; up++) {
        const double c = stored(v, l - up, morton(cx >> up, cy >> up));
        if (c < 0) continue;
        if (up == 0) return c;
        // The nearest stored ancestor: split (its children are stored when not
        // empty, so this one is empty) or a leaf (uniform inside).
        if (c > v.h.threshold) return 0;
        return c / std::ldexp(1.0, 2 * static_cast<int>(up));
    }
    return 0;
}

}  // namespace

std::vector<unsigned char> build_density_grid(const double* x, const double* y, std::size_t n, DensityExtent e,
                                              int levels, int threshold, double mean_w, double mean_h,
                                              double probe_w, double probe_h) {
    levels = std::clamp(levels, 0, kDensityMaxLevels);
    Header h{};
    h.magic = kMagic;
    h.version = kVersion;
    h.levels = static_cast<std::uint32_t>(levels);
    h.threshold = static_cast<std::uint32_t>(std::max(threshold, 0));
    h.xmin = e.xmin, h.ymin = e.ymin, h.xmax = e.xmax, h.ymax = e.ymax;
    h.mean_w = std::isfinite(mean_w) && mean_w > 0 ? mean_w : 0;
    h.mean_h = std::isfinite(mean_h) && mean_h > 0 ? mean_h : 0;
    h.probe_w = std::isfinite(probe_w) && probe_w > h.mean_w ? probe_w : h.mean_w;
    h.probe_h = std::isfinite(probe_h) && probe_h > h.mean_h ? probe_h : h.mean_h;
    if (!(h.xmax > h.xmin)) h.xmax = h.xmin + 1;
    if (!(h.ymax > h.ymin)) h.ymax = h.ymin + 1;
    const double side = std::ldexp(1.0, levels);
    std::vector<std::uint64_t> codes;
    codes.reserve(n);
    for (std::size_t i = 0; i < n; i++) {
        if (!std::isfinite(x[i]) || !std::isfinite(y[i])) continue;
        const double fx = (x[i] - h.xmin) / (h.xmax - h.xmin) * side;
        const double fy = (y[i] - h.ymin) / (h.ymax - h.ymin) * side;
        const auto cx = static_cast<std::uint32_t>(std::clamp(fx, 0.0, side - 1));
        const auto cy = static_cast<std::uint32_t>(std::clamp(fy, 0.0, side - 1));
        codes.push_back(morton(cx, cy));
    }
    std::sort(codes.begin(), codes.end());
    h.total = static_cast<double>(codes.size());

    struct Cell {
        std::uint64_t key;
        std::uint32_t count;
    };
    std::vector<std::vector<Cell>> kept(levels + 1);
    std::vector<Cell> prev, cur;
    for (int l = 0; l <= levels; l++) {
        const int shift = 2 * (levels - l);
        cur.clear();
        for (std::uint64_t c : codes) {
            const std::uint64_t k = shift >= 64 ? 0 : c >> shift;
            if (!cur.empty() && cur.back().key == k)
                cur.back().count++;
            else
                cur.push_back({k, 1});
        }
        std::size_t p = 0;
        for (const Cell& c : cur) {
            if (l == 0) {
                kept[l].push_back(c);
                continue;
            }
            while (p < prev.size() && prev[p].key < (c.key >> 2)) p++;
            if (p < prev.size() && prev[p].key == (c.key >> 2) && prev[p].count > h.threshold) kept[l].push_back(c);
        }
        h.ncells[l] = static_cast<std::uint32_t>(kept[l].size());
        std::swap(prev, cur);
    }
    std::size_t len = sizeof(Header);
    for (int l = 0; l <= levels; l++) len += 12 * kept[l].size();
    std::vector<unsigned char> out(len);
    std::memcpy(out.data(), &h, sizeof h);
    std::size_t off = sizeof h;
    for (int l = 0; l <= levels; l++) {
        for (const Cell& c : kept[l]) std::memcpy(&out[off], &c.key, 8), off += 8;
        for (const Cell& c : kept[l]) std::memcpy(&out[off], &c.count, 4), off += 4;
    }
    return out;
}

double density_rows(const unsigned char* blob, std::size_t len, double xmin, double ymin, double xmax,
                    double ymax) noexcept {
    View v;
    if (!open(blob, len, &v)) return -1;
    if (!(xmax >= xmin) || !(ymax >= ymin)) return 0;
    const Header& h = v.h;
    // Rows are counted by their box's centre: one whose box meets the query
    // has its centre within the query grown by half the rows' mean size.
    xmin -= h.mean_w / 2, xmax += h.mean_w / 2;
    ymin -= h.mean_h / 2, ymax += h.mean_h / 2;
    xmin = std::max(xmin, h.xmin), ymin = std::max(ymin, h.ymin);
    xmax = std::min(xmax, h.xmax), ymax = std::min(ymax, h.ymax);
    if (xmax < xmin || ymax < ymin) return 0;
    const double W = h.xmax - h.xmin, H = h.ymax - h.ymin;
    // The finest level at which the box covers at most 64 cells.
    std::uint32_t l = 0;
    for (std::uint32_t c = h.levels; c > 0; c--) {
        const double s = std::ldexp(1.0, static_cast<int>(c));
        const double nx = std::floor((xmax - h.xmin) / W * s) - std::floor((xmin - h.xmin) / W * s) + 1;
        const double ny = std::floor((ymax - h.ymin) / H * s) - std::floor((ymin - h.ymin) / H * s) + 1;
        if (nx * ny <= 64) {
            l = c;
            break;
        }
    }
    const double s = std::ldexp(1.0, static_cast<int>(l));
    const double cw = W / s, ch = H / s;
    const auto last = static_cast<std::uint32_t>(s - 1);
    const auto i0 = static_cast<std::uint32_t>(std::min(s - 1, std::floor((xmin - h.xmin) / cw)));
    const auto i1 = static_cast<std::uint32_t>(std::min(s - 1, std::floor((xmax - h.xmin) / cw)));
    const auto j0 = static_cast<std::uint32_t>(std::min(s - 1, std::floor((ymin - h.ymin) / ch)));
    const auto j1 = static_cast<std::uint32_t>(std::min(s - 1, std::floor((ymax - h.ymin) / ch)));
    double rows = 0;
    for (std::uint32_t i = i0; i <= i1 && i <= last; i++) {
        const double cx0 = h.xmin + i * cw;
        const double fx = (std::min(xmax, cx0 + cw) - std::max(xmin, cx0)) / cw;
        for (std::uint32_t j = j0; j <= j1 && j <= last; j++) {
            const double cy0 = h.ymin + j * ch;
            const double fy = (std::min(ymax, cy0 + ch) - std::max(ymin, cy0)) / ch;
            // A degenerate box (a point) still meets the rows of its cell's share.
            const double frac = std::max(fx, 1e-9) * std::max(fy, 1e-9);
            rows += cell_rows(v, l, i, j) * std::min(1.0, frac);
        }
    }
    return rows;
}

namespace {

// The finest level whose cells are at least a w × h box, and the box's share of such a cell.
std::uint32_t level_for(const Header& hd, double w, double h, double* frac) noexcept {
    const double W = hd.xmax - hd.xmin, H = hd.ymax - hd.ymin;
    std::uint32_t l = 0;
    while (l < hd.levels && W / std::ldexp(1.0, static_cast<int>(l + 1)) >= w &&
           H / std::ldexp(1.0, static_cast<int>(l + 1)) >= h)
        l++;
    const double cell_area = (W / std::ldexp(1.0, static_cast<int>(l))) * (H / std::ldexp(1.0, static_cast<int>(l)));
    *frac = std::min(1.0, std::max(w, 0.0) * std::max(h, 0.0) / cell_area);
    return l;
}

// Calls f(rows per level-l cell, rows the stored cell holds) for each stored
// cell that stands for level l: itself, or a leaf above it spread evenly.
template <class F>
void for_each_cell_at(const View& v, std::uint32_t l, F f) noexcept {
    for (std::uint32_t la = 0; la <= l; la++) {
        for (std::uint32_t i = 0; i < v.h.ncells[la]; i++) {
            std::uint32_t c;
            std::memcpy(&c, v.counts[la] + 4 * i, 4);
            if (la == l)
                f(static_cast<double>(c), static_cast<double>(c));
            else if (c <= v.h.threshold)  // a leaf above l: uniform over its 4^d cells at l
                f(c / std::ldexp(1.0, 2 * static_cast<int>(l - la)), static_cast<double>(c));
        }
    }
}

}  // namespace

double density_rows_around(const unsigned char* blob, std::size_t len, double w, double h) noexcept {
    View v;
    if (!open(blob, len, &v)) return -1;
    if (!(v.h.total > 0)) return 0;
    double frac;
    const std::uint32_t l = level_for(v.h, w, h, &frac);
    // Σ over rows of the rows in their cell: Σ_cells density × rows.
    double sum = 0;
    for_each_cell_at(v, l, [&](double d, double rows) { sum += d * rows; });
    return sum / v.h.total * frac;
}

double density_rows_around_dense(const unsigned char* blob, std::size_t len, double w, double h, double q) noexcept {
    View v;
    if (!open(blob, len, &v)) return -1;
    const Header& hd = v.h;
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
    while (l < hd.levels && (W / std::ldexp(1.0, static_cast<int>(l)) > w / 2 ||
                             H / std::ldexp(1.0, static_cast<int>(l)) > h / 2))
        l++;
    while (l > 0 && hd.ncells[l] == 0) l--;  // the finest level stored
    constexpr int kTop = 256;
    std::uint32_t top[kTop], counts[kTop];  // indices and counts of the densest cells at l, densest first
    int ntop = 0;
    for (std::uint32_t i = 0; i < hd.ncells[l]; i++) {
        std::uint32_t c;
        std::memcpy(&c, v.counts[l] + 4 * i, 4);
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
    std::uint64_t key;
    std::memcpy(&key, v.keys[l] + 8 * top[pick], 8);
    const double cw = W / std::ldexp(1.0, static_cast<int>(l)), ch = H / std::ldexp(1.0, static_cast<int>(l));
    const double cx = hd.xmin + (compact(key) + 0.5) * cw, cy = hd.ymin + (compact(key >> 1) + 0.5) * ch;
    // density_rows grows a box by the rows' mean size; a probe around a row does not.
    const double gw = std::max(0.0, w - hd.mean_w) / 2, gh = std::max(0.0, h - hd.mean_h) / 2;
    return density_rows(blob, len, cx - gw, cy - gh, cx + gw, cy + gh);
}

double density_rows_probed(const unsigned char* blob, std::size_t len, double w, double h) noexcept {
    View v;
    if (!open(blob, len, &v)) return -1;
    return density_rows_around(blob, len, std::max(w, 0.0) + v.h.mean_w, std::max(h, 0.0) + v.h.mean_h);
}

bool density_mean_size(const unsigned char* blob, std::size_t len, double* w, double* h) noexcept {
    View v;
    if (!open(blob, len, &v)) return false;
    *w = v.h.mean_w;
    *h = v.h.mean_h;
    return true;
}

bool density_probe_size(const unsigned char* blob, std::size_t len, double* w, double* h) noexcept {
    View v;
    if (!open(blob, len, &v)) return false;
    *w = v.h.probe_w;
    *h = v.h.probe_h;
    return true;
}

double density_total(const unsigned char* blob, std::size_t len) noexcept {
    View v;
    return open(blob, len, &v) ? v.h.total : -1;
}

long density_cells(const unsigned char* blob, std::size_t len) noexcept {
    View v;
    if (!open(blob, len, &v)) return -1;
    long n = 0;
    for (std::uint32_t l = 0; l <= v.h.levels; l++) n += v.h.ncells[l];
    return n;
}

}  // namespace ot::core
