// _PG_init: settings always; shared memory only when preloaded.
#include "ext/bucket_table.hpp"
#include "ext/density_grid.hpp"
#include "ext/density_shared.hpp"
#include "ext/hook.hpp"
#include "ext/identity_stats.hpp"
#include "ext/samples.hpp"
#include "ext/settings.hpp"

extern "C" {
#include "miscadmin.h"
#include "storage/ipc.h"
}

extern "C" {
PG_MODULE_MAGIC;
void _PG_init(void);
}

namespace {
shmem_request_hook_type prev_shmem_request = nullptr;
shmem_startup_hook_type prev_shmem_startup = nullptr;

void on_shmem_request() {
    if (prev_shmem_request) prev_shmem_request();
    ot::ext::request_shared_memory();
    ot::ext::identity_stats_request_shmem();
    ot::ext::samples_request_shmem();
    ot::ext::density_shared_request_shmem();
}

void on_shmem_startup() {
    if (prev_shmem_startup) prev_shmem_startup();
    ot::ext::attach_shared_memory();
    ot::ext::identity_stats_attach();
    ot::ext::samples_attach();
    ot::ext::density_shared_attach();
}
}  // namespace

void _PG_init(void) {
    ot::ext::define_settings();
    ot::ext::install_density_analyze_hook();
    // Without preloading there is no shared table; every budget function then
    // raises an error naming the fix (require_shared_memory).
    if (!process_shared_preload_libraries_in_progress) return;
    prev_shmem_request = shmem_request_hook;
    shmem_request_hook = on_shmem_request;
    prev_shmem_startup = shmem_startup_hook;
    shmem_startup_hook = on_shmem_startup;
    ot::ext::install_hooks();
}
