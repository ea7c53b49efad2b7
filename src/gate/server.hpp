// The process around the sessions: the listeners (public and admin) with
// their connection limits and descriptor back-off, the I/O threads, config
// reloads, draining and the log writer. Beast, one io_context per I/O
// thread; what a request touches on its way (config snapshot, log buffer,
// metrics shard, upstream pool) is kept per thread, so two threads meet only
// on the bucket table and the connection counts. A connection is a Session
// (session.hpp).
#pragma once
#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "gate/buckets.hpp"
#include "gate/coalescer.hpp"
#include "gate/concurrency.hpp"
#include "gate/upstream_pool.hpp"
#include "gate/config.hpp"
#include "gate/conn_limits.hpp"
#include "gate/log_writer.hpp"
#include "gate/metrics.hpp"
#include "gate/redis_store.hpp"
#include "gate/upstream_url.hpp"

namespace ot::gate {

class Gate {
public:
    Gate(boost::asio::io_context& ioc, std::shared_ptr<const Config> cfg);
    ~Gate();
    // Binds both listeners (throws on failure) and starts `threads` I/O
    // threads, each with an io_context of its own: a connection lives on one
    // thread, so its steps never wake another core. `ioc` (run by the
    // caller) only accepts and hands connections out.
    void start(int threads);
    void join();  // after drain_and_stop, once the caller's ioc has returned
    void reload(std::shared_ptr<const Config> cfg);  // keeps listeners and connections
    void drain_and_stop(double timeout_s);           // SIGTERM

    // Used by sessions, from the I/O thread `worker` they live on.
    std::shared_ptr<const Config> config() const { return std::atomic_load(&cfg_); }
    const std::shared_ptr<const Config>& config(unsigned worker);
    boost::asio::io_context& ioc() { return ioc_; }
    BucketTable& buckets() { return buckets_; }
    BucketTable& cells() { return cells_; }  // the area budgets (tiers[].cells), bounded like buckets()
    // The shared store of I/O thread `worker` (buckets.store: redis), else null.
    BucketStore* store(unsigned worker) { return stores_.empty() ? nullptr : stores_[worker].get(); }
    redis::StoreMetrics& store_metrics() { return store_metrics_; }
    Metrics& metrics() { return metrics_; }
    Coalescer& coalescer() { return coalescer_; }
    Slots& slots() { return slots_; }
    // A plain socket on the I/O thread's own executor: its deadlines are the
    // session's (session_io.cpp), not a timer per operation.
    using UpstreamSocket = boost::asio::ip::tcp::socket::rebind_executor<boost::asio::io_context::executor_type>::other;
    using UpstreamPool = IdlePool<std::unique_ptr<UpstreamSocket>>;
    // The pool of I/O thread `worker`.
    UpstreamPool& pool(unsigned worker) { return *pools_[worker]; }
    std::size_t idle_upstream() const;
    const Upstream& upstream() const { return upstream_; }
    // Hands one line to the log writer thread (log_writer.hpp), which
    // writes it within its gather period; no I/O thread ever waits on write(2).
    void log_line(unsigned worker, std::string_view line);
    // The same without a string of the caller's: append the line to
    // log_buffer(worker) (the thread's scratch), then call log_appended(worker).
    std::string& log_buffer(unsigned worker) { return per_thread_[worker]->log; }
    void log_appended(unsigned worker);
    std::uint64_t log_dropped_bytes() const { return log_writer_.dropped_bytes(); }
    bool draining() const { return draining_; }
    // Requests under way on thread `worker` (a counter per thread: one
    // shared by all would be written from every core on every request).
    std::atomic<int>& inflight(unsigned worker) { return per_thread_[worker]->inflight; }
    int inflight_total() const;
    ConnLimits& conn_limits() { return conn_limits_; }
    std::uint64_t accept_backoffs() const { return accept_backoffs_.load(); }
    std::uint64_t handler_faults() const { return handler_faults_.load(); }
    void count_fault() { handler_faults_++; }
    // The global connection limit in force (configured, or derived from the
    // descriptor limit), fixed at start.
    std::size_t max_connections() const { return max_connections_; }

private:
    struct alignas(64) PerThread {
        std::shared_ptr<const Config> cfg;
        std::uint64_t cfg_generation = ~std::uint64_t{0};
        std::string log;  // the line being formatted
        std::atomic<int> inflight{0};
    };
    struct Listener {
        explicit Listener(boost::asio::io_context& ioc);
        boost::asio::ip::tcp::acceptor acceptor;
        boost::asio::steady_timer backoff;
        bool admin = false;
    };
    using ClientSocketT = boost::asio::ip::tcp::socket::rebind_executor<boost::asio::io_context::executor_type>::other;
    void accept(Listener& l);
    void admit(ClientSocketT s, bool admin, unsigned worker);
    void out_of_descriptors(Listener& l);
    boost::asio::io_context& ioc_;
    std::vector<std::unique_ptr<boost::asio::io_context>> workers_;
    std::vector<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> guards_;
    std::vector<std::thread> threads_;
    std::atomic<unsigned> next_worker_{0};
    std::shared_ptr<const Config> cfg_;
    std::atomic<std::uint64_t> cfg_generation_{0};  // bumped after each reload's store
    std::vector<std::unique_ptr<PerThread>> per_thread_;
    Upstream upstream_;
    BucketTable buckets_, cells_;
    Metrics metrics_;
    Coalescer coalescer_;
    Slots slots_;
    std::vector<std::unique_ptr<UpstreamPool>> pools_;  // one per worker
    redis::StoreMetrics store_metrics_;
    std::vector<std::unique_ptr<BucketStore>> stores_;  // one per worker, on its io_context; before the workers go
    Listener public_, admin_;
    ConnLimits conn_limits_;
    std::size_t max_connections_ = 0;
    int spare_fd_ = -1;  // given up at EMFILE to accept (and turn away) one connection
    std::atomic<std::uint64_t> accept_backoffs_{0}, handler_faults_{0};
    LogWriter log_writer_{1};  // stdout
    std::atomic<bool> draining_{false};
};

}  // namespace ot::gate
