// Counters for the admin listener's Prometheus page. One shard per I/O
// thread, each under its own lock: a request only ever touches its thread's
// shard, so the lock is never contended except by a scrape, which sums them.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ot::gate {

class Metrics {
public:
    explicit Metrics(std::size_t shards = 1) { resize(shards); }
    // Before the I/O threads start: shard `i` belongs to thread `i`.
    void resize(std::size_t shards);
    void request(unsigned shard, std::string_view cls, std::string_view verdict, double charged);
    void upstream(unsigned shard, double seconds, bool failed);
    void refunded(unsigned shard, std::string_view cls, double amount);
    void coalesced(unsigned shard);
    // A measured settlement's final charge (charge: measured).
    void settled(unsigned shard, std::string_view cls, double amount);
    std::string prometheus(std::size_t bucket_keys) const;

private:
    static constexpr double kBounds[] = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30};
    static constexpr std::size_t kNumBounds = sizeof(kBounds) / sizeof(kBounds[0]);
    struct alignas(64) Shard {
        mutable std::mutex mu;
        // class -> verdict -> count; std::less<> finds by the caller's strings without copying them.
        std::map<std::string, std::map<std::string, std::uint64_t, std::less<>>, std::less<>> requests;
        std::map<std::string, double, std::less<>> charged, refunded, settled;
        std::uint64_t latency_counts[kNumBounds + 1] = {};
        double latency_sum = 0;
        std::uint64_t latency_n = 0, upstream_failures = 0, coalesced = 0;
    };
    Shard& at(unsigned shard) { return *shards_[shard % shards_.size()]; }
    std::vector<std::unique_ptr<Shard>> shards_;
};

}  // namespace ot::gate
