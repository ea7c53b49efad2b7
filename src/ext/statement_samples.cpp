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

double sample_open_ms = 0;
bool sample_pending = false;

namespace {

bool waiting = false;  // a statement ended, its answer not out yet
core::PlanFeatures waiting_features;
double waiting_ms = 0;

bool priced_seen = false;  // admitted, and not yet found closed at an answer

const void* answered_owner = nullptr;  // an open statement answered
double answered_ms = 0;                // ... its overhead so far

bool keep_waiting(double extra_ms) {
    waiting = false;
    return sample_record(waiting_features, waiting_ms + std::max(extra_ms, 0.0));
}

void update_pending() { sample_pending = waiting || priced_seen || answered_owner != nullptr; }

}  // namespace

void priced_statement_admitted() {
    priced_seen = true;
    sample_pending = true;
}

bool statement_sample(const void* record, const core::PlanFeatures& f, double exec_ms) {
    if (!answers_watched()) return sample_record(f, exec_ms);
    bool due = false;
    if (waiting) due = keep_waiting(0);  // two statements ended with no answer between
    if (record == answered_owner) {
        due |= sample_record(f, exec_ms + std::max(answered_ms, 0.0));
        answered_owner = nullptr;
        answered_ms = 0;
    } else {
        waiting = true;
        waiting_features = f;
        waiting_ms = exec_ms;
    }
    update_pending();
    return due;
}

// CommandComplete, PortalSuspended, EmptyQueryResponse, ReadyForQuery.
void statement_overhead_slow(char type) {
    if (waiting) {
        if (keep_waiting(sample_open_ms)) request_refit();
    } else if (type == 'Z') {
        // A statement that failed or was cut off leaves no sample: its
        // record is closed by now, and its slot may be the next one's.
        if (answered_owner != nullptr && !record_open(answered_owner)) {
            answered_owner = nullptr;
            answered_ms = 0;
        }
    } else if (const void* owner = open_priced_record()) {
        if (owner != answered_owner) {
            answered_owner = owner;
            answered_ms = 0;
        }
        answered_ms += sample_open_ms;
    } else {
        priced_seen = false;
    }
    sample_open_ms = 0;
    update_pending();
}

}  // namespace ot::ext
