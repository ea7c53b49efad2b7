// The pricing hook: every statement is priced at ExecutorStart (with this
// execution's parameter values) and charged according to ogc_throttle.mode.
#pragma once
#include "ext/hot.hpp"

#include "ext/bucket_table.hpp"
#include "ext/settings.hpp"

extern "C" {
#include "access/xact.h"
#include "executor/execdesc.h"
}

namespace ot::ext {
void install_hooks();
// After the executor's own start (metering.cpp's ExecutorStart hook, which
// admits an unpriced statement in reject mode itself): prices the statement
// and charges it, or admits one with nothing to price (calls_extension false).
void executor_started(QueryDesc* qd, Mode mode, bool calls_extension);
// Before that start: begins the stage (execution.hpp) that executor_started()
// ends before its admission (an error ends it with its (sub)transaction).
void begin_start_stage(Mode mode);
// A function is about to run while no meter holds the clock (function_metering.cpp's
// object access hook): begins the conversion stage (execution.hpp), unless a stage is on.
void begin_conversion_stage();
// Admits a further pass (a FETCH) of an open cursor: refused while the bucket
// is in debt. Returns the tokens left.
double admit_further_pass(const IdentityKey& id, core::Budget b, Mode mode);
// The same, where the debt board proves most buckets out of debt in reject mode
// without a call or a visit to the bucket (serial: identity_serial() of id).
inline double admit_unless_in_debt(const IdentityKey& id, core::Budget b, std::uint64_t serial, Mode mode) {
    const double tokens = mode == Mode::Reject ? bucket_quick_admit_inline(id, b, serial) : -1;
    return tokens >= 0 ? tokens : admit_further_pass(id, b, mode);
}
// This role's budget; ERROR (22023) when the spend path cannot represent it.
// The settings change seldom: the last budget found usable needs no second
// look (inline, every statement asks); usable_budget_check() looks.
extern OT_LOCAL core::Budget usable_budget_ok;
core::Budget usable_budget_check(core::Budget b);
inline core::Budget usable_budget() {
    const core::Budget b = current_budget();
    if (likely(same_budget(b, usable_budget_ok))) return b;
    return usable_budget_check(b);
}
// The pricing hook is pricing a statement (the queries it runs are part of it).
extern OT_LOCAL bool pricing;
inline bool pricing_in_progress() { return pricing; }
// (Sub)transaction `from` aborts (InvalidSubTransactionId: the transaction):
// pricing begun in it, or below it, is over.
void pricing_aborted(SubTransactionId from);
// Meters utility statements that work outside the executor (utility_metering.cpp).
void install_utility_metering();
// Meters the planning of top-level statements (planning_metering.cpp).
void install_planning_metering();
// The planner is planning a top-level statement (the queries it analyses are part of it).
extern OT_LOCAL int planning_depth;
inline bool planning_in_progress() { return planning_depth > 0; }
// Milliseconds the planning meter has timed in this backend.
extern OT_LOCAL double planning_ms_total;
// Charges what each client message made the backend do that no meter timed,
// when the backend answers it (message_metering.cpp).
void install_message_metering();
// Meters function calls that run outside any metered statement: deferred
// triggers at COMMIT, event triggers, fast-path calls (function_metering.cpp).
void install_function_metering();
}
