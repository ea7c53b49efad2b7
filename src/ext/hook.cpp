#include "ext/hook.hpp"
#include "ext/hot.hpp"

#include <cmath>
#include <limits>

#include "ext/boundary.hpp"
#include "ext/execution.hpp"
#include "ext/bucket_table.hpp"
#include "ext/identity_stats.hpp"
#include "ext/metering.hpp"
#include "ext/settlement.hpp"
#include "ext/plan_pricing.hpp"
#include "ext/statement_samples.hpp"
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

bool pricing = false;  // price_and_charge is on the stack

namespace {

SubTransactionId pricing_subid = InvalidSubTransactionId;  // the one it started in

[[noreturn]] __attribute__((cold)) void refuse(const IdentityKey& id, const StatementPricing& p, core::Budget b, core::SpendOutcome outcome,
                         double retry_after_s, bool waited_too_long, double cost) {
    const char* why = p.ncalls > 0 ? describe_pricing(p) : "no priced call; the bucket is in debt from measured time";
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
__attribute__((cold)) void wait_for_turn(const IdentityKey& id, double cost, core::Budget b, int64 wait_us) {
    end_conversion_stage();  // (a meter's admission: the wait is not the conversion's, what follows is metered)
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
        admission_waited(static_cast<double>(wait_us) / 1000.0);
    }
    PG_CATCH();
    {
        bucket_refund(id, cost, b);
        PG_RE_THROW();
    }
    PG_END_TRY();
}

// A budget the bucket arithmetic cannot represent is an error, never a pass.

struct Admitted {
    double deposit;      // charged now, settled against the measured time
    double tokens_left;  // in the bucket afterwards
};

// Reject: spend or refuse. Delay: reserve, wait for the turn, or refuse when
// the wait would be too long. p is null for a further pass of a cursor.
// Statistics count priced statements, and every refusal or wait; a refusal
// or a wait is written at once, an admission with the settlements' batch.
OT_HOT Admitted admit(const IdentityKey& id, core::Budget b, Mode mode, double cost, const StatementPricing* p) {
    static const StatementPricing no_calls = {nullptr, 0, {false, core::kNoLimit}, {0.0, false, 0}};
    const bool priced = p != nullptr && p->ncalls > 0;
    // Nothing to charge and provably not in debt: no visit to the bucket
    // (what is owed waits for the next visit).
    if (cost == 0 && !priced && mode == Mode::Reject)
        if (const double lower_bound = bucket_quick_admit(id, b); lower_bound >= 0) return {0.0, lower_bound};
    const double owed = take_owed(id, b);
    if (mode == Mode::Reject) {
        const core::SpendResult r = bucket_spend(id, cost, b, owed);
        if (unlikely(r.outcome != core::SpendOutcome::Allowed)) {
            record_statement(id, {0.0, true, 0});
            refuse(id, p ? *p : no_calls, b, r.outcome, r.retry_after_s, false, cost);
        }
        if (priced) count_admitted(id, cost, identity_serial(id));
        return {cost, r.remaining};
    }
    const core::ReserveResult r = bucket_reserve(id, cost, b, max_delay_us(), owed);
    if (r.outcome != core::SpendOutcome::Allowed) {
        record_statement(id, {0.0, true, 0});
        refuse(id, p ? *p : no_calls, b, r.outcome, r.retry_after_s, true, cost);
    }
    if (r.wait_ns > 0) {
        wait_for_turn(id, cost, b, r.wait_ns / 1000);
        count_hook_event(HookEvent::Delayed, r.wait_ns / 1000);
    }
    if (r.wait_ns > 0)
        record_statement(id, {cost, false, r.wait_ns / 1000});
    else if (priced)
        count_admitted(id, cost, identity_serial(id));
    // What the bucket holds when its turn comes: what the statement may run on
    // beyond its estimate (0 was read as an empty bucket, and an unpriced
    // statement on a full one was cut off at the grace).
    return {cost, r.remaining};
}

// A statement that calls no extension function (the plan's invalidation
// items say so) has nothing to price: it is admitted against its bucket's
// debt and metered, as price_and_charge would, without building a pricing.
// Nothing here throws or runs a query, so it needs neither guard() nor the
// pricing flag; what may ereport holds no C++ object.
OT_HOT void admit_unpriced(QueryDesc* qd, Mode mode) {
    const IdentityKey& id = own_identity();
    const core::Budget b = usable_budget();
    if (mode == Mode::Log) {
        metering_admitted(qd, id, b, mode, 0.0, 0.0, b.capacity, nullptr);
        return;
    }
    if (metering_nested()) return;  // on the outer statement's clock
    if (!true_up_enabled()) {
        metering_admitted(qd, id, b, mode, 0.0, 0.0, HUGE_VAL, nullptr);  // free: never cut off
        return;
    }
    const Admitted a = admit(id, b, mode, 0.0, nullptr);
    metering_admitted(qd, id, b, mode, 0.0, a.deposit, a.tokens_left, nullptr);
}

void price_and_charge(QueryDesc* qd) {
    const Mode mode = current_mode();
    const StatementPricing p = price_planned_statement(qd->plannedstmt, qd->params);
    stage_end(Stage::Start, true);  // (before the admission: a delay's wait is not the start's)
    const double cost = p.ncalls > 0 ? p.price.total : 0.0;
    if (p.ncalls > 0) {
        count_hook_event(HookEvent::Priced);
        priced_statement_admitted();
    }
    const IdentityKey& id = own_identity();
    const core::Budget b = usable_budget();

    if (mode == Mode::Log) {
        if (p.ncalls > 0) {
            const BucketView v = bucket_peek(id, b);
            const bool would_refuse = cost > b.capacity || cost > v.tokens;
            if (!would_refuse) {
                count_admitted(id, 0.0, identity_serial(id));
            } else {
                record_statement(id, {0.0, true, 0});
                count_hook_event(HookEvent::ShadowRefusal);
                ereport(LOG,
                        (errmsg("ogc_throttle: would refuse a statement of identity \"%s\" (shadow mode)", id.bytes),
                         errdetail("The statement costs %g with %.2f of %g tokens left; priced as: %s.", cost, v.tokens,
                                   b.capacity, describe_pricing(p))));
            }
        }
        metering_admitted(qd, id, b, mode, cost, 0.0, b.capacity, p.ncalls > 0 ? &p.price.features : nullptr);
        return;
    }
    // An unpriced statement costs nothing to admit, but it pays its measured
    // time and so waits out a debt; without true-up it is free, as in 0.1.
    // Nested in a metered statement, its time is on the outer clock already.
    if (p.ncalls == 0 && (metering_nested() || !true_up_enabled())) {
        if (!metering_nested()) metering_admitted(qd, id, b, mode, 0.0, 0.0, HUGE_VAL, nullptr);  // free: never cut off
        return;
    }
    const Admitted a = admit(id, b, mode, cost, &p);
    metering_admitted(qd, id, b, mode, cost, a.deposit, a.tokens_left, p.ncalls > 0 ? &p.price.features : nullptr);
}

}  // namespace

