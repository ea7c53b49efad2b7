// Idle keep-alive connections to the upstream, shared by all sessions. Held
// as bare descriptors so that a session can wrap one on its own strand (an
// Asio socket is bound to the executor it was made with).
#pragma once
#include <chrono>
#include <cstddef>
#include <mutex>
#include <optional>
#include <vector>

namespace ot::gate {

class UpstreamPool {
public:
    struct Conn {
        int fd;
        bool v6;
    };
    using Clock = std::chrono::steady_clock;
    UpstreamPool(std::size_t max_idle, double idle_timeout_s) : max_idle_(max_idle), idle_s_(idle_timeout_s) {}
    ~UpstreamPool();
    void configure(std::size_t max_idle, double idle_timeout_s);
    // Most recently used first (its peer is least likely to have timed it
    // out). Connections past the idle timeout or already closed by the peer
    // are dropped on the way.
    std::optional<Conn> take(Clock::time_point now = Clock::now());
    void put(Conn c, Clock::time_point now = Clock::now());
    std::size_t idle() const;

private:
    struct Idle {
        Conn c;
        Clock::time_point since;
    };
    mutable std::mutex mu_;
    std::vector<Idle> idle_;
    std::size_t max_idle_;
    double idle_s_;
};

// Whether the peer has closed (or sent unsolicited bytes on) an idle connection.
bool idle_conn_dead(int fd);

}  // namespace ot::gate
