#include "ext/hook.hpp"

#include <cmath>

#include "ext/boundary.hpp"
#include "ext/bucket_table.hpp"
#include "ext/identity_stats.hpp"
#include "ext/plan_pricing.hpp"
#include "ext/settings.hpp"
#include "ext/sqlstates.hpp"
#include "ext/sql_args.hpp"

extern "C" {
#include "access/parallel.h"
#include "access/xact.h"
#include "executor/executor.h"
#include "miscadmin.h"
#include "storage/latch.h"
#include "utils/wait_event.h"
}

namespace ot::ext {
namespace {

ExecutorStart_hook_type prev_executor_start = nullptr;

[[noreturn]] void refuse(const IdentityKey& id, const StatementPricing& p, core::Budget b, core::SpendOutcome outcome,
                         double retry_after_s, bool waited_too_long) {
    const double cost = p.price.total;
    const char* why = describe_pricing(p);
    if (outcome == core::SpendOutcome::NeverFits)
        ereport(ERROR, (errcode(kCostExceedsCapacity),
                        errmsg("ogc_throttle: statement cost %g exceeds the capacity of identity \"%s\"", cost,
                               id.bytes),
                        errdetail("Capacity %g; priced as: %s.", b.capacity, why),
                        errhint("Ask for less (a smaller area or radius, a LIMIT, a higher zoom), or raise "
                                "ogc_throttle.capacity for this role.")));
    if (waited_too_long)
        ereport(ERROR, (errcode(kBudgetExhausted),
                        errmsg("ogc_throttle: statement refused: identity \"%s\" would wait longer than "
                               "ogc_throttle.max_delay",
                               id.bytes),
                        errdetail("The statement costs %g; the bucket refills %g per second; priced as: %s.", cost,
                                  b.rate, why),
                        errhint("Retry after %d second(s).", retry_seconds(retry_after_s))));
    ereport(ERROR, (errcode(kBudgetExhausted),
                    errmsg("ogc_throttle: statement refused: budget exhausted for identity \"%s\"", id.bytes),
                    errdetail("The statement costs %g; capacity %g, refilling %g per second; priced as: %s.", cost,
                              b.capacity, b.rate, why),
                    errhint("Retry after %d second(s).", retry_seconds(retry_after_s))));
    pg_unreachable();
}

// Sleeps until the reserved turn. Interruptible (statement_timeout,
// pg_cancel_backend, postmaster death); a waiter interrupted before its turn
// gives its reservation back. No C++ object lives in this frame.
void wait_for_turn(const IdentityKey& id, double cost, core::Budget b, int64 wait_us) {
    const TimestampTz deadline = GetCurrentTimestamp() + wait_us;
    PG_TRY();
    {
        for (;;) {
            const TimestampTz now = GetCurrentTimestamp();
            if (now >= deadline) break;
            const long ms = static_cast<long>((deadline - now + 999) / 1000);
            const int rc = WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, ms, PG_WAIT_EXTENSION);
            if (rc & WL_LATCH_SET) ResetLatch(MyLatch);
            CHECK_FOR_INTERRUPTS();
        }
    }
    PG_CATCH();
    {
        bucket_refund(id, cost, b);
        PG_RE_THROW();
    }
    PG_END_TRY();
}

void price_and_charge(QueryDesc* qd) {
    const Mode mode = current_mode();
    const StatementPricing p = price_planned_statement(qd->plannedstmt, qd->params);
    if (p.ncalls == 0) return;
    count_hook_event(HookEvent::Priced);
    const double cost = p.price.total;
    const IdentityKey id = own_identity();
    const core::Budget b = current_budget();
    if (core::budget_problem(b) != nullptr) return;  // GUC ranges make this unreachable

    if (mode == Mode::Log) {
        const BucketView v = bucket_peek(id, b);
        const bool would_refuse = cost > b.capacity || cost > v.tokens;
        record_statement(id, {0.0, would_refuse, 0});
        if (would_refuse) {
            count_hook_event(HookEvent::ShadowRefusal);
            ereport(LOG, (errmsg("ogc_throttle: would refuse a statement of identity \"%s\" (shadow mode)", id.bytes),
                          errdetail("The statement costs %g with %.2f of %g tokens left; priced as: %s.", cost,
                                    v.tokens, b.capacity, describe_pricing(p))));
        }
        return;
    }
    if (mode == Mode::Reject) {
        const core::SpendResult r = bucket_spend(id, cost, b);
        const bool refused = r.outcome != core::SpendOutcome::Allowed;
        record_statement(id, {refused ? 0.0 : cost, refused, 0});
        if (refused) refuse(id, p, b, r.outcome, r.retry_after_s, false);
        return;
    }
    const core::ReserveResult r = bucket_reserve(id, cost, b, max_delay_us());
    if (r.outcome != core::SpendOutcome::Allowed) {
        record_statement(id, {0.0, true, 0});
        refuse(id, p, b, r.outcome, r.retry_after_s, true);
    }
    if (r.wait_ns > 0) {
        wait_for_turn(id, cost, b, r.wait_ns / 1000);
        count_hook_event(HookEvent::Delayed, r.wait_ns / 1000);
    }
    record_statement(id, {cost, false, r.wait_ns / 1000});
}

void on_executor_start(QueryDesc* qd, int eflags) {
    // Parallel workers run a fragment of a statement the leader already paid for.
    if (current_mode() != Mode::Off && (eflags & EXEC_FLAG_EXPLAIN_ONLY) == 0 && !IsParallelWorker() &&
        shared_memory_ready())
        guard([qd] { price_and_charge(qd); });
    if (prev_executor_start)
        prev_executor_start(qd, eflags);
    else
        standard_ExecutorStart(qd, eflags);
}

}  // namespace

void install_hooks() {
    prev_executor_start = ExecutorStart_hook;
    ExecutorStart_hook = on_executor_start;
}

}  // namespace ot::ext
