// Autovacuum's own work on a table, charged to the table's owner. The owner of a table may set its
// autovacuum thresholds (ALTER TABLE … SET (autovacuum_vacuum_threshold = 1, …)), and then each of
// its one-row updates makes a worker vacuum the table, every index scanned, and analyze it: fifteen
// such updates of a 400 000-row table with four indexes were charged 67 ms and took autovacuum 1.6 s.
// Every transaction in which a worker holds a table's maintenance lock (ShareUpdateExclusiveLock: its
// VACUUM, its ANALYZE, its TOAST table's, a BRIN summarization) is charged to the table's owner, as
// the owner's sessions are charged (maintenance_metering.cpp reads their settings): its wall time
// from the end of the worker's previous transaction, less a metered pass of the owner's functions
// in it (charged on its own), and the writeback of the buffers it left dirty (writeback.hpp); a
// transaction aborted (a vacuum cancelled by a conflicting lock request) is charged at the worker's
// next commit, to the session that waited for the lock if the table is gone by then. Charged, never
// refused or cut off: a table left unvacuumed bloats and ages toward wraparound, for everyone. The
// debt refuses the owner's own statements.
// ogc_throttle.charge_autovacuum (server-wide) turns it off.
#include "ext/execution.hpp"
#include "ext/metering.hpp"
#include "ext/settings.hpp"
#include "ext/settlement.hpp"
#include "ext/wal_readers.hpp"
#include "ext/writeback.hpp"

extern "C" {
#include "access/htup_details.h"
#include "access/transam.h"
#include "access/xact.h"
#include "catalog/pg_class.h"
#include "miscadmin.h"
#include "storage/lock.h"
#include "storage/lwlock.h"
#include "storage/proc.h"
#include "utils/syscache.h"
}