core::Budget usable_budget_ok = {0.0, 0.0};

core::Budget usable_budget_check(core::Budget b) {
    if (const char* why = core::budget_problem(b))
        ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE), errmsg("ogc_throttle: invalid budget: %s", why),
                        errdetail("ogc_throttle.capacity = %g, ogc_throttle.rate = %g.", b.capacity, b.rate),
                        errhint("Lower ogc_throttle.capacity or raise ogc_throttle.rate for this role.")));
    usable_budget_ok = b;
    return b;
}


void pricing_aborted(SubTransactionId from) {
    if (pricing && (from == InvalidSubTransactionId || from <= pricing_subid)) pricing = false;
}

namespace {

// ogc_throttle.lazy_pricing: while the bucket holds twice cost_max, no estimate can refuse or
// delay a statement (each is clamped to cost_max), so it is admitted unpriced against a deposit
// of cost_max. The deposit is never less than its estimate would have been, so nothing admitted
// beside it sees more tokens; and it leaves cost_max behind, so the statement after it is
// admitted as it would have been beside its estimate (a bucket holding only cost_max would be
// emptied: the next statements of a client that runs several at once refused where their
// estimates fit). Its measured time is what it pays, as any statement's. False: price it (one
// in lazy_sample_every for calibration, the bucket short of twice cost_max, log mode, no
// true-up, a statement nested in another).
std::uint64_t lazy_seen = 0;

bool admit_lazily(QueryDesc* qd, Mode mode) {
    if (mode == Mode::Log || !true_up_enabled() || metering_nested()) return false;
    if (setting_lazy_sample_every > 0 && ++lazy_seen % static_cast<std::uint64_t>(setting_lazy_sample_every) == 0)
        return false;
    const core::Budget b = usable_budget();
    const IdentityKey& id = own_identity();
    const double deposit = current_cost_max();
    const double left = bucket_spend_if_held(id, deposit, deposit, b, take_owed(id, b));
    if (left < 0) return false;
    count_admitted(id, deposit, identity_serial(id));  // the unused deposit leaves the statistics at the end
    // Its estimate is unknown, not 0: throttle_last_statement() shows NULL.
    metering_admitted(qd, id, b, mode, std::numeric_limits<double>::quiet_NaN(), deposit, left, nullptr);
    return true;
}

}  // namespace

