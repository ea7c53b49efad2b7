// In-memory GCRA buckets (core/gcra.hpp), sharded so that the gate's threads
// rarely meet on one lock, and bounded: when a shard is full, full buckets
// (TAT <= now, indistinguishable from no entry) are dropped first, then the
// ones closest to full.
#pragma once
#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/gcra.hpp"

namespace ot::gate {

struct BucketView {
    std::string key;
    double tokens;
    std::uint64_t throttled;
    std::int64_t last_request_us;
};

class BucketTable {
public:
    explicit BucketTable(std::size_t max_keys);
    core::SpendResult spend(const std::string& key, double cost, core::Budget b, std::int64_t now_us);
    // Gives back part of a charge (charge on the way out); never above full.
    void refund(const std::string& key, double amount, core::Budget b, std::int64_t now_us);
    // Charges more than admission took (a measured cost above the estimate);
    // the bucket may go into debt.
    void charge(const std::string& key, double amount, core::Budget b, std::int64_t now_us);
    // At most `limit` entries, tokens as of now_us under each key's last budget.
    std::vector<BucketView> snapshot(std::int64_t now_us, std::size_t limit) const;
    std::size_t size() const;
    void set_max_keys(std::size_t max_keys);

private:
    struct Entry {
        std::int64_t tat_ns = 0;  // core/gcra.hpp keeps TATs in nanoseconds
        std::int64_t last_us = 0;
        std::uint64_t throttled = 0;
        core::Budget budget{1, 1};
    };
    struct Shard {
        mutable std::mutex mu;
        std::unordered_map<std::string, Entry> map;
    };
    static constexpr std::size_t kShards = 16;
    void make_room(Shard& s, std::int64_t now_us);
    Shard shards_[kShards];
    std::size_t per_shard_max_;
};

}  // namespace ot::gate
