// One client connection: reads requests (header/body/idle limits), applies
// the policy (assess → bucket → decide), answers or hands the exchange to
// the upstream leg, and logs one line per exchange. The per-request state is
// one value (Exchange) reset by assignment; the upstream leg's own state is
// UpstreamLeg. The member functions live in: session.cpp (the client side
// and policy), session_io.cpp (deadlines, /readyz), upstream_client.cpp
// (coalescing, slots, refunds), upstream_relay.cpp (the upstream connection
// and the relay) and admin.cpp (the admin listener's endpoints).
#pragma once
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/core/flat_static_buffer.hpp>
#include <boost/beast/http.hpp>
#include <memory>
#include <optional>
#include <string>

#include "gate/capabilities_relay.hpp"
#include "gate/conn_limits.hpp"
#include "gate/exchange.hpp"
#include "gate/server.hpp"

namespace ot::gate {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;
// The I/O thread's own executor type, not the type-erased any_io_executor:
// every handler of a client connection is dispatched through it.
using ClientSocket = tcp::socket::rebind_executor<asio::io_context::executor_type>::other;
using ClientTimer = asio::basic_waitable_timer<Clock, asio::wait_traits<Clock>, asio::io_context::executor_type>;

std::chrono::milliseconds ms(double seconds);
std::int64_t now_us();
bool hop_by_hop(beast::string_view name);

// The upstream side of one exchange (see upstream_client.cpp).
struct UpstreamLeg {
    std::unique_ptr<Gate::UpstreamSocket> conn;
    std::unique_ptr<tcp::resolver> resolver;
    http::request<http::string_body> req;
    std::string req_head;  // req's head, written with its body in one gather write
    std::optional<beast::flat_static_buffer_base> buf;  // over mem
    std::unique_ptr<char[]> mem, chunk;                 // relay blocks, held only while relaying
    std::optional<http::response_parser<http::buffer_body>> parser;
    std::string res_head;      // the answer's head as the client gets it
    bool head_sent = false;    // res_head went (or is going) to the client
    bool out_chunked = false;  // the client's body is framed in chunks by the gate
    // Direct relay: a body of known length (no rewrite, not shared) goes
    // from the upstream's socket into `buf` (after what came with the head)
    // and from there to the client's socket, one copy in user space; the
    // parser only reads the head.
    bool direct = false;
    std::uint64_t remaining = 0;  // direct: body bytes not yet handed to the client
    bool extra = false;           // bytes after the body: the connection is not reused
    char chunk_line[24];          // a chunk's size line, for out_chunked
    std::string acc;  // the leader's copy of a body small enough to share
    std::unique_ptr<CapsRelay> caps;  // the capabilities rewrite of this answer, if any
    std::unique_ptr<asio::steady_timer> queue_timer;
    std::uint64_t queue_ticket = 0;  // while waiting for a slot
    bool queued = false;
    bool keep_alive = false, chunked = false, buffering = false;
};

class Session : public std::enable_shared_from_this<Session> {
public:
    Session(ClientSocket s, Gate& g, bool admin, unsigned worker, ConnLimits::Ticket ticket, bool probe_only);
    ~Session();
    void start() { guard([&] { read(); }); }

private:
    // Every completion handler runs its body through guard(): an exception
    // costs this exchange a 500 (502 once the upstream was asked) and a log
    // line, never the process. After a fault no handler body runs again
    // (halted_): each would act on state the exception left half-changed (a
    // cancelled upstream read once retried the request on a fresh connection).
    template <class F>
    void guard(F&& f) noexcept {
        if (!halted_) contain(std::forward<F>(f));
    }
    // guard() without the halt: for the handlers a fault still needs (its
    // own answer's write, the idle timer that bounds it).
    template <class F>
    void contain(F&& f) noexcept {
        try {
#ifdef OGC_GATE_FAULTS
            inject_fault(false);
            f();
            inject_fault(true);
#else
            f();
#endif
        } catch (const std::exception& e) {
            fault(e.what());
        } catch (...) {
            fault("unknown exception");
        }
    }
    void fault(const char* what) noexcept;
#ifdef OGC_GATE_FAULTS
    // Test builds only (build/gate/ogc-gate-faults, test/gate/handler_faults.t.sh):
    // throws at the boundary the request's X-OT-Test-Fault names.
    void inject_fault(bool after);
    Exchange::Clock::time_point fault_epoch_{};
    unsigned fault_calls_ = 0;
#endif

