// Work parallel maintenance workers do for a statement. A parallel CREATE INDEX or REINDEX
// (btree) and a parallel VACUUM hand part of their work to workers that run no query, so no
// executor pass of theirs is metered: measured here, a role's index build with two workers
// used 2.9 s of server CPU and was charged the leader's 2.0 s. Such a worker charges the
// leader's identity (its GUCs and session user are the leader's) the wall time of its whole
// life, from its fork to its commit: what it holds a worker slot and a core for. It is not cut
// off on its own: the leader's statement is, at its own deadline, and its workers stop with it,
// in an abort where the catalog cannot be read to name the identity: a worker stopped so charges
// the identity its leader published as its statement began (payer_slots.cpp).
#include "ext/metering.hpp"

#include "ext/settings.hpp"
#include "ext/sql_args.hpp"

extern "C" {
#include "access/parallel.h"
#include "miscadmin.h"
#include "utils/timestamp.h"
}

namespace ot::ext {

bool worker_ran_query_pass = false;

void parallel_worker_ended(bool committing) {
    if (!IsParallelWorker() || worker_ran_query_pass || !shared_memory_ready()) return;
    const Mode mode = current_mode();
    if (mode == Mode::Off || mode == Mode::Log || !true_up_enabled()) return;
    const core::Budget b = current_budget();
    if (core::budget_problem(b) != nullptr) return;  // the leader's statement was refused already
    const double ms = static_cast<double>(GetCurrentTimestamp() - MyStartTimestamp) / 1000.0;
    if (!(ms > 0)) return;
    const IdentityKey* id = committing ? &own_identity() : own_identity_if_known();
    Payer leader{};
    if (id == nullptr) {
        if (!leader_payer(leader) || !leader.charges) return;
        id = &leader.key;
    }
    count_measured(ms);
    bucket_charge(*id, ms, b);
}

}  // namespace ot::ext