namespace ot::ext {
namespace {

instr_time previous_end;  // the end of the worker's previous transaction
WritebackMark writeback_at_end;  // and its shared buffers dirtied and written then
WalMark wal_at_end;              // and the WAL it had written

// A relation of this database whose maintenance lock this backend holds (InvalidOid: none), and the
// PID of the first backend waiting for a lock on it (0: none), if asked.
Oid maintained_relation(int32* waiter = nullptr) {
    const LOCKMASK want = LOCKBIT_ON(ShareUpdateExclusiveLock);
    Oid found = InvalidOid;
    if (waiter != nullptr) *waiter = 0;
    for (int i = 0; i < NUM_LOCK_PARTITIONS && !OidIsValid(found); i++) {
        SHM_QUEUE* procLocks = &MyProc->myProcLocks[i];
        LWLock* partition = LockHashPartitionLockByIndex(i);
        LWLockAcquire(partition, LW_SHARED);
        auto* p = reinterpret_cast<PROCLOCK*>(SHMQueueNext(procLocks, procLocks, offsetof(PROCLOCK, procLink)));
        for (; p != nullptr;
             p = reinterpret_cast<PROCLOCK*>(SHMQueueNext(procLocks, &p->procLink, offsetof(PROCLOCK, procLink)))) {
            const LOCKTAG& t = p->tag.myLock->tag;
            if ((p->holdMask & want) != 0 && t.locktag_type == LOCKTAG_RELATION &&
                t.locktag_lockmethodid == DEFAULT_LOCKMETHOD && t.locktag_field1 == MyDatabaseId) {
                found = t.locktag_field2;
                const PROC_QUEUE& queue = p->tag.myLock->waitProcs;
                if (waiter != nullptr && queue.size > 0)
                    *waiter = reinterpret_cast<const PGPROC*>(queue.links.next)->pid;
                break;
            }
        }
        LWLockRelease(partition);
    }
    return found;
}

Oid owner_of(Oid relid) {
    HeapTuple tup = SearchSysCache1(RELOID, ObjectIdGetDatum(relid));
    if (!HeapTupleIsValid(tup)) return InvalidOid;
    const Oid owner = reinterpret_cast<Form_pg_class>(GETSTRUCT(tup))->relowner;
    ReleaseSysCache(tup);
    return owner;
}

// Wall time from the end of the worker's previous transaction to now, or to the start of a metered
// pass of the owner's functions in this one (charged on its own), the writeback of the buffers
// the transaction left dirty (most of a vacuum's it writes itself, through its ring), and what the
// WAL's readers do with what it wrote.
double span_ms() {
    instr_time until;
    if (!maintenance_pass_start(&until)) INSTR_TIME_SET_CURRENT(until);
    INSTR_TIME_SUBTRACT(until, previous_end);
    return INSTR_TIME_GET_MILLISEC(until) + writeback_ms(writeback_at_end) + wal_readers_ms(wal_at_end);
}

void charge_owner(Oid owner, double ms) {
    if (!OidIsValid(owner) || !shared_memory_ready()) return;  // (a table dropped since: see charge_aborted)
    // The identity the owner may choose, decided as the owner (the worker runs as a superuser).
    Oid user;
    int context;
    GetUserIdAndSecContext(&user, &context);
    SetUserIdAndSecContext(owner, context | SECURITY_RESTRICTED_OPERATION);
    OwnerPayer p;
    const bool charged = owner_payer(owner, &p);
    SetUserIdAndSecContext(user, context);
    if (!charged || core::budget_problem(p.budget) != nullptr) return;
    count_measured(ms);
    settle(p.id, p.budget, ms, ms, ms);
    flush_settlements();  // a worker may exit after its last table
}

// Work on a table whose transaction was aborted: a vacuum cancelled by a conflicting lock request
// (LOCK TABLE, TRUNCATE, ALTER TABLE: at most deadlock_timeout's wait for whoever asks, however long the
// vacuum had run), or an error in an index expression. The catalog cannot be read in an aborted
// transaction: the charge waits for the worker's next commit, which follows every abort (the next
// table's, or the worker's last).
struct Aborted {
    Oid rel;
    double ms;
    int32 waiter_pid;  // the first session waiting for a lock on rel at the abort (0: none)
    bool has_waiter;   // waiter: its payer then
    Payer waiter;
};
constexpr int kMaxAborted = 8;
Aborted aborted[kMaxAborted];
int naborted = 0;

bool maintained_here(Oid rel) {
    // (the system catalogs' upkeep is everyone's DDL, not their owner's: the bootstrap superuser)
    return setting_charge_autovacuum && OidIsValid(rel) && rel >= FirstNormalObjectId;
}

void note_aborted() {
    // A try refused for the owner's debt is charged nothing, as a refused statement is not: autovacuum
    // tries again at every nap, and the debt would grow by each try while the owner's own statements,
    // which could turn its autovacuum off, are refused.
    if (maintenance_refused()) return;
    int32 waiter;
    const Oid rel = maintained_relation(&waiter);  // (its locks are released after the abort's callbacks)
    const double ms = span_ms();
    if (!maintained_here(rel) || !(ms > 0)) return;
    for (int i = 0; i < naborted; i++)
        if (aborted[i].rel == rel) {
            aborted[i].ms += ms;
            return;
        }
    if (naborted == kMaxAborted) return;
    Aborted& a = aborted[naborted++];
    a = Aborted{rel, ms, waiter, false, {}};
    // (payer slots are read without a lock, and the catalog is not needed: safe in an aborted transaction)
    a.has_waiter = waiter != 0 && find_payer(waiter, a.waiter);
}

// A table dropped before the charge (its owner's DROP TABLE, waiting for the vacuum's lock, cancelled it):
// no owner is left to ask, and whoever waited for the lock, which the cancel was for, pays. Its payer is
// read again now: the table is gone, so a DROP has committed, and a session publishes its payer at a commit
// that writes, where at the abort a session's first statement (one that takes a vacuum's lock without a
// DROP, then drops the table) may have published none.
void charge_aborted(const Aborted& a) {
    const Oid owner = owner_of(a.rel);
    if (OidIsValid(owner)) return charge_owner(owner, a.ms);
    if (!shared_memory_ready()) return;
    Payer p = a.waiter;
    bool known = a.has_waiter;
    Payer now;
    if (a.waiter_pid != 0 && find_payer(a.waiter_pid, now) && now.metered) {
        p = now;
        known = true;
    }
    if (!known || !p.metered) return;
    count_measured(a.ms);
    settle(p.key, p.budget, p.charges ? a.ms : 0, p.charges ? a.ms : 0, a.ms);
    flush_settlements();
}

// At the pre-commit, where the catalog can still be read.
void charge_owners() {
    const int n = naborted;
    naborted = 0;  // (before the charges: an error in one must not charge the others twice)
    for (int i = 0; i < n; i++) charge_aborted(aborted[i]);
    const Oid rel = maintained_relation();
    if (!maintained_here(rel)) return;
    const double ms = span_ms();
    if (ms > 0) charge_owner(owner_of(rel), ms);
}

void on_xact(XactEvent event, void*) {
    switch (event) {
        case XACT_EVENT_PRE_COMMIT: charge_owners(); break;
        case XACT_EVENT_ABORT:
            note_aborted();
            [[fallthrough]];
        case XACT_EVENT_COMMIT:
            INSTR_TIME_SET_CURRENT(previous_end);
            writeback_mark(&writeback_at_end);
            wal_mark(&wal_at_end);
            // (maintenance_metering.cpp registers its callback at a worker's first pass, after this one
            // at the worker's first commit, so its settlement at this event has run already)
            maintenance_pass_forget();
            break;
        default: break;
    }
}

}  // namespace

void autovacuum_metering_start() {
    INSTR_TIME_SET_CURRENT(previous_end);
    writeback_mark(&writeback_at_end);
    wal_mark(&wal_at_end);
    RegisterXactCallback(on_xact, nullptr);
}

}  // namespace ot::ext
