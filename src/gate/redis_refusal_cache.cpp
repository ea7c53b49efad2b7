#include "gate/redis_refusal_cache.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>

namespace ot::gate {
namespace {

std::size_t round_up_pow2(std::size_t n) {
    std::size_t p = 1;
    while (p < n) p <<= 1;
    return p;
}

// Seconds from the store to nanoseconds on this thread's clock, rounded
// down: an instant computed from them is never later than the store's.
std::int64_t ns_down(double s) { return static_cast<std::int64_t>(std::floor(s * 1e9)); }

bool same_budget(double capacity, double rate, core::Budget b) { return capacity == b.capacity && rate == b.rate; }

}  // namespace

RefusalCache::RefusalCache(std::size_t entries) {
    if (entries == 0) return;
    const std::size_t sets = round_up_pow2((entries + kWays - 1) / kWays);
    slots_.resize(sets * kWays);
    epochs_.assign(sets, 0);
    set_mask_ = sets - 1;
}

std::size_t RefusalCache::set_of(std::string_view key) const { return std::hash<std::string_view>{}(key) & set_mask_; }

const RefusalCache::Slot* RefusalCache::find(std::string_view key, core::Budget b) const {
    if (slots_.empty() || key.size() > kMaxKey) return nullptr;
    const Slot* s = &slots_[set_of(key) * kWays];
    for (std::size_t i = 0; i < kWays; ++i, ++s)
        if (s->until_ns != 0 && s->len == key.size() && std::memcmp(s->key, key.data(), key.size()) == 0 &&
            same_budget(s->capacity, s->rate, b))
            return s;
    return nullptr;
}

RefusalCache::Slot* RefusalCache::find(std::string_view key, core::Budget b) {
    return const_cast<Slot*>(static_cast<const RefusalCache*>(this)->find(key, b));
}

std::optional<core::SpendResult> RefusalCache::lookup(std::string_view key, double cost, core::Budget b,
                                                      std::int64_t now_ns) const {
    const Slot* s = find(key, b);
    if (!s || now_ns >= s->until_ns || !(cost >= s->cost)) return std::nullopt;
    // The same arithmetic as the store's script on the cached bucket: the
    // remaining, retry and reset figures the store would answer for this cost.
    const core::SpendResult r = core::gcra_spend(s->tat_ns, now_ns, cost, b);
    if (r.outcome == core::SpendOutcome::Allowed) return std::nullopt;  // rounding at the very instant: ask
    return r;
}

std::uint32_t RefusalCache::ticket(std::string_view key) const {
    return slots_.empty() ? 0 : epochs_[set_of(key)];
}

void RefusalCache::refused(std::string_view key, double cost, core::Budget b, const core::SpendResult& r,
                           std::int64_t asked_ns, std::uint32_t ticket) {
    if (slots_.empty() || key.size() > kMaxKey || r.outcome != core::SpendOutcome::Refused) return;
    const std::size_t set = set_of(key);
    if (epochs_[set] != ticket) return;  // a refund went out after this call: the answer is stale
    const std::int64_t until = asked_ns + std::min(ns_down(r.retry_after_s), kMaxHoldNs);
    if (until <= asked_ns) return;
    Slot* first = &slots_[set * kWays];
    Slot* target = nullptr;
    // The key's own slot (whatever budget it was cached under), else a free
    // or expired one, else the one that would expire first.
    for (Slot* s = first; s != first + kWays; ++s)
        if (s->until_ns != 0 && s->len == key.size() && std::memcmp(s->key, key.data(), key.size()) == 0) target = s;
    if (!target)
        for (Slot* s = first; s != first + kWays; ++s)
            if (s->until_ns <= asked_ns) {
                target = s;
                break;
            }
    if (!target) {
        target = first;
        for (Slot* s = first + 1; s != first + kWays; ++s)
            if (s->until_ns < target->until_ns) target = s;
        ++evictions_;
    }
    target->tat_ns = asked_ns + ns_down(r.reset_after_s);
    target->until_ns = until;
    target->cost = cost;
    target->capacity = b.capacity;
    target->rate = b.rate;
    target->len = static_cast<std::uint8_t>(key.size());
    std::memcpy(target->key, key.data(), key.size());
}

void RefusalCache::admitted(std::string_view key, core::Budget b, const core::SpendResult& r, std::int64_t asked_ns,
                            std::uint32_t ticket) {
    Slot* s = find(key, b);
    if (!s) return;
    if (epochs_[set_of(key)] != ticket) return;
    // Emptier by what was admitted: the refused cost fits later than cached.
    const std::int64_t tat = asked_ns + ns_down(r.reset_after_s);
    const core::SpendResult again = core::gcra_spend(tat, asked_ns, s->cost, b);
    if (again.outcome != core::SpendOutcome::Refused) {
        s->until_ns = 0;
        return;
    }
    s->tat_ns = tat;
    // The admit's answer is the store's state as fresh as a refusal's.
    s->until_ns = asked_ns + std::min(ns_down(again.retry_after_s), kMaxHoldNs);
    if (s->until_ns <= asked_ns) s->until_ns = 0;
}

void RefusalCache::refunding(std::string_view key) {
    if (slots_.empty()) return;
    const std::size_t set = set_of(key);
    ++epochs_[set];
    if (key.size() > kMaxKey) return;
    for (Slot* s = &slots_[set * kWays]; s != &slots_[set * kWays] + kWays; ++s)
        if (s->until_ns != 0 && s->len == key.size() && std::memcmp(s->key, key.data(), key.size()) == 0) s->until_ns = 0;
}

std::size_t RefusalCache::size(std::int64_t now_ns) const {
    std::size_t n = 0;
    for (const Slot& s : slots_) n += s.until_ns > now_ns ? 1 : 0;
    return n;
}

}  // namespace ot::gate
