#include "gate/redis_client.hpp"

#include <algorithm>
#include <utility>

#include <boost/asio/connect.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>

namespace ot::gate::redis {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;

const char* failure_name(Failure f) {
    switch (f) {
        case Failure::None: return "none";
        case Failure::Timeout: return "timeout";
        case Failure::Unavailable: return "unavailable";
        case Failure::Protocol: return "protocol";
    }
    return "unknown";
}

std::shared_ptr<Client> Client::create(asio::io_context& ioc, Endpoint ep, ClientOptions opt) {
    return std::shared_ptr<Client>(new Client(ioc, std::move(ep), std::move(opt)));
}

Client::Client(asio::io_context& ioc, Endpoint ep, ClientOptions opt)
    : ioc_(ioc), ep_(std::move(ep)), opt_(std::move(opt)), resolver_(ioc), socket_(ioc), timer_(ioc), backoff_(ioc),
      in_(16 * 1024) {}

Client::~Client() = default;

void Client::command(std::vector<std::string> args, Handler h) {
    if (state_ == State::Closed || state_ == State::Backoff || closing_) {
        Result r;
        r.failure = Failure::Unavailable;
        r.detail = state_ == State::Closed || closing_ ? "client closed" : "reconnecting";
        complete(h, std::move(r));
        return;
    }
    if (state_ == State::Idle) start_connect();
    queue(args, std::move(h));
    flush();
    arm_timer();
}

void Client::queue(const std::vector<std::string>& args, Handler h) {
    encode_command(args, out_);
    pending_.push_back({std::move(h), Clock::now() + std::chrono::milliseconds(opt_.timeout_ms)});
}

void Client::start_connect() {
    state_ = State::Resolving;
    const std::uint64_t gen = generation_;
    resolver_.async_resolve(ep_.host, ep_.port, [self = shared_from_this(), gen](boost::system::error_code ec,
                                                                                 tcp::resolver::results_type res) {
        if (gen != self->generation_ || self->state_ != State::Resolving) return;
        if (ec) return self->drop(Failure::Unavailable, "resolve " + self->ep_.host + ": " + ec.message());
        self->state_ = State::Connecting;
        asio::async_connect(self->socket_, res, [self, gen](boost::system::error_code ec2, const tcp::endpoint&) {
            if (gen != self->generation_ || self->state_ != State::Connecting) return;
            if (ec2) return self->drop(Failure::Unavailable, "connect: " + ec2.message());
            self->on_connected();
        });
    });
}

void Client::on_connected() {
    state_ = State::Ready;
    boost::system::error_code ignored;
    socket_.set_option(tcp::no_delay(true), ignored);
    // The handshake goes before whatever was queued while connecting, with
    // the deadline of the oldest of those so no caller waits longer.
    std::vector<std::vector<std::string>> hs;
    if (!ep_.password.empty()) {
        if (ep_.username.empty()) hs.push_back({"AUTH", ep_.password});
        else hs.push_back({"AUTH", ep_.username, ep_.password});
    }
    if (ep_.db != 0) hs.push_back({"SELECT", std::to_string(ep_.db)});
    for (const auto& c : opt_.on_connect) hs.push_back(c);
    auto deadline = Clock::now() + std::chrono::milliseconds(opt_.timeout_ms);
    if (!pending_.empty()) deadline = std::min(deadline, pending_.front().deadline);
    std::string head;
    for (const auto& c : hs) encode_command(c, head);
    out_.insert(0, head);
    for (std::size_t i = 0; i < hs.size(); ++i) pending_.push_front({Handler{}, deadline});
    read();
    flush();
    arm_timer();
}

void Client::flush() {
    if (write_busy_ || out_.empty() || state_ != State::Ready) return;
    writing_.swap(out_);
    out_.clear();
    write_busy_ = true;
    const std::uint64_t gen = generation_;
    asio::async_write(socket_, asio::buffer(writing_), [self = shared_from_this(), gen](boost::system::error_code ec, std::size_t) {
        if (gen != self->generation_) return;
        self->write_busy_ = false;
        if (ec) return self->drop(Failure::Unavailable, "write: " + ec.message());
        self->flush();
    });
}

void Client::read() {
    const std::uint64_t gen = generation_;
    socket_.async_read_some(asio::buffer(in_), [self = shared_from_this(), gen](boost::system::error_code ec, std::size_t n) {
        if (gen != self->generation_) return;
        if (ec) return self->drop(Failure::Unavailable, "read: " + ec.message());
        if (!self->parser_.feed(self->in_.data(), n)) return self->drop(Failure::Protocol, self->parser_.error());
        while (auto r = self->parser_.next()) {
            self->on_reply(std::move(*r));
            if (gen != self->generation_) return;  // a handler closed the client, or a reply was unexpected
        }
        if (!self->parser_.error().empty()) return self->drop(Failure::Protocol, self->parser_.error());
        self->read();
    });
}

void Client::on_reply(Reply r) {
    if (pending_.empty()) return drop(Failure::Protocol, "reply without a command");
    // Only an answer proves the server well: a stalled one still accepts
    // connections, and must not be retried every 20 ms.
    backoff_ms_ = 0;
    Pending p = std::move(pending_.front());
    pending_.pop_front();
    if (!p.handler) {
        if (r.is_error()) return drop(Failure::Protocol, "connection setup: " + r.str);
        if (closing_ && pending_.empty()) close();
        return;
    }
    // The deadline may have passed while the reply sat in the same read as
    // others; the caller still gets the answer: it is not late by much.
    Result res;
    res.reply = std::move(r);
    p.handler(std::move(res));
    if (closing_ && pending_.empty()) return close();
    arm_timer();
}

void Client::arm_timer() {
    if (timer_armed_ || pending_.empty()) return;
    timer_armed_ = true;
    timer_.expires_at(pending_.front().deadline);
    const std::uint64_t gen = generation_;
    timer_.async_wait([self = shared_from_this(), gen](boost::system::error_code ec) {
        if (gen != self->generation_ || ec == asio::error::operation_aborted) return;
        self->timer_armed_ = false;
        if (!self->pending_.empty() && self->pending_.front().deadline <= Clock::now())
            return self->drop(Failure::Timeout, "no reply within " + std::to_string(self->opt_.timeout_ms) + " ms");
        self->arm_timer();
    });
}

void Client::complete(Handler& h, Result r) {
    if (!h) return;
    asio::post(ioc_, [h = std::move(h), r = std::move(r)]() mutable { h(std::move(r)); });
}

void Client::fail_all(Failure f, const std::string& detail) {
    std::deque<Pending> failed;
    failed.swap(pending_);
    for (Pending& p : failed) {
        Result r;
        r.failure = f;
        r.detail = detail;
        complete(p.handler, std::move(r));
    }
}

void Client::drop(Failure f, const std::string& detail) {
    if (state_ == State::Closed) return;
    if (closing_) {  // no reconnecting a replaced connection
        fail_all(f, detail);
        return close();
    }
    ++generation_;
    boost::system::error_code ignored;
    socket_.close(ignored);
    resolver_.cancel();
    timer_.cancel();
    timer_armed_ = false;
    write_busy_ = false;
    out_.clear();
    parser_.reset();
    state_ = State::Backoff;
    fail_all(f, detail);
    backoff_ms_ = backoff_ms_ == 0 ? opt_.backoff_min_ms : std::min(backoff_ms_ * 2, opt_.backoff_max_ms);
    backoff_.expires_after(std::chrono::milliseconds(backoff_ms_));
    backoff_.async_wait([self = shared_from_this()](boost::system::error_code ec) {
        if (ec || self->state_ != State::Backoff) return;
        ++self->reconnects_;
        self->start_connect();
    });
}

void Client::close_when_idle() {
    closing_ = true;
    if (pending_.empty() || state_ != State::Ready) close();
}

void Client::close() {
    if (state_ == State::Closed) return;
    ++generation_;
    state_ = State::Closed;
    boost::system::error_code ignored;
    socket_.close(ignored);
    resolver_.cancel();
    timer_.cancel();
    backoff_.cancel();
    fail_all(Failure::Unavailable, "client closed");
}

}  // namespace ot::gate::redis
