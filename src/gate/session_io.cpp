// The connection's deadlines and /readyz. One timer per connection, moved
// lazily: each client read or write, and each upstream operation, only
// pushes a deadline forward; the timer, when it fires early, waits again for
// the rest, and is re-armed at once only for a deadline earlier than the one
// it waits for (an upstream connect). A timer per I/O operation, as
// beast::tcp_stream keeps, cost a timer-queue insert and a cancelled
// completion per operation — three per passed request. The client deadline
// counts only while client I/O is pending, the upstream's only while an
// upstream operation is.
#include <iostream>

#include "gate/capabilities_relay.hpp"
#include "gate/session.hpp"

namespace ot::gate {

std::chrono::milliseconds ms(double seconds) { return std::chrono::milliseconds(static_cast<long long>(seconds * 1000)); }

std::int64_t now_us() {
    return std::chrono::duration_cast<std::chrono::microseconds>(Clock::now().time_since_epoch()).count();
}

bool hop_by_hop(beast::string_view name) {
    for (const char* h : {"connection", "keep-alive", "proxy-connection", "proxy-authenticate", "proxy-authorization",
                          "te", "trailer", "transfer-encoding", "upgrade", "expect"})
        if (beast::iequals(name, h)) return true;
    return false;
}

void Session::client_io(double seconds) {
    deadline_ = Clock::now() + ms(seconds);
    io_pending_ = true;
    arm_for(deadline_);
}

void Session::upstream_io(double seconds) {
    up_deadline_ = Clock::now() + ms(seconds);
    up_pending_ = true;
    arm_for(up_deadline_);
}

beast::error_code Session::upstream_io_done(beast::error_code ec) {
    up_pending_ = false;
    if (up_timed_out_) return beast::error::timeout;
    return ec;
}

void Session::arm_for(Clock::time_point at) {
    if (timer_armed_ && armed_at_ <= at) return;  // fires first, then waits the rest
    arm_idle_timer(at);
}

void Session::arm_idle_timer(Clock::time_point at) {
    timer_armed_ = true;
    armed_at_ = at;
    const unsigned gen = ++timer_gen_;
    idle_timer_.expires_at(at);  // cancels a wait for a later deadline: its handler is stale
    idle_timer_.async_wait([weak = weak_from_this(), gen](beast::error_code ec) {
        if (auto self = weak.lock()) self->contain([&] { self->on_idle_timer(ec, gen); });
    });
}

void Session::on_idle_timer(beast::error_code ec, unsigned gen) {
    if (gen != timer_gen_) return;  // superseded
    timer_armed_ = false;
    if (ec) return;
    const auto now = Clock::now();
    beast::error_code ignored;
    if (up_pending_ && up_.conn && now >= up_deadline_) {
        // The upstream is too slow: its pending operation completes with
        // operation_aborted, which upstream_io_done() reads as a timeout.
        up_timed_out_ = true;
        up_pending_ = false;
        up_.conn->close(ignored);
    }
    const bool client = io_pending_ && socket_.is_open();
    if (client && now >= deadline_) {
        // Too slow: the pending read or write completes with operation_aborted.
        timed_out_ = true;
        socket_.close(ignored);
        return;
    }
    // Moved on meanwhile: wait the rest.
    if (client && up_pending_) return arm_idle_timer(std::min(deadline_, up_deadline_));
    if (client) return arm_idle_timer(deadline_);
    if (up_pending_) return arm_idle_timer(up_deadline_);
}

void Session::ready() {
    ex_.decision.verdict = "health";
    const Upstream& u = gate_.upstream();
    probe_ = std::make_unique<beast::tcp_stream>(socket_.get_executor());
    probe_->expires_after(std::chrono::seconds(2));
    probe_resolver_ = std::make_unique<tcp::resolver>(socket_.get_executor());
    probe_resolver_->async_resolve(
        u.host, u.port, [self = shared_from_this()](beast::error_code ec, tcp::resolver::results_type rs) {
            self->guard([&] {
                if (ec) return self->plain(503, "upstream not resolvable", "health");
                self->probe_->async_connect(rs, [self](beast::error_code ec2, const tcp::endpoint&) {
                    self->guard([&] {
                        beast::error_code ignored;
                        self->probe_->socket().close(ignored);
                        if (ec2) return self->plain(503, "upstream not reachable", "health");
                        self->plain(200, "ready" + caps_readyz_details(), "health");
                    });
                });
            });
        });
}

}  // namespace ot::gate
