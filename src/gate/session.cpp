// The client side of a connection: reading, the idle timeout, the policy
// (assess → bucket → decide), the gate's own answers and the access log.
#include "gate/session.hpp"

#include <array>
#include <iostream>
#include <random>

#include "gate/access_log.hpp"
#include "gate/decision.hpp"
#include "gate/http_head.hpp"
#include "gate/identity.hpp"
#include "gate/log_line.hpp"
#include "gate/write_now.hpp"

namespace ot::gate {

namespace {

bool valid_request_id(std::string_view s) {
    if (s.empty() || s.size() > 128) return false;
    for (char c : s) {
        const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
                        c == '_' || c == '.' || c == ':';
        if (!ok) return false;
    }
    return true;
}

// Into `id`, whose buffer a kept-alive connection keeps from its previous request.
void mint_request_id(std::string& id) {
    thread_local std::mt19937_64 rng{std::random_device{}()};
    static constexpr char kHex[] = "0123456789abcdef";
    id.assign(32, '0');
    for (int half = 0; half < 2; ++half) {
        std::uint64_t v = rng();
        for (int i = 15; i >= 0; --i, v >>= 4) id[static_cast<std::size_t>(half * 16 + i)] = kHex[v & 0xf];
    }
}

// Everything assess() reads of a request.
bool same_input(const HttpIn& a, const HttpIn& b) {
    return a.target == b.target && a.method == b.method && a.content_type == b.content_type && a.body == b.body &&
           a.cookie == b.cookie;
}

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

constexpr const char* kAllow = "GET, HEAD, POST, OPTIONS";

}  // namespace

Session::Session(ClientSocket s, Gate& g, bool admin, unsigned worker, ConnLimits::Ticket ticket, bool probe_only)
    : socket_(std::move(s)), idle_timer_(socket_.get_executor()), gate_(g), admin_(admin), probe_only_(probe_only),
      worker_(worker), ticket_(std::move(ticket)) {
    beast::error_code ec;
    const auto ep = socket_.remote_endpoint(ec);
    if (!ec) peer_ = parse_ip(ep.address().to_string()).value_or(IpAddr{});
    socket_.set_option(tcp::no_delay(true), ec);
    // For write_now's first, synchronous sendmsg (async operations are not affected).
    socket_.non_blocking(true, ec);
}

Session::~Session() {
    // A session that dies mid-exchange (its client gone while it queued or
    // led a flight) must not keep a slot or strand its flight's waiters.
    try {
        release_slot();
        finish_flight({FlightResult::Kind::UpstreamError, nullptr, false, "leader's connection ended"});
    } catch (...) {
    }
}

void Session::fault(const char* what) noexcept {
    gate_.count_fault();
    try {
        std::cerr << "ogc-gate: request " << ex_.request_id << ": exception in a handler: " << what << "\n";
    } catch (...) {
    }
    const bool first = !halted_;
    halted_ = true;
    have_last_ = assessed_ = false;  // what the exception left is nobody's assessment
    beast::error_code ignored;
    try {
        if (first) ex_.upstream_error = std::string("internal: ") + what;
        drop_upstream();
        if (probe_) probe_->socket().close(ignored);
        release_slot();
        finish_flight({FlightResult::Kind::UpstreamError, nullptr, false, "internal error"});
        if (first && ex_.status_sent == 0 && ex_.counted) {
            // Nothing said yet: a proper answer, then the connection ends.
            ex_.keep_alive = false;
            const bool upstream = ex_.upstream_tried;
            ex_.decision.verdict = "error";
            compose(upstream ? 502 : 500, "text/plain; charset=utf-8",
                    upstream ? "bad gateway (internal error)\n" : "internal error\n", {});
            client_io(cfg_ ? std::min(5.0, cfg_->limits.idle_timeout_s) : 5.0);
            const std::array<asio::const_buffer, 2> bufs{asio::buffer(head_), asio::buffer(body_)};
            asio::async_write(socket_, bufs, [self = shared_from_this()](beast::error_code, std::size_t) {
                self->contain([&] {
                    self->client_io_done();
                    self->close();
                });
            });
            return;
        }
    } catch (...) {
    }
    // Half an answer out (or none possible): all that is left is to end it.
    socket_.close(ignored);
    try {
        finished();
    } catch (...) {
    }
}

void Session::read() {
    cfg_ = gate_.config(worker_);
    parser_.emplace();
    parser_->header_limit(static_cast<std::uint32_t>(cfg_->limits.header_bytes));
    parser_->body_limit(cfg_->limits.body_bytes);
    // A connection taken from the probe reserve gets little time.
    client_io(probe_only_ ? std::min(2.0, cfg_->limits.idle_timeout_s) : cfg_->limits.idle_timeout_s);
    http::async_read_header(socket_, buf_, *parser_, [self = shared_from_this()](beast::error_code ec, std::size_t) {
        self->guard([&] {
            if (ec || self->parser_->is_done()) return self->on_read(ec);
            self->read_body();
        });
    });
}

// curl and others wait (about a second) for "100 Continue" before sending a
// body they announced with Expect; a too-large one is refused before it is sent.
void Session::read_body() {
    const auto& h = parser_->get();
    if (beast::iequals(h[http::field::expect], "100-continue")) {
        if (h.has_content_length() && parser_->content_length() && *parser_->content_length() > cfg_->limits.body_bytes)
            return on_read(http::error::body_limit);
        auto cont = std::make_shared<http::response<http::empty_body>>(http::status::continue_, 11);
        return http::async_write(socket_, *cont, [self = shared_from_this(), cont](beast::error_code ec, std::size_t) {
            self->guard([&] {
                if (ec) return self->on_read(ec);
                self->read_rest();
            });
        });
    }
    read_rest();
}

void Session::read_rest() {
    http::async_read(socket_, buf_, *parser_, [self = shared_from_this()](beast::error_code ec, std::size_t) {
        self->guard([&] { self->on_read(ec); });
    });
}

void Session::take_request_id(const http::fields& f) {
    const auto incoming = f["X-Request-Id"];
    if (valid_request_id(std::string_view(incoming.data(), incoming.size())))
        ex_.request_id.assign(incoming.data(), incoming.size());
    else
        mint_request_id(ex_.request_id);
}

// A fresh slate per request on a kept-alive connection: one assignment.
void Session::begin_exchange() {
    release_slot();
    finish_flight({FlightResult::Kind::UpstreamError, nullptr, false, "superseded"});
    if (assessed_) {
        last_assessment_ = std::move(ex_.assessment);
        have_last_ = true;
        assessed_ = false;
    }
    // Every field starts afresh; only the request id's buffer is kept (emptied):
    // a minted id is 32 characters, an allocation per request otherwise.
    std::string rid = std::move(ex_.request_id);
    rid.clear();
    // The last answer's header pairs (a refusal's follow its Cache-Control),
    // which the next rate-limit set is written into (decide()).
    HeaderList& said = ex_.decision.forward ? ex_.decision.headers : ex_.decision.response.headers;
    if (!said.empty() && said.front().first == "Cache-Control") said.erase(said.begin());
    spare_headers_ = std::move(said);
    ex_ = Exchange{};
    ex_.request_id = std::move(rid);
    ex_.started = Clock::now();
    gate_.inflight(worker_)++;
    ex_.counted = true;
    req_ = {};  // an unreadable request must not answer as the previous one (HEAD) did
}

void Session::on_read(beast::error_code ec) {
    client_io_done();
    if (timed_out_ || ec == http::error::end_of_stream || ec == beast::error::timeout ||
        ec == asio::error::operation_aborted || ec == asio::error::connection_reset || ec == asio::error::eof)
        return close();
    begin_exchange();
    if (ec) {
        // The id this request sent, if its field was read whole (the parser
        // stores only complete fields, even when it stops later); else a new one.
        if (parser_) {
            take_request_id(parser_->get());
            ex_.method = std::string(parser_->get().method_string());
        } else {
            mint_request_id(ex_.request_id);
        }
        if (ec == http::error::body_limit)
            return plain(413, "request body larger than " + std::to_string(cfg_->limits.body_bytes) + " bytes", "invalid");
        if (ec == http::error::header_limit)
            return plain(431, "request header larger than " + std::to_string(cfg_->limits.header_bytes) + " bytes",
                         "invalid");
        return plain(400, "malformed HTTP request", "invalid");
    }
    // The request is judged by the configuration in force when it arrived, not
    // the one its connection held when it began to wait (a kept-alive
    // connection idle across a reload would otherwise keep the old caps).
    if (const auto& now = gate_.config(worker_); now != cfg_) cfg_ = now;
    req_ = parser_->release();
    ex_.method = std::string(req_.method_string());
    take_request_id(req_);
    ex_.keep_alive = req_.keep_alive() && !gate_.draining() && !probe_only_;
    // RFC 9112 3.2: a 1.1 request without Host, or with two, is a 400 — two
    // would let the gate and the upstream read different virtual hosts.
    const std::size_t hosts = req_.count(http::field::host);
    if (hosts > 1 || (hosts == 0 && req_.version() >= 11)) {
        ex_.keep_alive = false;
        return plain(400, hosts ? "more than one Host header" : "HTTP/1.1 request without a Host header", "invalid");
    }
    if (admin_) return admin();
    handle();
}

// Every Cookie header, joined as MapServer's CGI environment sees them, into c.
void Session::cookies(std::string& c) const {
    c.clear();
    for (const auto& f : req_)
        if (f.name() == http::field::cookie) {
            if (!c.empty()) c += "; ";
            c.append(f.value().data(), f.value().size());
        }
}

void Session::handle() {
    const std::string_view target(req_.target().data(), req_.target().size());
    const std::string_view path = target.substr(0, target.find('?'));
    if (path == "/healthz" || path == "/livez") return plain(200, "ok", "health");
    if (path == "/readyz") return ready();
    if (probe_only_) {
        ex_.keep_alive = false;
        return plain(503, "the gate is at its connection limit; retry later", "limited");
    }
    // TRACE would echo credentials back; OPTIONS is answered here (the gate
    // decides what reaches the map server, and an OPTIONS costs it nothing
    // to answer). Neither goes upstream.
    if (req_.method() == http::verb::options) {
        ex_.decision.verdict = "options";
        return respond(204, {}, {}, {{"Allow", kAllow}});
    }
    if (req_.method() == http::verb::trace || req_.method() == http::verb::connect) {
        ex_.decision.verdict = "invalid";
        return respond(405, "text/plain; charset=utf-8", "method not allowed\n", {{"Allow", kAllow}});
    }

    // The request's parts and header copies go into the connection's own
    // strings, whose buffers the previous request left: no allocation for a
    // request no longer than the one before (a path with its query is past the
    // short-string size). Nothing holds them past this request: the shared
    // store's callback below takes copies.
    HttpIn& in = in_;
    in.method.assign(req_.method_string().data(), req_.method_string().size());
    in.target.assign(target.data(), target.size());
    const auto content_type = req_[http::field::content_type];
    in.content_type.assign(content_type.data(), content_type.size());
    in.body.assign(req_.body());
    cookies(in.cookie);
    if (in.target.empty() || in.target[0] != '/')
        return plain(400, "only origin-form request targets are accepted", "invalid");
    const Config& c = *cfg_;
    if (have_last_ && last_cfg_ == cfg_ && same_input(last_in_, in)) {
        ex_.assessment = std::move(last_assessment_);
    } else {
        ex_.assessment = assess(in, c);
        last_in_ = in;
        last_cfg_ = cfg_;
    }
    have_last_ = false;
    assessed_ = true;
    HeaderList& headers = in_headers_;
    std::size_t n = 0;
    for (const auto& f : req_) {
        if (n == headers.size()) headers.emplace_back();
        headers[n].first.assign(f.name_string().data(), f.name_string().size());
        headers[n].second.assign(f.value().data(), f.value().size());
        ++n;
    }
    headers.erase(headers.begin() + static_cast<std::ptrdiff_t>(n), headers.end());
    const Identity id = identify(headers, peer_, c);
    ex_.identity_hash = id.hash;
    ex_.tier = id.tier;
    const Tier& tier = c.tier(id.tier);
    std::optional<core::SpendResult> spent;
    if (ex_.assessment.needs_budget(c.shadow)) {
        const double cost = ex_.assessment.price.cost;
        if (BucketStore* store = gate_.store(worker_)) {
            if (tier.cells && !c.shadow && cached_cell_refusal(in, headers, id, *store)) return;
            // The shared bucket answers on this thread's io_context; the
            // request waits for it without blocking the thread (or at once,
            // from the thread's refusal cache, for a client known to be over).
            auto self = shared_from_this();
            store->admit(id.key, cost, tier.budget, c.buckets.policy_for(ex_.assessment.price.cost_class),
                         [self, in, headers, id, cost, budget = tier.budget](StoreDecision d) {
                             self->guard([&] {
                                 if (d.source == StoreDecision::Source::FailClosed && !self->cfg_->shadow)
                                     return self->store_unavailable(d.spend.retry_after_s);
                                 self->ex_.ledger = d.source == StoreDecision::Source::Redis      ? Ledger::Store
                                                    : d.source == StoreDecision::Source::FailOpen ? Ledger::StoreUncharged
                                                                                                   : Ledger::Local;
                                 core::SpendResult s = d.spend;
                                 const bool local = d.source == StoreDecision::Source::Local;
                                 if (local) s = self->gate_.buckets().spend(id.key, cost, budget, now_us());
                                 self->shared_cell(in, headers, id, s, local);  // then decided()
                             });
                         });
            return;
        }
        const std::int64_t now = now_us();
        spent = gate_.buckets().spend(id.key, cost, tier.budget, now);
        if (tier.cells) local_cell(id, *spent, now);
    }
    decided(in, headers, id, spent);
}

void Session::decided(const HttpIn& in, const HeaderList& headers, const Identity& id,
                      const std::optional<core::SpendResult>& spent) {
    const Config& c = *cfg_;
    const Tier& tier = c.tier(id.tier);
    ex_.decision = decide(in, ex_.assessment, tier, spent, c, ex_.cell ? &*ex_.cell : nullptr, &spare_headers_);
    if (!ex_.decision.forward) {
        const Response& r = ex_.decision.response;
        return respond(r.status, r.content_type, r.body, r.headers);
    }
    ex_.bucket_key = id.key;
    ex_.budget = tier.budget;
    // Only after the budget said yes: joining a flight is no free ride.
    ex_.flight_key = coalesce_key(in, ex_.assessment.req, headers, c);
    forward(in);
}

void Session::plain(int status, const std::string& text, const std::string& verdict) {
    ex_.decision.verdict = verdict;
    respond(status, "text/plain; charset=utf-8", text + "\n", {});
}

// The gate's own answer: written straight into head_ (the fields Beast
// would have set: Content-Length, and Connection: close when the connection
// ends). A HEAD request gets the head only.
void Session::respond(int status, std::string_view type, std::string_view body, const HeaderList& headers) {
    write_reply(compose(status, type, body, headers));
}

// Head and body of the gate's own answer into head_/body_; whether the
// connection stays open after it.
bool Session::compose(int status, std::string_view type, std::string_view body, const HeaderList& headers) {
    ex_.status_sent = static_cast<unsigned>(status);
    const bool again = ex_.keep_alive && !gate_.draining();
    HeadWriter w(head_, 11, static_cast<unsigned>(status));
    w.field("Server", "ogc-gate");
    if (!type.empty()) w.field("Content-Type", type);
    for (const auto& [k, v] : headers) w.field(k, v);
    if (status != 204) w.field("Content-Length", body.size());
    w.field("X-Request-Id", ex_.request_id);
    if (!again) w.field("Connection", "close");
    w.end();
    if (req_.method() == http::verb::head) body_.clear();
    else body_.assign(body.data(), body.size());
    return again;
}

void Session::write_reply(bool again) {
    client_io(cfg_->limits.idle_timeout_s);
    const std::array<asio::const_buffer, 2> bufs{asio::buffer(head_), asio::buffer(body_)};
    // Usually completes inline (write_now.hpp): no scheduler round per answer.
    write_now(socket_, bufs, [self = shared_from_this(), again](beast::error_code ec, std::size_t) {
        self->guard([&] {
            self->client_io_done();
            self->finished();
            if (ec || !again) return self->close();
            self->read();
        });
    });
}

void Session::finished() {
    release_relay_buffers();
    if (!ex_.counted) return;
    ex_.counted = false;
    gate_.inflight(worker_)--;
    if (admin_ || ex_.decision.verdict == "health") return;
    gate_.metrics().request(worker_, log_class(ex_), ex_.decision.verdict, ex_.decision.charged);
    LogTimes t{seconds_since(ex_.started) * 1000, ex_.upstream_tried ? seconds_since(ex_.up_started) * 1000 : 0.0,
               iso_now_ms_view()};
    // Formatted straight into the thread's log buffer.
    append_access_log_line(gate_.log_buffer(worker_), ex_, t);
    gate_.log_appended(worker_);
}

void Session::close() {
    finished();
    beast::error_code ec;
    socket_.shutdown(tcp::socket::shutdown_send, ec);
}

}  // namespace ot::gate
