// The density grid's byte layout, shared by its builder
// (density_grid_build.cpp) and its readers (density_grid.cpp). Internal to
// src/core: density_grid.hpp is the interface.
//
//   Header (sizeof(Header))
//   per level l = 0..levels, ncells[l] cells sorted by Morton key, 16 bytes
//   each (struct Cell)
// A cell's fields are read together by a descent: in one array, a visited
// cell and its siblings share one or two cache lines (format 4 kept each
// field in an array of its own: four lines a cell, cold in shared memory).
// first_child is the index at level l + 1 of the first key >= 4·key: cell i's
// children are [first_child[i], first_child[i + 1]) (the last cell's end is
// ncells[l + 1]), empty for a leaf. A cell keeps its key's low 32 bits; the
// full key (2·l bits) of a cell below level 16 is its parent's, shifted, and
// its own low two bits (key_of).
//
// Formats 2 to 4 (keys u64[n], counts u32[n], and in format 4 first_child
// u32[n], blocks u32[n] per level; shorter headers before 4) are not read
// directly: upgrade_density_grid rewrites them as format 5.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "core/density_grid.hpp"

namespace ot::core::grid {

constexpr std::uint32_t kMagic = 0x4f544447;  // "OTDG"
constexpr std::uint32_t kVersion = 5;

struct Header {
    std::uint32_t magic, version, levels, threshold;
    double xmin, ymin, xmax, ymax;
    double total;
    double mean_w, mean_h;  // mean box size of the rows
    std::uint32_t ncells[kDensityMaxLevels + 1];
    // The rows' box size weighted by their area (sqrt of E[w·h], in the mean
    // aspect): what a probe by one of them covers on average. Few big polygons
    // among many small ones dominate the rows a join through them reads,
    // which the plain mean hides. Format 2 ends before these.
    double probe_w, probe_h;
    // Format 4. Σ over the rows of the rows in their level-l cell (a leaf
    // above l spread evenly): density_rows_around without visiting cells.
    double self_sum[kDensityMaxLevels + 1];
    std::uint32_t has_blocks;  // the cells' blocks hold counts (0: unknown)
    // self_sum is filled (0: a grid upgraded from format 2 or 3, whose sums are
    // added up from the cells as those formats were, for the same result).
    // Format 4 had 0 here as "reserved".
    std::uint32_t has_self_sum;
};
constexpr std::size_t kHeaderV2 = offsetof(Header, probe_w);
constexpr std::size_t kHeaderV3 = offsetof(Header, self_sum);
constexpr std::size_t kCellBytesV3 = 12, kCellBytesV4 = 20;

struct Cell {
    std::uint32_t key_lo;  // the Morton key's low 32 bits
    std::uint32_t count;
    std::uint32_t first_child;
    std::uint32_t blocks;  // distinct heap blocks of its rows (0: unknown)
};
static_assert(sizeof(Cell) == 16, "four cells a cache line");

struct View {
    Header h;
    const unsigned char* cells[kDensityMaxLevels + 1];
    // Optional (null when absent): the direct index of levels 0..jump_levels
    // (density_jump_fill), where a box query starts instead of the root.
    const std::uint32_t* jump;
    std::uint32_t jump_levels;
};

// A jump entry: the stored cell at that position ((level << 24) | index), the
// leaf above it that covers it (the same, with that leaf's level), or none
// (no rows there).
constexpr std::uint32_t kJumpNone = 0xffffffffu;
constexpr std::uint32_t kJumpMaxLevels = 7;  // 21 845 entries, 85 kB
// Entries of levels 0..l-1 before level l's row-major 2^l × 2^l.
constexpr std::size_t jump_offset(std::uint32_t l) noexcept { return ((std::size_t{1} << (2 * l)) - 1) / 3; }

// A format-5 blob's header checked and its levels located (false for
// anything else, older formats included).
bool open(const unsigned char* blob, std::size_t len, View* v) noexcept;

inline Cell cell_at(const unsigned char* level, std::size_t i) noexcept {
    Cell c;
    std::memcpy(&c, level + sizeof(Cell) * i, sizeof(Cell));
    return c;
}
inline std::uint32_t count_at(const unsigned char* level, std::size_t i) noexcept {
    std::uint32_t c;
    std::memcpy(&c, level + sizeof(Cell) * i + offsetof(Cell, count), 4);
    return c;
}

// 2^n, bit for bit what std::ldexp(1.0, n) returns for -1022 <= n <= 1023 (a grid's levels and
// their differences), built without the library call: a query asks for a dozen, and the calls
// (ldexp and scalbn) were a sixth of its instructions.
inline double pow2(int n) noexcept {
    const std::uint64_t bits = static_cast<std::uint64_t>(n + 1023) << 52;
    double d;
    std::memcpy(&d, &bits, sizeof d);
    return d;
}

// The full Morton key of cell i at level l.
std::uint64_t key_of(const View& v, std::uint32_t l, std::size_t i) noexcept;

std::uint64_t morton(std::uint32_t cx, std::uint32_t cy) noexcept;
std::uint32_t compact(std::uint64_t v) noexcept;  // even bits of 64 -> 32 bits

}  // namespace ot::core::grid
