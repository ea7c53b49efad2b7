// Shared GCRA buckets in Redis (redis_script.hpp) for one gate I/O thread:
// admit on the estimate, settle the difference once the measured cost is
// known. Every call answers through its handler on the thread's io_context,
// within the configured timeout; when Redis cannot answer, the decision says
// which failure policy applies and the caller carries it out (for `local`,
// the caller spends from its in-process BucketTable instead).
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include <boost/asio/io_context.hpp>

#include "core/gcra.hpp"
#include "gate/redis_client.hpp"
#include "gate/redis_metrics.hpp"
#include "gate/store_config.hpp"

namespace ot::gate {

struct StoreDecision {
    // Redis: `spend` holds the shared bucket's answer. FailOpen: admit
    // (spend says Allowed with the capacity left). FailClosed: refuse (spend
    // says Refused, retry after backoff). Local: decide with the in-process
    // buckets; `spend` is not set.
    enum class Source : std::uint8_t { Redis, FailOpen, FailClosed, Local };
    Source source = Source::Redis;
    core::SpendResult spend{core::SpendOutcome::Refused, 0, 0, 0, 0};
    redis::Failure failure = redis::Failure::None;  // why the store did not decide
    std::string detail;
    // Refused by this thread's cache of the store's refusals (no call made);
    // `spend` is what the store would answer for the cached bucket.
    bool cached = false;
};
const char* source_name(StoreDecision::Source s);

struct SettleResult {
    bool ok = false;           // false: not recorded (see failure/detail)
    double balance = 0;        // tokens after settling, negative while in debt
    double reset_after_s = 0;  // until full again
    redis::Failure failure = redis::Failure::None;
    std::string detail;
};

class BucketStore {
public:
    // The store of one I/O thread: its own connection, metrics shared.
    BucketStore(boost::asio::io_context& ioc, const StoreConfig& cfg, redis::StoreMetrics& metrics);
    ~BucketStore();
    BucketStore(const BucketStore&) = delete;
    BucketStore& operator=(const BucketStore&) = delete;

    // A refusal from the refusal cache (and a bad budget or cost) answers
    // inside this call; everything else later, on the io_context.
    void admit(const std::string& key, double cost, core::Budget b, redis::OnError on_error,
               std::function<void(StoreDecision)> done);
    // delta > 0 charges (the bucket may go into debt), delta < 0 refunds
    // (never above full); the measured cost minus what admit charged.
    void settle(const std::string& key, double delta, core::Budget b, std::function<void(SettleResult)> done);
    // The refusal cache alone (redis_refusal_cache.hpp): the store's answer
    // for a key already known to be over budget, without a call; nothing
    // when the store must be asked. Counted as a local refusal when it answers.
    std::optional<core::SpendResult> cached_refusal(const std::string& key, double cost, core::Budget b);
    // A reload changed buckets.url, timeout_ms, key_prefix or refusal_cache:
    // a new connection for what comes next; the old one answers what it has
    // in flight, then closes. The refusal cache starts empty (another Redis
    // may hold other buckets). On this store's io_context thread only.
    void reconfigure(const StoreConfig& cfg);
    void close();
    bool connected() const;

    // Tests only: the script takes this instant instead of Redis's TIME, so a
    // sequence can be replayed against core/gcra.hpp. Nanoseconds since epoch.
    void set_fixed_now_for_tests(std::optional<std::int64_t> ns);
    // Tests only: the TAT the last answered call left (nanoseconds since epoch).
    std::int64_t last_tat_ns() const;

    // Handlers still queued when the store goes keep this alive; `metrics`
    // must outlive the io_context's run.
    struct Inner;

private:
    boost::asio::io_context& ioc_;
    std::shared_ptr<Inner> in_;
};

}  // namespace ot::gate
