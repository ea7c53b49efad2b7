// The access log's writer thread. I/O threads hand it their batched lines
// (a memcpy under a lock) and go on; only this thread calls write(2), so a
// slow reader of stdout (a full pipe, a stalled journald) slows the log,
// never the requests. What piles up beyond `max_pending` bytes is dropped
// and counted rather than held without bound.
// After each write the writer gathers for `gather` before it looks again, and
// a submit wakes it only while it waits: at one connection the I/O thread
// hands over a line per request, and a futex wake-up per line (the writer
// taking a core from the I/O thread, wrk or the upstream on a 2-core host)
// was the gate's largest tail cost. A line after a quiet spell is written at
// once; under load, lines wait at most `gather` (20 ms: 50 wake-ups a second
// under steady load, where 2 ms made 500, each a thread to schedule on a
// core a request may be waiting for). drain() and the destructor cut a
// gather short, so nothing waits for it at shutdown.
#pragma once
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>

namespace ot::gate {

class LogWriter {
public:
    explicit LogWriter(int fd, std::size_t max_pending = 16u << 20,
                       std::chrono::microseconds gather = std::chrono::microseconds(20000));
    ~LogWriter();  // writes what is pending, then stops
    LogWriter(const LogWriter&) = delete;
    LogWriter& operator=(const LogWriter&) = delete;
    void submit(std::string_view text);
    // Blocks until everything submitted so far has been written (or failed).
    void drain();
    std::uint64_t dropped_bytes() const { return dropped_.load(); }
    std::uint64_t wakeups() const { return wakeups_.load(); }  // notifications sent to the writer

private:
    void run();
    const int fd_;
    const std::size_t max_pending_;
    const std::chrono::microseconds gather_;
    std::mutex mu_;
    std::condition_variable wake_, done_;
    std::string pending_;
    std::uint64_t submitted_ = 0, written_ = 0;  // batches
    bool stop_ = false;
    bool waiting_ = false;  // the writer sleeps on wake_
    bool flush_now_ = false;  // drain() asks: end the gather
    std::atomic<std::uint64_t> dropped_{0}, wakeups_{0};
    std::thread thread_;
};

}  // namespace ot::gate
