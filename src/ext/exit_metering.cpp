// The work a session's exit does. When a client goes (Terminate, a closed socket, a FATAL), the
// backend aborts the transaction left open and removes the session's temporary relations, on no
// meter: a role created 2 000 temporary tables (3.5 s charged), put a row in one with
// temp_buffers = '10GB' (each relation's drop then scans every local buffer descriptor), and
// left: 26 s of backend CPU, free (DISCARD TEMP, the same work as a statement, is metered). The
// exit is now timed from before the first of that work to after the last of it and charged to
// the session's identity when it leaves such work behind; it cannot be cut off, so what it used
// is debt its next sessions repay.
//
// PostgreSQL runs the exit's callbacks last registered first. The start is registered with the
// first message's answer, which is after the session's own start (the abort of an open
// transaction), and again once a transaction that created the temporary schema has ended (its
// commit registers the removal of the schema's relations, after everything earlier); the end
// runs after every such callback.
#include "ext/metering.hpp"

#include "ext/execution.hpp"
#include "ext/settlement.hpp"
#include "ext/sql_args.hpp"

extern "C" {
#include "access/xact.h"
#include "catalog/namespace.h"
#include "miscadmin.h"
#include "portability/instr_time.h"
#include "storage/ipc.h"
#include "utils/memutils.h"
}

namespace ot::ext {
namespace {

bool start_registered = false;  // before the open transaction's abort
bool temp_registered = false;   // before the temporary relations' removal
bool temp_callback_pending = false;
bool started = false;
instr_time exit_start;

// Timed only where the session left work behind: a temporary schema, or a transaction open (a
// FATAL inside one, a client gone within BEGIN). Another exit is the connection's own cost, as its
// set-up is (ogc_throttle.charge_connection).
void exit_begins(int, Datum) {
    if (started) return;  // (registered twice: the later runs first)
    Oid temp = InvalidOid, toast = InvalidOid;
    GetTempNamespaceState(&temp, &toast);
    if (!OidIsValid(temp) && !IsTransactionOrTransactionBlock()) return;
    INSTR_TIME_SET_CURRENT(exit_start);
    started = true;
}

void exit_ends(int, Datum) {
    if (!started || !shared_memory_ready()) return;
    const Mode mode = current_mode();
    if (mode == Mode::Off || mode == Mode::Log || !true_up_enabled()) return;
    const core::Budget b = current_budget();
    const IdentityKey* id = own_identity_if_known();
    if (id == nullptr || core::budget_problem(b) != nullptr) return;
    const double ms = elapsed_ms(exit_start);
    count_measured(ms);
    settle(*id, b, ms, ms, ms);
    flush_settlements();  // the exit's own flush has run already
}

// At the end of the transaction that created the temporary schema, after PostgreSQL registered
// the removal of its relations (a memory context's reset is the last of a transaction's cleanup).
void after_temp_schema(void*) {
    temp_callback_pending = false;
    Oid temp = InvalidOid, toast = InvalidOid;
    GetTempNamespaceState(&temp, &toast);
    if (!OidIsValid(temp) || temp_registered) return;  // rolled back: it registered nothing
    before_shmem_exit(exit_begins, 0);
    temp_registered = true;
}

}  // namespace

void exit_metering_start() {
    if (start_registered) return;
    before_shmem_exit(exit_begins, 0);
    on_shmem_exit(exit_ends, 0);
    start_registered = true;
}

void exit_metering_commit() {
    if (temp_registered || temp_callback_pending || !start_registered || MyBackendType != B_BACKEND) return;
    Oid temp = InvalidOid, toast = InvalidOid;
    GetTempNamespaceState(&temp, &toast);
    if (!OidIsValid(temp)) return;
    auto* cb =
        static_cast<MemoryContextCallback*>(MemoryContextAlloc(TopTransactionContext, sizeof(MemoryContextCallback)));
    cb->func = after_temp_schema;
    cb->arg = nullptr;
    MemoryContextRegisterResetCallback(TopTransactionContext, cb);
    temp_callback_pending = true;
}

}  // namespace ot::ext
