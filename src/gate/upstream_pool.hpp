// Idle keep-alive connections to the upstream. One pool per I/O thread: a
// connection stays registered with its thread's reactor between requests,
// so reusing one costs no system call beyond a liveness peek.
#pragma once
#include <chrono>
#include <cstddef>
#include <deque>
#include <mutex>
#include <optional>
#include <utility>

namespace ot::gate {

// Conn: movable; destroying it closes the connection.
template <class Conn>
class IdlePool {
public:
    using Clock = std::chrono::steady_clock;
    IdlePool(std::size_t max_idle, double idle_timeout_s) : max_idle_(max_idle), idle_s_(idle_timeout_s) {}
    void configure(std::size_t max_idle, double idle_timeout_s) {
        std::lock_guard<std::mutex> lock(mu_);
        max_idle_ = max_idle;
        idle_s_ = idle_timeout_s;
    }
    // Most recently used first (its peer is least likely to have timed it
    // out); expired ones and those `dead(conn)` says are closed are dropped.
    template <class Dead>
    std::optional<Conn> take(Clock::time_point now, Dead dead) {
        std::lock_guard<std::mutex> lock(mu_);
        const auto max_age = std::chrono::duration<double>(idle_s_);
        while (!idle_.empty() && now - idle_.front().second > max_age) idle_.pop_front();
        while (!idle_.empty()) {
            Conn c = std::move(idle_.back().first);
            idle_.pop_back();
            if (!dead(c)) return std::optional<Conn>(std::move(c));
        }
        return std::nullopt;
    }
    void put(Conn c, Clock::time_point now) {
        std::lock_guard<std::mutex> lock(mu_);
        if (max_idle_ == 0) return;
        while (idle_.size() >= max_idle_) idle_.pop_front();
        idle_.emplace_back(std::move(c), now);
    }
    std::size_t idle() const {
        std::lock_guard<std::mutex> lock(mu_);
        return idle_.size();
    }

private:
    // Uncontended (the owning thread) except for /metrics reading idle().
    mutable std::mutex mu_;
    std::deque<std::pair<Conn, Clock::time_point>> idle_;
    std::size_t max_idle_;
    double idle_s_;
};

// Whether the peer has closed (or sent unsolicited bytes on) an idle connection.
bool idle_conn_dead(int fd);

}  // namespace ot::gate
