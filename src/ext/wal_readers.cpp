// Who reads the WAL after the process that wrote it (wal_readers.hpp).
extern "C" {
#include "postgres.h"

#include "access/xlog.h"
#include "miscadmin.h"
#include "replication/walsender.h"
#include "replication/walsender_private.h"
#include "storage/proc.h"
#include "storage/procarray.h"
#include "storage/lwlock.h"
#include "storage/spin.h"
#include "utils/timestamp.h"
}

#include "ext/wal_readers.hpp"

namespace ot::ext {
namespace {

struct Readers {
    int streams = 0;        // walsenders streaming WAL, physical and logical
    int decoders_here = 0;  // logical walsenders of this database
    bool archiving = false;
};

Readers readers;
TimestampTz counted_at = 0;  // 0: never

// Walsenders come and go with their standbys and subscribers: counted again at most once a second,
// ProcArrayLock taken for each to tell a logical one (connected to a database) from a physical one.
const Readers& current_readers() {
    const TimestampTz now = GetCurrentTimestamp();
    if (counted_at != 0 && !TimestampDifferenceExceeds(counted_at, now, 1000)) return readers;
    if (LWLockHeldByMe(ProcArrayLock)) return readers;  // (an exit within a FATAL: the last count)
    Readers r;
    r.archiving = XLogArchivingActive();
    for (int i = 0; WalSndCtl != nullptr && i < max_wal_senders; i++) {
        WalSnd* w = &WalSndCtl->walsnds[i];
        SpinLockAcquire(&w->mutex);
        const pid_t pid = w->pid;
        const WalSndState state = w->state;
        SpinLockRelease(&w->mutex);
        if (pid == 0 || (state != WALSNDSTATE_CATCHUP && state != WALSNDSTATE_STREAMING)) continue;
        r.streams++;
        const PGPROC* proc = BackendPidGetProc(pid);
        if (proc != nullptr && proc->databaseId == MyDatabaseId) r.decoders_here++;
    }
    readers = r;
    counted_at = now;
    return readers;
}

}  // namespace

double wal_readers_ms(const WalMark& m) {
    if (setting_wal_send_cost == 0 && setting_wal_decode_cost == 0 && setting_wal_archive_cost == 0) return 0;
    const Readers& r = current_readers();
    const double kb = static_cast<double>(pgWalUsage.wal_bytes - m.bytes) / 1024.0;
    const double records = static_cast<double>(pgWalUsage.wal_records - m.records);
    return kb * (setting_wal_send_cost * r.streams + (r.archiving ? setting_wal_archive_cost : 0)) +
           records * setting_wal_decode_cost * r.decoders_here;
}

}  // namespace ot::ext
