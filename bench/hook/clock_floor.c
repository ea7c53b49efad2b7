/*
 * The least a wall-clock meter of executor passes and message spans costs: a
 * library that reads the clock where ogc_throttle's metering must, and does
 * nothing else. Two reads per executor pass (its start and end), one at each
 * answer that ends a message's work (ParseComplete, BindComplete,
 * CommandComplete, PortalSuspended). `make bench/hook/clock_floor.so` builds it;
 * `symbol_diff.sh LIB=clock_floor.so,...` compares it with a build of the
 * library (bench/README.md). Not part of the extension, and not for
 * production: it meters nothing.
 */
#include "postgres.h"

#include <time.h>

#include "executor/executor.h"
#include "fmgr.h"
#include "libpq/libpq.h"

PG_MODULE_MAGIC;

void _PG_init(void);

static ExecutorRun_hook_type prev_run = NULL;
static const PQcommMethods *socket_methods = NULL;
static PQcommMethods watched;
static int64 total_ns = 0; /* the elapsed time summed, as a meter would */

#ifdef FLOOR_TSC
/* The time-stamp counter instead (make bench/hook/clock_floor_tsc.so): what a
 * calibrated TSC clock would cost in its place, the calibration left out. */
#include <x86intrin.h>
static uint64 last_tsc = 0;
static inline void read_clock(void)
{
    const uint64 now = __rdtsc();
    total_ns += (int64) (now - last_tsc);
    last_tsc = now;
}
#else
static struct timespec last;
static inline void read_clock(void)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    total_ns += (now.tv_sec - last.tv_sec) * 1000000000 + (now.tv_nsec - last.tv_nsec);
    last = now;
}
#endif

static void floor_run(QueryDesc *qd, ScanDirection dir, uint64 count, bool once)
{
    read_clock();
    if (prev_run)
        prev_run(qd, dir, count, once);
    else
        standard_ExecutorRun(qd, dir, count, once);
    read_clock();
}

static int floor_putmessage(char type, const char *s, size_t len)
{
    if (type == '1' || type == '2' || type == 'C' || type == 's')
        read_clock();
    return socket_methods->putmessage(type, s, len);
}

void _PG_init(void)
{
    prev_run = ExecutorRun_hook;
    ExecutorRun_hook = floor_run;
    socket_methods = PqCommMethods;
    watched = *PqCommMethods;
    watched.putmessage = floor_putmessage;
    PqCommMethods = &watched;
}
