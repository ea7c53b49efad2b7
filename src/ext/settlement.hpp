// Settlements not yet written to shared memory. A short statement's true-up
// (a fraction of a millisecond, either way) rides along with the identity's
// next admission, which visits the bucket anyway; whatever reaches 10 ms,
// belongs to another identity, or is left when the backend exits is written
// at once. The identity statistics' share (statements admitted, charges,
// measured time) is batched likewise.
#pragma once
#include "ext/hot.hpp"
#include <cmath>
#include <cstdint>

#include "ext/bucket_table.hpp"

namespace ot::ext {

// amount > 0 is owed to id's bucket (measured beyond the deposit), < 0 is
// owed back (an unused deposit).
// serial: identity_serial() of the key id was copied from (0: unknown).
void owe(const IdentityKey& id, core::Budget b, double amount, std::uint64_t serial = 0);
// A finished statement (or span): owed as above (may be 0), and its share of
// id's statistics (charge change and measured ms), with one look at the identity.
void settle(const IdentityKey& id, core::Budget b, double owed, double charge, double measured_ms,
            std::uint64_t serial = 0);
// A statement the pricing hook admitted without a wait: counted in id's
// statistics, its cost charged there, with the batch below (a shared visit
// per priced statement was two fifths of its admission). The bucket was
// charged at once; only the statistics wait. Refusals and waits are written
// at once (record_statement), so a refused client shows at once.
void count_admitted(const IdentityKey& id, double cost, std::uint64_t serial);
// Writes this backend's pending statistics now: a reader of them sees its
// own statements, and a reset does not get them afterwards.
void flush_pending_stats();
// What is pending. One identity for both halves: a backend pays for one
// identity statement after statement, so a settlement compares its key once,
// and a change of identity (rare: a SET of ogc_throttle.identity) writes out
// both halves first.
inline constexpr double kFlushMs = 10;
inline constexpr double kStatsFlushMs = 100;
inline constexpr int kStatsFlushStatements = 64;
struct Pending {
    bool has_id;
    IdentityKey id;
    std::uint64_t serial;  // identity_serial() of the key id was copied from (0: unknown)
    bool any;
    core::Budget budget;
    double owed;  // > 0 to charge, < 0 to refund
    bool stats_any;
    double stats_charge;
    double stats_measured;
    int stats_statements;  // settlements in the batch
    int stats_admitted;    // statements admitted in the batch
    double counted_ms;  // passes' measured time settle_measured() took, not yet in the backend's shared counter
    // serial while both halves are pending for it (kNoFast otherwise): the
    // one compare settle_measured's usual case makes instead of four.
    std::uint64_t fast_serial = kNoFast;
    static constexpr std::uint64_t kNoFast = ~std::uint64_t{0};  // no identity's serial
};
extern OT_LOCAL Pending pending_settlement;
void settle_flush_due();  // writes out what reached its threshold
// A pass's measured ms: count_measured(ms), then settle(id, b, charge,
// charge, ms, serial), inline for the usual case: the same identity (known by
// its serial) and budget as what is pending, both halves pending already (a
// call and its checks were a twentieth of what a select-only statement's
// passes cost). The backend's shared measured-time counter (throttle_stats)
// then gets the time with the statistics' batch (a shared write per pass
// was another fortieth).
inline void settle_measured(const IdentityKey& id, core::Budget b, double charge, double ms, std::uint64_t serial) {
    Pending& p = pending_settlement;
    if (likely(serial == p.fast_serial && same_budget(p.budget, b))) {
        measured_here_ms += ms;
        p.counted_ms += ms;
        p.owed += charge;
        p.stats_charge += charge;
        p.stats_measured += ms;
        p.stats_statements++;
        if (unlikely(std::fabs(p.owed) >= kFlushMs || p.stats_measured >= kStatsFlushMs ||
                     p.stats_statements >= kStatsFlushStatements))
            settle_flush_due();
        return;
    }
    count_measured(ms);
    settle(id, b, charge, charge, ms, serial);
}
// What is still owed to id's bucket, handed over to be settled in the
// admission's own visit to the bucket (anything owed to another bucket is
// written first).
double take_owed(const IdentityKey& id, core::Budget b);
// Writes everything pending now (a settlement made while the backend exits).
void flush_settlements();

}  // namespace ot::ext
