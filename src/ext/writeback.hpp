// The writes a process leaves to others. A buffer of a shared table dirtied in
// a backend is written later by the checkpointer or the background writer,
// whose time no session's meter sees: 25 000 pages, each dirtied by a one-row
// update through its ctid, cost the updating role 196 ms and the checkpointer
// 91 ms of CPU at the next checkpoint (bench/writeback/run.sh: 3.7-4.2 µs a
// page with fsync off, 5.4-6.0 µs with fsync on, on the machine this was built
// on). Each such buffer is charged ogc_throttle.dirty_block_cost to whoever
// dirtied it. What the process wrote out itself (a ring buffer's
// writes in a large scan, a VACUUM or a COPY; an eviction) is in its own time
// already: the charge is for dirtied less written, never below zero.
#pragma once
#include "ext/hot.hpp"
#include "ext/settings.hpp"

extern "C" {
#include "executor/instrument.h"
}

namespace ot::ext {

struct WritebackMark {
    int64 dirtied = 0;
    int64 written = 0;
};

inline bool writeback_moved(const WritebackMark& m) {
    return pgBufferUsage.shared_blks_dirtied != m.dirtied || pgBufferUsage.shared_blks_written != m.written;
}

// Milliseconds of writeback left to others since the mark (at least 0).
inline double writeback_ms(const WritebackMark& m) {
    const int64 left = (pgBufferUsage.shared_blks_dirtied - m.dirtied) - (pgBufferUsage.shared_blks_written - m.written);
    return left > 0 ? static_cast<double>(left) * setting_dirty_block_cost : 0;
}

inline void writeback_mark(WritebackMark* m) {
    m->dirtied = pgBufferUsage.shared_blks_dirtied;
    m->written = pgBufferUsage.shared_blks_written;
}

}  // namespace ot::ext
