#include "gate/log_writer.hpp"

#include <unistd.h>

#include <cerrno>

namespace ot::gate {

LogWriter::LogWriter(int fd, std::size_t max_pending, std::chrono::microseconds gather)
    : fd_(fd), max_pending_(max_pending), gather_(gather), thread_([this] { run(); }) {}

LogWriter::~LogWriter() {
    {
        std::lock_guard<std::mutex> lock(mu_);
        stop_ = true;
    }
    wake_.notify_one();
    thread_.join();
}

void LogWriter::submit(std::string_view text) {
    if (text.empty()) return;
    bool wake = false;
    {
        std::lock_guard<std::mutex> lock(mu_);
        if (pending_.size() + text.size() > max_pending_) {
            dropped_ += text.size();
            return;
        }
        pending_.append(text.data(), text.size());
        ++submitted_;
        wake = waiting_;
        waiting_ = false;  // one notification per wait
    }
    if (wake) {
        wakeups_++;
        wake_.notify_one();
    }
}

void LogWriter::drain() {
    std::unique_lock<std::mutex> lock(mu_);
    const std::uint64_t target = submitted_;
    if (written_ >= target) return;
    flush_now_ = true;  // a writer gathering writes at once
    wake_.notify_one();
    done_.wait(lock, [&] { return written_ >= target; });
}

void LogWriter::run() {
    std::string out;
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
        waiting_ = true;
        wake_.wait(lock, [&] { return stop_ || !pending_.empty(); });
        waiting_ = false;
        flush_now_ = false;
        if (pending_.empty() && stop_) return;
        out.swap(pending_);  // both keep their capacity
        const std::uint64_t batch = submitted_;
        lock.unlock();
        const char* p = out.data();
        std::size_t left = out.size();
        while (left > 0) {
            const ssize_t n = ::write(fd_, p, left);
            if (n < 0 && errno == EINTR) continue;
            if (n <= 0) break;  // the log is gone; requests are still served
            p += n;
            left -= static_cast<std::size_t>(n);
        }
        out.clear();
        lock.lock();
        written_ = batch;
        done_.notify_all();
        if (stop_ || gather_.count() <= 0) continue;
        // Submits meanwhile only append (waiting_ is false): they are taken
        // in one piece when this ends, or when drain() or stop end it early.
        wake_.wait_for(lock, gather_, [&] { return stop_ || flush_now_; });
    }
}

}  // namespace ot::gate
