#include "gate/upstream_pool.hpp"

#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

namespace ot::gate {

bool idle_conn_dead(int fd) {
    char b;
    const ssize_t n = ::recv(fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n < 0) return !(errno == EAGAIN || errno == EWOULDBLOCK);
    // 0: orderly close; > 0: bytes nobody asked for, the stream is out of step.
    return true;
}

UpstreamPool::~UpstreamPool() {
    for (const Idle& i : idle_) ::close(i.c.fd);
}

void UpstreamPool::configure(std::size_t max_idle, double idle_timeout_s) {
    std::lock_guard<std::mutex> lock(mu_);
    max_idle_ = max_idle;
    idle_s_ = idle_timeout_s;
}

std::optional<UpstreamPool::Conn> UpstreamPool::take(Clock::time_point now) {
    std::vector<int> dead;
    std::optional<Conn> out;
    {
        std::lock_guard<std::mutex> lock(mu_);
        const auto max_age = std::chrono::duration<double>(idle_s_);
        // Oldest first in the vector: expired ones sit at the front.
        std::size_t expired = 0;
        while (expired < idle_.size() && now - idle_[expired].since > max_age) dead.push_back(idle_[expired++].c.fd);
        idle_.erase(idle_.begin(), idle_.begin() + static_cast<std::ptrdiff_t>(expired));
        while (!idle_.empty()) {
            const Conn c = idle_.back().c;
            idle_.pop_back();
            if (idle_conn_dead(c.fd)) {
                dead.push_back(c.fd);
                continue;
            }
            out = c;
            break;
        }
    }
    for (int fd : dead) ::close(fd);
    return out;
}

void UpstreamPool::put(Conn c, Clock::time_point now) {
    int drop = -1;
    {
        std::lock_guard<std::mutex> lock(mu_);
        if (max_idle_ == 0) {
            drop = c.fd;
        } else {
            if (idle_.size() >= max_idle_) {
                drop = idle_.front().c.fd;
                idle_.erase(idle_.begin());
            }
            idle_.push_back({c, now});
        }
    }
    if (drop >= 0) ::close(drop);
}

std::size_t UpstreamPool::idle() const {
    std::lock_guard<std::mutex> lock(mu_);
    return idle_.size();
}

}  // namespace ot::gate
