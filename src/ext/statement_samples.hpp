// A calibration sample is what a priced statement took as a client runs it:
// its executor passes plus the server time of its messages outside them
// (parsing, analysis, planning, the portal's end, the answer). That is what
// the metering charges, and what the fit must learn: a statement's executor
// time alone misses a floor of some tenths of a millisecond that the smallest
// statements (a z16 tile, a 50 m page) pay whatever they read
// (bench/HISTORY.md, "Timed as a client's statement").
#pragma once
#include "ext/pg.hpp"

#include "core/statement_cost.hpp"
#include "ext/hot.hpp"

namespace ot::ext {

// metering.cpp: the priced statement whose record is `record` completed
// after exec_ms of executor passes. Its sample is kept now, or when its last
// message is answered. True when a refit became due.
bool statement_sample(const void* record, const core::PlanFeatures& f, double exec_ms);
// hook.cpp: a priced statement was admitted (its answers are watched).
void priced_statement_admitted();

// message_metering.cpp, at each answer: ms of server time outside the
// executor since the previous answer (what no meter timed, and planning).
// Inline for the usual answer, when no priced statement is about.
extern OT_LOCAL double sample_open_ms;  // since the last statement-ending answer
extern OT_LOCAL bool sample_pending;     // a priced statement is about: the slow path decides
void statement_overhead_slow(char type);
inline void statement_overhead(char type, double ms) {
    sample_open_ms += ms;
    if (type == '1' || type == '2') return;  // ParseComplete, BindComplete: the statement goes on
    if (likely(!sample_pending)) {
        sample_open_ms = 0;
        return;
    }
    statement_overhead_slow(type);
}

// message_metering.cpp: answers are watched here (a client backend with a
// socket under a metering mode); otherwise a sample is its executor time.
bool answers_watched();
// metering.cpp: the record of the newest priced statement while it is open
// (a portal that outlives its answer: Execute, a cursor's FETCH), or null.
const void* open_priced_record();
bool record_open(const void* record);
// metering.cpp: a sample kept outside ExecutorEnd made a refit due; the
// next ExecutorEnd runs it.
void request_refit();

}  // namespace ot::ext
