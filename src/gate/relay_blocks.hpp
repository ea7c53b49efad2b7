// The two 64 kB relay buffers of an exchange, cached per I/O thread and held
// only while a request is being relayed: an idle keep-alive connection costs
// no 128 kB, and a busy thread allocates none per request.
#pragma once
#include <cstddef>
#include <memory>
#include <vector>

namespace ot::gate {

inline constexpr std::size_t kBlock = 64 * 1024;

inline std::vector<std::unique_ptr<char[]>>& free_blocks() {
    thread_local std::vector<std::unique_ptr<char[]>> f;
    return f;
}

inline std::unique_ptr<char[]> take_block() {
    auto& f = free_blocks();
    if (f.empty()) return std::unique_ptr<char[]>(new char[kBlock]);
    auto b = std::move(f.back());
    f.pop_back();
    return b;
}

inline void give_block(std::unique_ptr<char[]>& b) {
    if (!b) return;
    auto& f = free_blocks();
    if (f.size() < 64) f.push_back(std::move(b));
    b.reset();
}

}  // namespace ot::gate
