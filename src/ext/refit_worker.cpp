// Automatic refits (ogc_throttle.calibration = apply) run in a background
// worker started for each one, not in the ExecutorEnd of the statement that
// made the refit due: a fit of a full store takes about 0.5 s (8 resamples of
// up to 2 000 samples), and that statement's client waited for all of it.
//
// The worker is dynamic (registered when a fit is due, gone when it is done),
// so it holds a max_worker_processes slot, which parallel queries share, only
// while it fits. It is forked by the postmaster: the shared sample ring and
// the server-wide settings (postgresql.conf, ALTER SYSTEM) are what it sees,
// so the configured weights a fit starts from are the server's, never one
// session's or role's SET.
#include "ext/samples.hpp"

#include <cstring>

#include "ext/boundary.hpp"

extern "C" {
#include "miscadmin.h"
#include "postmaster/bgworker.h"

PGDLLEXPORT void ot_refit_worker_main(Datum arg);
}

namespace ot::ext {

bool launch_refit_worker() {
    BackgroundWorker w;
    std::memset(&w, 0, sizeof(w));
    w.bgw_flags = BGWORKER_SHMEM_ACCESS;
    w.bgw_start_time = BgWorkerStart_ConsistentState;  // a hot standby's statements are sampled too
    w.bgw_restart_time = BGW_NEVER_RESTART;
    snprintf(w.bgw_library_name, BGW_MAXLEN, "ogc_throttle");
    snprintf(w.bgw_function_name, BGW_MAXLEN, "ot_refit_worker_main");
    snprintf(w.bgw_name, BGW_MAXLEN, "ogc_throttle calibration refit");
    snprintf(w.bgw_type, BGW_MAXLEN, "ogc_throttle calibration");
    w.bgw_notify_pid = 0;
    return RegisterDynamicBackgroundWorker(&w, nullptr);
}

}  // namespace ot::ext

// PostgreSQL calls in here, like a hook: its body runs in guard(). An ERROR
// ends the worker (there is no transaction to abort to); refit_claimed() has
// released its claim on the way out.
void ot_refit_worker_main(Datum) {
    BackgroundWorkerUnblockSignals();
    ot::ext::guard([] { ot::ext::refit_claimed("a background worker"); });
}
