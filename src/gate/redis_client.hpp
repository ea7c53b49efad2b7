// One Redis connection on one io_context, pipelined: commands are written as
// they come (batched into one write while a write is under way) and replies
// are matched to them in order. A gate I/O thread owns one client, so nothing
// here takes a lock and nothing ever blocks the thread.
//
// Failure handling: a command not answered within timeout_ms fails with
// Timeout and the connection is dropped (a reply that late means Redis is
// stalled or the path is broken; a half-dead connection must not swallow
// more commands). While reconnecting (backoff doubling from backoff_min_ms to
// backoff_max_ms), commands fail at once with Unavailable, so the caller's
// failure policy applies immediately instead of after a timeout.
#pragma once
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>

#include "gate/redis_resp.hpp"

namespace ot::gate::redis {

struct Endpoint {
    std::string host = "127.0.0.1";
    std::string port = "6379";
    int db = 0;
    std::string username;  // AUTH user (Redis 6 ACL); empty: AUTH with the password alone
    std::string password;  // empty: no AUTH
};

struct ClientOptions {
    int timeout_ms = 50;
    int backoff_min_ms = 20;
    int backoff_max_ms = 2000;
    // Sent after every (re)connect, before anything else (e.g. SCRIPT LOAD);
    // their replies are checked and an error drops the connection.
    std::vector<std::vector<std::string>> on_connect;
};

enum class Failure : std::uint8_t { None, Timeout, Unavailable, Protocol };
const char* failure_name(Failure f);

struct Result {
    Failure failure = Failure::None;
    Reply reply;  // valid when failure == None (may itself be a Redis error reply)
    std::string detail;
    bool ok() const { return failure == Failure::None; }
};

class Client : public std::enable_shared_from_this<Client> {
public:
    using Handler = std::function<void(Result)>;
    static std::shared_ptr<Client> create(boost::asio::io_context& ioc, Endpoint ep, ClientOptions opt);
    ~Client();

    // Call from the io_context's thread only. The handler runs on it too,
    // never inside this call.
    void command(std::vector<std::string> args, Handler h);
    // Fails what is pending (Unavailable) and stops reconnecting.
    void close();
    // Takes no more commands (they fail Unavailable), answers those written,
    // then closes: a replaced connection (a reload moved the store) lets its
    // callers have their replies.
    void close_when_idle();

    bool connected() const { return state_ == State::Ready; }
    std::uint64_t reconnects() const { return reconnects_; }

private:
    Client(boost::asio::io_context& ioc, Endpoint ep, ClientOptions opt);
    enum class State : std::uint8_t { Idle, Resolving, Connecting, Ready, Backoff, Closed };
    struct Pending {
        Handler handler;  // empty for on_connect commands
        std::chrono::steady_clock::time_point deadline;
    };

    void start_connect();
    void on_connected();
    void queue(const std::vector<std::string>& args, Handler h);
    void flush();
    void read();
    void on_reply(Reply r);
    void arm_timer();
    void fail_all(Failure f, const std::string& detail);
    void drop(Failure f, const std::string& detail);
    void complete(Handler& h, Result r);

    boost::asio::io_context& ioc_;
    Endpoint ep_;
    ClientOptions opt_;
    boost::asio::ip::tcp::resolver resolver_;
    boost::asio::ip::tcp::socket socket_;
    boost::asio::steady_timer timer_;      // the oldest pending command's deadline
    boost::asio::steady_timer backoff_;
    State state_ = State::Idle;
    std::uint64_t generation_ = 0;         // bumps on every drop: stale completions are ignored
    std::deque<Pending> pending_;          // written (or queued to be), awaiting replies in order
    std::string out_, writing_;            // queued bytes; bytes in the current write
    bool write_busy_ = false;
    std::vector<char> in_;
    ReplyParser parser_;
    int backoff_ms_ = 0;
    std::uint64_t reconnects_ = 0;
    bool timer_armed_ = false;
    bool closing_ = false;
};

}  // namespace ot::gate::redis
