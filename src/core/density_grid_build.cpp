// Building a density grid (format 5), opening one, and rewriting an older one as format 5.
#include <algorithm>
#include <cmath>
#include <utility>

#include "core/density_grid_format.hpp"

namespace ot::core {
namespace grid {
namespace {

std::uint64_t spread(std::uint64_t v) noexcept {  // 32 bits -> even bits of 64
    v &= 0xffffffffULL;
    v = (v | (v << 16)) & 0x0000ffff0000ffffULL;
    v = (v | (v << 8)) & 0x00ff00ff00ff00ffULL;
    v = (v | (v << 4)) & 0x0f0f0f0f0f0f0f0fULL;
    v = (v | (v << 2)) & 0x3333333333333333ULL;
    v = (v | (v << 1)) & 0x5555555555555555ULL;
    return v;
}

}  // namespace

std::uint64_t morton(std::uint32_t cx, std::uint32_t cy) noexcept { return spread(cx) | (spread(cy) << 1); }

std::uint32_t compact(std::uint64_t v) noexcept {
    v &= 0x5555555555555555ULL;
    v = (v | (v >> 1)) & 0x3333333333333333ULL;
    v = (v | (v >> 2)) & 0x0f0f0f0f0f0f0f0fULL;
    v = (v | (v >> 4)) & 0x00ff00ff00ff00ffULL;
    v = (v | (v >> 8)) & 0x0000ffff0000ffffULL;
    v = (v | (v >> 16)) & 0x00000000ffffffffULL;
    return static_cast<std::uint32_t>(v);
}

bool open(const unsigned char* blob, std::size_t len, View* v) noexcept {
    if (blob == nullptr || len < sizeof(Header)) return false;
    std::memcpy(&v->h, blob, sizeof(Header));
    if (v->h.magic != kMagic || v->h.version != kVersion) return false;
    if (v->h.levels > static_cast<std::uint32_t>(kDensityMaxLevels)) return false;
    if (!(v->h.xmax > v->h.xmin) || !(v->h.ymax > v->h.ymin)) return false;
    v->jump = nullptr;
    v->jump_levels = 0;
    std::size_t off = sizeof(Header);
    for (std::uint32_t l = 0; l <= v->h.levels; l++) {
        const std::size_t n = v->h.ncells[l];
        if (n > (len - off) / sizeof(Cell)) return false;
        v->cells[l] = blob + off;
        off += sizeof(Cell) * n;
    }
    return true;
}

std::uint64_t key_of(const View& v, std::uint32_t l, std::size_t i) noexcept {
    const std::uint32_t lo = cell_at(v.cells[l], i).key_lo;
    if (l <= 16) return lo;  // 2·l bits: all of it
    // The parent: the last cell of level l − 1 whose children start at or before i.
    const unsigned char* up = v.cells[l - 1];
    std::size_t a = 0, b = v.h.ncells[l - 1];
    while (a < b) {
        const std::size_t mid = (a + b) / 2;
        if (cell_at(up, mid).first_child <= i) a = mid + 1; else b = mid;
    }
    if (a == 0) return lo;  // no parent starts at or before i: not a grid this library wrote
    return (key_of(v, l - 1, a - 1) << 2) | (lo & 3);
}

}  // namespace grid

using namespace grid;

namespace {

// A blob of formats 2 to 4, located: what upgrade_density_grid reads.
struct OldView {
    Header h;
    bool v4;
    const unsigned char* keys[kDensityMaxLevels + 1];
    const unsigned char* counts[kDensityMaxLevels + 1];
    const unsigned char* first_child[kDensityMaxLevels + 1];  // format 4 only
    const unsigned char* blocks[kDensityMaxLevels + 1];       // format 4 only
};

std::uint32_t u32_at(const unsigned char* p, std::size_t i) noexcept {
    std::uint32_t c;
    std::memcpy(&c, p + 4 * i, 4);
    return c;
}
std::uint64_t u64_at(const unsigned char* p, std::size_t i) noexcept {
    std::uint64_t c;
    std::memcpy(&c, p + 8 * i, 8);
    return c;
}

bool open_old(const unsigned char* blob, std::size_t len, OldView* v) noexcept {
    if (blob == nullptr || len < kHeaderV2) return false;
    v->h = Header{};
    std::memcpy(&v->h, blob, kHeaderV2);
    std::size_t off;
    if (v->h.version == 2) {
        v->h.probe_w = v->h.mean_w, v->h.probe_h = v->h.mean_h;
        off = kHeaderV2;
    } else if (v->h.version == 3 && len >= kHeaderV3) {
        std::memcpy(&v->h, blob, kHeaderV3);
        off = kHeaderV3;
    } else if (v->h.version == 4 && len >= sizeof(Header)) {
        std::memcpy(&v->h, blob, sizeof(Header));
        off = sizeof(Header);
    } else {
        return false;
    }
    v->v4 = v->h.version == 4;
    if (!v->v4) v->h.has_blocks = 0;
    v->h.has_self_sum = v->v4;
    if (v->h.magic != kMagic || v->h.levels > static_cast<std::uint32_t>(kDensityMaxLevels)) return false;
    if (!(v->h.xmax > v->h.xmin) || !(v->h.ymax > v->h.ymin)) return false;
    const std::size_t per = v->v4 ? kCellBytesV4 : kCellBytesV3;
    for (std::uint32_t l = 0; l <= v->h.levels; l++) {
        const std::size_t n = v->h.ncells[l];
        if (n > (len - off) / per) return false;
        v->keys[l] = blob + off;
        v->counts[l] = blob + off + 8 * n;
        v->first_child[l] = v->v4 ? blob + off + 12 * n : nullptr;
        v->blocks[l] = v->v4 ? blob + off + 16 * n : nullptr;
        off += per * n;
    }
    return true;
}

std::size_t cells_of(const Header& h) noexcept {
    std::size_t n = 0;
    for (std::uint32_t l = 0; l <= h.levels; l++) n += h.ncells[l];
    return n;
}

}  // namespace

std::size_t density_grid_upgraded_bytes(const unsigned char* blob, std::size_t len) noexcept {
    OldView v;
    return open_old(blob, len, &v) ? density_grid_bytes(cells_of(v.h)) : 0;
}

bool upgrade_density_grid(const unsigned char* blob, std::size_t len, unsigned char* out,
                          std::size_t out_len) noexcept {
    OldView v;
    if (!open_old(blob, len, &v) || out_len != density_grid_bytes(cells_of(v.h))) return false;
    grid::Header h = v.h;
    h.version = kVersion;
    std::memcpy(out, &h, sizeof h);
    std::size_t off = sizeof h;
    for (std::uint32_t l = 0; l <= h.levels; l++) {
        const std::size_t n = h.ncells[l], next = l < h.levels ? h.ncells[l + 1] : 0;
        std::size_t p = 0;  // formats 2 and 3: the first key at l + 1 at or after 4·key, found in order
        for (std::size_t i = 0; i < n; i++) {
            const std::uint64_t key = u64_at(v.keys[l], i);
            grid::Cell c{static_cast<std::uint32_t>(key), u32_at(v.counts[l], i), 0, 0};
            if (v.v4) {
                c.first_child = u32_at(v.first_child[l], i);
                c.blocks = u32_at(v.blocks[l], i);
            } else if (l < h.levels) {
                while (p < next && u64_at(v.keys[l + 1], p) < (key << 2)) p++;
                c.first_child = static_cast<std::uint32_t>(p);
            }
            std::memcpy(out + off, &c, sizeof c), off += sizeof c;
        }
    }
    return true;
}

std::size_t density_grid_bytes(std::size_t cells) noexcept { return sizeof(Header) + sizeof(grid::Cell) * cells; }

namespace {

struct KeptCell {
    std::uint64_t key;
    std::uint32_t count;
};

// Cells stored per level: every cell whose parent holds more than `threshold` rows (level 0 always).
std::size_t keep_cells(const std::vector<std::uint64_t>& codes, int levels, std::uint32_t threshold,
                       std::vector<std::vector<KeptCell>>* kept) {
    kept->assign(levels + 1, {});
    std::vector<KeptCell> prev, cur;
    std::size_t total = 0;
    for (int l = 0; l <= levels; l++) {
        const int shift = 2 * (levels - l);
        cur.clear();
        for (std::uint64_t c : codes) {
            const std::uint64_t k = c >> shift;
            if (!cur.empty() && cur.back().key == k)
                cur.back().count++;
            else
                cur.push_back({k, 1});
        }
        std::size_t p = 0;
        for (const KeptCell& c : cur) {
            if (l > 0) {
                while (p < prev.size() && prev[p].key < (c.key >> 2)) p++;
                if (!(p < prev.size() && prev[p].key == (c.key >> 2) && prev[p].count > threshold)) continue;
            }
            (*kept)[l].push_back(c);
        }
        total += (*kept)[l].size();
        std::swap(prev, cur);
    }
    return total;
}

// Distinct heap blocks of each stored cell's rows. blk is aligned with the sorted codes and sorted
// within each finest cell; going up a level, the runs of a cell's children are merged, so each
// cell's blocks are a sorted run and their distinct count one pass over it.
void count_blocks(const std::vector<std::uint64_t>& codes, std::vector<std::uint32_t>& blk, int levels,
                  const std::vector<std::vector<KeptCell>>& kept, std::vector<std::vector<std::uint32_t>>* out) {
    out->assign(levels + 1, {});
    std::vector<std::uint32_t> scratch(blk.size());
    const std::size_t n = codes.size();
    for (int l = levels; l >= 0; l--) {
        const int shift = 2 * (levels - l);
        std::size_t k = 0;
        for (std::size_t a = 0; a < n;) {
            const std::uint64_t key = codes[a] >> shift;
            std::size_t e = a + 1;
            while (e < n && (codes[e] >> shift) == key) e++;
            if (l < levels) {  // merge the children's runs, one after another
                std::size_t m = a;
                while (m < e) {
                    const std::uint64_t child = codes[m] >> (shift - 2);
                    std::size_t me = m + 1;
                    while (me < e && (codes[me] >> (shift - 2)) == child) me++;
                    if (m > a) {
                        std::merge(blk.begin() + a, blk.begin() + m, blk.begin() + m, blk.begin() + me,
                                   scratch.begin() + a);
                        std::copy(scratch.begin() + a, scratch.begin() + me, blk.begin() + a);
                    }
                    m = me;
                }
            }
            while (k < kept[l].size() && kept[l][k].key < key) k++;
            if (k < kept[l].size() && kept[l][k].key == key) {
                std::uint32_t d = 1;
                for (std::size_t p = a + 1; p < e; p++) d += blk[p] != blk[p - 1];
                (*out)[l].push_back(d);
            }
            a = e;
        }
        (*out)[l].resize(kept[l].size(), 0);
    }
}

}  // namespace

std::vector<unsigned char> build_density_grid(const double* x, const double* y, std::size_t n, DensityExtent e,
                                              int levels, int threshold, double mean_w, double mean_h,
                                              double probe_w, double probe_h, const std::uint32_t* blocks,
                                              std::size_t max_cells) {
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
    h.has_blocks = blocks != nullptr;
    h.has_self_sum = 1;
    if (!(h.xmax > h.xmin)) h.xmax = h.xmin + 1;
    if (!(h.ymax > h.ymin)) h.ymax = h.ymin + 1;
    const double side = std::ldexp(1.0, levels);
    std::vector<std::pair<std::uint64_t, std::uint32_t>> rows;
    rows.reserve(n);
    for (std::size_t i = 0; i < n; i++) {
        if (!std::isfinite(x[i]) || !std::isfinite(y[i])) continue;
        const double fx = (x[i] - h.xmin) / (h.xmax - h.xmin) * side;
        const double fy = (y[i] - h.ymin) / (h.ymax - h.ymin) * side;
        const auto cx = static_cast<std::uint32_t>(std::clamp(fx, 0.0, side - 1));
        const auto cy = static_cast<std::uint32_t>(std::clamp(fy, 0.0, side - 1));
        rows.emplace_back(morton(cx, cy), blocks != nullptr ? blocks[i] : 0);
    }
    std::sort(rows.begin(), rows.end());
    std::vector<std::uint64_t> codes(rows.size());
    std::vector<std::uint32_t> blk(blocks != nullptr ? rows.size() : 0);
    for (std::size_t i = 0; i < rows.size(); i++) {
        codes[i] = rows[i].first;
        if (blocks != nullptr) blk[i] = rows[i].second;
    }
    std::vector<std::pair<std::uint64_t, std::uint32_t>>().swap(rows);
    h.total = static_cast<double>(codes.size());

    std::vector<std::vector<KeptCell>> kept;
    // A bound on the size: each doubling of the threshold stops refining the sparsest half of the cells.
    while (keep_cells(codes, levels, h.threshold, &kept) > max_cells && max_cells > 0 &&
           h.threshold < 0x40000000u && !codes.empty())
        h.threshold = std::max<std::uint32_t>(1, h.threshold * 2);
    std::vector<std::vector<std::uint32_t>> nblocks;
    if (blocks != nullptr) count_blocks(codes, blk, levels, kept, &nblocks);

    double leaves_above = 0;  // Σ c²/4^(l − la) over the leaves above level l
    for (int l = 0; l <= levels; l++) {
        h.ncells[l] = static_cast<std::uint32_t>(kept[l].size());
        double here = 0, leaves = 0;
        for (const KeptCell& c : kept[l]) {
            const double sq = static_cast<double>(c.count) * c.count;
            here += sq;
            if (c.count <= h.threshold) leaves += sq;
        }
        h.self_sum[l] = here + leaves_above;
        leaves_above = (leaves_above + leaves) / 4;
    }
    std::size_t cells = 0;
    for (int l = 0; l <= levels; l++) cells += kept[l].size();
    std::vector<unsigned char> out(density_grid_bytes(cells));
    std::memcpy(out.data(), &h, sizeof h);
    std::size_t off = sizeof h;
    for (int l = 0; l <= levels; l++) {
        std::size_t p = 0;  // first child: the first key at l + 1 at or after 4·key
        for (std::size_t i = 0; i < kept[l].size(); i++) {
            const KeptCell& c = kept[l][i];
            if (l < levels)
                while (p < kept[l + 1].size() && kept[l + 1][p].key < (c.key << 2)) p++;
            const grid::Cell g{static_cast<std::uint32_t>(c.key), c.count,
                               static_cast<std::uint32_t>(l < levels ? p : 0),
                               blocks != nullptr ? nblocks[l][i] : 0};
            std::memcpy(&out[off], &g, sizeof g), off += sizeof g;
        }
    }
    return out;
}

}  // namespace ot::core
