#include "ext/statement_samples.hpp"

#include <algorithm>

#include "ext/samples.hpp"

// Which messages' time is whose. A simple Query's statement ends (ExecutorEnd)
// before its CommandComplete: its sample waits for that answer and takes the
// overhead gathered since the previous one. An Execute's portal (and a
// cursor) outlives its answers: the overhead up to each of them is kept for
// the open priced statement and added when it ends (at the next Bind, the
// Sync's commit, the CLOSE). Overhead that no priced statement owns is
// dropped at the next statement-ending answer.
namespace ot::ext {
namespace {

bool waiting = false;  // a statement ended, its answer not out yet
core::PlanFeatures waiting_features;
double waiting_ms = 0;

double open_ms = 0;  // since the last statement-ending answer

const void* answered_owner = nullptr;  // an open statement answered
double answered_ms = 0;                // ... its overhead so far

bool keep_waiting(double extra_ms) {
    waiting = false;
    return sample_record(waiting_features, waiting_ms + extra_ms);
}

}  // namespace

bool statement_sample(const void* record, const core::PlanFeatures& f, double exec_ms) {
    if (!answers_watched()) return sample_record(f, exec_ms);
    bool due = false;
    if (waiting) due = keep_waiting(0);  // two statements ended with no answer between
    if (record == answered_owner) {
        due |= sample_record(f, exec_ms + answered_ms);
        answered_owner = nullptr;
        answered_ms = 0;
        return due;
    }
    waiting = true;
    waiting_features = f;
    waiting_ms = exec_ms;
    return due;
}

void statement_overhead(char type, double ms) {
    open_ms += std::max(ms, 0.0);
    switch (type) {
        case 'C':  // CommandComplete
        case 's':  // PortalSuspended
        case 'I':  // EmptyQueryResponse
        case 'Z':  // ReadyForQuery
            break;
        default: return;  // ParseComplete, BindComplete: the statement goes on
    }
    if (waiting) {
        if (keep_waiting(open_ms)) request_refit();
        open_ms = 0;
        return;
    }
    if (type == 'Z') {
        // A statement that failed or was cut off leaves no sample: its
        // record is closed by now, and its slot may be the next one's.
        if (answered_owner != nullptr && !record_open(answered_owner)) {
            answered_owner = nullptr;
            answered_ms = 0;
        }
        open_ms = 0;
        return;
    }
    const void* owner = open_priced_record();
    if (owner != nullptr) {
        if (owner != answered_owner) {
            answered_owner = owner;
            answered_ms = 0;
        }
        answered_ms += open_ms;
    }
    open_ms = 0;
}

}  // namespace ot::ext
