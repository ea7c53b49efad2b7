#include "gate/metrics.hpp"

#include "gate/prom_text.hpp"

namespace ot::gate {
namespace {

template <class Map>
void add(Map& m, std::string_view k, double v) {
    auto it = m.find(k);
    if (it == m.end()) it = m.emplace(std::string(k), 0.0).first;
    it->second += v;
}

}  // namespace

void Metrics::resize(std::size_t shards) {
    shards_.clear();
    for (std::size_t i = 0; i < std::max<std::size_t>(shards, 1); ++i) shards_.push_back(std::make_unique<Shard>());
}

void Metrics::request(unsigned shard, std::string_view cls, std::string_view verdict, double charged) {
    Shard& s = at(shard);
    std::lock_guard<std::mutex> lock(s.mu);
    auto c = s.requests.find(cls);
    if (c == s.requests.end()) c = s.requests.emplace(std::string(cls), decltype(c->second){}).first;
    auto v = c->second.find(verdict);
    if (v == c->second.end()) v = c->second.emplace(std::string(verdict), 0).first;
    v->second++;
    if (charged > 0) add(s.charged, cls, charged);
}

void Metrics::upstream(unsigned shard, double seconds, bool failed) {
    Shard& s = at(shard);
    std::lock_guard<std::mutex> lock(s.mu);
    if (failed) s.upstream_failures++;
    std::size_t i = 0;
    while (i < kNumBounds && seconds > kBounds[i]) ++i;
    s.latency_counts[i]++;
    s.latency_sum += seconds;
    s.latency_n++;
}

void Metrics::refunded(unsigned shard, std::string_view cls, double amount) {
    Shard& s = at(shard);
    std::lock_guard<std::mutex> lock(s.mu);
    add(s.refunded, cls, amount);
}

void Metrics::settled(unsigned shard, std::string_view cls, double amount) {
    Shard& s = at(shard);
    std::lock_guard<std::mutex> lock(s.mu);
    add(s.settled, cls, amount);
}

void Metrics::coalesced(unsigned shard) {
    Shard& s = at(shard);
    std::lock_guard<std::mutex> lock(s.mu);
    s.coalesced++;
}

std::string Metrics::prometheus(std::size_t bucket_keys) const {
    Shard sum;
    for (const auto& p : shards_) {
        std::lock_guard<std::mutex> lock(p->mu);
        for (const auto& [cls, verdicts] : p->requests)
            for (const auto& [verdict, n] : verdicts) sum.requests[cls][verdict] += n;
        for (const auto& [k, v] : p->charged) sum.charged[k] += v;
        for (const auto& [k, v] : p->refunded) sum.refunded[k] += v;
        for (const auto& [k, v] : p->settled) sum.settled[k] += v;
        for (std::size_t i = 0; i <= kNumBounds; ++i) sum.latency_counts[i] += p->latency_counts[i];
        sum.latency_sum += p->latency_sum;
        sum.latency_n += p->latency_n;
        sum.upstream_failures += p->upstream_failures;
        sum.coalesced += p->coalesced;
    }
    std::string o;
    o.reserve(4096);
    prom_family(o, "ogc_gate_requests_total", "counter", "Requests by cost class and verdict.");
    for (const auto& [cls, verdicts] : sum.requests)
        for (const auto& [verdict, n] : verdicts)
            prom_sample(o, "ogc_gate_requests_total", {{"class", cls}, {"verdict", verdict}}, n);
    prom_family(o, "ogc_gate_cost_charged_total", "counter", "Cost units charged to buckets, by class.");
    for (const auto& [k, v] : sum.charged) prom_sample(o, "ogc_gate_cost_charged_total", {{"class", k}}, v);
    prom_family(o, "ogc_gate_cost_refunded_total", "counter",
                "Cost units given back (304, empty, upstream failure, busy), by class.");
    for (const auto& [k, v] : sum.refunded) prom_sample(o, "ogc_gate_cost_refunded_total", {{"class", k}}, v);
    if (!sum.settled.empty()) {
        prom_family(o, "ogc_gate_cost_settled_total", "counter",
                    "Final charges (ms of upstream time) of settled requests, by class (charge: measured).");
        for (const auto& [k, v] : sum.settled) prom_sample(o, "ogc_gate_cost_settled_total", {{"class", k}}, v);
    }
    prom_family(o, "ogc_gate_coalesced_total", "counter", "Requests answered from another request's upstream call.");
    prom_sample(o, "ogc_gate_coalesced_total", {}, sum.coalesced);
    prom_family(o, "ogc_gate_upstream_latency_seconds", "histogram", "Time to the upstream's complete response.");
    std::uint64_t cum = 0;
    for (std::size_t i = 0; i < kNumBounds; ++i) {
        cum += sum.latency_counts[i];
        std::string le;
        prom_number(le, kBounds[i]);
        prom_sample(o, "ogc_gate_upstream_latency_seconds_bucket", {{"le", le}}, cum);
    }
    cum += sum.latency_counts[kNumBounds];
    prom_sample(o, "ogc_gate_upstream_latency_seconds_bucket", {{"le", "+Inf"}}, cum);
    prom_sample(o, "ogc_gate_upstream_latency_seconds_sum", {}, sum.latency_sum);
    prom_sample(o, "ogc_gate_upstream_latency_seconds_count", {}, sum.latency_n);
    prom_family(o, "ogc_gate_upstream_failures_total", "counter", "Upstream connections or responses that failed.");
    prom_sample(o, "ogc_gate_upstream_failures_total", {}, sum.upstream_failures);
    prom_family(o, "ogc_gate_bucket_keys", "gauge", "Keys held in the bucket table.");
    prom_sample(o, "ogc_gate_bucket_keys", {}, static_cast<std::uint64_t>(bucket_keys));
    return o;
}

}  // namespace ot::gate