// The executor's start runs the plan's functions in its initial partition
// pruning, and pricing evaluates the arguments it prices, with this
// execution's parameters: both may run a function the user wrote (an
// immutable one, in a generic plan) for as long as it likes. Their stage gets
// the tokens the bucket holds now as its allowance, as a pass would (the debt
// board's bound when it proves one, else a look at the bucket).
void begin_start_stage(Mode mode) {
    if (mode == Mode::Log || !metering_idle() || cutoff_grace_ms() < 0) return;
    const IdentityKey& id = own_identity();
    const core::Budget b = usable_budget();
    double tokens = bucket_quick_admit_inline(id, b, identity_serial(id));
    if (tokens < 0) tokens = bucket_peek(id, b).tokens;
    stage_begin(Stage::Start, id, b, mode, tokens);
}

// What a message makes the backend evaluate outside every meter: a Bind's or
// an EXECUTE's parameters converted to a domain whose CHECK calls functions
// (pg_sleep(VALUE), a function the role wrote), a fast-path call's arguments,
// the expressions of a utility statement that is not metered. Charged with
// the message at its answer (message_metering.cpp), and without this run as
// long as they liked first: 3 s of pg_sleep in a CHECK on a 300 ms budget.
// Refused while the bucket is in debt, as a further pass is; the stage's
// deadline is set from what the bucket holds.
void begin_conversion_stage() {
    const Mode mode = current_mode();
    if (stage_on != Stage::None || mode == Mode::Off || mode == Mode::Log || !true_up_enabled() ||
        cutoff_grace_ms() < 0 || IsParallelWorker() || !shared_memory_ready())
        return;
    const IdentityKey& id = own_identity();
    const core::Budget b = usable_budget();
    stage_begin(Stage::Conversion, id, b, mode, admit_unless_in_debt(id, b, identity_serial(id), mode));
}

double admit_further_pass(const IdentityKey& id, core::Budget b, Mode mode) {
    if (mode == Mode::Log) return b.capacity;
    return admit(id, b, mode, 0.0, nullptr).tokens_left;
}

// The ExecutorStart hook's part for what its start_unpriced() (metering.cpp) leaves:
// a statement that calls extension functions is priced, one that calls none
// is admitted in the mode's way.
void executor_started(QueryDesc* qd, Mode mode, bool calls_extension) {
    if (!calls_extension) {
        stage_end(Stage::Start, true);  // (a plan that prunes at its start has one)
        return admit_unpriced(qd, mode);
    }
    if (setting_lazy_pricing && admit_lazily(qd, mode)) return stage_end(Stage::Start, true);
    // No PG_TRY (a setjmp per statement): an error out of pricing, a refusal
    // included, aborts the subtransaction it started in, and pricing_aborted
    // clears the flag.
    pricing = true;
    pricing_subid = GetCurrentSubTransactionId();
    guard([qd] { price_and_charge(qd); });
    pricing = false;
}

void install_hooks() {
    install_metering_hooks();  // the executor's hooks, ExecutorStart's included
    install_utility_metering();
    install_planning_metering();
    install_function_metering();
    install_message_metering();
}

}  // namespace ot::ext
