#include "gate/server.hpp"

#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <iostream>
#include <nlohmann/json.hpp>
#include <random>
#include <stdexcept>

#include "gate/decision.hpp"
#include "gate/identity.hpp"
#include "gate/text.hpp"

namespace ot::gate {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;

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
    char buf[33];
    std::snprintf(buf, sizeof buf, "%016llx%016llx", static_cast<unsigned long long>(rng()),
                  static_cast<unsigned long long>(rng()));
    return buf;
}

bool hop_by_hop(beast::string_view name) {
    for (const char* h : {"connection", "keep-alive", "proxy-connection", "proxy-authenticate", "proxy-authorization",
                          "te", "trailer", "transfer-encoding", "upgrade", "expect"})
        if (beast::iequals(name, h)) return true;
    return false;
}

std::string iso_now() {
    const auto t = std::chrono::system_clock::now();
    const std::time_t tt = std::chrono::system_clock::to_time_t(t);
    const auto msec = std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count() % 1000;
    std::tm tm{};
    gmtime_r(&tt, &tm);
    char buf[64];
    std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
                  tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<int>(msec));
    return buf;
}

// One request/response exchange on a client connection, possibly repeated
// (keep-alive). Holds a config snapshot per request, so a reload never
// changes the rules half-way through one.
class Session : public std::enable_shared_from_this<Session> {
public:
    Session(tcp::socket s, Gate& g, bool admin) : stream_(std::move(s)), gate_(g), admin_(admin) {
        beast::error_code ec;
        const auto ep = stream_.socket().remote_endpoint(ec);
        if (!ec) peer_ = parse_ip(ep.address().to_string()).value_or(IpAddr{});
    }
    void start() { read(); }

private:
    void read() {
        cfg_ = gate_.config();
        parser_.emplace();
        parser_->header_limit(static_cast<std::uint32_t>(cfg_->limits.header_bytes));
        parser_->body_limit(cfg_->limits.body_bytes);
        stream_.expires_after(ms(cfg_->limits.idle_timeout_s));
        http::async_read_header(stream_, buf_, *parser_, [self = shared_from_this()](beast::error_code ec, std::size_t) {
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
            return http::async_write(stream_, *cont, [self = shared_from_this(), cont](beast::error_code ec, std::size_t) {
                if (ec) return self->on_read(ec);
                self->read_rest();
            });
        }
        read_rest();
    }

    void read_rest() {
        http::async_read(stream_, buf_, *parser_, [self = shared_from_this()](beast::error_code ec, std::size_t) {
            self->on_read(ec);
        });
    }

    void on_read(beast::error_code ec) {
        if (ec == http::error::end_of_stream || ec == beast::error::timeout || ec == asio::error::operation_aborted ||
            ec == asio::error::connection_reset || ec == asio::error::eof)
            return close();
        // A fresh slate per request on a kept-alive connection.
        assessment_ = {};
        decision_ = {};
        upstream_status_ = 0;
        identity_hash_.clear();
        tier_.clear();
        upstream_error_.clear();
        started_ = Clock::now();
        gate_.inflight++;
        counted_ = true;
        keep_alive_ = false;
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

    HeaderList headers_of(const http::request<http::string_body>& r) {
        HeaderList h;
        for (const auto& f : r) h.emplace_back(std::string(f.name_string()), std::string(f.value()));
        return h;
    }

    void handle() {
        const std::string target(req_.target());
        const std::string path = target.substr(0, target.find('?'));
        if (path == "/healthz" || path == "/livez") return plain(200, "ok", "health");
        if (path == "/readyz") return ready();

        HttpIn in{std::string(req_.method_string()), target, std::string(req_[http::field::content_type]), req_.body()};
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
        forward(in);
    }

    // --- upstream -------------------------------------------------------
    void forward(const HttpIn& in) {
        const Upstream& u = gate_.upstream();
        up_req_ = {};
        up_req_.method_string(in.method);
        up_req_.target(u.prefix + decision_.target);
        up_req_.version(11);
        for (const auto& f : req_)
            if (!hop_by_hop(f.name_string()) && !beast::iequals(f.name_string(), "X-Request-Id"))
                up_req_.insert(f.name_string(), f.value());
        up_req_.set("X-Request-Id", request_id_);
        const std::string peer = ip_to_string(peer_);
        const auto xff = req_["X-Forwarded-For"];
        up_req_.set("X-Forwarded-For", xff.empty() ? peer : std::string(xff) + ", " + peer);
        up_req_.keep_alive(false);
        up_req_.body() = decision_.body ? *decision_.body : req_.body();
        if (!up_req_.body().empty() || req_.has_content_length()) up_req_.prepare_payload();

        up_started_ = Clock::now();
        up_buf_.consume(up_buf_.size());
        up_ = std::make_unique<beast::tcp_stream>(stream_.get_executor());
        up_->expires_after(ms(cfg_->limits.upstream_connect_timeout_s));
        resolver_ = std::make_unique<tcp::resolver>(stream_.get_executor());
        resolver_->async_resolve(u.host, u.port, [self = shared_from_this()](beast::error_code ec, tcp::resolver::results_type rs) {
            if (ec) return self->upstream_failed(ec);
            self->up_->async_connect(rs, [self](beast::error_code ec2, const tcp::endpoint&) {
                if (ec2) return self->upstream_failed(ec2);
                self->up_->expires_after(ms(self->cfg_->limits.upstream_timeout_s));
                http::async_write(*self->up_, self->up_req_, [self](beast::error_code ec3, std::size_t) {
                    if (ec3) return self->upstream_failed(ec3);
                    self->up_parser_.emplace();
                    self->up_parser_->body_limit(self->cfg_->limits.upstream_body_bytes);
                    if (self->req_.method() == http::verb::head) self->up_parser_->skip(true);
                    http::async_read(*self->up_, self->up_buf_, *self->up_parser_,
                                     [self](beast::error_code ec4, std::size_t) { self->on_upstream(ec4); });
                });
            });
        });
    }

    void upstream_failed(beast::error_code ec) {
        const bool timeout = ec == beast::error::timeout;
        gate_.metrics().upstream(seconds_since(up_started_), true);
        upstream_status_ = 0;
        OgcError e{timeout ? ErrorKind::UpstreamTimeout : ErrorKind::UpstreamDown, "NoApplicableCode", "",
                   timeout ? "The map server behind this gate did not answer in time. Try again later or ask for less."
                           : "The map server behind this gate is not reachable. Try again later."};
        const Rendered r = render_error(assessment_.req.service, assessment_.req.dialect, e, cfg_->exception_status);
        // The verdict stays what the policy decided; the failure is logged
        // beside it (and counted in ogc_gate_upstream_failures_total).
        upstream_error_ = (timeout ? "timeout: " : "") + ec.message();
        HeaderList h = decision_.headers;
        h.push_back({"Cache-Control", "no-store"});
        respond(r.status, r.content_type, r.body, h);
    }

    void on_upstream(beast::error_code ec) {
        if (ec) return upstream_failed(ec);
        gate_.metrics().upstream(seconds_since(up_started_), false);
        beast::error_code ignored;
        up_->socket().shutdown(tcp::socket::shutdown_both, ignored);
        auto up = up_parser_->release();
        upstream_status_ = up.result_int();
        res_ = {};
        res_.result(up.result_int());
        res_.version(11);
        for (const auto& f : up)
            if (!hop_by_hop(f.name_string())) res_.insert(f.name_string(), f.value());
        res_.body() = std::move(up.body());
        if (req_.method() != http::verb::head) res_.prepare_payload();
        for (const auto& [k, v] : decision_.headers) res_.set(k, v);
        send();
    }

    // --- responses --------------------------------------------------------
    void plain(int status, const std::string& text, const std::string& verdict) {
        decision_.verdict = verdict;
        respond(status, "text/plain; charset=utf-8", text + "\n", {});
    }

    void respond(int status, const std::string& type, const std::string& body, const HeaderList& headers) {
        res_ = {};
        res_.result(static_cast<unsigned>(status));
        res_.version(11);
        res_.set(http::field::server, "ogc-gate");
        if (!type.empty()) res_.set(http::field::content_type, type);
        for (const auto& [k, v] : headers) res_.insert(k, v);
        res_.body() = body;
        res_.prepare_payload();
        send();
    }

    void send() {
        res_.set("X-Request-Id", request_id_);
        res_.keep_alive(keep_alive_ && !gate_.draining());
        stream_.expires_after(ms(cfg_->limits.idle_timeout_s));
        http::async_write(stream_, res_, [self = shared_from_this()](beast::error_code ec, std::size_t) {
            self->finished();
            if (ec || !self->res_.keep_alive()) return self->close();
            self->read();
        });
    }

    void finished() {
        if (!counted_) return;
        counted_ = false;
        gate_.inflight--;
        if (admin_ || decision_.verdict == "health") return;
        const std::string cls = assessment_.price.cost_class.empty() ? "other" : assessment_.price.cost_class;
        gate_.metrics().request(cls, decision_.verdict, decision_.charged);
        nlohmann::json j = {
            {"ts", iso_now()},
            {"request_id", request_id_},
            {"identity", identity_hash_},
            {"tier", tier_},
            {"method", std::string(req_.method_string())},
            {"service", service_name(assessment_.req.service)},
            {"operation", op_name(assessment_.req.op)},
            {"class", cls},
            {"cost", assessment_.price.cost},
            {"verdict", decision_.verdict},
            {"status", res_.result_int()},
            {"upstream_status", upstream_status_},
            {"latency_ms", seconds_since(started_) * 1000},
        };
        if (!assessment_.caps.note.empty()) j["note"] = assessment_.caps.note;
        if (!upstream_error_.empty()) j["upstream_error"] = upstream_error_;
        if (upstream_status_ || decision_.verdict.rfind("upstream", 0) == 0)
            j["upstream_ms"] = seconds_since(up_started_) * 1000;
        gate_.log_line(j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
    }

    void close() {
        finished();
        beast::error_code ec;
        stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
    }

    static double seconds_since(Clock::time_point t) {
        return std::chrono::duration<double>(Clock::now() - t).count();
    }

    // --- health and admin -------------------------------------------------
    void ready() {
        decision_.verdict = "health";
        const Upstream& u = gate_.upstream();
        up_ = std::make_unique<beast::tcp_stream>(stream_.get_executor());
        up_->expires_after(std::chrono::seconds(2));
        resolver_ = std::make_unique<tcp::resolver>(stream_.get_executor());
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
        if (path == "/metrics")
            return respond(200, "text/plain; version=0.0.4", gate_.metrics().prometheus(gate_.buckets().size()), {});
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

    beast::tcp_stream stream_;
    std::unique_ptr<beast::tcp_stream> up_;
    Gate& gate_;
    bool admin_;
    IpAddr peer_{};
    beast::flat_buffer buf_, up_buf_;
    std::shared_ptr<const Config> cfg_;
    std::optional<http::request_parser<http::string_body>> parser_;
    http::request<http::string_body> req_, up_req_;
    std::optional<http::response_parser<http::string_body>> up_parser_;
    http::response<http::string_body> res_;
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
      public_(asio::make_strand(ioc)), admin_(asio::make_strand(ioc)) {}

void Gate::start() {
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
}

void Gate::accept(tcp::acceptor& a, bool admin) {
    a.async_accept(asio::make_strand(ioc_), [this, &a, admin](beast::error_code ec, tcp::socket s) {
        if (ec == asio::error::operation_aborted || !a.is_open()) return;
        if (!ec) std::make_shared<Session>(std::move(s), *this, admin)->start();
        accept(a, admin);
    });
}

void Gate::reload(std::shared_ptr<const Config> cfg) {
    buckets_.set_max_keys(cfg->limits.max_keys);
    std::atomic_store(&cfg_, std::move(cfg));
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
        if (inflight.load() <= 0 || Clock::now() >= deadline) {
            ioc_.stop();
            return;
        }
        timer->expires_after(std::chrono::milliseconds(50));
        timer->async_wait([tick](beast::error_code) { (*tick)(); });
    };
    (*tick)();
}

void Gate::log_line(const std::string& line) {
    std::lock_guard<std::mutex> lock(log_mu_);
    std::cout << line << '\n' << std::flush;
}

}  // namespace ot::gate
