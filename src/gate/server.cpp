#include "gate/server.hpp"

#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/core/flat_static_buffer.hpp>
#include <boost/beast/http.hpp>
#include <unistd.h>

#include <cerrno>

#include <array>
#include <chrono>
#include <cmath>
#include <iostream>
#include <nlohmann/json.hpp>
#include <random>
#include <stdexcept>

#include "gate/decision.hpp"
#include "gate/http_head.hpp"
#include "gate/identity.hpp"
#include "gate/kvp.hpp"
#include "gate/log_line.hpp"
#include "gate/text.hpp"

namespace ot::gate {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;
// The I/O thread's own executor type, not the type-erased any_io_executor:
// every handler of a client connection is dispatched through it.
using ClientSocket = tcp::socket::rebind_executor<asio::io_context::executor_type>::other;
using ClientTimer = asio::basic_waitable_timer<Clock, asio::wait_traits<Clock>, asio::io_context::executor_type>;

namespace {

std::int64_t now_us() {
    return std::chrono::duration_cast<std::chrono::microseconds>(Clock::now().time_since_epoch()).count();
}

std::chrono::milliseconds ms(double seconds) { return std::chrono::milliseconds(static_cast<long long>(seconds * 1000)); }

bool valid_request_id(std::string_view s) {
    if (s.empty() || s.size() > 128) return false;
    for (char c : s) {
        const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
                        c == '_' || c == '.' || c == ':';
        if (!ok) return false;
    }
    return true;
}

std::string mint_request_id() {
    thread_local std::mt19937_64 rng{std::random_device{}()};
    static constexpr char kHex[] = "0123456789abcdef";
    std::string id(32, '0');
    for (int half = 0; half < 2; ++half) {
        std::uint64_t v = rng();
        for (int i = 15; i >= 0; --i, v >>= 4) id[static_cast<std::size_t>(half * 16 + i)] = kHex[v & 0xf];
    }
    return id;
}

bool hop_by_hop(beast::string_view name) {
    for (const char* h : {"connection", "keep-alive", "proxy-connection", "proxy-authenticate", "proxy-authorization",
                          "te", "trailer", "transfer-encoding", "upgrade", "expect"})
        if (beast::iequals(name, h)) return true;
    return false;
}

// Relay buffers, cached per I/O thread and held only while a request is
// being relayed: an idle keep-alive connection costs no 128 kB.
constexpr std::size_t kBlock = 64 * 1024;

std::vector<std::unique_ptr<char[]>>& free_blocks() {
    thread_local std::vector<std::unique_ptr<char[]>> f;
    return f;
}

std::unique_ptr<char[]> take_block() {
    auto& f = free_blocks();
    if (f.empty()) return std::unique_ptr<char[]>(new char[kBlock]);
    auto b = std::move(f.back());
    f.pop_back();
    return b;
}

void give_block(std::unique_ptr<char[]>& b) {
    if (!b) return;
    auto& f = free_blocks();
    if (f.size() < 64) f.push_back(std::move(b));
    b.reset();
}

// One request/response exchange on a client connection, possibly repeated
// (keep-alive). Holds a config snapshot per request, so a reload never
// changes the rules half-way through one.
class Session : public std::enable_shared_from_this<Session> {
public:
    Session(ClientSocket s, Gate& g, bool admin, unsigned worker)
        : socket_(std::move(s)), idle_timer_(socket_.get_executor()), gate_(g), admin_(admin), worker_(worker) {
        beast::error_code ec;
        const auto ep = socket_.remote_endpoint(ec);
        if (!ec) peer_ = parse_ip(ep.address().to_string()).value_or(IpAddr{});
        socket_.set_option(tcp::no_delay(true), ec);
    }
    void start() { read(); }

private:
    // --- the client's idle timeout -------------------------------------
    // One timer per connection, moved lazily: each client read or write
    // only pushes deadline_ forward, and the timer, when it fires early,
    // waits again for the rest. (A timer per I/O operation, as
    // beast::tcp_stream keeps, cost a timer-queue insert and a cancelled
    // completion per request.) It only counts while client I/O is pending:
    // waiting for the upstream is the upstream's timeout.
    void client_io(double seconds) {
        deadline_ = Clock::now() + ms(seconds);
        io_pending_ = true;
        if (!timer_armed_) arm_idle_timer();
    }

    void arm_idle_timer() {
        timer_armed_ = true;
        idle_timer_.expires_at(deadline_);
        idle_timer_.async_wait([weak = weak_from_this()](beast::error_code ec) {
            if (auto self = weak.lock()) self->on_idle_timer(ec);
        });
    }

    void client_io_done() { io_pending_ = false; }

    void on_idle_timer(beast::error_code ec) {
        timer_armed_ = false;
        if (ec || !io_pending_ || !socket_.is_open()) return;
        if (Clock::now() < deadline_) return arm_idle_timer();  // moved on meanwhile: wait the rest
        // Too slow: the pending read or write completes with operation_aborted.
        timed_out_ = true;
        beast::error_code ignored;
        socket_.close(ignored);
    }

    void read() {
        cfg_ = gate_.config(worker_);
        parser_.emplace();
        parser_->header_limit(static_cast<std::uint32_t>(cfg_->limits.header_bytes));
        parser_->body_limit(cfg_->limits.body_bytes);
        client_io(cfg_->limits.idle_timeout_s);
        http::async_read_header(socket_, buf_, *parser_, [self = shared_from_this()](beast::error_code ec, std::size_t) {
            if (ec || self->parser_->is_done()) return self->on_read(ec);
            self->read_body();
        });
    }

