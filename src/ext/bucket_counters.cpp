// This backend's counters in the shared header (throttle_stats): one slot per
// PGPROC, written only by its backend, summed by readers.
#include "ext/bucket_shared.hpp"
#include "ext/hot.hpp"

#include <algorithm>
#include <cmath>

#include "ext/settings.hpp"

extern "C" {
#include "storage/proc.h"
}

namespace ot::ext {
namespace {

constexpr double kMicros = 1e6;

// Single writer per slot: a plain read-then-write is enough and avoids a locked instruction.
void bump(pg_atomic_uint64* c, uint64 by) { pg_atomic_write_u64(c, pg_atomic_read_u64(c) + by); }

}  // namespace

// A backend keeps its PGPROC slot for life: found once, not read from MyProc and
// the shared header (two more cache lines) on every statement.
OT_HOT BackendCounters* my_counters() {
    static BackendCounters* mine = nullptr;
    if (mine != nullptr) return mine;
    if (MyProc == nullptr || MyProc->pgprocno < 0 || MyProc->pgprocno >= shared->nslots) return nullptr;
    mine = &shared->slots[MyProc->pgprocno];
    return mine;
}

void init_counters() {
    for (int i = 0; i < shared->nslots; i++) {
        BackendCounters* c = &shared->slots[i];
        pg_atomic_init_u64(&c->visiting, 0);
        pg_atomic_init_u64(&c->spends, 0);
        pg_atomic_init_u64(&c->refusals, 0);
        pg_atomic_init_u64(&c->never_fits, 0);
        pg_atomic_init_u64(&c->cost_micro, 0);
        pg_atomic_init_u64(&c->statements_priced, 0);
        pg_atomic_init_u64(&c->statements_delayed, 0);
        pg_atomic_init_u64(&c->delay_us, 0);
        pg_atomic_init_u64(&c->shadow_refusals, 0);
        pg_atomic_init_u64(&c->measured_us, 0);
        pg_atomic_init_u64(&c->cutoffs, 0);
        pg_atomic_init_u32(&c->payer.seq, 0);
        c->payer.pid = 0;
    }
}

void count_spend(const core::SpendResult& r, double cost) {
    BackendCounters* c = my_counters();
    if (c == nullptr) return;
    switch (r.outcome) {
        case core::SpendOutcome::Allowed:
            bump(&c->spends, 1);
            bump(&c->cost_micro, static_cast<uint64>(cost * kMicros));
            break;
        case core::SpendOutcome::Refused: bump(&c->refusals, 1); break;
        case core::SpendOutcome::NeverFits: bump(&c->never_fits, 1); break;
    }
}

void count_owed(double owed) {
    BackendCounters* c = my_counters();
    if (c == nullptr || owed == 0) return;
    const uint64 charged = pg_atomic_read_u64(&c->cost_micro);
    const uint64 delta = static_cast<uint64>(std::fabs(owed) * kMicros);
    pg_atomic_write_u64(&c->cost_micro, owed > 0 ? charged + delta : (charged > delta ? charged - delta : 0));
}

void count_hook_event(HookEvent ev, int64 delay_us) {
    BackendCounters* c = my_counters();
    if (c == nullptr) return;
    switch (ev) {
        case HookEvent::Priced: bump(&c->statements_priced, 1); break;
        case HookEvent::ShadowRefusal: bump(&c->shadow_refusals, 1); break;
        case HookEvent::Delayed:
            bump(&c->statements_delayed, 1);
            bump(&c->delay_us, static_cast<uint64>(std::max<int64>(delay_us, 0)));
            break;
        case HookEvent::Cutoff: bump(&c->cutoffs, 1); break;
    }
}

double measured_here_ms = 0;  // this backend's, for life: never reset

pg_atomic_uint64* measured_counter = nullptr;

void publish_measured(double ms) {
    if (measured_counter == nullptr) {
        BackendCounters* c = my_counters();
        if (c == nullptr) return;
        measured_counter = &c->measured_us;
    }
    bump(measured_counter, static_cast<uint64>(ms * 1000.0));
}

void count_measured_first(double ms) {
    measured_here_ms += ms;
    BackendCounters* c = my_counters();
    if (c == nullptr) return;
    measured_counter = &c->measured_us;
    bump(measured_counter, static_cast<uint64>(ms * 1000.0));
}

TableStats table_stats() {
    TableStats s{};
    for (int i = 0; i < shared->nslots; i++) {
        BackendCounters* c = &shared->slots[i];
        s.spends += static_cast<int64>(pg_atomic_read_u64(&c->spends));
        s.refusals += static_cast<int64>(pg_atomic_read_u64(&c->refusals));
        s.never_fits += static_cast<int64>(pg_atomic_read_u64(&c->never_fits));
        s.cost_charged += static_cast<double>(pg_atomic_read_u64(&c->cost_micro)) / kMicros;
        s.statements_priced += static_cast<int64>(pg_atomic_read_u64(&c->statements_priced));
        s.statements_delayed += static_cast<int64>(pg_atomic_read_u64(&c->statements_delayed));
        s.delay_seconds += static_cast<double>(pg_atomic_read_u64(&c->delay_us)) / kMicros;
        s.shadow_refusals += static_cast<int64>(pg_atomic_read_u64(&c->shadow_refusals));
        s.measured_ms += static_cast<double>(pg_atomic_read_u64(&c->measured_us)) / 1000.0;
        s.cutoffs += static_cast<int64>(pg_atomic_read_u64(&c->cutoffs));
    }
    s.identities = hash_get_num_entries(buckets);
    s.max_identities = setting_max_identities;
    s.evicted_full = static_cast<int64>(pg_atomic_read_u64(&shared->evicted_full));
    s.evicted_lossy = static_cast<int64>(pg_atomic_read_u64(&shared->evicted_lossy));
    s.stats_reset = static_cast<TimestampTz>(pg_atomic_read_u64(&shared->stats_reset));
    return s;
}

void table_stats_reset() {
    // Counters are single-writer without locks; a backend bumping its counter at
    // this very instant may write back its pre-reset value. Acceptable for stats.
    for (int i = 0; i < shared->nslots; i++) {
        BackendCounters* c = &shared->slots[i];
        pg_atomic_write_u64(&c->spends, 0);
        pg_atomic_write_u64(&c->refusals, 0);
        pg_atomic_write_u64(&c->never_fits, 0);
        pg_atomic_write_u64(&c->cost_micro, 0);
        pg_atomic_write_u64(&c->statements_priced, 0);
        pg_atomic_write_u64(&c->statements_delayed, 0);
        pg_atomic_write_u64(&c->delay_us, 0);
        pg_atomic_write_u64(&c->shadow_refusals, 0);
        pg_atomic_write_u64(&c->measured_us, 0);
        pg_atomic_write_u64(&c->cutoffs, 0);
    }
    pg_atomic_write_u64(&shared->evicted_full, 0);
    pg_atomic_write_u64(&shared->evicted_lossy, 0);
    pg_atomic_write_u64(&shared->stats_reset, static_cast<uint64>(GetCurrentTimestamp()));
}

}  // namespace ot::ext
