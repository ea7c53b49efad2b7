#include "ext/execution.hpp"
#include "ext/hook.hpp"
#include "ext/metering.hpp"
#include "ext/settlement.hpp"
#include "ext/sql_args.hpp"

extern "C" {
#include "access/parallel.h"
#include "access/xact.h"
#include "libpq/libpq.h"
#include "miscadmin.h"
#include "parser/analyze.h"
#include "tcop/tcopprot.h"
#include "utils/timestamp.h"
}

// What a client message makes the backend do outside every meter: the raw
// parse of a query string, its analysis (a literal cast to a type runs that
// type's input function there: 'LINESTRING(...)'::geometry, 4 MB of it, was
// 250 ms of PostGIS parsing charged 0.09 ms), its rewriting, a Bind's
// parameter conversion (for an INSERT's generic plan nothing else runs in the
// Bind), a statement's ExecutorEnd and portal drop, and the parts of a COMMIT
// no meter times (deferrable UNIQUE rechecks).
//
// PostgreSQL stamps each Query, Parse, Bind, Execute and fast-path message
// with its start (statement_timestamp()) after reading it whole. A span runs
// from there, or from the last point of the same message already accounted
// for, to the next such point: the end of a statement's parse analysis, the
// start of its planning, the end of its ExecutorStart (this pricing
// included), and the answer that ends the message's work (ParseComplete,
// BindComplete, CommandComplete, PortalSuspended, EmptyQueryResponse: every
// message the backend sends passes PqCommMethods, which is watched here).
// What the meters timed inside a span, and waits for a turn in delay mode,
// are taken out of it. A message that fails is accounted up to its
// ErrorResponse, once the abort has settled what its meters timed.
//
// The client's idle time is never in a span. Sync and Close carry no stamp,
// so after an answer the mark is a beginning only for the next statement of
// the same query string (debug_query_string is set while a Query, Parse or
// Bind message is served, unset in Sync and Close); otherwise only the next
// stamped message's own start is. After ReadyForQuery nothing continues.
//
// Not covered: work in a message with no stamp (a Sync's implicit commit
// beyond its meters, a Close's portal drop); sending the bytes is the
// client's time.
namespace ot::ext {
namespace {

post_parse_analyze_hook_type prev_analyze = nullptr;
const PQcommMethods* socket_methods = nullptr;
PQcommMethods watched_methods;

// Where the mark is: after ReadyForQuery nothing continues; after another
// answer, only the next statement of the same query string; at a point
// inside a message, what follows in it.
enum class Mark { Closed, Answered, Inside };
TimestampTz message = 0;  // the stamp of the message the mark is in
TimestampTz mark = 0;     // accounted for up to here
Mark where = Mark::Closed;
// Measured by the meters (spans' own charges left out), and waited for a
// turn, in all and at the mark.
double spans_counted = 0;
double metered_at_mark = 0;
double waited_total = 0;
double waited_at_mark = 0;
TimestampTz error_at = 0;     // an ErrorResponse went out since the mark
bool error_in_text = false;  // ... while a statement's text was being served
double pending_ms = 0;        // accounted for, not yet charged

bool metered_backend() {
    return MyBackendType == B_BACKEND && !IsParallelWorker() && current_mode() != Mode::Off && true_up_enabled() &&
           shared_memory_ready();
}

// No meter times the backend now: a commit's deferred-trigger phase charges
// its own gaps (commit_metering.cpp).
bool between_meters() {
    return !commit_phase_on && metering_idle() && !pricing_in_progress() && !planning_in_progress();
}

double metered() { return measured_so_far_ms() - spans_counted; }

// The unmetered part of the current message up to `until`, added to pending
// when its beginning is known. in_text: a statement's text is being served.
void account(TimestampTz until, bool in_text) {
    const TimestampTz start = GetCurrentStatementStartTimestamp();
    TimestampTz from = start;
    if (start == message) {
        if (where == Mark::Closed || (where == Mark::Answered && !in_text)) return;
        from = mark;
    }
    const double ms = static_cast<double>(until - from) / 1000.0 - (metered() - metered_at_mark) -
                      (waited_total - waited_at_mark);
    if (ms > 0) pending_ms += ms;
}

void restart(TimestampTz now, Mark at) {
    message = GetCurrentStatementStartTimestamp();
    mark = now;
    where = at;
    metered_at_mark = metered();
    waited_at_mark = waited_total;
    error_at = 0;
}

// A statement's own parse is some microseconds: those gather here and are
// charged by the twentieth of a millisecond (the remainder when the backend
// exits is lost). Outside a transaction the login role's name cannot be
// looked up: what is pending then waits for the next charge.
void settle(bool in_transaction) {
    if (pending_ms < 0.05) return;
    const core::Budget b = current_budget();
    if (core::budget_problem(b) != nullptr) {
        pending_ms = 0;  // its statements are refused already
        return;
    }
    const IdentityKey* id = in_transaction ? &own_identity() : own_identity_if_known();
    if (id == nullptr) return;
    const double ms = pending_ms;
    pending_ms = 0;  // first: a charge that fails is not retried forever
    spans_counted += ms;
    count_measured(ms);
    const bool charges = current_mode() != Mode::Log;
    if (charges) owe(*id, b, ms);
    note_stats(*id, charges ? ms : 0, ms);
}

void on_analyze(ParseState* pstate, Query* query, JumbleState* jstate) {
    if (prev_analyze != nullptr) prev_analyze(pstate, query, jstate);
    charge_unmetered_span();
}

// The answer ends the message's work, or a statement's in a query string.
// Rows, notices and the rest pass untouched.
void answered(char type) {
    switch (type) {
        case 'E':  // ErrorResponse: the abort that follows settles the meters first
            if (error_at == 0) {
                error_at = GetCurrentTimestamp();
                error_in_text = debug_query_string != nullptr;
            }
            return;
        case '1':  // ParseComplete
        case '2':  // BindComplete
        case 'C':  // CommandComplete
        case 's':  // PortalSuspended
        case 'I':  // EmptyQueryResponse
        case 'Z':  // ReadyForQuery
            break;
        default: return;
    }
    if (!metered_backend() || !between_meters()) return;
    TimestampTz now = 0;  // a mark after ReadyForQuery is never read
    if (type != 'Z') {
        now = GetCurrentTimestamp();
        account(now, debug_query_string != nullptr);
    } else if (error_at != 0) {
        account(error_at, error_in_text);  // what the failed message did until its error
    }
    settle(IsTransactionState() && !IsAbortedTransactionBlockState());
    restart(now, type == 'Z' ? Mark::Closed : Mark::Answered);
}

int watched_putmessage(char type, const char* s, size_t len) {
    answered(type);
    return socket_methods->putmessage(type, s, len);
}

}  // namespace

void charge_unmetered_span() {
    if (!metered_backend() || !between_meters() || IsAbortedTransactionBlockState()) return;
    const TimestampTz now = GetCurrentTimestamp();
    account(now, debug_query_string != nullptr);
    settle(true);
    restart(now, Mark::Inside);
}

void admission_waited(double ms) {
    commit_phase_waited(ms);
    waited_total += ms;
}

void install_message_metering() {
    prev_analyze = post_parse_analyze_hook;
    post_parse_analyze_hook = on_analyze;
    // Every message the backend sends goes through PqCommMethods (a parallel
    // worker's are redirected to its queue, which this leaves alone).
    socket_methods = PqCommMethods;
    watched_methods = *PqCommMethods;
    watched_methods.putmessage = watched_putmessage;
    PqCommMethods = &watched_methods;
}

}  // namespace ot::ext