    // session_io.cpp: the connection's one timer, for the client's and the
    // upstream's deadlines; /readyz.
    void client_io(double seconds);
    void client_io_done() { io_pending_ = false; }
    void upstream_io(double seconds);
    // The upstream's operation completed: its error, or timeout when the
    // deadline closed the socket under it.
    beast::error_code upstream_io_done(beast::error_code ec);
    void arm_for(Clock::time_point at);
    void arm_idle_timer(Clock::time_point at);
    void on_idle_timer(beast::error_code ec, unsigned gen);
    void ready();
    // session.cpp
    void read();
    void read_body();
    void read_rest();
    void on_read(beast::error_code ec);
    void begin_exchange();
    void take_request_id(const http::fields& f);
    void handle();
    // The budget's answer is in (at once from the in-process buckets, or
    // later from the shared store): refuse or forward.
    void decided(const HttpIn& in, const HeaderList& headers, const Identity& id,
                 const std::optional<core::SpendResult>& spent);
    // session_cells.cpp: the area budget (tiers[].cells), asked once the address admitted, in
    // the gate's own table or the shared store; and its share of a refund.
    void local_cell(const Identity& id, const core::SpendResult& addr, std::int64_t now);
    void shared_cell(const HttpIn& in, const HeaderList& headers, const Identity& id, const core::SpendResult& addr,
                     bool addr_local);
    void refund_cell();
    // The store's refusal cache for a request with an area budget: answered
    // (true) when the address or the cell is known to refuse.
    bool cached_cell_refusal(const HttpIn& in, const HeaderList& headers, const Identity& id, BucketStore& store);
    void cookies(std::string& c) const;
    void plain(int status, const std::string& text, const std::string& verdict);
    void respond(int status, std::string_view type, std::string_view body, const HeaderList& headers);
    bool compose(int status, std::string_view type, std::string_view body, const HeaderList& headers);
    void write_reply(bool again);
    void finished();
    void close();
    // admin.cpp
    void admin();
    // upstream_client.cpp
    void forward(const HttpIn& in);
    std::size_t finish_flight(FlightResult r);  // how many shared the flight
    void on_flight(const FlightResult& r);
    void acquire_slot();
    void slot_granted();
    void release_slot();
    void busy();
    void send_upstream();
    void write_upstream();
    void upstream_failed(beast::error_code ec);
    void upstream_error_reply(bool timeout, const std::string& msg);
    void drop_upstream();
    void on_upstream_header(beast::error_code ec);
    // upstream_relay.cpp: the request out, the answer back
    void relay_read();
    void direct_fill();
    void relay_chunk(const char* data, std::size_t n, bool more);
    void write_client(const char* data, std::size_t n, bool more);
    void client_written(beast::error_code ec, bool more);
    void prepare_client_head();
    bool upstream_complete() const;
    void upstream_broke(beast::error_code ec);
    void upstream_done();
    void publish();
    void respond_shared(const SharedResponse& s, bool check_refund = true, const HeaderList* own = nullptr);
    void maybe_refund(unsigned status, bool empty_body);
    void refund(double fraction);
    void release_relay_buffers();
    // settle_session.cpp
    void settle(Ending e);
    Timing timing() const;
    void note_estimate();
    void store_unavailable(double retry_after_s);

    ClientSocket socket_;
    ClientTimer idle_timer_;
    Clock::time_point deadline_{}, up_deadline_{}, armed_at_{};
    unsigned timer_gen_ = 0;  // a wait cancelled by an earlier deadline is stale
    bool io_pending_ = false, timer_armed_ = false, timed_out_ = false;
    bool up_pending_ = false, up_timed_out_ = false;
    Gate& gate_;
    const bool admin_, probe_only_;
    const unsigned worker_;  // the I/O thread this connection lives on
    ConnLimits::Ticket ticket_;
    IpAddr peer_{};
    bool halted_ = false;  // a handler threw: see guard()
    std::string head_, body_;  // a response written whole (not relayed)
    beast::flat_buffer buf_;
    std::shared_ptr<const Config> cfg_;
    std::optional<http::request_parser<http::string_body>> parser_;
    http::request<http::string_body> req_;
    http::response<http::string_body> res_;
    std::unique_ptr<beast::tcp_stream> probe_;  // /readyz's connection test
    std::unique_ptr<tcp::resolver> probe_resolver_;
    UpstreamLeg up_;
    Exchange ex_;
    // The previous request's assessment on this connection, kept (moved out
    // of the exchange before its reset) with what it was assessed from:
    // assess() is a pure function of the request and the configuration, so
    // a client repeating its request is not parsed, capped and priced again
    // (handle()). The configuration is held, not just compared by address,
    // so a reload can never be mistaken for the configuration it replaced.
    std::shared_ptr<const Config> last_cfg_;
    HttpIn last_in_;
    // The current request's parts and header copies (handle()), kept so their
    // buffers serve the next request on the connection.
    HttpIn in_;
    HeaderList in_headers_;
    HeaderList spare_headers_;  // see begin_exchange()
    Assessment last_assessment_;
    bool have_last_ = false;  // last_assessment_ is that of last_in_ under last_cfg_
    bool assessed_ = false;   // ex_.assessment is that of last_in_ under last_cfg_
};

}  // namespace ot::gate
