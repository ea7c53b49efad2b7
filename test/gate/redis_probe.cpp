// Drives a BucketStore from a line protocol on stdin, for the TAP test
// (test/gate/redis_store.t.sh): the store runs on its own io_context thread,
// as on a gate I/O thread; each command prints one line when answered.
//   admit KEY COST CAPACITY RATE CLASS
//     -> source=redis|open|closed|local outcome=allowed|refused|never remaining=R retry=S failure=F ms=T
//   settle KEY DELTA CAPACITY RATE -> ok=0|1 balance=B failure=F ms=T
//   connected -> connected=0|1      metrics -> Prometheus text, then END
// A call not answered within 5 s prints "hang" (the test counts it a failure).
// With --hammer KEY COST CAPACITY RATE SECS DEPTH instead of commands: DEPTH
// admits in flight for SECS, then "admitted=N calls=M failed=F start=T0 end=T1"
// (epoch seconds of the first call and the last answer).
#include <chrono>
#include <cstdlib>
#include <functional>
#include <cstdio>
#include <future>
#include <iostream>
#include <sstream>
#include <thread>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/post.hpp>

#include "gate/redis_store.hpp"

using namespace ot::gate;
using Clock = std::chrono::steady_clock;

namespace {

const char* outcome_name(ot::core::SpendOutcome o) {
    switch (o) {
        case ot::core::SpendOutcome::Allowed: return "allowed";
        case ot::core::SpendOutcome::Refused: return "refused";
        case ot::core::SpendOutcome::NeverFits: return "never";
    }
    return "?";
}

}  // namespace

namespace {

double epoch_s() {
    return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

int hammer(BucketStore& store, boost::asio::io_context& ioc, char** a) {
    const std::string key = a[0];
    const double cost = std::atof(a[1]), cap = std::atof(a[2]), rate = std::atof(a[3]), secs = std::atof(a[4]);
    const int depth = std::atoi(a[5]);
    std::uint64_t admitted = 0, calls = 0, failed = 0, issued = 0;
    const auto end = Clock::now() + std::chrono::duration<double>(secs);
    std::function<void()> issue = [&] {
        store.admit(key, cost, {cap, rate}, redis::OnError::Closed, [&](StoreDecision d) {
            ++calls;
            if (d.source != StoreDecision::Source::Redis) ++failed;
            else if (d.spend.outcome == ot::core::SpendOutcome::Allowed) ++admitted;
            // Posted: a refusal from the store's refusal cache answers
            // inside admit(), and calling on from there would recurse.
            if (Clock::now() < end) {
                ++issued;
                boost::asio::post(ioc, issue);
            }
        });
    };
    const double t0 = epoch_s();
    for (int i = 0; i < depth; ++i) {
        ++issued;
        issue();
    }
    while (calls < issued) ioc.run_one();
    std::printf("admitted=%llu calls=%llu failed=%llu start=%.6f end=%.6f\n", static_cast<unsigned long long>(admitted),
                static_cast<unsigned long long>(calls), static_cast<unsigned long long>(failed), t0, epoch_s());
    return failed == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
    const bool hammering = argc == 10 && std::string(argv[3]) == "--hammer";
    if ((argc != 3 && !hammering) || std::string(argv[1]) != "--config") {
        std::cerr << "usage: redis_probe --config FILE.yaml [--hammer KEY COST CAPACITY RATE SECS DEPTH]\n";
        return 2;
    }
    StoreConfig cfg;
    try {
        cfg = parse_store_config(YAML::LoadFile(argv[2])["buckets"]);
    } catch (const std::exception& e) {
        std::cerr << "config: " << e.what() << "\n";
        return 2;
    }
    boost::asio::io_context ioc;
    redis::StoreMetrics metrics;
    if (hammering) {
        BucketStore store(ioc, cfg, metrics);
        return hammer(store, ioc, argv + 4);
    }
    auto guard = boost::asio::make_work_guard(ioc);
    auto store = std::make_unique<BucketStore>(ioc, cfg, metrics);
    std::thread io([&] { ioc.run(); });

    std::string line;
    while (std::getline(std::cin, line)) {
        std::istringstream in(line);
        std::string op, key, cls;
        double x = 0, cap = 0, rate = 0;
        in >> op;
        std::promise<std::string> answer;
        auto fut = answer.get_future();
        const auto t0 = Clock::now();
        auto ms = [t0] { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); };
        if (op == "admit" && (in >> key >> x >> cap >> rate >> cls)) {
            boost::asio::post(ioc, [&, key, x, cap, rate, cls] {
                store->admit(key, x, {cap, rate}, cfg.policy_for(cls), [&, ms](StoreDecision d) {
                    char b[256];
                    std::snprintf(b, sizeof b, "source=%s outcome=%s remaining=%.6f retry=%.6f failure=%s ms=%.3f",
                                  source_name(d.source),
                                  d.source == StoreDecision::Source::Local ? "-" : outcome_name(d.spend.outcome),
                                  d.spend.remaining, d.spend.retry_after_s, redis::failure_name(d.failure), ms());
                    answer.set_value(b);
                });
            });
        } else if (op == "settle" && (in >> key >> x >> cap >> rate)) {
            boost::asio::post(ioc, [&, key, x, cap, rate] {
                store->settle(key, x, {cap, rate}, [&, ms](SettleResult s) {
                    char b[200];
                    std::snprintf(b, sizeof b, "ok=%d balance=%.6f failure=%s ms=%.3f", s.ok ? 1 : 0, s.balance,
                                  redis::failure_name(s.failure), ms());
                    answer.set_value(b);
                });
            });
        } else if (op == "connected") {
            boost::asio::post(ioc, [&] { answer.set_value(std::string("connected=") + (store->connected() ? "1" : "0")); });
        } else if (op == "metrics") {
            answer.set_value(metrics.prometheus() + "END");
        } else if (op == "quit") {
            break;
        } else {
            answer.set_value("error: bad command");
        }
        if (fut.wait_for(std::chrono::seconds(5)) != std::future_status::ready) {
            // The promise may still be set later; leave it to the exit below.
            std::cout << "hang" << std::endl;
            std::_Exit(3);
        }
        std::cout << fut.get() << std::endl;
    }
    boost::asio::post(ioc, [&] { store->close(); });
    guard.reset();
    boost::asio::post(ioc, [&] { ioc.stop(); });
    io.join();
    return 0;
}
