#include "gate/buckets.hpp"

#include <algorithm>
#include <functional>

namespace ot::gate {
namespace {

// A GCRA step holds a shard for a fraction of a microsecond: a short spin
// beats sleeping on a futex and the wake-up that ends the sleep.
std::unique_lock<std::mutex> lock_briefly(std::mutex& m) {
    for (int i = 0; i < 64; ++i) {
        if (m.try_lock()) return std::unique_lock<std::mutex>(m, std::adopt_lock);
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#endif
    }
    return std::unique_lock<std::mutex>(m);
}

}  // namespace

BucketTable::BucketTable(std::size_t max_keys) { set_max_keys(max_keys); }

void BucketTable::set_max_keys(std::size_t max_keys) { per_shard_max_ = std::max<std::size_t>(1, max_keys / kShards); }

std::size_t BucketTable::size() const {
    std::size_t n = 0;
    for (const Shard& s : shards_) {
        std::lock_guard<std::mutex> lock(s.mu);
        n += s.map.size();
    }
    return n;
}

std::vector<BucketView> BucketTable::snapshot(std::int64_t now_us, std::size_t limit) const {
    std::vector<BucketView> out;
    for (const Shard& s : shards_) {
        std::lock_guard<std::mutex> lock(s.mu);
        for (const auto& [k, e] : s.map) {
            if (out.size() >= limit) return out;
            out.push_back({k, core::gcra_tokens(e.tat_ns, now_us * 1000, e.budget), e.throttled, e.last_us});
        }
    }
    return out;
}

void BucketTable::make_room(Shard& s, std::int64_t now_us) {
    for (auto it = s.map.begin(); it != s.map.end();) {
        if (core::gcra_is_full(it->second.tat_ns, now_us * 1000)) it = s.map.erase(it);
        else ++it;
    }
    if (s.map.size() < per_shard_max_) return;
    // Nothing is full: drop the emptiest-debt quarter (earliest TAT). Those
    // clients get a little credit back; the table never grows unbounded.
    std::vector<std::pair<std::int64_t, std::string>> by_tat;
    by_tat.reserve(s.map.size());
    for (const auto& [k, e] : s.map) by_tat.emplace_back(e.tat_ns, k);
    const std::size_t drop = std::max<std::size_t>(1, by_tat.size() / 4);
    std::nth_element(by_tat.begin(), by_tat.begin() + static_cast<std::ptrdiff_t>(drop - 1), by_tat.end());
    for (std::size_t i = 0; i < drop; ++i) s.map.erase(by_tat[i].second);
}

core::SpendResult BucketTable::spend(const std::string& key, double cost, core::Budget b, std::int64_t now_us) {
    Shard& s = shards_[std::hash<std::string>{}(key) % kShards];
    const auto lock = lock_briefly(s.mu);
    auto it = s.map.find(key);
    if (it == s.map.end()) {
        if (s.map.size() >= per_shard_max_) make_room(s, now_us);
        it = s.map.emplace(key, Entry{now_us * 1000, now_us, 0}).first;
    }
    Entry& e = it->second;
    e.budget = b;
    const core::SpendResult r = core::gcra_spend(e.tat_ns, now_us * 1000, cost, b);
    e.last_us = now_us;
    if (r.outcome == core::SpendOutcome::Allowed) e.tat_ns = r.new_tat_ns;
    else e.throttled++;
    return r;
}

void BucketTable::refund(const std::string& key, double amount, core::Budget b, std::int64_t now_us) {
    if (!(amount > 0)) return;
    Shard& s = shards_[std::hash<std::string>{}(key) % kShards];
    const auto lock = lock_briefly(s.mu);
    auto it = s.map.find(key);
    if (it == s.map.end()) return;  // evicted as full: nothing to give back
    it->second.tat_ns = core::gcra_refund(it->second.tat_ns, now_us * 1000, amount, b);
}

void BucketTable::charge(const std::string& key, double amount, core::Budget b, std::int64_t now_us) {
    if (!(amount > 0)) return;
    Shard& s = shards_[std::hash<std::string>{}(key) % kShards];
    const auto lock = lock_briefly(s.mu);
    auto it = s.map.find(key);
    if (it == s.map.end()) {
        if (s.map.size() >= per_shard_max_) make_room(s, now_us);
        it = s.map.emplace(key, Entry{now_us * 1000, now_us, 0}).first;
    }
    it->second.budget = b;
    it->second.tat_ns = core::gcra_charge(it->second.tat_ns, now_us * 1000, amount, b);
}

}  // namespace ot::gate
