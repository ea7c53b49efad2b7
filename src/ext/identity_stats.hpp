// Per-identity statistics of the pricing hook, in a shared table of their
// own (ogc_throttle.max_identity_stats entries, least recently active
// forgotten first), so the bucket table stays small and its lossless eviction
// of full buckets does not erase anyone's history.
#pragma once
#include "ext/bucket_table.hpp"

namespace ot::ext {

void identity_stats_request_shmem();
void identity_stats_attach();
size_t identity_stats_shmem_size();

struct StatementRecord {
    double cost;       // charged (0 when refused or in shadow mode)
    bool refused;      // refused, or in shadow mode would have been
    int64 delay_us;    // > 0: waited this long
};
void record_statement(const IdentityKey& id, const StatementRecord& r);
// A backend's batch (settlement.cpp): statements admitted, what they changed
// in the charge (their costs, + charged and - refunded on measured time) and
// their measured time.
void record_batch(const IdentityKey& id, int64 statements, double charge_delta, double measured_ms);

struct IdentityStatsRow {
    IdentityKey identity;
    int64 statements;
    int64 refused;
    int64 delayed;
    double delay_seconds;
    double cost_charged;
    double measured_ms;
    TimestampTz last_statement;
};
// palloc'd; *count receives the length. Empty when the table is disabled.
IdentityStatsRow* identity_stats_snapshot(int64* count);
void identity_stats_reset();

}  // namespace ot::ext
