#include "ext/execution.hpp"
#include "ext/hot.hpp"
#include "ext/hook.hpp"
#include "ext/metering.hpp"
#include "ext/settlement.hpp"
#include "ext/statement_samples.hpp"
#include "ext/sql_args.hpp"
#include "ext/wal_readers.hpp"
#include "ext/writeback.hpp"

#include <cstring>
#include <ctime>

extern "C" {
#include "access/parallel.h"
#include "access/xact.h"
#include "libpq/libpq.h"
#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/proc.h"
#include "port/pg_bswap.h"
#include "tcop/tcopprot.h"
#include "utils/backend_status.h"
#include "utils/memutils.h"
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
// from there, or from the answer that ended the previous statement of the
// same query string, to the answer that ends this one's work (ParseComplete,
// BindComplete, CommandComplete, PortalSuspended, EmptyQueryResponse: every
// message the backend sends passes PqCommMethods, which is watched here).
// What the meters timed inside a span (passes, planning, a commit's flush and
// deferred-trigger phase) and waits for a turn in delay mode are taken out of
// it; the rest is charged. A message that fails is accounted up to its
// ErrorResponse, once the abort has settled what its meters timed. Only the
// answers are marks, so a statement reads the clock once or twice for this,
// none when its messages come in one write (below); marks at each parse
// analysis, planning and executor start, as there were, added some 650
// instructions to a select-only statement over a socket.
//
// The client's idle time is never in a span. Sync and Close carry no stamp,
// so after an answer the mark is a beginning only for the next statement of
// the same query string (debug_query_string is set while a Query, Parse or
// Bind message is served, unset in Sync and Close); otherwise only the next
// stamped message's own start is. After ReadyForQuery nothing continues.
//
// A fast-path call (libpq's PQfn) is one stamped message: its arguments'
// conversion (a domain's CHECK runs there, built-in functions no hook times)
// ends at its FunctionCallResponse, and its implicit commit (deferred
// triggers, deferrable UNIQUE rechecks) runs between that answer and
// ReadyForQuery with no client message in between, so the span continues to
// ReadyForQuery.
//
// A Sync carries no stamp, and the client may send it whenever it likes
// (libpq's pipeline mode), so the wall time from the answer before it holds
// the client's idle time, unless it was here already at that answer (below).
// Its implicit commit still runs work no meter times (deferrable UNIQUE
// rechecks: 300 000 of them were 400 ms). When an answer with nothing
// buffered leaves an implicit transaction that wrote (only a write queues
// that work), the backend's CPU clock is read there and again at the
// ReadyForQuery that follows: the CPU time between, less what the meters
// timed, is charged. An idle backend uses none; what waits on the disk there
// is not counted.
//
// Not covered: a Close's portal drop outside such a transaction, and the
// disk waits of a late Sync's commit beyond its meters; sending the bytes is
// the client's time.
//
// An answer (ParseComplete, BindComplete, CommandComplete) sent while the
// client's next message is already in the receive buffer, or inside a simple
// Query (next_message_here), cannot be followed by a wait for the client:
// the clock is not read there, and the span is deferred, going on across the
// messages that follow while each finds the next one buffered (a Describe's
// RowDescription or NoData and a CloseComplete are then watched too, and a
// Flush), up to a ReadyForQuery, or an answer after which nothing is
// buffered. At the ReadyForQuery the span ends at the stamp PostgreSQL's
// activity report took just before it (ready_stamp): a simple Query, and
// libpq's Parse, Bind, Describe, Execute, Sync sent in one write, read no
// clock of their own for their spans, and a Sync's commit is in the span,
// timed by the wall clock as the rest.
// The span is then longer, never shorter: a message buffered only in part
// leaves the wait for its rest in it (the client's to pay). A deferred span
// the session leaves by Terminate is charged at its exit, up to the failing
// message's start if an error came first. It is charged to the payer at its
// end: a statement that names another payer within itself takes its Bind's
// part along.
namespace ot::ext {
namespace {

const PQcommMethods* socket_methods = nullptr;
PQcommMethods watched_methods;

// Where the mark is: after ReadyForQuery nothing continues; after another
// answer, only the next statement of the same query string.
enum class Mark { Closed, Answered };
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
bool fastpath_answered = false;  // the mark is a fast-path call's answer: its commit follows
bool cpu_marked = false;          // the mark left an implicit transaction that wrote
double cpu_at_mark = 0;           // the backend's CPU time there, ms
double pending_ms = 0;        // accounted for, not yet charged
// Shared buffers dirtied and written at the last answer that charged them (writeback.hpp): a
// backend's writes left to others are its payer's at its next answer, wherever they were done
// (an executor pass, a parallel worker's share added at its end, a utility statement, a commit).
WritebackMark writeback_at_answer;
WalMark wal_at_answer;  // and the WAL it had written (wal_readers.hpp), charged the same way
double planning_at_mark = 0;  // planning_ms_total at the mark
TimestampTz deferred_from = 0;  // a deferred span runs from this stamp (0: none is)

// The answer ends the message's work, or a statement's in a query string.
// Rows, notices and the rest pass untouched (is_answer(): a tail call, no frame);
// a notification is caught with the answers and timed on its own (deliver_and_put).
// (A bit per type from '1' to 'p', and PortalSuspended's 's' on its own: a
// subtraction, a compare and a bit test, where a switch was a dozen compares
// a message.)
constexpr std::uint64_t answer_bit(char type) { return std::uint64_t{1} << (type - '1'); }
constexpr std::uint64_t kAnswers = answer_bit('E') | answer_bit('1') | answer_bit('2') | answer_bit('C') |
                                   answer_bit('I') | answer_bit('V') | answer_bit('Z') | answer_bit('A');
// While a span is deferred: also a Describe's last answer and a CloseComplete, after which the
// client may be waited for.
constexpr std::uint64_t kDeferredAnswers = kAnswers | answer_bit('T') | answer_bit('n') | answer_bit('3');
// The mask in force: kDeferredAnswers exactly while deferred_from is set (defer() and restart() keep the two
// together). Stored, not derived, because every message the backend sends, each row included, reads it.
std::uint64_t answers = kAnswers;
// type's bit in a mask of answer_bit()s.
inline bool in_mask(std::uint64_t mask, char type) {
    const unsigned offset = static_cast<unsigned char>(type) - static_cast<unsigned>('1');
    return offset < 64 && ((mask >> offset) & 1) != 0;
}
inline bool is_answer(char type) { return in_mask(answers, type) || type == 's'; }
// An answer after which the statement goes on.
constexpr std::uint64_t kGoesOn = answer_bit('1') | answer_bit('2') | answer_bit('T') | answer_bit('n') | answer_bit('3');
inline bool goes_on(char type) { return in_mask(kGoesOn, type); }
// An answer a span may be deferred past (defer()): one that goes on, and a CommandComplete, after
// which the client's next message (a Sync, as drivers send it with the Execute) may be here already.
constexpr std::uint64_t kDefers = kGoesOn | answer_bit('C');
inline bool defers(char type) { return in_mask(kDefers, type); }

// The client cannot be waited for before the backend reads its next message: that message is in
// the receive buffer already, or this is a simple Query, which reads nothing up to its
// ReadyForQuery (its statements, one after another, then its commit; a COPY FROM STDIN among them
// reads the client's data under its own meter).
inline bool next_message_here() { return simple_query_message || pq_buffer_has_data(); }

// An answer that goes on, or a CommandComplete, with the client's next message already here: the
// span is (or stays) deferred, from the stamp of the message this answer ends (see the top). Not
// where the span would go on from the mark (the same stamp as the mark's message): it is read as
// before there.
inline bool defer(TimestampTz start) {
    if (!next_message_here()) return false;
    if (deferred_from == 0) {
        if (start == message) return false;
        deferred_from = start;
        answers = kDeferredAnswers;
    }
    return true;
}

// A client backend with the shared table (fixed for the backend's life once
// true), under a metering mode. Inline: every answer asks (its call was 18 of
// the ~450 instructions the meter added to a statement over a socket).
bool client_backend = false;
__attribute__((noinline)) bool find_client_backend() {
    client_backend = MyBackendType == B_BACKEND && !IsParallelWorker() && shared_memory_ready();
    return client_backend;
}
inline bool metered_backend() {
    return (likely(client_backend) || find_client_backend()) && current_mode() != Mode::Off && true_up_enabled();
}

// No meter times the backend now: a commit's deferred-trigger phase charges
// its own gaps (commit_metering.cpp).
bool between_meters() {
    return !commit_phase_on && metering_idle() && !pricing_in_progress() && !planning_in_progress();
}

double metered() { return measured_so_far_ms() - spans_counted; }

// GetCurrentTimestamp() read from clock_gettime: the same clock as the
// messages' stamps (gettimeofday's), without its call and conversions (two
// reads a statement were a tenth of what the meter added over a socket). The
// static keeps the caller's frame free of a stack-protector canary.
timespec clock_now;
inline TimestampTz now_timestamp() {
    clock_gettime(CLOCK_REALTIME, &clock_now);
    constexpr int64 kEpochShift = static_cast<int64>(POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE) * SECS_PER_DAY;
    return (static_cast<int64>(clock_now.tv_sec) - kEpochShift) * USECS_PER_SEC + clock_now.tv_nsec / 1000;
}

// Now, at a ReadyForQuery: PostgreSQL read the clock just before it, where
// pgstat_report_activity() stamps the backend's turn to idle (or to idle in
// a transaction), and nothing a meter could miss runs between (GUC reports,
// an idle timer). Read again only when activity tracking is off (the state
// is then disabled, its stamp 0) or the stamp is older than `since`.
inline TimestampTz ready_stamp(TimestampTz since) {
    const volatile PgBackendStatus* be = MyBEEntry;
    if (likely(be != nullptr)) {
        const BackendState state = be->st_state;
        const TimestampTz stamp = be->st_state_start_timestamp;
        if ((state == STATE_IDLE || state == STATE_IDLEINTRANSACTION || state == STATE_IDLEINTRANSACTION_ABORTED) &&
            stamp >= since)
            return stamp;
    }
    return now_timestamp();
}

// The unmetered part of the current message up to `until` (0 when its
// beginning is unknown). continues: the work after the mark belongs to the
// message (a statement's text is being served, or a fast-path call commits).
// start: the current message's stamp; now_metered: metered() now.
inline double account(TimestampTz until, bool continues, TimestampTz start, double now_metered) {
    TimestampTz from = start;
    if (deferred_from != 0) {
        from = deferred_from;
    } else if (start == message) {
        if (where == Mark::Closed || !continues) return 0;
        from = mark;
    }
    return static_cast<double>(until - from) / 1000.0 - (now_metered - metered_at_mark) -
           (waited_total - waited_at_mark);
}

// (Into the static clock_now too: a local whose address is taken would give
// answer_and_put a stack-protector canary, and with it no tail call.)
double cpu_ms() {
    if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &clock_now) != 0) return 0;
    return static_cast<double>(clock_now.tv_sec) * 1e3 + static_cast<double>(clock_now.tv_nsec) / 1e6;
}

// A Sync may commit work the answers did not see (above): an implicit
// transaction with an xid. A statement inside a transaction block pays for
// its commit in the COMMIT's own message, and a simple Query's last
// statement has committed before its answer.
// (MyProc->xid: the top transaction's id once it has one, as
// GetTopTransactionIdIfAny() says it, without its call, except in an aborted
// transaction block, which is a block either way.)
inline bool commit_pending_at_sync() {
    return MyProc->xid != InvalidTransactionId && !IsTransactionBlock();
}

double delivered_total = 0;  // delivery CPU charged to senders, all told
// A listening session's time while idle (from its ReadyForQuery), up to here: its CPU time and
// delivered_total then.
double idle_cpu = 0;
double delivered_at_idle = 0;

// A listening session's every answer marks its CPU time (what follows it, up to the ReadyForQuery,
// it pays for: idle_transaction_ended), and its ReadyForQuery the start of its idle time.
__attribute__((noinline)) void listening_restart(Mark at, bool fastpath) {
    if (at == Mark::Closed) {
        idle_cpu = cpu_ms();
        delivered_at_idle = delivered_total;
    } else if (!fastpath) {
        cpu_marked = true;
    }
}

inline void restart(TimestampTz now, Mark at, bool fastpath, TimestampTz start, double now_metered) {
    deferred_from = 0;
    answers = kAnswers;
    message = start;
    mark = now;
    where = at;
    fastpath_answered = fastpath;
    cpu_marked = at == Mark::Answered && !fastpath && commit_pending_at_sync();
    if (unlikely(listening_session)) listening_restart(at, fastpath);
    if (cpu_marked) cpu_at_mark = cpu_ms();
    metered_at_mark = now_metered;
    waited_at_mark = waited_total;
    error_at = 0;
}

// A statement's own spans are some microseconds: they gather here and are
// charged by the millisecond, and what is left when the backend exits is
// charged then. What gathers belongs to the identity paying when it was done:
// a pooler that sets ogc_throttle.identity per client message must not hand
// one client's remainder to the next. Outside a transaction the login role's
// name cannot be looked up before a statement of the session has: time done
// then gets its owner at the next charge.
constexpr double kChargeMs = 1.0;
IdentityKey pending_id;
std::uint64_t pending_serial = 0;  // identity_serial() of the key pending_id was copied from
core::Budget pending_budget;
Oid pending_role = InvalidOid;
std::uint64_t pending_generation = 0;
bool pending_owned = false;
bool exit_charge_registered = false;

void charge_pending() {
    if (!pending_owned || pending_ms <= 0) return;
    const double ms = pending_ms;
    pending_ms = 0;  // first: a charge that fails is not retried forever
    if (core::budget_problem(pending_budget) != nullptr) return;  // its statements are refused already
    spans_counted += ms;
    count_measured(ms);
    const bool charges = current_mode() != Mode::Log;
    settle(pending_id, pending_budget, charges ? ms : 0, charges ? ms : 0, ms, pending_serial);
}

inline void add_upkeep(bool may_look_up);

void charge_message_at_exit(int code);

void charge_at_exit(int code, Datum) {
    if (!shared_memory_ready()) return;
    charge_message_at_exit(code);
    // (a session ended within a statement, a FATAL or its own role's pg_terminate_backend, left its
    // pages and WAL to others all the same)
    add_upkeep(false);
    charge_pending();
    flush_settlements();  // the exit's own flush may have run already
}

// Who pays now, cheaply: the login role and how often the identity setting
// was assigned (the key itself is looked up only when time is added).
// (The settings inline first, the call last; the budget by its bits, as
// settle_measured() compares it: -0.0 against 0.0 only hands what gathered to
// the same payer early.)
inline bool same_payer(core::Budget b) {
    return same_budget(b, pending_budget) && identity_generation() == pending_generation &&
           GetSessionUserId() == pending_role;
}

// At a metered session's first answer (its connection's ReadyForQuery), whatever that answer adds:
// a session that ends within its first statement leaves its pages and WAL to others too.
__attribute__((noinline)) void register_exit_charge() {
    if (exit_charge_registered) return;
    before_shmem_exit(charge_at_exit, 0);
    exit_charge_registered = true;
    exit_metering_start();
}

// may_look_up: the identity's key may be looked up in the catalog if a
// transaction is open (asked only when time has no owner yet).
void add_pending_slow(double ms, bool may_look_up) {
    const core::Budget b = current_budget();
    if (pending_owned && !same_payer(b)) {
        charge_pending();  // to the identity it was done for
        pending_owned = false;
    }
    register_exit_charge();
    if (!(ms > 0)) return;
    pending_ms += ms;
    if (!pending_owned) {
        const bool in_transaction = may_look_up && IsTransactionState() && !IsAbortedTransactionBlockState();
        if (const IdentityKey* id = in_transaction ? &own_identity() : own_identity_if_known()) {
            pending_id = *id;
            pending_serial = identity_serial(*id);
            pending_budget = b;
            pending_role = GetSessionUserId();
            pending_generation = identity_generation();
            pending_owned = true;
        }
    }
    if (pending_ms >= kChargeMs) charge_pending();
}

// The usual case inline: time for the payer that owns what has gathered (the
// call that made it the owner also registered the charge at exit).
inline void add_pending(double ms, bool may_look_up) {
    if (likely(pending_owned) && ms > 0 && likely(same_payer(current_budget()))) {
        pending_ms += ms;
        if (pending_ms >= kChargeMs) charge_pending();
        return;
    }
    add_pending_slow(ms, may_look_up);
}

// Where the last message's span stops when the session leaves. The abort that settles what is
// still being metered runs after the exit's charge: a running pass is settled there, so the span
// stops at its start (read on the monotonic clock, set back from now on the wall clock), and so is
// a commit's deferred-trigger phase (the message's start, then). Planning cut short by a FATAL
// never reaches its own settlement, and pricing and a stage's work are the message's anyway: they
// stay in the span, up to the message's error if it sent one, else up to now. A pass nobody meters
// (begun in mode off) is nobody's: the message's start.
TimestampTz exit_bound(TimestampTz start) {
    if (running != nullptr) return now_timestamp() - static_cast<TimestampTz>(elapsed_ms(running->pass_start) * 1000.0);
    if (commit_phase_on || run_depth != 0) return start;
    return error_at != 0 ? error_at : now_timestamp();
}

// A session that leaves without the ReadyForQuery that would have ended its last message's span
// pays for that span as the ReadyForQuery would have had it pay: a span deferred (a Terminate right
// behind a Bind), and a message that ended its own backend (its role's pg_terminate_backend of
// itself, a FATAL; the client gone while the message ran, with no error sent) up to the work
// still in flight. Without this, 300 ms of an EXECUTE's parameter conversion were free when its
// pass ended the backend. A Terminate, or a client gone, after a ReadyForQuery or an answer leaves
// nothing: its message has no stamp of its own, and after an answer the span goes on only while a
// message is still being served.
// Whether it was is not read from debug_query_string, which proc_exit clears before any exit
// callback runs: a FATAL the client was sent says it (error_in_text); one that could not be sent
// (client_connection_check_interval found the socket closed) ended a backend that was not reading
// the client's next message; a Terminate or the end of the input was read there (exit code 0).
void charge_message_at_exit(int code) {
    if (!metered_backend()) return;
    const TimestampTz start = GetCurrentStatementStartTimestamp();
    const bool continues = error_at != 0 ? error_in_text : code != 0 && !pq_is_reading_msg();
    add_pending(account(exit_bound(start), continues, start, metered()), false);
    deferred_from = 0;
    error_at = 0;
}

// What the backend left to others since the last answer that charged it: the pages it dirtied
// (writeback.hpp) and the WAL it wrote (wal_readers.hpp).
inline void add_upkeep(bool may_look_up) {
    if (unlikely(writeback_moved(writeback_at_answer))) {
        const double ms = writeback_ms(writeback_at_answer);
        writeback_mark(&writeback_at_answer);
        add_pending(ms, may_look_up);
    }
    if (unlikely(wal_moved(wal_at_answer))) {
        const double ms = wal_readers_ms(wal_at_answer);
        wal_mark(&wal_at_answer);
        add_pending(ms, may_look_up);
    }
}

// An answer's accounting (answered, below), or a flush's while a span is deferred.
__attribute__((always_inline)) inline void account_answer(char type) {
    if (!metered_backend() || !between_meters()) return;
    if (unlikely(!exit_charge_registered)) register_exit_charge();
    const TimestampTz start = GetCurrentStatementStartTimestamp();
    if (defers(type) && defer(start)) return;
    add_upkeep(type != 'Z');
    const double now_metered = metered();
    TimestampTz now = 0;  // a mark after ReadyForQuery is never read
    double unmetered = 0;
    if (type != 'Z') {
        now = now_timestamp();
        unmetered = account(now, debug_query_string != nullptr, start, now_metered);
        add_pending(unmetered, true);
    } else if (fastpath_answered) {
        // the call's commit, up to its error if it failed
        unmetered = account(error_at != 0 ? error_at : ready_stamp(mark), true, start, now_metered);
        add_pending(unmetered, false);
    } else if (cpu_marked && start == message) {
        // only unstamped messages since the mark: a Sync's commit, failed or
        // not, by its CPU time, what the meters timed taken out
        unmetered = cpu_ms() - cpu_at_mark - (now_metered - metered_at_mark);
        add_pending(unmetered, false);
    } else if (error_at != 0) {
        // what the failed message did until its error
        unmetered = account(error_at, error_in_text, start, now_metered);
        add_pending(unmetered, false);
    } else if (deferred_from != 0) {
        // deferred up to a Sync: its commit is in the span
        unmetered = account(ready_stamp(deferred_from), true, start, now_metered);
        add_pending(unmetered, false);
    }
    statement_overhead(goes_on(type) ? '2' : type, unmetered + (planning_ms_total - planning_at_mark));
    planning_at_mark = planning_ms_total;
    restart(now, type == 'Z' ? Mark::Closed : Mark::Answered, type == 'V', start, now_metered);
}

// type is an answer (is_answer): ParseComplete, BindComplete, CommandComplete,
// PortalSuspended, EmptyQueryResponse, FunctionCallResponse, ReadyForQuery,
// or an ErrorResponse, whose abort that follows settles the meters first
// (and, while a span is deferred, RowDescription, NoData, CloseComplete).
inline void answered(char type) {
    if (unlikely(type == 'E')) {
        if (error_at == 0) {
            error_at = now_timestamp();
            error_in_text = debug_query_string != nullptr;
        }
        return;
    }
    end_conversion_stage();  // (its work is the message's, which this answer ends)
    account_answer(type);
    if (type == 'Z') simple_query_message = false;  // (metered or not: the next message is read now)
}

// A NotificationResponse ('A', not an answer: it ends no message's work) is delivered inside the
// listener's own transaction (ProcessIncomingNotify's), between statements; its sender pays for
// it (notify_metering.cpp). The CPU time from just before the first one of a transaction, then
// from each one to the next, is charged to the sender of the later one. The listener does not pay
// for it: it is taken out of the spans here as a wait is, and out of the CPU windows (a Sync's, a
// listening session's). Where no sender is found, the time stays in them, the listener's own.
bool delivering = false;
double delivery_cpu = 0;

void delivery_over(void*) {
    delivering = false;
    delivery_flush();
}

inline int32 sender_pid(const char* s, size_t len) {
    uint32 n = 0;
    if (len >= sizeof n) std::memcpy(&n, s, sizeof n);
    return static_cast<int32>(pg_ntoh32(n));
}

__attribute__((noinline)) int deliver_and_put(const char* s, size_t len) {
    if (!delivering) {
        if (!IsTransactionState() || !shared_memory_ready()) return socket_methods->putmessage('A', s, len);
        auto* cb = static_cast<MemoryContextCallback*>(
            MemoryContextAlloc(TopTransactionContext, sizeof(MemoryContextCallback)));
        cb->func = delivery_over;
        cb->arg = nullptr;
        MemoryContextRegisterResetCallback(TopTransactionContext, cb);
        delivering = true;
        delivery_begin();
        delivery_cpu = cpu_ms();
    }
    const int r = socket_methods->putmessage('A', s, len);
    const double now = cpu_ms();
    // (what the sender is not charged stays the listener's: notify_metering.cpp)
    const double ms = delivery_senders_part(now - delivery_cpu, len);
    delivery_cpu = now;
    if (!delivery_charge(sender_pid(s, len), ms)) return r;  // no sender found: the listener's own time
    waited_total += ms;
    delivered_total += ms;
    if (cpu_marked) cpu_at_mark += ms;
    return r;
}

__attribute__((noinline)) int answer_and_put(char type, const char* s, size_t len) {
    if (unlikely(type == 'A')) return deliver_and_put(s, len);
    // A deferred span goes on past an answer that goes on, the next message buffered (defer()).
    if (deferred_from != 0 && defers(type) && next_message_here()) {
        end_conversion_stage();
        return socket_methods->putmessage(type, s, len);
    }
    answered(type);
    return socket_methods->putmessage(type, s, len);
}

// Both ways end in a tail call: a row (most messages) passes without a frame.
OT_HOT int watched_putmessage(char type, const char* s, size_t len) {
    if (unlikely(is_answer(type))) return answer_and_put(type, s, len);
    return socket_methods->putmessage(type, s, len);
}

// A Flush message, or anything else that flushes, while a span is deferred: with nothing buffered
// the client may be waited for next, so the span ends here as at an answer that goes on ('3').
int watched_flush() {
    if (unlikely(deferred_from != 0) && !next_message_here()) account_answer('3');
    return socket_methods->flush();
}

}  // namespace

bool listening_session = false;
bool simple_query_message = false;

void note_listening() { listening_session = true; }

// A transaction of a listening session ended: one it ran while idle (reading notifications, or
// catching up with the cache invalidations) pays for its CPU time less what it delivered. (After a
// ReadyForQuery the mark is closed and no message has stamped a new start yet.)
void idle_transaction_ended() {
    if (where != Mark::Closed || GetCurrentStatementStartTimestamp() != message || !metered_backend()) return;
    const double now = cpu_ms();
    const double own = now - idle_cpu - (delivered_total - delivered_at_idle);
    idle_cpu = now;
    delivered_at_idle = delivered_total;
    add_pending(own, false);
}

bool answers_watched() { return whereToSendOutput == DestRemote && metered_backend(); }

void admission_waited(double ms) {
    commit_phase_waited(ms);
    waited_total += ms;
}

void install_message_metering() {
    // Every message the backend sends goes through PqCommMethods (a parallel
    // worker's are redirected to its queue, which this leaves alone).
    socket_methods = PqCommMethods;
    watched_methods = *PqCommMethods;
    watched_methods.putmessage = watched_putmessage;
    watched_methods.flush = watched_flush;
    PqCommMethods = &watched_methods;
}

}  // namespace ot::ext
