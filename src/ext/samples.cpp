#include "ext/samples.hpp"

#include <algorithm>

#include "ext/settings.hpp"

extern "C" {
#include "miscadmin.h"
#include "port/atomics.h"
#include "portability/instr_time.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "storage/spin.h"
}

namespace ot::ext {
namespace {

// Floats: a sample is 88 bytes, 10 000 of them under a megabyte.
struct Slot {
    float calls[core::kCostClasses];
    float rows[core::kCostClasses];
    float unpriced;
    float measured_ms;
};

struct Ring {
    slock_t mutex;  // guards written, last_fit_at, fitted and the slots
    uint64 written;
    uint64 last_fit_at;
    TimestampTz last_fit_time;  // of the last fit tried, automatic or not
    TimestampTz fitting_since;  // an automatic fit is under way (0: none)
    FittedWeights fitted;
    // Bumped with every fit stored: a backend keeps its cost model until it moves.
    pg_atomic_uint64 fitted_generation;
    int capacity;
    Slot slots[FLEXIBLE_ARRAY_MEMBER];
};

Ring* ring = nullptr;

// Automatic refits: every tenth of the store, at least every 1000 samples, and
// at most every 10 seconds: a fit of a full store takes up to about 0.5 s of
// one process (8 resamples), which every 1000 short statements would make a
// large share of a core; one in 10 s keeps it under 5 %.
uint64 refit_every() { return static_cast<uint64>(std::max(1000, setting_max_samples / 10)); }
constexpr TimestampTz kMinRefitInterval = 10 * USECS_PER_SEC;

}  // namespace

size_t samples_shmem_size() {
    if (setting_max_samples <= 0) return 0;
    return add_size(offsetof(Ring, slots), mul_size(setting_max_samples, sizeof(Slot)));
}

void samples_request_shmem() {
    if (setting_max_samples > 0) RequestAddinShmemSpace(samples_shmem_size());
}

void samples_attach() {
    if (setting_max_samples <= 0) return;
    LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
    bool found = false;
    ring = static_cast<Ring*>(ShmemInitStruct("ogc_throttle samples", samples_shmem_size(), &found));
    if (!found) {
        SpinLockInit(&ring->mutex);
        ring->written = 0;
        ring->last_fit_at = 0;
        ring->last_fit_time = 0;
        ring->fitting_since = 0;
        ring->fitted = FittedWeights{};
        pg_atomic_init_u64(&ring->fitted_generation, 0);
        ring->capacity = setting_max_samples;
    }
    LWLockRelease(AddinShmemInitLock);
}

bool samples_enabled() { return ring != nullptr; }

bool sample_record(const core::PlanFeatures& f, double measured_ms) {
    if (ring == nullptr || !setting_calibration_samples) return false;
    Slot s;
    for (int c = 0; c < core::kCostClasses; c++) {
        s.calls[c] = static_cast<float>(f.calls[c]);
        s.rows[c] = static_cast<float>(f.rows[c]);
    }
    s.unpriced = static_cast<float>(f.unpriced);
    s.measured_ms = static_cast<float>(measured_ms);
    SpinLockAcquire(&ring->mutex);
    ring->slots[ring->written % static_cast<uint64>(ring->capacity)] = s;
    ring->written++;
    const bool due = ring->written - ring->last_fit_at >= refit_every();
    SpinLockRelease(&ring->mutex);
    return due && calibration_applies();
}

int64 samples_written() {
    if (ring == nullptr) return 0;
    SpinLockAcquire(&ring->mutex);
    const uint64 w = ring->written;
    SpinLockRelease(&ring->mutex);
    return static_cast<int64>(w);
}

core::Sample* samples_snapshot(size_t* n) {
    *n = 0;
    if (ring == nullptr) return nullptr;
    const size_t cap = static_cast<size_t>(ring->capacity);
    // Copied out under the spinlock in one pass (no allocation while holding it).
    Slot* copy = static_cast<Slot*>(palloc(sizeof(Slot) * cap));
    SpinLockAcquire(&ring->mutex);
    const uint64 written = ring->written;
    const size_t have = static_cast<size_t>(std::min<uint64>(written, cap));
    const size_t first = written > cap ? static_cast<size_t>(written % cap) : 0;
    for (size_t i = 0; i < have; i++) copy[i] = ring->slots[(first + i) % cap];
    SpinLockRelease(&ring->mutex);
    auto* out = static_cast<core::Sample*>(palloc0(sizeof(core::Sample) * std::max<size_t>(have, 1)));
    for (size_t i = 0; i < have; i++) {
        for (int c = 0; c < core::kCostClasses; c++) {
            out[i].features.calls[c] = copy[i].calls[c];
            out[i].features.rows[c] = copy[i].rows[c];
        }
        out[i].features.unpriced = copy[i].unpriced;
        out[i].measured_ms = copy[i].measured_ms;
    }
    pfree(copy);
    *n = have;
    return out;
}

void fitted_store(const core::Calibration& c) {
    if (ring == nullptr) return;
    FittedWeights f{};
    f.valid = c.problem == nullptr;
    for (int i = 0; i < core::kCostClasses; i++) {
        f.fitted_class[i] = c.fitted_class[i];
        f.weights[i] = c.fitted.weights[i];
    }
    f.at = GetCurrentTimestamp();
    f.samples_used = c.samples_used;
    SpinLockAcquire(&ring->mutex);
    if (f.valid) {
        ring->fitted = f;
        pg_atomic_fetch_add_u64(&ring->fitted_generation, 1);
    }
    ring->last_fit_at = ring->written;
    ring->last_fit_time = f.at;
    SpinLockRelease(&ring->mutex);
}

uint64 fitted_generation() { return ring != nullptr ? pg_atomic_read_u64(&ring->fitted_generation) : 0; }

FittedWeights fitted_load() {
    if (ring == nullptr) return FittedWeights{};
    SpinLockAcquire(&ring->mutex);
    const FittedWeights f = ring->fitted;
    SpinLockRelease(&ring->mutex);
    return f;
}

namespace {
core::Calibration fit(const core::CostModel& m, const core::Sample* s, size_t n) noexcept {
    try {
        return core::calibrate(m, s, n);
    } catch (...) {  // std::bad_alloc: no fit this time
        core::Calibration c{};
        c.problem = "out of memory";
        return c;
    }
}

// A claim older than this is taken over: a worker that was registered but
// never ran (the postmaster could not fork it) must not stop every later refit.
constexpr TimestampTz kStaleClaim = 60 * USECS_PER_SEC;

bool claim_fit(TimestampTz now) {
    SpinLockAcquire(&ring->mutex);
    const bool free = ring->fitting_since == 0 || now - ring->fitting_since > kStaleClaim;
    if (free) ring->fitting_since = now;
    SpinLockRelease(&ring->mutex);
    return free;
}

void release_fit() {
    SpinLockAcquire(&ring->mutex);
    ring->fitting_since = 0;
    SpinLockRelease(&ring->mutex);
}

void fit_and_log(const char* where) {
    instr_time start;
    INSTR_TIME_SET_CURRENT(start);
    size_t n = 0;
    core::Sample* s = samples_snapshot(&n);
    fitted_store(fit(configured_cost_model(), s, n));
    pfree(s);
    instr_time took;
    INSTR_TIME_SET_CURRENT(took);
    INSTR_TIME_SUBTRACT(took, start);
    elog(DEBUG1, "ogc_throttle: weights refitted from %zu samples in %s (%.1f ms)", n, where,
         INSTR_TIME_GET_MILLISEC(took));
}

}  // namespace

void refit_claimed(const char* where) {
    if (ring == nullptr) return;
    PG_TRY();
    { fit_and_log(where); }
    PG_CATCH();
    {
        release_fit();
        PG_RE_THROW();
    }
    PG_END_TRY();
    release_fit();
}

void refit_if_due() {
    if (ring == nullptr || !calibration_applies()) return;
    const TimestampTz now = GetCurrentTimestamp();
    SpinLockAcquire(&ring->mutex);
    const bool too_soon = now - ring->last_fit_time < kMinRefitInterval;
    if (too_soon) ring->last_fit_at = ring->written;  // due again after another refit_every() samples
    SpinLockRelease(&ring->mutex);
    if (too_soon || !claim_fit(now)) return;  // or another fit is under way
    // A fit of a full store takes about 0.5 s: a worker of its own runs it, and
    // the client whose statement made it due does not wait. With no worker
    // slot free (max_worker_processes), this backend fits, as it always did.
    if (launch_refit_worker()) return;  // the worker releases the claim
    refit_claimed("the backend (no background worker could be started)");
}

}  // namespace ot::ext
