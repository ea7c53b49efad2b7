// What the shared bucket store did: decision latency (as the caller saw it,
// send to reply), failures by kind and the fallbacks they caused. Relaxed
// atomics: every I/O thread records into one instance, and the admin page
// reads it without stopping anyone.
#pragma once
#include <array>
#include <atomic>
#include <cstdint>
#include <string>

namespace ot::gate::redis {

enum class OnError : std::uint8_t { Open, Closed, Local };
const char* on_error_name(OnError p);

struct StoreMetrics {
    // Upper bounds in milliseconds of the latency histogram buckets (+Inf last).
    static constexpr std::array<double, 12> kBoundsMs = {0.1, 0.2, 0.3, 0.5, 1, 2, 5, 10, 25, 50, 100, 250};

    std::array<std::atomic<std::uint64_t>, kBoundsMs.size() + 1> latency{};  // not cumulative
    std::atomic<std::uint64_t> latency_sum_ns{0};
    std::atomic<std::uint64_t> calls{0};
    std::atomic<std::uint64_t> timeouts{0}, unavailable{0}, protocol_errors{0}, script_errors{0};
    std::atomic<std::uint64_t> noscript_reloads{0};
    // Refused from a thread's refusal cache without a call; live cached
    // refusals pushed out by newer ones (the cache is too small for the
    // clients over budget at once).
    std::atomic<std::uint64_t> local_refusals{0}, refusal_cache_evictions{0};
    std::array<std::atomic<std::uint64_t>, 3> fallbacks{};  // by OnError

    void observe_ns(std::uint64_t ns);
    void fallback(OnError p) { fallbacks[static_cast<int>(p)].fetch_add(1, std::memory_order_relaxed); }
    std::uint64_t errors() const;
    // Prometheus text exposition, metric names prefixed ogc_gate_store_.
    std::string prometheus() const;
};

}  // namespace ot::gate::redis
