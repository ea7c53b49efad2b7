// The calibration sample store: the last ogc_throttle.max_samples priced
// statements' features and measured milliseconds, in a shared ring, and the
// weights last fitted from them (applied when ogc_throttle.calibration = apply).
#pragma once
#include "ext/pg.hpp"

#include "core/calibration.hpp"

namespace ot::ext {

void samples_request_shmem();
void samples_attach();
size_t samples_shmem_size();
bool samples_enabled();

// Keeps one sample (cheap: a spinlock and a copy). Returns true when enough
// samples arrived since the last fit that an automatic refit is due.
bool sample_record(const core::PlanFeatures& f, double measured_ms);

// Every kept sample, oldest first (palloc'd); *n receives the count.
core::Sample* samples_snapshot(size_t* n);
int64 samples_written();

// Weights fitted by the last throttle_calibrate(true) or automatic refit.
struct FittedWeights {
    bool valid;
    bool fitted_class[core::kCostClasses];
    core::ClassWeights weights[core::kCostClasses];
    TimestampTz at;
    int64 samples_used;
};
void fitted_store(const core::Calibration& c);
FittedWeights fitted_load();
// Changes whenever fitted_load's answer may have (no lock taken).
uint64 fitted_generation();

// Refits from the samples and stores the result if one is due and no other
// fit is under way: in a background worker started for it (refit_worker.cpp),
// or in this backend when none can be started. May allocate: call inside guard().
void refit_if_due();
// The fit itself, once claimed (by refit_if_due); releases the claim. `where`
// names the process in the DEBUG1 line it logs.
void refit_claimed(const char* where);
// refit_worker.cpp: starts a worker that runs refit_claimed(); false when none
// could be registered.
bool launch_refit_worker();

}  // namespace ot::ext
