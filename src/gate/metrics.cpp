#include "gate/metrics.hpp"

#include <sstream>

namespace ot::gate {
namespace {

template <class Map>
void add(Map& m, const std::string& k, double v) {
    auto it = m.find(k);
    if (it == m.end()) it = m.emplace(k, 0.0).first;
    it->second += v;
}

}  // namespace

void Metrics::resize(std::size_t shards) {
    shards_.clear();
    for (std::size_t i = 0; i < std::max<std::size_t>(shards, 1); ++i) shards_.push_back(std::make_unique<Shard>());
}

void Metrics::request(unsigned shard, const std::string& cls, const std::string& verdict, double charged) {
    Shard& s = at(shard);
    std::lock_guard<std::mutex> lock(s.mu);
    auto c = s.requests.find(cls);
    if (c == s.requests.end()) c = s.requests.emplace(cls, decltype(c->second){}).first;
    auto v = c->second.find(verdict);
    if (v == c->second.end()) v = c->second.emplace(verdict, 0).first;
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

void Metrics::refunded(unsigned shard, const std::string& cls, double amount) {
    Shard& s = at(shard);
    std::lock_guard<std::mutex> lock(s.mu);
    add(s.refunded, cls, amount);
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
        for (std::size_t i = 0; i <= kNumBounds; ++i) sum.latency_counts[i] += p->latency_counts[i];
        sum.latency_sum += p->latency_sum;
        sum.latency_n += p->latency_n;
        sum.upstream_failures += p->upstream_failures;
        sum.coalesced += p->coalesced;
    }
    std::ostringstream o;
    o << "# HELP ogc_gate_requests_total Requests by cost class and verdict.\n"
         "# TYPE ogc_gate_requests_total counter\n";
    for (const auto& [cls, verdicts] : sum.requests)
        for (const auto& [verdict, n] : verdicts)
            o << "ogc_gate_requests_total{class=\"" << cls << "\",verdict=\"" << verdict << "\"} " << n << "\n";
    o << "# HELP ogc_gate_cost_charged_total Cost units charged to buckets, by class.\n"
         "# TYPE ogc_gate_cost_charged_total counter\n";
    for (const auto& [k, v] : sum.charged) o << "ogc_gate_cost_charged_total{class=\"" << k << "\"} " << v << "\n";
    o << "# HELP ogc_gate_cost_refunded_total Cost units given back (304, empty, upstream failure, busy), by class.\n"
         "# TYPE ogc_gate_cost_refunded_total counter\n";
    for (const auto& [k, v] : sum.refunded) o << "ogc_gate_cost_refunded_total{class=\"" << k << "\"} " << v << "\n";
    o << "# HELP ogc_gate_coalesced_total Requests answered from another request's upstream call.\n"
         "# TYPE ogc_gate_coalesced_total counter\n"
      << "ogc_gate_coalesced_total " << sum.coalesced << "\n";
    o << "# HELP ogc_gate_upstream_latency_seconds Time to the upstream's complete response.\n"
         "# TYPE ogc_gate_upstream_latency_seconds histogram\n";
    std::uint64_t cum = 0;
    for (std::size_t i = 0; i < kNumBounds; ++i) {
        cum += sum.latency_counts[i];
        o << "ogc_gate_upstream_latency_seconds_bucket{le=\"" << kBounds[i] << "\"} " << cum << "\n";
    }
    cum += sum.latency_counts[kNumBounds];
    o << "ogc_gate_upstream_latency_seconds_bucket{le=\"+Inf\"} " << cum << "\n"
      << "ogc_gate_upstream_latency_seconds_sum " << sum.latency_sum << "\n"
      << "ogc_gate_upstream_latency_seconds_count " << sum.latency_n << "\n"
      << "# HELP ogc_gate_upstream_failures_total Upstream connections or responses that failed.\n"
         "# TYPE ogc_gate_upstream_failures_total counter\n"
      << "ogc_gate_upstream_failures_total " << sum.upstream_failures << "\n"
      << "# HELP ogc_gate_bucket_keys Keys held in the bucket table.\n"
         "# TYPE ogc_gate_bucket_keys gauge\n"
      << "ogc_gate_bucket_keys " << bucket_keys << "\n";
    return o.str();
}

}  // namespace ot::gate
