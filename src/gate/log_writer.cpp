#include "gate/log_writer.hpp"

#include <unistd.h>

#include <cerrno>

namespace ot::gate {

LogWriter::LogWriter(int fd, std::size_t max_pending) : fd_(fd), max_pending_(max_pending), thread_([this] { run(); }) {}

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
    {
        std::lock_guard<std::mutex> lock(mu_);
        if (pending_.size() + text.size() > max_pending_) {
            dropped_ += text.size();
            return;
        }
        pending_.append(text.data(), text.size());
        ++submitted_;
    }
    wake_.notify_one();
}

void LogWriter::drain() {
    std::unique_lock<std::mutex> lock(mu_);
    const std::uint64_t target = submitted_;
    done_.wait(lock, [&] { return written_ >= target; });
}

void LogWriter::run() {
    std::string out;
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
        wake_.wait(lock, [&] { return stop_ || !pending_.empty(); });
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
    }
}

}  // namespace ot::gate