    // curl and others wait (about a second) for "100 Continue" before
    // sending a body they announced with Expect; a too-large one is refused
    // before it is sent.
    void read_body() {
        const auto& h = parser_->get();
        if (beast::iequals(h[http::field::expect], "100-continue")) {
            if (h.has_content_length() && parser_->content_length() &&
                *parser_->content_length() > cfg_->limits.body_bytes)
                return on_read(http::error::body_limit);
            auto cont = std::make_shared<http::response<http::empty_body>>(http::status::continue_, 11);
            return http::async_write(socket_, *cont, [self = shared_from_this(), cont](beast::error_code ec, std::size_t) {
                if (ec) return self->on_read(ec);
                self->read_rest();
            });
        }
        read_rest();
    }

    void read_rest() {
        http::async_read(socket_, buf_, *parser_, [self = shared_from_this()](beast::error_code ec, std::size_t) {
            self->on_read(ec);
        });
    }

    void on_read(beast::error_code ec) {
        client_io_done();
        if (timed_out_ || ec == http::error::end_of_stream || ec == beast::error::timeout || ec == asio::error::operation_aborted ||
            ec == asio::error::connection_reset || ec == asio::error::eof)
            return close();
        // A fresh slate per request on a kept-alive connection.
        assessment_ = {};
        decision_ = {};
        upstream_status_ = 0;
        identity_hash_.clear();
        tier_.clear();
        upstream_error_.clear();
        flight_key_.reset();
        slot_class_.clear();
        bucket_key_.clear();
        coalesced_ = retried_ = false;
        refunded_ = 0;
        status_sent_ = 0;
        started_ = Clock::now();
        gate_.inflight(worker_)++;
        counted_ = true;
        keep_alive_ = false;
        req_ = {};  // an unreadable request must not answer as the previous one (HEAD) did
        if (ec == http::error::body_limit)
            return plain(413, "request body larger than " + std::to_string(cfg_->limits.body_bytes) + " bytes", "invalid");
        if (ec == http::error::header_limit)
            return plain(431, "request header larger than " + std::to_string(cfg_->limits.header_bytes) + " bytes",
                         "invalid");
        if (ec) return plain(400, "malformed HTTP request", "invalid");
        req_ = parser_->release();
        keep_alive_ = req_.keep_alive() && !gate_.draining();
        auto incoming = req_["X-Request-Id"];
        request_id_ = valid_request_id(std::string_view(incoming.data(), incoming.size())) ? std::string(incoming) : mint_request_id();
        // Nothing a client sends may take the process down: a bug in a
        // parser costs that one request a 500, not every connection.
        try {
            if (admin_) return admin();
            handle();
        } catch (const std::exception& e) {
            upstream_error_ = std::string("internal: ") + e.what();
            plain(500, "internal error", "error");
        }
    }

    // Every Cookie header, joined as MapServer's CGI environment sees them.
    std::string cookies() const {
        std::string c;
        for (const auto& f : req_)
            if (f.name() == http::field::cookie) {
                if (!c.empty()) c += "; ";
                c.append(f.value().data(), f.value().size());
            }
        return c;
    }

    HeaderList headers_of(const http::request<http::string_body>& r) {
        HeaderList h;
        for (const auto& f : r) h.emplace_back(std::string(f.name_string()), std::string(f.value()));
        return h;
    }

    void handle() {
        const std::string_view target(req_.target().data(), req_.target().size());
        const std::string_view path = target.substr(0, target.find('?'));
        if (path == "/healthz" || path == "/livez") return plain(200, "ok", "health");
        if (path == "/readyz") return ready();

        HttpIn in{std::string(req_.method_string()), std::string(target), std::string(req_[http::field::content_type]),
                  req_.body(), cookies()};
        if (in.target.empty() || in.target[0] != '/')
            return plain(400, "only origin-form request targets are accepted", "invalid");
        const Config& c = *cfg_;
        assessment_ = assess(in, c);
        const HeaderList headers = headers_of(req_);
        const Identity id = identify(headers, peer_, c);
        identity_hash_ = id.hash;
        tier_ = id.tier;
        const Tier& tier = c.tier(id.tier);
        std::optional<core::SpendResult> spent;
        if (assessment_.needs_budget(c.shadow))
            spent = gate_.buckets().spend(id.key, assessment_.price.cost, tier.budget, now_us());
        decision_ = decide(in, assessment_, tier, spent, c);
        if (!decision_.forward) {
            const Response& r = decision_.response;
            return respond(r.status, r.content_type, r.body, r.headers);
        }
        bucket_key_ = id.key;
        budget_ = tier.budget;
        // Only after the budget said yes: joining a flight is no free ride.
        flight_key_ = coalesce_key(in, assessment_.req, headers, c);
        forward(in);
    }

