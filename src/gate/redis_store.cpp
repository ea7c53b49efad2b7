#include "gate/redis_store.hpp"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <utility>

#include "gate/redis_refusal_cache.hpp"
#include "gate/redis_script.hpp"

namespace ot::gate {

using redis::Failure;
using Clock = std::chrono::steady_clock;

const char* source_name(StoreDecision::Source s) {
    switch (s) {
        case StoreDecision::Source::Redis: return "redis";
        case StoreDecision::Source::FailOpen: return "open";
        case StoreDecision::Source::FailClosed: return "closed";
        case StoreDecision::Source::Local: return "local";
    }
    return "unknown";
}

namespace {

// %.17g doubles from the script: strtod gives back the very same value.
bool number(const redis::Reply& r, double& out) {
    if (r.type != redis::Reply::Type::String) return false;
    char* end = nullptr;
    out = std::strtod(r.str.c_str(), &end);
    return end != r.str.c_str() && *end == '\0';
}

bool tat_of(const redis::Reply& r, std::int64_t& out) {
    if (r.type != redis::Reply::Type::String) return false;
    char* end = nullptr;
    const long long s = std::strtoll(r.str.c_str(), &end, 10);
    if (*end != ' ') return false;
    const char* p = end + 1;
    const long long ns = std::strtoll(p, &end, 10);
    if (end == p || *end != '\0') return false;
    out = static_cast<std::int64_t>(s) * 1'000'000'000 + ns;
    return true;
}

std::int64_t steady_ns() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count();
}

std::string num(double v) {
    char b[40];
    std::snprintf(b, sizeof b, "%.17g", v);
    return b;
}

}  // namespace

struct BucketStore::Inner : std::enable_shared_from_this<Inner> {
    std::shared_ptr<redis::Client> client;
    redis::StoreMetrics& metrics;
    std::string prefix;
    std::optional<std::int64_t> fixed_now_ns;
    std::int64_t last_tat_ns = 0;
    RefusalCache cache;
    std::uint64_t moves = 0;  // reconfigure()s: an answer from before one is not cached

    Inner(std::shared_ptr<redis::Client> c, redis::StoreMetrics& m, std::string p, std::size_t cache_entries)
        : client(std::move(c)), metrics(m), prefix(std::move(p)), cache(cache_entries) {}

    // Off while a test fixes the script's clock: the cache keeps time by
    // this thread's clock, not by the test's instants.
    bool caching() const { return !fixed_now_ns && cache.capacity() != 0; }

    std::optional<core::SpendResult> local_refusal(const std::string& key, double cost, core::Budget b) {
        if (!caching()) return std::nullopt;
        auto hit = cache.lookup(key, cost, b, steady_ns());
        if (hit) metrics.local_refusals.fetch_add(1, std::memory_order_relaxed);
        return hit;
    }

    struct Call {
        std::vector<std::string> tail;  // 1, key, op, x, capacity, rate [, now]
        Clock::time_point start;
        std::function<void(redis::Result)> done;  // called once, with the script's reply or a failure
    };

