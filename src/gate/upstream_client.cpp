// The upstream leg of an exchange: the forwarded request, coalescing (lead
// or wait), the concurrency slot, upstream failures, shared answers and
// refunds. The connection and the relay are upstream_relay.cpp's.
#include <cmath>

#include "gate/access_log.hpp"
#include "gate/decision.hpp"
#include "gate/http_head.hpp"
#include "gate/identity.hpp"
#include "gate/kvp.hpp"
#include "gate/relay_blocks.hpp"
#include "gate/session.hpp"

namespace ot::gate {

namespace {

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

bool safe_method(http::verb v) { return v == http::verb::get || v == http::verb::head; }

}  // namespace

void Session::release_relay_buffers() {
    up_.caps.reset();
    up_.buf.reset();
    give_block(up_.mem);
    give_block(up_.chunk);
}

void Session::forward(const HttpIn& in) {
    const Upstream& u = gate_.upstream();
    auto& r = up_.req;
    r = {};
    r.method_string(in.method);
    const ToUpstream& tu = cfg_->to_upstream;
    std::string target = u.prefix + ex_.decision.target;
    // Shadow mode forwards the request as sent: it names nobody upstream.
    if (!tu.param.empty() && !cfg_->shadow) {
        target += target.find('?') == std::string::npos ? '?' : '&';
        target += tu.param;
        target += '=';
        append_encoded(target, ex_.bucket_key);
    }
    r.target(target);
    r.version(11);
    const auto named_by_gate = [&tu](beast::string_view n) {
        return !tu.header.empty() &&
               (beast::iequals(n, tu.header) || beast::iequals(n, "X-OT-Tier") || beast::iequals(n, "X-OT-Signature"));
    };
    for (const auto& f : req_)
        if (!hop_by_hop(f.name_string()) && !beast::iequals(f.name_string(), "X-Request-Id") &&
            !named_by_gate(f.name_string()))
            r.insert(f.name_string(), f.value());
    r.set("X-Request-Id", ex_.request_id);
    if (!tu.header.empty()) {
        r.set(tu.header, ex_.bucket_key);
        r.set("X-OT-Tier", ex_.tier);
        if (!tu.hmac_key.empty())
            r.set("X-OT-Signature", upstream_signature(tu.hmac_key, ex_.bucket_key, ex_.tier, ex_.request_id));
    }
    const std::string peer = ip_to_string(peer_);
    const auto xff = req_["X-Forwarded-For"];
    r.set("X-Forwarded-For", xff.empty() ? peer : std::string(xff) + ", " + peer);
    caps_prepare_upstream(r, ex_.assessment.req, *cfg_, req_, peer_);
    r.keep_alive(true);
    note_estimate();
    r.body() = ex_.decision.body ? *ex_.decision.body : req_.body();
    if (!r.body().empty() || req_.has_content_length()) r.prepare_payload();
    if (ex_.flight_key) {
        auto self = shared_from_this();
        auto exe = socket_.get_executor();
        const bool lead = gate_.coalescer().join(*ex_.flight_key, [self, exe](const FlightResult& fr) {
            asio::post(exe, [self, fr] { self->guard([&] { self->on_flight(fr); }); });
        });
        if (!lead) {
            ex_.flight_key.reset();
            ex_.coalesced = true;
            return;
        }
    }
    acquire_slot();
}

std::size_t Session::finish_flight(FlightResult r) {
    if (!ex_.flight_key) return 1;
    const std::string key = std::move(*ex_.flight_key);
    ex_.flight_key.reset();
    return gate_.coalescer().finish(key, std::move(r));
}

void Session::on_flight(const FlightResult& r) {
    if (r.kind == FlightResult::Kind::Response || r.kind == FlightResult::Kind::UpstreamError) {
        ex_.from_flight = true;  // the leader's upstream time, shared
        ex_.flight_ms = r.upstream_ms;
        ex_.sharers = r.sharers;
    }
    switch (r.kind) {
        case FlightResult::Kind::Response:
            gate_.metrics().coalesced(worker_);
            return respond_shared(*r.response);
        case FlightResult::Kind::UpstreamError: return upstream_error_reply(r.timeout, r.error);
        case FlightResult::Kind::Busy: return busy();
        case FlightResult::Kind::Overflow:
            ex_.coalesced = false;
            return acquire_slot();
    }
}

void Session::acquire_slot() {
    ex_.slot_class = concurrency_class(ex_.assessment.req, ex_.assessment.price.cost_class, *cfg_);
    if (ex_.slot_class.empty()) return send_upstream();
    auto self = shared_from_this();
    auto exe = socket_.get_executor();
    std::uint64_t ticket = 0;
    switch (gate_.slots().acquire(
        ex_.slot_class, [self, exe] { asio::post(exe, [self] { self->guard([&] { self->slot_granted(); }); }); },
        &ticket)) {
        case Slots::Outcome::Granted: ex_.holding_slot = true; return send_upstream();
        case Slots::Outcome::Full: return busy();
        case Slots::Outcome::Queued: break;
    }
    up_.queued = true;
    up_.queue_ticket = ticket;
    up_.queue_timer = std::make_unique<asio::steady_timer>(exe);
    up_.queue_timer->expires_after(ms(cfg_->concurrency.queue_timeout_s));
    up_.queue_timer->async_wait([self, ticket, cls = ex_.slot_class](beast::error_code ec) {
        if (ec) return;
        // Lost the race to a grant: slot_granted() is already posted.
        self->guard([&] {
            if (!self->gate_.slots().cancel(cls, ticket)) return;
            self->up_.queued = false;
            self->busy();
        });
    });
}

void Session::slot_granted() {
    up_.queued = false;
    ex_.holding_slot = true;
    if (up_.queue_timer) up_.queue_timer->cancel();
    send_upstream();
}

void Session::release_slot() {
    // Still waiting (the exchange ended some other way): leave the queue, so
    // a later grant does not answer an exchange that is over.
    if (up_.queued && gate_.slots().cancel(ex_.slot_class, up_.queue_ticket)) {
        up_.queued = false;
        if (up_.queue_timer) up_.queue_timer->cancel();
    }
    if (!ex_.holding_slot) return;
    ex_.holding_slot = false;
    gate_.slots().release(ex_.slot_class);
}

void Session::busy() {
    finish_flight({FlightResult::Kind::Busy, nullptr, false, {}});
    ex_.decision.verdict = "busy";
    refund(1.0);
    settle(Ending::NoUpstream);
    const double wait = std::max(1.0, std::ceil(cfg_->concurrency.queue_timeout_s));
    OgcError e{ErrorKind::Busy, "NoApplicableCode", "",
               "The map server behind this gate is busy with requests of this kind. Retry after " +
                   std::to_string(static_cast<int>(wait)) + " s."};
    const Rendered r = render_refusal(ex_.assessment, e, *cfg_);
    HeaderList h = ex_.decision.headers;
    h.push_back({"Retry-After", std::to_string(static_cast<int>(wait))});
    h.push_back({"Cache-Control", "no-store"});
    respond(r.status, r.content_type, r.body, h);
}

void Session::upstream_failed(beast::error_code ec) {
    const bool timeout = ec == beast::error::timeout;
    // A pooled connection the upstream closed while idle fails before any
    // answer: one retry on a fresh connection, for requests safe to repeat.
    if (ex_.reused && !ex_.retried && !timeout && safe_method(req_.method()) && !up_.head_sent) {
        ex_.retried = true;
        drop_upstream();
        return send_upstream();
    }
    drop_upstream();
    release_slot();
    gate_.metrics().upstream(worker_, seconds_since(ex_.up_started), true);
    ex_.upstream_status = 0;
    // The verdict stays what the policy decided; the failure is logged
    // beside it (and counted in ogc_gate_upstream_failures_total).
    const std::string msg = (timeout ? "timeout: " : "") + ec.message();
    ex_.up_last = Clock::now();
    FlightResult fr{FlightResult::Kind::UpstreamError, nullptr, timeout, msg};
    fr.upstream_ms = measured_ms(timing());
    ex_.sharers = finish_flight(std::move(fr));
    upstream_error_reply(timeout, msg);
}

void Session::upstream_error_reply(bool timeout, const std::string& msg) {
    ex_.upstream_error = msg;
    refund(cfg_->refund_fraction);
    settle(Ending::Failed);
    OgcError e{timeout ? ErrorKind::UpstreamTimeout : ErrorKind::UpstreamDown, "NoApplicableCode", "",
               timeout ? "The map server behind this gate did not answer in time. Try again later or ask for less."
                       : "The map server behind this gate is not reachable. Try again later."};
    const Rendered r = render_refusal(ex_.assessment, e, *cfg_);
    HeaderList h = ex_.decision.headers;
    h.push_back({"Cache-Control", "no-store"});
    if (ex_.final_charge >= 0) h.push_back({"X-OT-Cost", format_ms(ex_.final_charge)});
    respond(r.status, r.content_type, r.body, h);
}

void Session::drop_upstream() {
    if (!up_.conn) return;
    beast::error_code ignored;
    up_.conn->close(ignored);
    up_.conn.reset();
}

// The leader has the whole (small) body: one copy for every waiter. A
// Set-Cookie is the leader's own: the waiters get the answer without it,
// the leader with it.
void Session::publish() {
    auto sr = std::make_shared<SharedResponse>();
    const auto& m = up_.parser->get();
    sr->status = m.result_int();
    HeaderList own_cookies;
    for (const auto& f : m) {
        if (hop_by_hop(f.name_string())) continue;
        if (beast::iequals(f.name_string(), "Set-Cookie")) own_cookies.emplace_back("Set-Cookie", std::string(f.value()));
        else sr->headers.emplace_back(std::string(f.name_string()), std::string(f.value()));
    }
    sr->body = std::move(up_.acc);
    up_.acc.clear();
    FlightResult fr{FlightResult::Kind::Response, sr, false, {}};
    fr.upstream_ms = measured_ms(timing());
    ex_.sharers = finish_flight(std::move(fr));  // before upstream_done settles: the share needs the count
    upstream_done();
    ex_.body_bytes = sr->body.size();
    respond_shared(*sr, false, &own_cookies);
}

void Session::respond_shared(const SharedResponse& s, bool check_refund, const HeaderList* own) {
    res_ = {};
    res_.result(s.status);
    res_.version(11);
    for (const auto& [k, v] : s.headers) res_.insert(k, v);
    if (own)
        for (const auto& [k, v] : *own) res_.insert(k, v);
    res_.body() = s.body;
    ex_.upstream_status = s.status;
    if (req_.method() != http::verb::head) res_.prepare_payload();
    for (const auto& [k, v] : ex_.decision.headers) res_.set(k, v);
    if (check_refund) {
        maybe_refund(s.status, s.body.empty());
        settle(Ending::Complete);
    }
    if (ex_.final_charge >= 0) res_.set("X-OT-Cost", format_ms(ex_.final_charge));
    ex_.status_sent = res_.result_int();
    res_.set("X-Request-Id", ex_.request_id);
    res_.keep_alive(ex_.keep_alive && !gate_.draining());
    serialize_head(res_.base(), head_);
    body_ = std::move(res_.body());
    write_reply(res_.keep_alive());
}

void Session::maybe_refund(unsigned status, bool empty_body) {
    if (cfg_->charge == ChargeMode::Measured) return;  // settle() instead
    const bool empty = empty_body && req_.method() != http::verb::head && status < 300;
    if (status == 304 || status == 204 || empty || status >= 500) refund(cfg_->refund_fraction);
}

void Session::refund(double fraction) {
    if (cfg_->charge == ChargeMode::Measured) return;  // settle() instead
    if (!(ex_.decision.charged > 0) || ex_.bucket_key.empty() || ex_.refunded > 0) return;
    ex_.refunded = ex_.decision.charged * fraction;
    if (BucketStore* store = gate_.store(worker_))
        store->settle(ex_.bucket_key, -ex_.refunded, ex_.budget, [](const SettleResult&) {});  // counted in its metrics
    else
        gate_.buckets().refund(ex_.bucket_key, ex_.refunded, ex_.budget, now_us());
    refund_cell();  // the area budget's share
    gate_.metrics().refunded(worker_, log_class(ex_), ex_.refunded);
}

}  // namespace ot::gate