    // --- upstream -------------------------------------------------------
    void forward(const HttpIn& in) {
        const Upstream& u = gate_.upstream();
        up_req_ = {};
        up_req_.method_string(in.method);
        const ToUpstream& tu = cfg_->to_upstream;
        std::string target = u.prefix + decision_.target;
        // Shadow mode forwards the request as sent: it names nobody upstream.
        if (!tu.param.empty() && !cfg_->shadow) {
            target += target.find('?') == std::string::npos ? '?' : '&';
            target += tu.param;
            target += '=';
            append_encoded(target, bucket_key_);
        }
        up_req_.target(target);
        up_req_.version(11);
        const auto named_by_gate = [&tu](beast::string_view n) {
            return !tu.header.empty() &&
                   (beast::iequals(n, tu.header) || beast::iequals(n, "X-OT-Tier") || beast::iequals(n, "X-OT-Signature"));
        };
        for (const auto& f : req_)
            if (!hop_by_hop(f.name_string()) && !beast::iequals(f.name_string(), "X-Request-Id") &&
                !named_by_gate(f.name_string()))
                up_req_.insert(f.name_string(), f.value());
        up_req_.set("X-Request-Id", request_id_);
        if (!tu.header.empty()) {
            up_req_.set(tu.header, bucket_key_);
            up_req_.set("X-OT-Tier", tier_);
            if (!tu.hmac_key.empty())
                up_req_.set("X-OT-Signature", upstream_signature(tu.hmac_key, bucket_key_, tier_, request_id_));
        }
        const std::string peer = ip_to_string(peer_);
        const auto xff = req_["X-Forwarded-For"];
        up_req_.set("X-Forwarded-For", xff.empty() ? peer : std::string(xff) + ", " + peer);
        up_req_.keep_alive(true);
        up_req_.body() = decision_.body ? *decision_.body : req_.body();
        if (!up_req_.body().empty() || req_.has_content_length()) up_req_.prepare_payload();
        if (flight_key_) {
            auto self = shared_from_this();
            auto ex = socket_.get_executor();
            const bool lead = gate_.coalescer().join(*flight_key_, [self, ex](const FlightResult& r) {
                asio::post(ex, [self, r] { self->on_flight(r); });
            });
            if (!lead) {
                flight_key_.reset();
                coalesced_ = true;
                return;
            }
        }
        acquire_slot();
    }

    void finish_flight(FlightResult r) {
        if (!flight_key_) return;
        const std::string key = std::move(*flight_key_);
        flight_key_.reset();
        gate_.coalescer().finish(key, r);
    }

    void on_flight(const FlightResult& r) {
        switch (r.kind) {
            case FlightResult::Kind::Response:
                gate_.metrics().coalesced(worker_);
                return respond_shared(*r.response);
            case FlightResult::Kind::UpstreamError: return upstream_error_reply(r.timeout, r.error);
            case FlightResult::Kind::Busy: return busy();
            case FlightResult::Kind::Overflow:
                coalesced_ = false;
                return acquire_slot();
        }
    }

    void acquire_slot() {
        slot_class_ = concurrency_class(assessment_.req, assessment_.price.cost_class, *cfg_);
        if (slot_class_.empty()) return send_upstream();
        auto self = shared_from_this();
        auto ex = socket_.get_executor();
        std::uint64_t ticket = 0;
        switch (gate_.slots().acquire(slot_class_, [self, ex] { asio::post(ex, [self] { self->slot_granted(); }); },
                                      &ticket)) {
            case Slots::Outcome::Granted: holding_slot_ = true; return send_upstream();
            case Slots::Outcome::Full: return busy();
            case Slots::Outcome::Queued: break;
        }
        queue_timer_ = std::make_unique<asio::steady_timer>(ex);
        queue_timer_->expires_after(ms(cfg_->concurrency.queue_timeout_s));
        queue_timer_->async_wait([self, ticket](beast::error_code ec) {
            if (ec) return;
            // Lost the race to a grant: slot_granted() is already posted.
            if (self->gate_.slots().cancel(self->slot_class_, ticket)) self->busy();
        });
    }

    void slot_granted() {
        holding_slot_ = true;
        if (queue_timer_) queue_timer_->cancel();
        send_upstream();
    }

    void release_slot() {
        if (!holding_slot_) return;
        holding_slot_ = false;
        gate_.slots().release(slot_class_);
    }

    void busy() {
        finish_flight({FlightResult::Kind::Busy, nullptr, false, {}});
        decision_.verdict = "busy";
        refund(1.0);
        const double wait = std::max(1.0, std::ceil(cfg_->concurrency.queue_timeout_s));
        OgcError e{ErrorKind::Busy, "NoApplicableCode", "",
                   "The map server behind this gate is busy with requests of this kind. Retry after " +
                       std::to_string(static_cast<int>(wait)) + " s."};
        const Rendered r = render_refusal(assessment_, e, *cfg_);
        HeaderList h = decision_.headers;
        h.push_back({"Retry-After", std::to_string(static_cast<int>(wait))});
        h.push_back({"Cache-Control", "no-store"});
        respond(r.status, r.content_type, r.body, h);
    }

