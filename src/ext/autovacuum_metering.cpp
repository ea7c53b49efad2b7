// Autovacuum's own work on a table, charged to the table's owner. The owner of a table may set its
// autovacuum thresholds (ALTER TABLE … SET (autovacuum_vacuum_threshold = 1, …)), and then each of
// its one-row updates makes a worker vacuum the table, every index scanned, and analyze it: fifteen
// such updates of a 400 000-row table with four indexes were charged 67 ms and took autovacuum 1.6 s.
// Every transaction in which a worker holds a table's maintenance lock (ShareUpdateExclusiveLock: its
// VACUUM, its ANALYZE, its TOAST table's, a BRIN summarization) is charged to the table's owner, as
// the owner's sessions are charged (maintenance_metering.cpp reads their settings): its wall time
// from the end of the worker's previous transaction, less a metered pass of the owner's functions
// in it (charged on its own). Charged, never refused or cut off: a table left unvacuumed bloats and
// ages toward wraparound, for everyone. The debt refuses the owner's own statements.
// ogc_throttle.charge_autovacuum (server-wide) turns it off.
#include "ext/execution.hpp"
#include "ext/settings.hpp"
#include "ext/settlement.hpp"

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

// A relation of this database whose maintenance lock this backend holds (InvalidOid: none).
Oid maintained_relation() {
    const LOCKMASK want = LOCKBIT_ON(ShareUpdateExclusiveLock);
    Oid found = InvalidOid;
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

// At the pre-commit, where the catalog can still be read.
void charge_owner() {
    if (!setting_charge_autovacuum) return;
    const Oid rel = maintained_relation();
    // (the system catalogs' upkeep is everyone's DDL, not their owner's: the bootstrap superuser)
    if (!OidIsValid(rel) || rel < FirstNormalObjectId) return;
    const Oid owner = owner_of(rel);
    if (!OidIsValid(owner) || !shared_memory_ready()) return;
    // The identity the owner may choose, decided as the owner (the worker runs as a superuser).
    Oid user;
    int context;
    GetUserIdAndSecContext(&user, &context);
    SetUserIdAndSecContext(owner, context | SECURITY_RESTRICTED_OPERATION);
    OwnerPayer p;
    const bool charged = owner_payer(owner, &p);
    SetUserIdAndSecContext(user, context);
    if (!charged || core::budget_problem(p.budget) != nullptr) return;
    instr_time until;
    if (!maintenance_pass_start(&until)) INSTR_TIME_SET_CURRENT(until);
    INSTR_TIME_SUBTRACT(until, previous_end);
    const double ms = INSTR_TIME_GET_MILLISEC(until);
    if (!(ms > 0)) return;
    count_measured(ms);
    settle(p.id, p.budget, ms, ms, ms);
    flush_settlements();  // a worker may exit after its last table
}

void on_xact(XactEvent event, void*) {
    switch (event) {
        case XACT_EVENT_PRE_COMMIT: charge_owner(); break;
        case XACT_EVENT_COMMIT:
        case XACT_EVENT_ABORT: INSTR_TIME_SET_CURRENT(previous_end); break;
        default: break;
    }
}

}  // namespace

void autovacuum_metering_start() {
    INSTR_TIME_SET_CURRENT(previous_end);
    RegisterXactCallback(on_xact, nullptr);
}

}  // namespace ot::ext
