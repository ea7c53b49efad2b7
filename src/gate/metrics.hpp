// Counters for the admin listener's Prometheus page.
#pragma once
#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>

namespace ot::gate {

class Metrics {
public:
    void request(const std::string& cls, const std::string& verdict, double charged);
    void upstream(double seconds, bool failed);
    void refunded(const std::string& cls, double amount);
    void coalesced();
    std::string prometheus(std::size_t bucket_keys) const;

private:
    static constexpr double kBounds[] = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30};
    static constexpr std::size_t kNumBounds = sizeof(kBounds) / sizeof(kBounds[0]);
    mutable std::mutex mu_;
    std::map<std::pair<std::string, std::string>, std::uint64_t> requests_;
    std::map<std::string, double> charged_;
    std::uint64_t latency_counts_[kNumBounds + 1] = {};
    double latency_sum_ = 0;
    std::uint64_t latency_n_ = 0;
    std::uint64_t upstream_failures_ = 0;
    std::map<std::string, double> refunded_;
    std::uint64_t coalesced_ = 0;
};

}  // namespace ot::gate