    void send_upstream() {
        up_started_ = Clock::now();
        // Beast reads no more than the buffer's spare capacity: a growing
        // flat_buffer would take a 20 kB tile in 40 reads of 512 bytes.
        if (!up_mem_) up_mem_ = take_block();
        if (!chunk_mem_) chunk_mem_ = take_block();
        up_buf_.emplace(up_mem_.get(), kBlock);
        up_sr_.reset();
        up_parser_.reset();
        auto ex = socket_.get_executor();
        if (!retried_) {
            // A GET/HEAD that meets a connection the upstream has closed is
            // retried (upstream_failed); anything else must not meet one, so
            // only it pays a system call to look first.
            const bool safe = req_.method() == http::verb::get || req_.method() == http::verb::head;
            auto conn = gate_.pool(worker_).take(Clock::now(), [safe](const std::unique_ptr<beast::tcp_stream>& c) {
                return !safe && idle_conn_dead(c->socket().native_handle());
            });
            if (conn) {
                reused_ = true;
                up_ = std::move(*conn);
                return write_upstream();
            }
        }
        reused_ = false;
        const Upstream& u = gate_.upstream();
        up_ = std::make_unique<beast::tcp_stream>(ex);
        up_->expires_after(ms(cfg_->limits.upstream_connect_timeout_s));
        resolver_ = std::make_unique<tcp::resolver>(ex);
        resolver_->async_resolve(u.host, u.port, [self = shared_from_this()](beast::error_code ec, tcp::resolver::results_type rs) {
            if (ec) return self->upstream_failed(ec);
            self->up_->async_connect(rs, [self](beast::error_code ec2, const tcp::endpoint&) {
                if (ec2) return self->upstream_failed(ec2);
                beast::error_code ignored;
                self->up_->socket().set_option(tcp::no_delay(true), ignored);
                self->write_upstream();
            });
        });
    }

    void write_upstream() {
        up_->expires_after(ms(cfg_->limits.upstream_timeout_s));
        http::async_write(*up_, up_req_, [self = shared_from_this()](beast::error_code ec, std::size_t) {
            if (ec) return self->upstream_failed(ec);
            self->up_parser_.emplace();
            self->up_parser_->body_limit(self->cfg_->limits.upstream_body_bytes);
            if (self->req_.method() == http::verb::head) self->up_parser_->skip(true);
            http::async_read_header(*self->up_, *self->up_buf_, *self->up_parser_,
                                    [self](beast::error_code ec2, std::size_t) { self->on_upstream_header(ec2); });
        });
    }

    void upstream_failed(beast::error_code ec) {
        const bool timeout = ec == beast::error::timeout;
        // A pooled connection the upstream closed while idle fails before any
        // answer: one retry on a fresh connection, for requests safe to repeat.
        const bool safe = req_.method() == http::verb::get || req_.method() == http::verb::head;
        if (reused_ && !retried_ && !timeout && safe && !up_sr_) {
            retried_ = true;
            drop_upstream();
            return send_upstream();
        }
        drop_upstream();
        release_slot();
        gate_.metrics().upstream(worker_, seconds_since(up_started_), true);
        upstream_status_ = 0;
        // The verdict stays what the policy decided; the failure is logged
        // beside it (and counted in ogc_gate_upstream_failures_total).
        const std::string msg = (timeout ? "timeout: " : "") + ec.message();
        finish_flight({FlightResult::Kind::UpstreamError, nullptr, timeout, msg});
        upstream_error_reply(timeout, msg);
    }

    void upstream_error_reply(bool timeout, const std::string& msg) {
        upstream_error_ = msg;
        refund(cfg_->refund_fraction);
        OgcError e{timeout ? ErrorKind::UpstreamTimeout : ErrorKind::UpstreamDown, "NoApplicableCode", "",
                   timeout ? "The map server behind this gate did not answer in time. Try again later or ask for less."
                           : "The map server behind this gate is not reachable. Try again later."};
        const Rendered r = render_refusal(assessment_, e, *cfg_);
        HeaderList h = decision_.headers;
        h.push_back({"Cache-Control", "no-store"});
        respond(r.status, r.content_type, r.body, h);
    }

    void drop_upstream() {
        if (!up_) return;
        beast::error_code ignored;
        up_->socket().close(ignored);
        up_.reset();
    }

    void on_upstream_header(beast::error_code ec) {
        if (ec) return upstream_failed(ec);
        auto& m = up_parser_->get();
        upstream_status_ = m.result_int();
        up_keep_alive_ = m.keep_alive();
        up_chunked_ = up_parser_->chunked();
        body_bytes_ = 0;
        buffering_ = false;
        if (flight_key_) {
            const auto len = up_parser_->content_length();
            if (len && *len > cfg_->coalesce.max_body_bytes) finish_flight({FlightResult::Kind::Overflow, nullptr, false, {}});
            else buffering_ = true;
        }
        acc_.clear();
        relay_read();
    }

    void relay_read() {
        if (up_parser_->is_done()) return relay_chunk(0, false);
        auto& b = up_parser_->get().body();
        b.data = chunk_mem_.get();
        b.size = kBlock;
        // An inactivity timeout: a 50 MB download may take longer in total.
        up_->expires_after(ms(cfg_->limits.upstream_timeout_s));
        http::async_read(*up_, *up_buf_, *up_parser_, [self = shared_from_this()](beast::error_code ec, std::size_t) {
            if (ec == http::error::need_buffer) ec = {};
            if (ec) return self->upstream_broke(ec);
            const std::size_t n = kBlock - self->up_parser_->get().body().size;
            self->relay_chunk(n, !self->up_parser_->is_done());
        });
    }

    void relay_chunk(std::size_t n, bool more) {
        body_bytes_ += n;
        if (buffering_) {
            acc_.append(chunk_mem_.get(), n);
            if (acc_.size() <= cfg_->coalesce.max_body_bytes) {
                if (more) return relay_read();
                return publish();
            }
            // Too big to share after all: the others fetch their own copy.
            buffering_ = false;
            finish_flight({FlightResult::Kind::Overflow, nullptr, false, {}});
            return write_client(acc_.data(), acc_.size(), more);
        }
        write_client(chunk_mem_.get(), n, more);
    }

