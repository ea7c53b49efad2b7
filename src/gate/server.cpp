// The listeners (with connection limits and the descriptor back-off), the
// I/O threads, reload, drain and the log writer.
#include "gate/server.hpp"

#include <boost/asio/strand.hpp>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <iostream>

#include "gate/session.hpp"

namespace ot::gate {

namespace {

// Descriptors kept back from client connections when the global limit is
// derived from RLIMIT_NOFILE: upstream connections, the log, resolvers.
constexpr std::size_t kFdReserve = 128;
// Connections accepted above the global limit, to answer probes only.
constexpr std::size_t kProbeReserve = 32;

// As nginx's worker_rlimit_nofile: the soft limit up to the hard one, so a
// default 1024 does not cap a gate meant for thousands of connections.
std::size_t raise_nofile() {
    rlimit r{};
    if (getrlimit(RLIMIT_NOFILE, &r) != 0) return 1024;
    if (r.rlim_cur < r.rlim_max) {
        rlimit want = r;
        want.rlim_cur = r.rlim_max == RLIM_INFINITY ? 1048576 : r.rlim_max;
        if (setrlimit(RLIMIT_NOFILE, &want) == 0) r = want;
    }
    return r.rlim_cur == RLIM_INFINITY ? 1048576 : static_cast<std::size_t>(r.rlim_cur);
}

// An io_context::run() that an escaped exception does not end: logged, and
// the loop goes on (the handler that threw has already lost its exchange).
void run_forever(asio::io_context& io, Gate& g) {
    for (;;) {
        try {
            io.run();
            return;
        } catch (const std::exception& e) {
            g.count_fault();
            std::cerr << "ogc-gate: exception escaped a handler: " << e.what() << "\n";
        } catch (...) {
            g.count_fault();
            std::cerr << "ogc-gate: unknown exception escaped a handler\n";
        }
    }
}

}  // namespace

Gate::Listener::Listener(asio::io_context& ioc) : acceptor(asio::make_strand(ioc)), backoff(acceptor.get_executor()) {}

Gate::Gate(asio::io_context& ioc, std::shared_ptr<const Config> cfg)
    : ioc_(ioc), cfg_(std::move(cfg)), upstream_(parse_upstream(cfg_->upstream)), buckets_(cfg_->limits.max_keys),
      cells_(cfg_->limits.max_keys),
      public_(ioc), admin_(ioc) {
    slots_.configure(cfg_->concurrency.classes, cfg_->concurrency.max_queue);
    admin_.admin = true;
}

void Gate::start(int threads) {
    metrics_.resize(static_cast<std::size_t>(std::max(threads, 1)));
    for (int i = 0; i < std::max(threads, 1); ++i) {
        per_thread_.push_back(std::make_unique<PerThread>());
        workers_.push_back(std::make_unique<asio::io_context>(1));
        guards_.push_back(asio::make_work_guard(*workers_.back()));
        pools_.push_back(std::make_unique<UpstreamPool>(cfg_->limits.upstream_keepalive, cfg_->limits.upstream_idle_timeout_s));
        if (cfg_->buckets.store == StoreConfig::Kind::Redis)
            stores_.push_back(std::make_unique<BucketStore>(*workers_.back(), cfg_->buckets, store_metrics_));
    }
    auto open = [](tcp::acceptor& a, const tcp::endpoint& ep) {
        a.open(ep.protocol());
        a.set_option(asio::socket_base::reuse_address(true));
        a.bind(ep);
        a.listen(asio::socket_base::max_listen_connections);
    };
    const std::size_t nofile = raise_nofile();
    const std::size_t derived = nofile > kFdReserve + kProbeReserve + 16 ? nofile - kFdReserve - kProbeReserve : 16;
    max_connections_ = cfg_->limits.max_connections ? cfg_->limits.max_connections : derived;
    conn_limits_.configure(max_connections_, cfg_->limits.max_connections_per_address, kProbeReserve);
    spare_fd_ = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    open(public_.acceptor, parse_listen(cfg_->listen));
    accept(public_);
    if (!cfg_->admin_listen.empty() && cfg_->admin_listen != "off") {
        open(admin_.acceptor, parse_listen(cfg_->admin_listen));
        accept(admin_);
    }
    // Last: a listener that fails to bind leaves no thread behind.
    for (auto& w : workers_) threads_.emplace_back([this, io = w.get()] { run_forever(*io, *this); });
}

void Gate::accept(Listener& l) {
    const unsigned worker = next_worker_++ % workers_.size();
    l.acceptor.async_accept(workers_[worker]->get_executor(), [this, &l, worker](beast::error_code ec, ClientSocket s) {
        if (ec == asio::error::operation_aborted || !l.acceptor.is_open()) return;
        if (ec == asio::error::no_descriptors || ec.value() == ENFILE || ec == asio::error::no_buffer_space ||
            ec == asio::error::no_memory)
            return out_of_descriptors(l);
        if (!ec) {
            try {
                admit(std::move(s), l.admin, worker);
            } catch (const std::exception& e) {
                count_fault();
                std::cerr << "ogc-gate: cannot take a connection: " << e.what() << "\n";
            }
        }
        accept(l);
    });
}

void Gate::admit(ClientSocketT s, bool admin, unsigned worker) {
    ConnLimits::Ticket ticket;
    bool probe_only = false;
    if (!admin) {
        beast::error_code ec;
        const auto ep = s.remote_endpoint(ec);
        if (ec) return;  // already gone
        const IpAddr peer = parse_ip(ep.address().to_string()).value_or(IpAddr{});
        switch (conn_limits_.admit(peer, ticket)) {
            case ConnLimits::Admit::Ok: break;
            case ConnLimits::Admit::ProbeOnly: probe_only = true; break;
            case ConnLimits::Admit::OverAddress:
            case ConnLimits::Admit::Full: {
                // Closed at once, with a reset: holding it costs the descriptor the limit protects.
                s.set_option(asio::socket_base::linger(true, 0), ec);
                s.close(ec);
                return;
            }
        }
    }
    auto session = std::make_shared<Session>(std::move(s), *this, admin, worker, std::move(ticket), probe_only);
    // Started on its own thread: it reads that thread's config snapshot.
    asio::post(workers_[worker]->get_executor(), [session] { session->start(); });
}

// EMFILE: accept() would fail again at once, and the listener would spin a
// core. The spare descriptor is given up to take the connection at the head
// of the queue and turn it away with a 503 (its client learns something,
// rather than hanging), then the listener pauses before it tries again.
void Gate::out_of_descriptors(Listener& l) {
    accept_backoffs_++;
    if (spare_fd_ >= 0) {
        ::close(spare_fd_);
        spare_fd_ = -1;
        const int fd = ::accept4(l.acceptor.native_handle(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd >= 0) {
            static constexpr char k503[] =
                "HTTP/1.1 503 Service Unavailable\r\nServer: ogc-gate\r\nRetry-After: 1\r\nContent-Length: 0\r\n"
                "Connection: close\r\n\r\n";
            [[maybe_unused]] const auto n = ::send(fd, k503, sizeof k503 - 1, MSG_NOSIGNAL | MSG_DONTWAIT);
            ::close(fd);
        }
        spare_fd_ = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    }
    l.backoff.expires_after(std::chrono::milliseconds(100));
    l.backoff.async_wait([this, &l](beast::error_code ec) {
        if (ec || !l.acceptor.is_open()) return;
        accept(l);
    });
}

void Gate::reload(std::shared_ptr<const Config> cfg) {
    // The shared store's connection moves on each I/O thread, between its
    // requests (store kind itself, local or redis, is kept by the caller).
    const StoreConfig& was = cfg_->buckets;
    const StoreConfig& now = cfg->buckets;
    if (!stores_.empty() && (now.url != was.url || now.timeout_ms != was.timeout_ms ||
                             now.key_prefix != was.key_prefix || now.refusal_cache != was.refusal_cache))
        for (std::size_t i = 0; i < stores_.size(); ++i)
            asio::post(*workers_[i], [store = stores_[i].get(), keep = cfg] { store->reconfigure(keep->buckets); });
    buckets_.set_max_keys(cfg->limits.max_keys);
    cells_.set_max_keys(cfg->limits.max_keys);
    slots_.configure(cfg->concurrency.classes, cfg->concurrency.max_queue);
    for (auto& p : pools_) p->configure(cfg->limits.upstream_keepalive, cfg->limits.upstream_idle_timeout_s);
    std::atomic_store(&cfg_, std::move(cfg));
    cfg_generation_.fetch_add(1, std::memory_order_release);
}

const std::shared_ptr<const Config>& Gate::config(unsigned worker) {
    // The shared pointer is read under a lock (std::atomic_load): once per
    // reload and thread, not once per request.
    PerThread& t = *per_thread_[worker];
    const std::uint64_t g = cfg_generation_.load(std::memory_order_acquire);
    if (g != t.cfg_generation) {
        // Behind a control block of this thread's own: sessions copy t.cfg
        // per request, and a count shared with the other threads would move
        // its cache line between cores each time.
        auto holder = std::make_shared<std::shared_ptr<const Config>>(std::atomic_load(&cfg_));
        t.cfg = std::shared_ptr<const Config>(holder, holder->get());
        t.cfg_generation = g;
    }
    return t.cfg;
}

void Gate::drain_and_stop(double timeout_s) {
    draining_ = true;
    // Closed on their own strands: an accept may be completing on another thread.
    for (Listener* l : {&public_, &admin_})
        asio::post(l->acceptor.get_executor(), [l] {
            beast::error_code ec;
            l->backoff.cancel();
            l->acceptor.close(ec);
        });
    auto timer = std::make_shared<asio::steady_timer>(ioc_);
    const auto deadline = Clock::now() + ms(timeout_s);
    auto tick = std::make_shared<std::function<void()>>();
    *tick = [this, timer, deadline, tick]() {
        if (inflight_total() <= 0 || Clock::now() >= deadline) {
            ioc_.stop();
            for (auto& w : workers_) w->stop();
            return;
        }
        timer->expires_after(std::chrono::milliseconds(50));
        timer->async_wait([tick](beast::error_code) { (*tick)(); });
    };
    (*tick)();
}

Gate::~Gate() {
    join();
    stores_.clear();  // their sockets live on the workers' io_contexts
    if (spare_fd_ >= 0) ::close(spare_fd_);
}

int Gate::inflight_total() const {
    int n = 0;
    for (const auto& t : per_thread_) n += t->inflight.load();
    return n;
}

std::size_t Gate::idle_upstream() const {
    std::size_t n = 0;
    for (const auto& p : pools_) n += p->idle();
    return n;
}

void Gate::join() {
    for (auto& w : workers_) w->stop();
    for (auto& t : threads_)
        if (t.joinable()) t.join();
    // The threads are gone and every line is handed over: written before exit.
    log_writer_.drain();
}

void Gate::log_line(unsigned worker, std::string_view line) {
    PerThread& t = *per_thread_[worker];
    t.log.append(line.data(), line.size());
    log_appended(worker);
}

// Handed over at once, a line at a time (a memcpy under the writer's lock,
// which the writer itself takes once per gather period). Batching the lines
// of one epoll round behind a posted flush cost the I/O thread a scheduler
// round — an epoll_wait with a zero timeout — per request at one connection.
void Gate::log_appended(unsigned worker) {
    PerThread& t = *per_thread_[worker];
    t.log += '\n';
    log_writer_.submit(t.log);
    t.log.clear();
}

}  // namespace ot::gate
