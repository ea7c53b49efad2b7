// The admin listener: /metrics (all Prometheus text the gate writes beyond
// the per-request counters in metrics.cpp), /buckets and /healthz, behind
// the optional bearer token or address list (admin.token, admin.allow).
#include <openssl/crypto.h>

#include <nlohmann/json.hpp>

#include "gate/prom_text.hpp"
#include "gate/text.hpp"
#include "gate/session.hpp"

namespace ot::gate {

namespace {

std::string metrics_text(Gate& g) {
    std::string m = g.metrics().prometheus(g.buckets().size());
    if (g.store(0) != nullptr) m += g.store_metrics().prometheus();
    auto gauge = [&m](std::string_view name, std::string_view help, std::uint64_t v) {
        prom_family(m, name, "gauge", help);
        prom_sample(m, name, {}, v);
    };
    auto counter = [&m](std::string_view name, std::string_view help, std::uint64_t v) {
        prom_family(m, name, "counter", help);
        prom_sample(m, name, {}, v);
    };
    gauge("ogc_gate_cell_keys", "Area budget buckets (client and map cell) held; see tiers[].cells.", g.cells().size());
    gauge("ogc_gate_flights_in_progress", "Coalesced upstream calls under way.", g.coalescer().in_flight());
    gauge("ogc_gate_upstream_idle_connections", "Keep-alive connections to the upstream, idle.", g.idle_upstream());
    ConnLimits& cl = g.conn_limits();
    gauge("ogc_gate_connections_open", "Client connections held on the public listener.", cl.open());
    gauge("ogc_gate_connections_max", "The global connection limit in force.", g.max_connections());
    gauge("ogc_gate_connection_addresses", "Client addresses with a connection open.", cl.addresses());
    prom_family(m, "ogc_gate_connections_refused_total", "counter",
                "Connections closed on accept, by limit (per_address, global).");
    prom_sample(m, "ogc_gate_connections_refused_total", {{"limit", "per_address"}}, cl.refused_address());
    prom_sample(m, "ogc_gate_connections_refused_total", {{"limit", "global"}}, cl.refused_global());
    counter("ogc_gate_accept_backoffs_total", "Times the listener paused for want of file descriptors.",
            g.accept_backoffs());
    counter("ogc_gate_log_dropped_bytes_total", "Access log bytes dropped because stdout could not keep up.",
            g.log_dropped_bytes());
    counter("ogc_gate_handler_exceptions_total", "Exceptions caught at a completion handler (each cost one exchange).",
            g.handler_faults());
    const auto v = g.slots().view();
    prom_family(m, "ogc_gate_concurrency_active", "gauge", "Requests holding a slot, by concurrency class.");
    for (const auto& c : v)
        prom_sample(m, "ogc_gate_concurrency_active", {{"class", c.name}}, static_cast<std::uint64_t>(c.active));
    prom_family(m, "ogc_gate_concurrency_queued", "gauge", "Requests waiting for a slot.");
    for (const auto& c : v)
        prom_sample(m, "ogc_gate_concurrency_queued", {{"class", c.name}}, static_cast<std::uint64_t>(c.queued));
    prom_family(m, "ogc_gate_concurrency_rejected_total", "counter", "Requests answered 503 for want of a slot.");
    for (const auto& c : v)
        prom_sample(m, "ogc_gate_concurrency_rejected_total", {{"class", c.name}}, static_cast<std::uint64_t>(c.rejected));
    return m;
}

std::string buckets_json(Gate& g) {
    nlohmann::json arr = nlohmann::json::array();
    const std::int64_t now = now_us();
    for (const BucketView& b : g.buckets().snapshot(now, 10000))
        arr.push_back({{"key", b.key},
                       {"tokens", b.tokens},
                       {"throttled", b.throttled},
                       {"last_request_s_ago", static_cast<double>(now - b.last_request_us) / 1e6}});
    nlohmann::json j = {{"keys", g.buckets().size()}, {"buckets", arr}};
    // The area budgets: each tier's grid and budget, and the cells in use
    // ("<identity key>@<cell>", split for reading).
    nlohmann::json budgets = nlohmann::json::array(), cells = nlohmann::json::array();
    for (const Tier& t : g.config()->tiers)
        if (t.cells)
            budgets.push_back({{"tier", t.name},
                               {"grid", grid_name(t.cells->grid)},
                               {"rate", t.cells->budget.rate},
                               {"burst", t.cells->budget.capacity},
                               {"classes", t.cells->classes},
                               {"keyed_clients", t.cells->keyed_clients}});
    for (const BucketView& b : g.cells().snapshot(now, 10000)) {
        const std::size_t at = b.key.find('@');
        cells.push_back({{"key", b.key.substr(0, at)},
                         {"cell", at == std::string::npos ? std::string() : b.key.substr(at + 1)},
                         {"tokens", b.tokens},
                         {"throttled", b.throttled},
                         {"last_request_s_ago", static_cast<double>(now - b.last_request_us) / 1e6}});
    }
    j["cell_budgets"] = std::move(budgets);
    j["cell_keys"] = g.cells().size();
    j["cells"] = std::move(cells);
    return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

// The token, compared in constant time; or the peer in admin.allow.
bool admitted(const AdminAccess& a, const IpAddr& peer, std::string_view authorization) {
    for (const Cidr& c : a.allow)
        if (c.contains(peer)) return true;
    if (a.token.empty()) return a.allow.empty();
    constexpr std::string_view kBearer = "Bearer ";
    if (authorization.size() != kBearer.size() + a.token.size()) return false;
    if (!iequals(authorization.substr(0, kBearer.size()), kBearer)) return false;
    return CRYPTO_memcmp(authorization.data() + kBearer.size(), a.token.data(), a.token.size()) == 0;
}

}  // namespace

void Session::admin() {
    const std::string_view target(req_.target().data(), req_.target().size());
    const std::string_view path = target.substr(0, target.find('?'));
    ex_.decision.verdict = "admin";
    // Liveness stays open: it says nothing an attacker could use.
    if (path == "/healthz") return respond(200, "text/plain", "ok\n", {});
    const auto auth = req_[http::field::authorization];
    if (!admitted(cfg_->admin, peer_, std::string_view(auth.data(), auth.size())))
        return respond(401, "text/plain", "admin endpoints need Authorization: Bearer <admin.token>\n",
                       {{"WWW-Authenticate", "Bearer realm=\"ogc-gate admin\""}});
    if (path == "/metrics") return respond(200, "text/plain; version=0.0.4", metrics_text(gate_), {});
    if (path == "/buckets") return respond(200, "application/json", buckets_json(gate_), {});
    respond(404, "text/plain", "admin endpoints: /metrics /buckets /healthz\n", {});
}

}  // namespace ot::gate