    void write_client(const char* data, std::size_t n, bool more) {
        auto& m = up_parser_->get();
        if (!up_sr_) {
            std::vector<std::string> drop;
            for (const auto& f : m)
                if (hop_by_hop(f.name_string())) drop.emplace_back(f.name_string());
            for (const auto& d : drop) m.erase(d);
            m.version(11);
            for (const auto& [k, v] : decision_.headers) m.set(k, v);
            m.set("X-Request-Id", request_id_);
            // An HTTP/1.0 client cannot read chunks: the end of its body is
            // the end of the connection.
            if (up_chunked_ && req_.method() != http::verb::head) {
                if (req_.version() >= 11) m.chunked(true);
                else keep_alive_ = false;
            }
            m.keep_alive(keep_alive_ && !gate_.draining());
            status_sent_ = m.result_int();
            up_sr_.emplace(m);
        }
        auto& b = m.body();
        b.data = const_cast<char*>(data);
        b.size = n;
        b.more = more;
        client_io(cfg_->limits.idle_timeout_s);
        http::async_write(socket_, *up_sr_, [self = shared_from_this(), more](beast::error_code ec, std::size_t) {
            self->client_io_done();
            if (ec == http::error::need_buffer) ec = {};
            if (!self->acc_.empty()) std::string().swap(self->acc_);
            if (ec) {
                // The client left mid-body: nothing more can be said to it.
                self->drop_upstream();
                self->release_slot();
                self->upstream_error_ = "client gone: " + ec.message();
                return self->close();
            }
            if (more) return self->relay_read();
            self->upstream_done();
            const bool again = self->up_parser_->get().keep_alive();
            self->finished();
            if (!again) return self->close();
            self->read();
        });
    }

    void upstream_broke(beast::error_code ec) {
        if (!up_sr_) return upstream_failed(ec);  // nothing sent yet: a proper error answer
        drop_upstream();
        release_slot();
        gate_.metrics().upstream(worker_, seconds_since(up_started_), true);
        upstream_error_ = "upstream broke off mid-body: " + ec.message();
        close();
    }

    void upstream_done() {
        gate_.metrics().upstream(worker_, seconds_since(up_started_), false);
        if (up_ && up_keep_alive_ && up_parser_->is_done() && up_buf_->size() == 0) {
            up_->expires_never();
            gate_.pool(worker_).put(std::move(up_), Clock::now());
        }
        drop_upstream();
        release_slot();
        maybe_refund(upstream_status_, body_bytes_ == 0);
    }

    // The leader has the whole (small) body: one copy for every waiter.
    void publish() {
        auto sr = std::make_shared<SharedResponse>();
        const auto& m = up_parser_->get();
        sr->status = m.result_int();
        for (const auto& f : m)
            if (!hop_by_hop(f.name_string()) && !beast::iequals(f.name_string(), "Set-Cookie"))
                sr->headers.emplace_back(std::string(f.name_string()), std::string(f.value()));
        sr->body = std::move(acc_);
        acc_.clear();
        upstream_done();
        body_bytes_ = sr->body.size();
        finish_flight({FlightResult::Kind::Response, sr, false, {}});
        respond_shared(*sr, false);
    }

    void respond_shared(const SharedResponse& s, bool check_refund = true) {
        res_ = {};
        res_.result(s.status);
        res_.version(11);
        for (const auto& [k, v] : s.headers) res_.insert(k, v);
        res_.body() = s.body;
        upstream_status_ = s.status;
        if (req_.method() != http::verb::head) res_.prepare_payload();
        for (const auto& [k, v] : decision_.headers) res_.set(k, v);
        if (check_refund) maybe_refund(s.status, s.body.empty());
        status_sent_ = res_.result_int();
        res_.set("X-Request-Id", request_id_);
        res_.keep_alive(keep_alive_ && !gate_.draining());
        serialize_head(res_.base(), head_);
        body_ = std::move(res_.body());
        write_reply(res_.keep_alive());
    }

    void maybe_refund(unsigned status, bool empty_body) {
        const bool empty = empty_body && req_.method() != http::verb::head && status < 300;
        if (status == 304 || status == 204 || empty || status >= 500) refund(cfg_->refund_fraction);
    }

    void refund(double fraction) {
        if (!(decision_.charged > 0) || bucket_key_.empty() || refunded_ > 0) return;
        refunded_ = decision_.charged * fraction;
        gate_.buckets().refund(bucket_key_, refunded_, budget_, now_us());
        const std::string cls = assessment_.price.cost_class.empty() ? "other" : assessment_.price.cost_class;
        gate_.metrics().refunded(worker_, cls, refunded_);
    }

    // --- responses --------------------------------------------------------
    void plain(int status, const std::string& text, const std::string& verdict) {
        decision_.verdict = verdict;
        respond(status, "text/plain; charset=utf-8", text + "\n", {});
    }

    // The gate's own answer: written straight into head_ (the fields Beast
    // would have set: Content-Length, and Connection: close when the
    // connection ends). A HEAD request gets the head only.
    void respond(int status, const std::string& type, const std::string& body, const HeaderList& headers) {
        status_sent_ = static_cast<unsigned>(status);
        const bool again = keep_alive_ && !gate_.draining();
        HeadWriter w(head_, 11, static_cast<unsigned>(status));
        w.field("Server", "ogc-gate");
        if (!type.empty()) w.field("Content-Type", type);
        for (const auto& [k, v] : headers) w.field(k, v);
        w.field("Content-Length", body.size());
        w.field("X-Request-Id", request_id_);
        if (!again) w.field("Connection", "close");
        w.end();
        if (req_.method() == http::verb::head) body_.clear();
        else body_ = body;
        write_reply(again);
    }

