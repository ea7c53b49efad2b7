// The last refusals the shared store (redis_store.hpp) answered on one gate
// I/O thread, so that a client already known to be over budget is refused
// again without a script call, until the instant the store said its request
// would fit. It only ever refuses: a request the cache does not refuse goes
// to the store. Fixed size (a set-associative table of whole keys, no
// allocation after construction), one per thread, no lock.
//
// Why each rule (doc/shared-buckets.md "The refusal cache"):
//  - keyed by the whole bucket key (address or key hash, and "@<cell>" for
//    area budgets) compared byte for byte, plus the budget: one client's
//    refusal never answers for another, nor for another tier's budget;
//  - a hit needs cost >= the refused cost: a cheaper request may fit sooner
//    and is the store's to decide;
//  - the entry's bucket is the store's TAT moved to this thread's clock as of
//    when the call was sent (before Redis read its clock), so the cache sees
//    the bucket at least as full as the store did and its waits end no later
//    than the store's;
//  - a refund this thread sends for a key forgets it, and a refusal answered
//    after a refund was sent for that key (pipelined, read before it) is not
//    cached. Refunds by other threads or gates are not seen, so an entry
//    lives at most kMaxHoldNs (then the store is asked again, and answers
//    with what the other gates did meanwhile): a refund elsewhere is seen
//    here within a second, however long the wait the store named.
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "core/gcra.hpp"

namespace ot::gate {

class RefusalCache {
public:
    static constexpr std::size_t kWays = 4;
    static constexpr std::size_t kMaxKey = 87;  // longer keys are never cached (the store decides)
    static constexpr std::int64_t kMaxHoldNs = 1'000'000'000;  // an entry's life, at most

    // Room for `entries` refusals (rounded up to a power of two, at least
    // kWays); 0 turns the cache off.
    explicit RefusalCache(std::size_t entries);

    // The local answer for `key` at `cost` and `now_ns` (this thread's
    // steady clock): Refused (or NeverFits) with the figures the store would
    // give for that bucket, or nothing (ask the store).
    std::optional<core::SpendResult> lookup(std::string_view key, double cost, core::Budget b, std::int64_t now_ns) const;

    // Read before the call is sent; the store's answer is only cached if no
    // refund for the key was sent in between.
    std::uint32_t ticket(std::string_view key) const;
    // The store refused `cost` for `key`; `asked_ns` is when the call was sent.
    void refused(std::string_view key, double cost, core::Budget b, const core::SpendResult& r, std::int64_t asked_ns,
                 std::uint32_t ticket);
    // The store admitted a request for `key`: a cached refusal's bucket
    // moves to the emptier state (its headers then stay exact).
    void admitted(std::string_view key, core::Budget b, const core::SpendResult& r, std::int64_t asked_ns,
                  std::uint32_t ticket);
    // This thread sends a refund for `key`: its bucket is about to be fuller.
    void refunding(std::string_view key);

    std::size_t capacity() const { return slots_.size(); }
    std::size_t size(std::int64_t now_ns) const;  // live entries (tests, metrics)
    std::uint64_t evictions() const { return evictions_; }  // live entries pushed out by newer ones

private:
    struct Slot {
        std::int64_t tat_ns = 0;      // the bucket, on this thread's clock
        std::int64_t until_ns = 0;    // refused at `cost` before this instant; 0: empty
        double cost = 0;
        double capacity = 0, rate = 0;
        std::uint8_t len = 0;
        char key[kMaxKey];
    };
    std::size_t set_of(std::string_view key) const;
    Slot* find(std::string_view key, core::Budget b);
    const Slot* find(std::string_view key, core::Budget b) const;

    std::vector<Slot> slots_;           // sets of kWays consecutive slots
    std::vector<std::uint32_t> epochs_;  // per set: refunds sent for its keys
    std::size_t set_mask_ = 0;
    std::uint64_t evictions_ = 0;
};

}  // namespace ot::gate
