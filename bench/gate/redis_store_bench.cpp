// Decision latency and throughput of the shared bucket store against the
// in-process buckets, in one run (bench/gate/redis_store.sh starts Redis).
//   latency: one call in flight, N admits over 1000 keys; p50/p99 of each
//            and the added latency (Redis minus in-process)
//   throughput: DEPTH calls in flight on one connection for SECS seconds,
//            on the refusal path (one exhausted key) and the admit path
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "gate/buckets.hpp"
#include "gate/redis_store.hpp"

using namespace ot::gate;
using Clock = std::chrono::steady_clock;

namespace {

double pct(std::vector<double> v, double p) {
    std::sort(v.begin(), v.end());
    return v[std::min(v.size() - 1, static_cast<std::size_t>(p * static_cast<double>(v.size())))];
}

std::int64_t wall_us() {
    return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

const ot::core::Budget kRoomy{1e6, 1e5};   // the admit path: never refuses here
const ot::core::Budget kTight{1, 0.001};   // the refusal path once spent

// Keeps `depth` admits in flight for `secs`; returns decisions per second.
double redis_throughput(boost::asio::io_context& ioc, BucketStore& store, int depth, double secs, bool refuse,
                        std::uint64_t& failures) {
    std::uint64_t done = 0, issued = 0;
    const auto end = Clock::now() + std::chrono::duration<double>(secs);
    bool stop = false;
    std::function<void()> issue = [&] {
        const std::string key = refuse ? "bench:refused" : "bench:k" + std::to_string(issued % 1000);
        ++issued;
        store.admit(key, 1, refuse ? kTight : kRoomy, redis::OnError::Closed, [&](StoreDecision d) {
            ++done;
            if (d.source != StoreDecision::Source::Redis) ++failures;
            if (!stop && Clock::now() >= end) stop = true;
            if (!stop) issue();
        });
    };
    const auto t0 = Clock::now();
    for (int i = 0; i < depth; ++i) issue();
    ioc.restart();
    while (done < issued) ioc.run_one();
    return static_cast<double>(done) / std::chrono::duration<double>(Clock::now() - t0).count();
}

double local_throughput(BucketTable& table, double secs, bool refuse) {
    std::uint64_t n = 0;
    const auto end = Clock::now() + std::chrono::duration<double>(secs);
    const auto t0 = Clock::now();
    while (Clock::now() < end)
        for (int i = 0; i < 256; ++i, ++n)
            table.spend(refuse ? "bench:refused" : "bench:k" + std::to_string(n % 1000), 1, refuse ? kTight : kRoomy, wall_us());
    return static_cast<double>(n) / std::chrono::duration<double>(Clock::now() - t0).count();
}

}  // namespace

int main(int argc, char** argv) {
    std::string port = "18720";
    int n = 20000, depth = 64;
    double secs = 3;
    for (int i = 1; i + 1 < argc; i += 2) {
        const std::string a = argv[i];
        if (a == "--port") port = argv[i + 1];
        else if (a == "--n") n = std::atoi(argv[i + 1]);
        else if (a == "--depth") depth = std::atoi(argv[i + 1]);
        else if (a == "--secs") secs = std::atof(argv[i + 1]);
    }
    boost::asio::io_context ioc;
    redis::StoreMetrics metrics;
    StoreConfig cfg;
    cfg.store = StoreConfig::Kind::Redis;
    cfg.endpoint.port = port;
    cfg.timeout_ms = 1000;
    cfg.key_prefix = "bench:";
    BucketStore store(ioc, cfg, metrics);
    BucketTable table(100000);

    // Latency, one call at a time; the first 500 calls warm up both sides.
    std::vector<double> rl, ll;
    std::uint64_t failures = 0;
    for (int i = 0; i < n + 500; ++i) {
        const std::string key = "bench:k" + std::to_string(i % 1000);
        auto t0 = Clock::now();
        table.spend(key, 1, kRoomy, wall_us());
        const double local_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
        bool done = false;
        t0 = Clock::now();
        store.admit(key, 1, kRoomy, redis::OnError::Closed, [&](StoreDecision d) {
            done = true;
            if (d.source != StoreDecision::Source::Redis) ++failures;
        });
        ioc.restart();
        while (!done) ioc.run_one();
        const double redis_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
        if (i >= 500) rl.push_back(redis_ms), ll.push_back(local_ms);
    }
    std::vector<double> added(rl.size());
    for (std::size_t i = 0; i < rl.size(); ++i) added[i] = rl[i] - ll[i];
    std::printf("latency (%d decisions, one in flight)\n", n);
    std::printf("  in-process   p50 %8.4f ms  p99 %8.4f ms\n", pct(ll, 0.5), pct(ll, 0.99));
    std::printf("  redis        p50 %8.4f ms  p99 %8.4f ms\n", pct(rl, 0.5), pct(rl, 0.99));
    std::printf("  added        p50 %8.4f ms  p99 %8.4f ms   (targets: p50 <= 0.3, p99 <= 1)\n", pct(added, 0.5),
                pct(added, 0.99));

    // Spend the refusal key, then measure both paths.
    table.spend("bench:refused", 1, kTight, wall_us());
    bool spent = false;
    store.admit("bench:refused", 1, kTight, redis::OnError::Closed, [&](StoreDecision) { spent = true; });
    ioc.restart();
    while (!spent) ioc.run_one();
    for (bool refuse : {true, false}) {
        const double r = redis_throughput(ioc, store, depth, secs, refuse, failures);
        const double l = local_throughput(table, secs, refuse);
        std::printf("throughput, %s path (%d in flight, %.0f s): redis %.0f/s  in-process %.0f/s  ratio %.4f\n",
                    refuse ? "refusal" : "admit", depth, secs, r, l, r / l);
    }
    std::printf("store failures during the run: %llu\n", static_cast<unsigned long long>(failures));
    store.close();
    return failures == 0 ? 0 : 1;
}