    void write_reply(bool again) {
        client_io(cfg_->limits.idle_timeout_s);
        const std::array<asio::const_buffer, 2> bufs{asio::buffer(head_), asio::buffer(body_)};
        asio::async_write(socket_, bufs, [self = shared_from_this(), again](beast::error_code ec, std::size_t) {
            self->client_io_done();
            self->finished();
            if (ec || !again) return self->close();
            self->read();
        });
    }

    void finished() {
        up_buf_.reset();
        give_block(up_mem_);
        give_block(chunk_mem_);
        if (!counted_) return;
        counted_ = false;
        gate_.inflight(worker_)--;
        if (admin_ || decision_.verdict == "health") return;
        const std::string cls = assessment_.price.cost_class.empty() ? "other" : assessment_.price.cost_class;
        gate_.metrics().request(worker_, cls, decision_.verdict, decision_.charged);
        // Keys in alphabetical order, as they have always been written.
        JsonLine j;
        j.str("class", cls);
        if (coalesced_) j.boolean("coalesced", true);
        if (!slot_class_.empty()) j.str("concurrency_class", slot_class_);
        j.num("cost", assessment_.price.cost);
        j.str("identity", identity_hash_);
        j.num("latency_ms", seconds_since(started_) * 1000);
        j.str("method", std::string_view(req_.method_string().data(), req_.method_string().size()));
        if (!assessment_.caps.note.empty()) j.str("note", assessment_.caps.note);
        j.str("operation", op_name(assessment_.req.op));
        if (refunded_ > 0) j.num("refunded", refunded_);
        j.str("request_id", request_id_);
        j.str("service", service_name(assessment_.req.service));
        j.num("status", static_cast<std::int64_t>(status_sent_));
        j.str("tier", tier_);
        j.str("ts", iso_now_ms());
        if (!upstream_error_.empty()) j.str("upstream_error", upstream_error_);
        if (upstream_status_ || decision_.verdict.rfind("upstream", 0) == 0)
            j.num("upstream_ms", seconds_since(up_started_) * 1000);
        if (retried_) j.boolean("upstream_retried", true);
        j.num("upstream_status", static_cast<std::int64_t>(upstream_status_));
        j.str("verdict", decision_.verdict);
        gate_.log_line(worker_, std::move(j).finish());
    }

    void close() {
        finished();
        beast::error_code ec;
        socket_.shutdown(tcp::socket::shutdown_send, ec);
    }

    static double seconds_since(Clock::time_point t) {
        return std::chrono::duration<double>(Clock::now() - t).count();
    }

    // --- health and admin -------------------------------------------------
    void ready() {
        decision_.verdict = "health";
        const Upstream& u = gate_.upstream();
        up_ = std::make_unique<beast::tcp_stream>(socket_.get_executor());
        up_->expires_after(std::chrono::seconds(2));
        resolver_ = std::make_unique<tcp::resolver>(socket_.get_executor());
        resolver_->async_resolve(u.host, u.port, [self = shared_from_this()](beast::error_code ec, tcp::resolver::results_type rs) {
            if (ec) return self->plain(503, "upstream not resolvable", "health");
            self->up_->async_connect(rs, [self](beast::error_code ec2, const tcp::endpoint&) {
                beast::error_code ignored;
                self->up_->socket().close(ignored);
                if (ec2) return self->plain(503, "upstream not reachable", "health");
                self->plain(200, "ready", "health");
            });
        });
    }

    void admin() {
        const std::string target(req_.target());
        const std::string path = target.substr(0, target.find('?'));
        if (path == "/metrics") {
            std::string m = gate_.metrics().prometheus(gate_.buckets().size());
            m += "# HELP ogc_gate_flights_in_progress Coalesced upstream calls under way.\n"
                 "# TYPE ogc_gate_flights_in_progress gauge\n"
                 "ogc_gate_flights_in_progress " + std::to_string(gate_.coalescer().in_flight()) + "\n"
                 "# HELP ogc_gate_upstream_idle_connections Keep-alive connections to the upstream, idle.\n"
                 "# TYPE ogc_gate_upstream_idle_connections gauge\n"
                 "ogc_gate_upstream_idle_connections " + std::to_string(gate_.idle_upstream()) + "\n"
                 "# HELP ogc_gate_concurrency_active Requests holding a slot, by concurrency class.\n"
                 "# TYPE ogc_gate_concurrency_active gauge\n";
            const auto v = gate_.slots().view();
            for (const auto& c : v) m += "ogc_gate_concurrency_active{class=\"" + c.name + "\"} " + std::to_string(c.active) + "\n";
            m += "# HELP ogc_gate_concurrency_queued Requests waiting for a slot.\n# TYPE ogc_gate_concurrency_queued gauge\n";
            for (const auto& c : v) m += "ogc_gate_concurrency_queued{class=\"" + c.name + "\"} " + std::to_string(c.queued) + "\n";
            m += "# HELP ogc_gate_concurrency_rejected_total Requests answered 503 for want of a slot.\n"
                 "# TYPE ogc_gate_concurrency_rejected_total counter\n";
            for (const auto& c : v) m += "ogc_gate_concurrency_rejected_total{class=\"" + c.name + "\"} " + std::to_string(c.rejected) + "\n";
            return respond(200, "text/plain; version=0.0.4", m, {});
        }
        if (path == "/buckets") {
            nlohmann::json arr = nlohmann::json::array();
            const std::int64_t now = now_us();
            for (const BucketView& b : gate_.buckets().snapshot(now, 10000)) {
                arr.push_back({{"key", b.key},
                               {"tokens", b.tokens},
                               {"throttled", b.throttled},
                               {"last_request_s_ago", static_cast<double>(now - b.last_request_us) / 1e6}});
            }
            nlohmann::json j = {{"keys", gate_.buckets().size()}, {"buckets", arr}};
            return respond(200, "application/json", j.dump() + "\n", {});
        }
        if (path == "/healthz") return respond(200, "text/plain", "ok\n", {});
        respond(404, "text/plain", "admin endpoints: /metrics /buckets /healthz\n", {});
    }

