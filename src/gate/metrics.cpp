#include "gate/metrics.hpp"

#include <sstream>

namespace ot::gate {

void Metrics::request(const std::string& cls, const std::string& verdict, double charged) {
    std::lock_guard<std::mutex> lock(mu_);
    requests_[{cls, verdict}]++;
    if (charged > 0) charged_[cls] += charged;
}

void Metrics::upstream(double seconds, bool failed) {
    std::lock_guard<std::mutex> lock(mu_);
    if (failed) upstream_failures_++;
    std::size_t i = 0;
    while (i < kNumBounds && seconds > kBounds[i]) ++i;
    latency_counts_[i]++;
    latency_sum_ += seconds;
    latency_n_++;
}

void Metrics::refunded(const std::string& cls, double amount) {
    std::lock_guard<std::mutex> lock(mu_);
    refunded_[cls] += amount;
}

void Metrics::coalesced() {
    std::lock_guard<std::mutex> lock(mu_);
    coalesced_++;
}

std::string Metrics::prometheus(std::size_t bucket_keys) const {
    std::lock_guard<std::mutex> lock(mu_);
    std::ostringstream o;
    o << "# HELP ogc_gate_requests_total Requests by cost class and verdict.\n"
         "# TYPE ogc_gate_requests_total counter\n";
    for (const auto& [k, v] : requests_)
        o << "ogc_gate_requests_total{class=\"" << k.first << "\",verdict=\"" << k.second << "\"} " << v << "\n";
    o << "# HELP ogc_gate_cost_charged_total Cost units charged to buckets, by class.\n"
         "# TYPE ogc_gate_cost_charged_total counter\n";
    for (const auto& [k, v] : charged_) o << "ogc_gate_cost_charged_total{class=\"" << k << "\"} " << v << "\n";
    o << "# HELP ogc_gate_cost_refunded_total Cost units given back (304, empty, upstream failure, busy), by class.\n"
         "# TYPE ogc_gate_cost_refunded_total counter\n";
    for (const auto& [k, v] : refunded_) o << "ogc_gate_cost_refunded_total{class=\"" << k << "\"} " << v << "\n";
    o << "# HELP ogc_gate_coalesced_total Requests answered from another request's upstream call.\n"
         "# TYPE ogc_gate_coalesced_total counter\n"
      << "ogc_gate_coalesced_total " << coalesced_ << "\n";
    o << "# HELP ogc_gate_upstream_latency_seconds Time to the upstream's complete response.\n"
         "# TYPE ogc_gate_upstream_latency_seconds histogram\n";
    std::uint64_t cum = 0;
    for (std::size_t i = 0; i < kNumBounds; ++i) {
        cum += latency_counts_[i];
        o << "ogc_gate_upstream_latency_seconds_bucket{le=\"" << kBounds[i] << "\"} " << cum << "\n";
    }
    cum += latency_counts_[kNumBounds];
    o << "ogc_gate_upstream_latency_seconds_bucket{le=\"+Inf\"} " << cum << "\n"
      << "ogc_gate_upstream_latency_seconds_sum " << latency_sum_ << "\n"
      << "ogc_gate_upstream_latency_seconds_count " << latency_n_ << "\n"
      << "# HELP ogc_gate_upstream_failures_total Upstream connections or responses that failed.\n"
         "# TYPE ogc_gate_upstream_failures_total counter\n"
      << "ogc_gate_upstream_failures_total " << upstream_failures_ << "\n"
      << "# HELP ogc_gate_bucket_keys Keys held in the bucket table.\n"
         "# TYPE ogc_gate_bucket_keys gauge\n"
      << "ogc_gate_bucket_keys " << bucket_keys << "\n";
    return o.str();
}

}  // namespace ot::gate
