#include "ext/execution.hpp"
#include "ext/hook.hpp"
#include "ext/metering.hpp"
#include "ext/settlement.hpp"
#include "ext/sql_args.hpp"

extern "C" {
#include "access/parallel.h"
#include "access/xact.h"
#include "miscadmin.h"
#include "parser/analyze.h"
#include "utils/timestamp.h"
}

// What a client message makes the backend do before any meter starts: the raw
// parse of a query string, its analysis (a literal cast to a type runs that
// type's input function there: 'LINESTRING(...)'::geometry, 4 MB of it, was
// 250 ms of PostGIS parsing charged 0.09 ms), its rewriting, a Bind's
// parameter conversion. PostgreSQL stamps each Query, Parse, Bind and Execute
// message with its start (statement_timestamp()), after reading it whole, so
// the span from there to the end of a statement's parse analysis, or to the
// start of its planning, is the message's own unmetered work, less whatever
// was metered within it (an earlier statement of the same query string).
// Sending the bytes is the client's time, not ours; reading them is not counted.
//
// The last span of a statement ends with its ExecutorStart (this pricing
// included), which for a SELECT's portal runs in the Bind message itself.
//
// Not covered: a Bind of a generic plan that starts its executor only at
// Execute (INSERT, UPDATE: its parameter conversion is then in no span), and
// work after the last statement of a message (its ExecutorEnd and the
// portal's drop).
namespace ot::ext {
namespace {

post_parse_analyze_hook_type prev_analyze = nullptr;

TimestampTz message = 0;   // the message the mark is in (its start)
TimestampTz mark = 0;      // charged up to here
double metered_at_mark = 0;  // measured_so_far_ms() then
double pending_ms = 0;       // not yet charged
// Waits for a turn (delay mode): in all, and in the message that waited last.
double waited_total = 0;
double waited_at_mark = 0;
TimestampTz wait_message = 0;
double waited_in_message = 0;

// A commit's deferred-trigger phase charges its own gaps (commit_metering.cpp).
bool charged_here() {
    return MyBackendType == B_BACKEND && !commit_phase_on && metering_idle() && !pricing_in_progress() && !planning_in_progress() &&
           !IsParallelWorker() && !IsAbortedTransactionBlockState() && current_mode() != Mode::Off &&
           true_up_enabled() && shared_memory_ready();
}

void on_analyze(ParseState* pstate, Query* query, JumbleState* jstate) {
    if (prev_analyze != nullptr) prev_analyze(pstate, query, jstate);
    charge_unmetered_span();
}

}  // namespace

void charge_unmetered_span() {
    if (!charged_here()) return;
    const TimestampTz now = GetCurrentTimestamp();
    const TimestampTz start = GetCurrentStatementStartTimestamp();
    double ms;
    if (start != message) {
        message = start;
        ms = static_cast<double>(now - start) / 1000.0 - (wait_message == start ? waited_in_message : 0);
    } else {
        ms = static_cast<double>(now - mark) / 1000.0 - (measured_so_far_ms() - metered_at_mark) -
             (waited_total - waited_at_mark);
    }
    mark = now;
    // A statement's own parse is some microseconds: those gather here and are
    // charged by the twentieth of a millisecond (the remainder when the
    // backend exits is lost).
    if (ms > 0) pending_ms += ms;
    if (pending_ms >= 0.05) {
        const core::Budget b = current_budget();
        if (core::budget_problem(b) == nullptr) {
            const IdentityKey& id = own_identity();
            const bool charges = current_mode() != Mode::Log;
            count_measured(pending_ms);
            if (charges) owe(id, b, pending_ms);
            note_stats(id, charges ? pending_ms : 0, pending_ms);
        }
        pending_ms = 0;
    }
    metered_at_mark = measured_so_far_ms();
    waited_at_mark = waited_total;
}

void admission_waited(double ms) {
    commit_phase_waited(ms);
    const TimestampTz start = GetCurrentStatementStartTimestamp();
    if (start != wait_message) {
        wait_message = start;
        waited_in_message = 0;
    }
    waited_in_message += ms;
    waited_total += ms;
}

void install_parse_metering() {
    prev_analyze = post_parse_analyze_hook;
    post_parse_analyze_hook = on_analyze;
}

}  // namespace ot::ext