    void run(std::string key, const char* op, double x, core::Budget b, std::function<void(redis::Result)> done) {
        auto call = std::make_shared<Call>();
        call->tail = {"1", prefix + key, op, num(x), num(b.capacity), num(b.rate)};
        if (fixed_now_ns)
            call->tail.push_back(std::to_string(*fixed_now_ns / 1'000'000'000) + " " +
                                 std::to_string(*fixed_now_ns % 1'000'000'000));
        call->start = Clock::now();
        call->done = std::move(done);
        eval(call, false);
    }

    // EVALSHA normally; after NOSCRIPT (Redis restarted, SCRIPT FLUSH, a
    // failover to a replica that never saw SCRIPT LOAD) once EVAL with the
    // body, which caches the script again for every later EVALSHA.
    void eval(const std::shared_ptr<Call>& call, bool with_body) {
        std::vector<std::string> args;
        args.reserve(call->tail.size() + 2);
        args.emplace_back(with_body ? "EVAL" : "EVALSHA");
        args.push_back(with_body ? redis::gcra_script() : redis::gcra_script_sha1());
        args.insert(args.end(), call->tail.begin(), call->tail.end());
        client->command(std::move(args), [self = shared_from_this(), call, with_body](redis::Result r) {
            if (r.ok() && r.reply.is_error() && !with_body && r.reply.str.compare(0, 8, "NOSCRIPT") == 0) {
                self->metrics.noscript_reloads.fetch_add(1, std::memory_order_relaxed);
                return self->eval(call, true);
            }
            if (r.ok())
                self->metrics.observe_ns(static_cast<std::uint64_t>(
                    std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - call->start).count()));
            else if (r.failure == Failure::Timeout)
                self->metrics.timeouts.fetch_add(1, std::memory_order_relaxed);
            else if (r.failure == Failure::Unavailable)
                self->metrics.unavailable.fetch_add(1, std::memory_order_relaxed);
            else
                self->metrics.protocol_errors.fetch_add(1, std::memory_order_relaxed);
            call->done(std::move(r));
        });
    }

    // The reply {code, remaining, retry_after, reset_after, tat}, or why not.
    bool parse(const redis::Result& r, int& code, double (&v)[3], std::string& why) {
        const redis::Reply& rep = r.reply;
        if (rep.is_error()) {
            metrics.script_errors.fetch_add(1, std::memory_order_relaxed);
            why = rep.str;
            return false;
        }
        std::int64_t tat = 0;
        if (rep.type != redis::Reply::Type::Array || rep.elements.size() != 5 ||
            rep.elements[0].type != redis::Reply::Type::Integer || !number(rep.elements[1], v[0]) ||
            !number(rep.elements[2], v[1]) || !number(rep.elements[3], v[2]) || !tat_of(rep.elements[4], tat)) {
            metrics.script_errors.fetch_add(1, std::memory_order_relaxed);
            why = "unexpected reply from the bucket script";
            return false;
        }
        code = static_cast<int>(rep.elements[0].integer);
        last_tat_ns = tat;
        return true;
    }
};

namespace {
std::shared_ptr<redis::Client> connect(boost::asio::io_context& ioc, const StoreConfig& cfg) {
    redis::ClientOptions opt;
    opt.timeout_ms = cfg.timeout_ms;
    opt.on_connect.push_back({"SCRIPT", "LOAD", redis::gcra_script()});
    return redis::Client::create(ioc, cfg.endpoint, std::move(opt));
}
}  // namespace

BucketStore::BucketStore(boost::asio::io_context& ioc, const StoreConfig& cfg, redis::StoreMetrics& metrics)
    : ioc_(ioc) {
    in_ = std::make_shared<Inner>(connect(ioc, cfg), metrics, cfg.key_prefix, cfg.refusal_cache);
}

void BucketStore::reconfigure(const StoreConfig& cfg) {
    // Calls in flight hold `in_` and answer through the old connection;
    // their NOSCRIPT retry, if any, goes out on the new one.
    std::shared_ptr<redis::Client> old = std::move(in_->client);
    in_->client = connect(ioc_, cfg);
    in_->prefix = cfg.key_prefix;
    in_->cache = RefusalCache(cfg.refusal_cache);
    ++in_->moves;
    old->close_when_idle();
}

BucketStore::~BucketStore() { in_->client->close(); }

void BucketStore::close() { in_->client->close(); }
bool BucketStore::connected() const { return in_->client->connected(); }
void BucketStore::set_fixed_now_for_tests(std::optional<std::int64_t> ns) { in_->fixed_now_ns = ns; }
std::int64_t BucketStore::last_tat_ns() const { return in_->last_tat_ns; }

std::optional<core::SpendResult> BucketStore::cached_refusal(const std::string& key, double cost, core::Budget b) {
    return in_->local_refusal(key, cost, b);
}

void BucketStore::admit(const std::string& key, double cost, core::Budget b, redis::OnError on_error,
                        std::function<void(StoreDecision)> done) {
    // Whatever goes wrong, the policy decides: never a silent allow unless
    // the operator chose `open` for this class.
    auto fallback = [in = in_, on_error, b](Failure f, std::string detail) {
        StoreDecision d;
        d.failure = f;
        d.detail = std::move(detail);
        in->metrics.fallback(on_error);
        switch (on_error) {
            case redis::OnError::Open:
                d.source = StoreDecision::Source::FailOpen;
                d.spend = {core::SpendOutcome::Allowed, 0, b.capacity, 0, 0};
                break;
            case redis::OnError::Closed:
                d.source = StoreDecision::Source::FailClosed;
                d.spend = {core::SpendOutcome::Refused, 0, 0, 1.0, 0};
                break;
            case redis::OnError::Local: d.source = StoreDecision::Source::Local; break;
        }
        return d;
    };
    const char* problem = core::budget_problem(b);
    if (!problem) problem = core::cost_problem(cost);
    if (!problem && b.capacity / b.rate > redis::kMaxRefillSeconds) problem = "capacity / rate exceeds 1e5 seconds";
    if (problem) {
        // A caller bug, not a store failure: refused whatever the policy.
        StoreDecision d;
        d.source = StoreDecision::Source::FailClosed;
        d.failure = Failure::Protocol;
        d.detail = problem;
        d.spend = {core::SpendOutcome::Refused, 0, 0, 1.0, 0};
        done(std::move(d));
        return;
    }
    if (auto hit = in_->local_refusal(key, cost, b)) {
        StoreDecision d;
        d.spend = *hit;
        d.cached = true;
        done(std::move(d));
        return;
    }
    // Sent now: Redis reads its clock later, so the bucket the answer
    // describes is cached as of this instant (never ahead of the store's).
    const std::int64_t asked = steady_ns();
    const std::uint32_t ticket = in_->cache.ticket(key);
    in_->run(key, "admit", cost, b,
             [in = in_, fallback, done = std::move(done), key, cost, b, asked, ticket, moves = in_->moves](redis::Result r) {
        if (!r.ok()) return done(fallback(r.failure, std::move(r.detail)));
        int code = 0;
        double v[3];
        std::string why;
        if (!in->parse(r, code, v, why)) return done(fallback(Failure::Protocol, std::move(why)));
        StoreDecision d;
        d.spend.outcome = code == 0 ? core::SpendOutcome::Allowed
                          : code == 2 ? core::SpendOutcome::NeverFits
                                      : core::SpendOutcome::Refused;
        d.spend.new_tat_ns = in->last_tat_ns;
        d.spend.remaining = v[0];
        d.spend.retry_after_s = v[1];
        d.spend.reset_after_s = v[2];
        if (in->caching() && moves == in->moves) {
            if (d.spend.outcome == core::SpendOutcome::Refused) {
                const std::uint64_t before = in->cache.evictions();
                in->cache.refused(key, cost, b, d.spend, asked, ticket);
                if (in->cache.evictions() != before)
                    in->metrics.refusal_cache_evictions.fetch_add(1, std::memory_order_relaxed);
            } else if (d.spend.outcome == core::SpendOutcome::Allowed) {
                in->cache.admitted(key, b, d.spend, asked, ticket);
            }
        }
        done(std::move(d));
    });
}

void BucketStore::settle(const std::string& key, double delta, core::Budget b, std::function<void(SettleResult)> done) {
    const char* problem = core::budget_problem(b);
    if (!problem && !std::isfinite(delta)) problem = "delta is not a finite number";
    if (!problem && b.capacity / b.rate > redis::kMaxRefillSeconds) problem = "capacity / rate exceeds 1e5 seconds";
    if (problem) {
        SettleResult s;
        s.failure = Failure::Protocol;
        s.detail = problem;
        done(std::move(s));
        return;
    }
    // Written before any later admit on this connection: the next answer for
    // the key already counts the refund, and one in flight is not cached.
    if (delta < 0) in_->cache.refunding(key);
    in_->run(key, "settle", delta, b, [in = in_, done = std::move(done)](redis::Result r) {
        SettleResult s;
        if (!r.ok()) {
            s.failure = r.failure;
            s.detail = std::move(r.detail);
            return done(std::move(s));
        }
        int code = 0;
        double v[3];
        if (!in->parse(r, code, v, s.detail)) {
            s.failure = Failure::Protocol;
            return done(std::move(s));
        }
        s.ok = true;
        s.balance = v[0];
        s.reset_after_s = v[2];
        done(std::move(s));
    });
}

}  // namespace ot::gate
