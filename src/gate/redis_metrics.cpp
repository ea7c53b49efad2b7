#include "gate/redis_metrics.hpp"

#include <sstream>

namespace ot::gate::redis {

const char* on_error_name(OnError p) {
    switch (p) {
        case OnError::Open: return "open";
        case OnError::Closed: return "closed";
        case OnError::Local: return "local";
    }
    return "unknown";
}

void StoreMetrics::observe_ns(std::uint64_t ns) {
    const double ms = static_cast<double>(ns) / 1e6;
    std::size_t i = 0;
    while (i < kBoundsMs.size() && ms > kBoundsMs[i]) ++i;
    latency[i].fetch_add(1, std::memory_order_relaxed);
    latency_sum_ns.fetch_add(ns, std::memory_order_relaxed);
    calls.fetch_add(1, std::memory_order_relaxed);
}

std::uint64_t StoreMetrics::errors() const {
    return timeouts.load(std::memory_order_relaxed) + unavailable.load(std::memory_order_relaxed) +
           protocol_errors.load(std::memory_order_relaxed) + script_errors.load(std::memory_order_relaxed);
}

std::string StoreMetrics::prometheus() const {
    std::ostringstream o;
    o << "# HELP ogc_gate_store_latency_seconds Shared bucket store round trip (answered calls).\n"
         "# TYPE ogc_gate_store_latency_seconds histogram\n";
    std::uint64_t cum = 0;
    for (std::size_t i = 0; i < kBoundsMs.size(); ++i) {
        cum += latency[i].load(std::memory_order_relaxed);
        o << "ogc_gate_store_latency_seconds_bucket{le=\"" << kBoundsMs[i] / 1000 << "\"} " << cum << "\n";
    }
    cum += latency[kBoundsMs.size()].load(std::memory_order_relaxed);
    o << "ogc_gate_store_latency_seconds_bucket{le=\"+Inf\"} " << cum << "\n"
      << "ogc_gate_store_latency_seconds_sum " << static_cast<double>(latency_sum_ns.load(std::memory_order_relaxed)) / 1e9
      << "\n"
      << "ogc_gate_store_latency_seconds_count " << cum << "\n";
    o << "# HELP ogc_gate_store_errors_total Shared bucket store calls that failed, by kind.\n"
         "# TYPE ogc_gate_store_errors_total counter\n"
      << "ogc_gate_store_errors_total{kind=\"timeout\"} " << timeouts.load(std::memory_order_relaxed) << "\n"
      << "ogc_gate_store_errors_total{kind=\"unavailable\"} " << unavailable.load(std::memory_order_relaxed) << "\n"
      << "ogc_gate_store_errors_total{kind=\"protocol\"} " << protocol_errors.load(std::memory_order_relaxed) << "\n"
      << "ogc_gate_store_errors_total{kind=\"script\"} " << script_errors.load(std::memory_order_relaxed) << "\n";
    o << "# HELP ogc_gate_store_fallbacks_total Decisions taken by the failure policy instead of the store.\n"
         "# TYPE ogc_gate_store_fallbacks_total counter\n";
    for (int p = 0; p < 3; ++p)
        o << "ogc_gate_store_fallbacks_total{on_error=\"" << on_error_name(static_cast<OnError>(p)) << "\"} "
          << fallbacks[p].load(std::memory_order_relaxed) << "\n";
    o << "# HELP ogc_gate_store_script_reloads_total EVALSHA answered NOSCRIPT (Redis restarted or flushed).\n"
         "# TYPE ogc_gate_store_script_reloads_total counter\n"
      << "ogc_gate_store_script_reloads_total " << noscript_reloads.load(std::memory_order_relaxed) << "\n";
    o << "# HELP ogc_gate_store_local_refusals_total Refused from the refusal cache without a store call.\n"
         "# TYPE ogc_gate_store_local_refusals_total counter\n"
      << "ogc_gate_store_local_refusals_total " << local_refusals.load(std::memory_order_relaxed) << "\n"
      << "# HELP ogc_gate_store_refusal_cache_evictions_total Cached refusals pushed out before they expired.\n"
         "# TYPE ogc_gate_store_refusal_cache_evictions_total counter\n"
      << "ogc_gate_store_refusal_cache_evictions_total " << refusal_cache_evictions.load(std::memory_order_relaxed)
      << "\n";
    return o.str();
}

}  // namespace ot::gate::redis
