// Who pays for work a backend causes elsewhere, published in the backend's PGPROC slot of the shared
// header: the notifications it queues are delivered by listeners (notify_metering.cpp), and a
// parallel worker stopped by its leader's error charges the leader's identity without reading the
// catalog (parallel_maintenance.cpp). A backend writes its own slot, at a commit that has an xid
// (a commit that queues notifications always gets one) and as a metered utility statement begins
// (a parallel index build or VACUUM), and only when something in it changed; readers know the
// backend by its PID.
#include "ext/bucket_shared.hpp"
#include "ext/metering.hpp"
#include "ext/sql_args.hpp"

extern "C" {
#include "miscadmin.h"
#include "port/atomics.h"
#include "storage/proc.h"
}

namespace ot::ext {
namespace {

bool published = false;
Payer mine{};  // what this backend's slot says

// pid's payer, from slot s; false if the slot is another backend's (or stayed busy).
bool read_slot(const PayerSlot& s, int32 pid, Payer& out) {
    for (int tries = 0; tries < 1000; tries++) {
        const uint32 before = pg_atomic_read_u32(const_cast<pg_atomic_uint32*>(&s.seq));
        if (before & 1) {
            pg_spin_delay();
            continue;
        }
        pg_read_barrier();
        const bool match = s.pid == pid;
        Payer copy{s.metered, s.charges, {s.capacity, s.rate}, s.key};
        pg_read_barrier();
        if (pg_atomic_read_u32(const_cast<pg_atomic_uint32*>(&s.seq)) != before) continue;
        if (match) out = copy;
        return match;
    }
    return false;
}

int last_slot = -1;  // where the last one was found: a flood comes from few senders

}  // namespace

void publish_payer() {
    if (!shared_memory_ready()) return;
    BackendCounters* c = my_counters();
    if (c == nullptr) return;
    const Mode mode = current_mode();
    const core::Budget b = current_budget();
    const IdentityKey* id = nullptr;
    if (mode != Mode::Off && true_up_enabled() && core::budget_problem(b) == nullptr) id = own_identity_if_known();
    Payer now{id != nullptr, id != nullptr && mode != Mode::Log, b, id != nullptr ? *id : IdentityKey{}};
    if (published && now.metered == mine.metered && now.charges == mine.charges && same_budget(b, mine.budget) &&
        same_identity(now.key, mine.key))
        return;
    PayerSlot& s = c->payer;
    pg_atomic_write_u32(&s.seq, pg_atomic_read_u32(&s.seq) + 1);
    pg_write_barrier();
    s.pid = MyProcPid;
    s.metered = now.metered;
    s.charges = now.charges;
    s.capacity = b.capacity;
    s.rate = b.rate;
    s.key = now.key;
    pg_write_barrier();
    pg_atomic_write_u32(&s.seq, pg_atomic_read_u32(&s.seq) + 1);
    mine = now;
    published = true;
}

bool find_payer(int32 pid, Payer& out) {
    if (!shared_memory_ready()) return false;
    if (last_slot >= 0 && read_slot(shared->slots[last_slot].payer, pid, out)) return true;
    for (int i = 0; i < shared->nslots; i++)
        if (read_slot(shared->slots[i].payer, pid, out)) {
            last_slot = i;
            return true;
        }
    return false;
}

bool leader_payer(Payer& out) {
    const PGPROC* leader = MyProc != nullptr ? MyProc->lockGroupLeader : nullptr;
    if (!shared_memory_ready() || leader == nullptr || leader == MyProc || leader->pgprocno < 0 ||
        leader->pgprocno >= shared->nslots)
        return false;
    return read_slot(shared->slots[leader->pgprocno].payer, leader->pid, out);
}

}  // namespace ot::ext