    ClientSocket socket_;
    ClientTimer idle_timer_;
    Clock::time_point deadline_{};
    bool io_pending_ = false, timer_armed_ = false, timed_out_ = false;
    std::string head_, body_;  // a response written whole (not relayed)
    std::unique_ptr<beast::tcp_stream> up_;
    Gate& gate_;
    bool admin_;
    unsigned worker_;  // the I/O thread this connection lives on
    IpAddr peer_{};
    beast::flat_buffer buf_;
    std::optional<beast::flat_static_buffer_base> up_buf_;  // over up_mem_
    std::unique_ptr<char[]> up_mem_, chunk_mem_;
    std::shared_ptr<const Config> cfg_;
    std::optional<http::request_parser<http::string_body>> parser_;
    http::request<http::string_body> req_, up_req_;
    std::optional<http::response_parser<http::buffer_body>> up_parser_;
    std::optional<http::response_serializer<http::buffer_body>> up_sr_;
    std::string acc_;  // the leader's copy of a body small enough to share
    http::response<http::string_body> res_;
    std::optional<std::string> flight_key_;  // set while leading a flight
    std::string slot_class_, bucket_key_;
    core::Budget budget_{1, 1};
    std::unique_ptr<asio::steady_timer> queue_timer_;
    std::size_t body_bytes_ = 0;
    double refunded_ = 0;
    unsigned status_sent_ = 0;
    bool holding_slot_ = false, coalesced_ = false, reused_ = false, retried_ = false;
    bool up_keep_alive_ = false, up_chunked_ = false, buffering_ = false;
    std::unique_ptr<tcp::resolver> resolver_;
    Assessment assessment_;
    Decision decision_;
    std::string request_id_, identity_hash_, tier_, upstream_error_;
    unsigned upstream_status_ = 0;
    bool keep_alive_ = false, counted_ = false;
    Clock::time_point started_{}, up_started_{};
};

}  // namespace

Upstream parse_upstream(const std::string& url) {
    if (url.rfind("http://", 0) != 0) throw std::runtime_error("upstream must be an http:// URL: " + url);
    std::string rest = url.substr(7);
    Upstream u;
    const std::size_t slash = rest.find('/');
    if (slash != std::string::npos) {
        u.prefix = rest.substr(slash);
        while (!u.prefix.empty() && u.prefix.back() == '/') u.prefix.pop_back();
        rest = rest.substr(0, slash);
    }
    const std::size_t colon = rest.rfind(':');
    if (colon == std::string::npos || (rest.find(']') != std::string::npos && rest.find(']') > colon)) {
        u.host = rest;
        u.port = "80";
    } else {
        u.host = rest.substr(0, colon);
        u.port = rest.substr(colon + 1);
    }
    if (!u.host.empty() && u.host.front() == '[') u.host = u.host.substr(1, u.host.size() - 2);
    if (u.host.empty() || !parse_int(u.port)) throw std::runtime_error("upstream needs a host and a numeric port: " + url);
    return u;
}

tcp::endpoint parse_listen(const std::string& hostport) {
    const std::size_t colon = hostport.rfind(':');
    if (colon == std::string::npos) throw std::runtime_error("listen address must be HOST:PORT: " + hostport);
    std::string host = hostport.substr(0, colon);
    if (!host.empty() && host.front() == '[') host = host.substr(1, host.size() - 2);
    const auto port = parse_int(hostport.substr(colon + 1));
    if (!port || *port < 0 || *port > 65535) throw std::runtime_error("bad port in " + hostport);
    beast::error_code ec;
    const auto addr = asio::ip::make_address(host.empty() ? "0.0.0.0" : host, ec);
    if (ec) throw std::runtime_error("listen host must be an IP address: " + hostport);
    return {addr, static_cast<unsigned short>(*port)};
}

Gate::Gate(asio::io_context& ioc, std::shared_ptr<const Config> cfg)
    : ioc_(ioc), cfg_(std::move(cfg)), upstream_(parse_upstream(cfg_->upstream)), buckets_(cfg_->limits.max_keys),
      public_(asio::make_strand(ioc)), admin_(asio::make_strand(ioc)) {
    slots_.configure(cfg_->concurrency.classes, cfg_->concurrency.max_queue);
}

void Gate::start(int threads) {
    metrics_.resize(static_cast<std::size_t>(std::max(threads, 1)));
    for (int i = 0; i < std::max(threads, 1); ++i) {
        per_thread_.push_back(std::make_unique<PerThread>());
        workers_.push_back(std::make_unique<asio::io_context>(1));
        guards_.push_back(asio::make_work_guard(*workers_.back()));
        pools_.push_back(std::make_unique<UpstreamPool>(cfg_->limits.upstream_keepalive, cfg_->limits.upstream_idle_timeout_s));
    }
    auto open = [](tcp::acceptor& a, const tcp::endpoint& ep) {
        a.open(ep.protocol());
        a.set_option(asio::socket_base::reuse_address(true));
        a.bind(ep);
        a.listen(asio::socket_base::max_listen_connections);
    };
    open(public_, parse_listen(cfg_->listen));
    accept(public_, false);
    if (!cfg_->admin_listen.empty() && cfg_->admin_listen != "off") {
        open(admin_, parse_listen(cfg_->admin_listen));
        accept(admin_, true);
    }
    // Last: a listener that fails to bind leaves no thread behind.
    for (auto& w : workers_) threads_.emplace_back([io = w.get()] { io->run(); });
}

void Gate::accept(tcp::acceptor& a, bool admin) {
    const unsigned worker = next_worker_++ % workers_.size();
    a.async_accept(workers_[worker]->get_executor(), [this, &a, admin, worker](beast::error_code ec, ClientSocket s) {
        if (ec == asio::error::operation_aborted || !a.is_open()) return;
        if (!ec) std::make_shared<Session>(std::move(s), *this, admin, worker)->start();
        accept(a, admin);
    });
}

void Gate::reload(std::shared_ptr<const Config> cfg) {
    buckets_.set_max_keys(cfg->limits.max_keys);
    slots_.configure(cfg->concurrency.classes, cfg->concurrency.max_queue);
    for (auto& p : pools_) p->configure(cfg->limits.upstream_keepalive, cfg->limits.upstream_idle_timeout_s);
    std::atomic_store(&cfg_, std::move(cfg));
    cfg_generation_.fetch_add(1, std::memory_order_release);
}

const std::shared_ptr<const Config>& Gate::config(unsigned worker) {
    // The shared pointer is read under a lock (std::atomic_load): once per
    // reload and thread, not once per request.
    PerThread& t = *per_thread_[worker];
    const std::uint64_t g = cfg_generation_.load(std::memory_order_acquire);
    if (g != t.cfg_generation) {
        // Behind a control block of this thread's own: sessions copy t.cfg
        // per request, and a count shared with the other threads would move
        // its cache line between cores each time.
        auto holder = std::make_shared<std::shared_ptr<const Config>>(std::atomic_load(&cfg_));
        t.cfg = std::shared_ptr<const Config>(holder, holder->get());
        t.cfg_generation = g;
    }
    return t.cfg;
}

void Gate::drain_and_stop(double timeout_s) {
    draining_ = true;
    // Closed on their own strands: an accept may be completing on another thread.
    for (tcp::acceptor* a : {&public_, &admin_})
        asio::post(a->get_executor(), [a] {
            beast::error_code ec;
            a->close(ec);
        });
    auto timer = std::make_shared<asio::steady_timer>(ioc_);
    const auto deadline = Clock::now() + ms(timeout_s);
    auto tick = std::make_shared<std::function<void()>>();
    *tick = [this, timer, deadline, tick]() {
        if (inflight_total() <= 0 || Clock::now() >= deadline) {
            ioc_.stop();
            for (auto& w : workers_) w->stop();
            return;
        }
        timer->expires_after(std::chrono::milliseconds(50));
        timer->async_wait([tick](beast::error_code) { (*tick)(); });
    };
    (*tick)();
}

Gate::~Gate() { join(); }

int Gate::inflight_total() const {
    int n = 0;
    for (const auto& t : per_thread_) n += t->inflight.load();
    return n;
}

std::size_t Gate::idle_upstream() const {
    std::size_t n = 0;
    for (const auto& p : pools_) n += p->idle();
    return n;
}

void Gate::join() {
    for (auto& w : workers_) w->stop();
    for (auto& t : threads_)
        if (t.joinable()) t.join();
    // The threads are gone: what they buffered is written from here.
    for (unsigned i = 0; i < per_thread_.size(); ++i) flush_log(i);
}

void Gate::log_line(unsigned worker, std::string line) {
    PerThread& t = *per_thread_[worker];
    t.log += line;
    t.log += '\n';
    if (t.log.size() >= 64 * 1024) return flush_log(worker);
    if (t.flush_posted) return;
    t.flush_posted = true;
    // Runs after the handlers already queued on this thread: the lines of
    // one epoll round go out in one write.
    asio::post(*workers_[worker], [this, worker] { flush_log(worker); });
}

void Gate::flush_log(unsigned worker) {
    PerThread& t = *per_thread_[worker];
    t.flush_posted = false;
    if (t.log.empty()) return;
    write_log(t.log);
    t.log.clear();
}

void Gate::write_log(const std::string& text) {
    // One writer at a time: a pipe or socket (journald) does not keep two
    // threads' batches apart.
    std::lock_guard<std::mutex> lock(log_mu_);
    const char* p = text.data();
    std::size_t left = text.size();
    while (left > 0) {
        const ssize_t n = ::write(STDOUT_FILENO, p, left);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return;  // the log is gone; requests are still served
        p += n;
        left -= static_cast<std::size_t>(n);
    }
}

}  // namespace ot::gate
