// The density grid's byte layout, shared by its builder
// (density_grid_build.cpp) and its readers (density_grid.cpp). Internal to
// src/core: density_grid.hpp is the interface.
//
//   Header (format 4: sizeof(Header); 3: up to self_sum; 2: up to probe_w)
//   per level l = 0..levels, ncells[l] cells sorted by Morton key:
//     keys u64[n], counts u32[n]                  (every format)
//     first_child u32[n], blocks u32[n]           (format 4)
// first_child[i] is the index at level l + 1 of the first key >= 4·key[i]:
// cell i's children are [first_child[i], first_child[i + 1]) (the last
// cell's end is ncells[l + 1]), empty for a leaf.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "core/density_grid.hpp"

namespace ot::core::grid {

constexpr std::uint32_t kMagic = 0x4f544447;  // "OTDG"
constexpr std::uint32_t kVersion = 4;

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
    std::uint32_t has_blocks;  // the blocks arrays hold counts (0: unknown)
    std::uint32_t reserved;
};
constexpr std::size_t kHeaderV2 = offsetof(Header, probe_w);
constexpr std::size_t kHeaderV3 = offsetof(Header, self_sum);
constexpr std::size_t kCellBytesV3 = 12, kCellBytesV4 = 20;

struct View {
    Header h;
    bool v4;
    const unsigned char* keys[kDensityMaxLevels + 1];
    const unsigned char* counts[kDensityMaxLevels + 1];
    const unsigned char* first_child[kDensityMaxLevels + 1];  // format 4 only
    const unsigned char* blocks[kDensityMaxLevels + 1];       // format 4 only
};

bool open(const unsigned char* blob, std::size_t len, View* v) noexcept;

inline std::uint32_t u32_at(const unsigned char* p, std::size_t i) noexcept {
    std::uint32_t c;
    std::memcpy(&c, p + 4 * i, 4);
    return c;
}
inline std::uint64_t u64_at(const unsigned char* p, std::size_t i) noexcept {
    std::uint64_t c;
    std::memcpy(&c, p + 8 * i, 8);
    return c;
}

std::uint64_t morton(std::uint32_t cx, std::uint32_t cy) noexcept;
std::uint32_t compact(std::uint64_t v) noexcept;  // even bits of 64 -> 32 bits

}  // namespace ot::core::grid
