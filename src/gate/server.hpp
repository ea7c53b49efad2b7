// The I/O shell around the pure decision: accepts connections (public and
// admin listeners), reads requests with header/body/idle limits, asks
// assess → buckets → decide → coalescer → concurrency slot → upstream
// (pooled keep-alive connections, bodies streamed), writes one JSON log line
// per request. Beast, one io_context per I/O thread; what a request touches
// on its way (config snapshot, log buffer, metrics shard, upstream pool) is
// kept per thread, so two threads meet only on the bucket table.
#pragma once
#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/ip/tcp.hpp>
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
#include "gate/metrics.hpp"

namespace ot::gate {

struct Upstream {
    std::string host;
    std::string port;
    std::string prefix;  // path prefix, "" for none
};
// "http://host:port[/prefix]"; throws std::runtime_error.
Upstream parse_upstream(const std::string& url);
boost::asio::ip::tcp::endpoint parse_listen(const std::string& hostport);

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
    Metrics& metrics() { return metrics_; }
    Coalescer& coalescer() { return coalescer_; }
    Slots& slots() { return slots_; }
    using UpstreamPool = IdlePool<std::unique_ptr<boost::beast::tcp_stream>>;
    // The pool of I/O thread `worker`.
    UpstreamPool& pool(unsigned worker) { return *pools_[worker]; }
    std::size_t idle_upstream() const;
    const Upstream& upstream() const { return upstream_; }
    // Appends one line to the thread's log buffer; the buffer is written
    // (one write(2) under a lock) once the thread has run what is ready, so a
    // busy thread logs many requests per system call and a quiet one at once.
    void log_line(unsigned worker, std::string line);
    bool draining() const { return draining_; }
    // Requests under way on thread `worker` (a counter per thread: one
    // shared by all would be written from every core on every request).
    std::atomic<int>& inflight(unsigned worker) { return per_thread_[worker]->inflight; }
    int inflight_total() const;

private:
    struct alignas(64) PerThread {
        std::shared_ptr<const Config> cfg;
        std::uint64_t cfg_generation = ~std::uint64_t{0};
        std::string log;
        bool flush_posted = false;
        std::atomic<int> inflight{0};
    };
    void flush_log(unsigned worker);
    void write_log(const std::string& text);
    void accept(boost::asio::ip::tcp::acceptor& a, bool admin);
    boost::asio::io_context& ioc_;
    std::vector<std::unique_ptr<boost::asio::io_context>> workers_;
    std::vector<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> guards_;
    std::vector<std::thread> threads_;
    std::atomic<unsigned> next_worker_{0};
    std::shared_ptr<const Config> cfg_;
    std::atomic<std::uint64_t> cfg_generation_{0};  // bumped after each reload's store
    std::vector<std::unique_ptr<PerThread>> per_thread_;
    Upstream upstream_;
    BucketTable buckets_;
    Metrics metrics_;
    Coalescer coalescer_;
    Slots slots_;
    std::vector<std::unique_ptr<UpstreamPool>> pools_;  // one per worker
    boost::asio::ip::tcp::acceptor public_, admin_;
    std::mutex log_mu_;
    std::atomic<bool> draining_{false};
};

}  // namespace ot::gate
