// A real redis-server for the store's unit tests, started once per test
// binary on 127.0.0.1:18701 (the gate's TAP tests use 185xx and 8000/8001)
// and stopped at exit. A missing redis-server fails the tests: nothing is
// skipped.
#pragma once
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>

extern char** environ;

namespace redis_test {

inline constexpr int kPort = 18701;

class Server {
public:
    Server() {
        std::vector<std::string> args = {"redis-server", "--port", std::to_string(kPort), "--bind", "127.0.0.1",
                                         "--save", "", "--appendonly", "no", "--daemonize", "no", "--loglevel",
                                         "warning", "--dir", "/tmp"};
        std::vector<char*> argv;
        for (auto& a : args) argv.push_back(a.data());
        argv.push_back(nullptr);
        // Its start-up warnings (memory overcommit) are not test output.
        posix_spawn_file_actions_t fa;
        posix_spawn_file_actions_init(&fa);
        posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
        posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
        const int rc = posix_spawnp(&pid_, "redis-server", &fa, nullptr, argv.data(), environ);
        posix_spawn_file_actions_destroy(&fa);
        if (rc != 0) {
            pid_ = -1;
            return;
        }
        for (int i = 0; i < 100 && !up_; ++i) {
            boost::asio::io_context ioc;
            boost::asio::ip::tcp::socket s(ioc);
            boost::system::error_code ec;
            s.connect({boost::asio::ip::make_address("127.0.0.1"), kPort}, ec);
            up_ = !ec;
            if (!up_) std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
    }
    ~Server() {
        if (pid_ > 0) {
            kill(pid_, SIGTERM);
            waitpid(pid_, nullptr, 0);
        }
    }
    bool up() const { return up_; }

private:
    pid_t pid_ = -1;
    bool up_ = false;
};

inline Server& server() {
    static Server s;
    return s;
}

// Runs the io_context until `done` says so, or fails after `limit`.
inline bool run_until(boost::asio::io_context& ioc, const std::function<bool()>& done,
                      std::chrono::milliseconds limit = std::chrono::milliseconds(5000)) {
    const auto end = std::chrono::steady_clock::now() + limit;
    ioc.restart();
    while (!done()) {
        if (std::chrono::steady_clock::now() > end) return false;
        ioc.run_one_for(std::chrono::milliseconds(5));
        ioc.restart();
    }
    return true;
}

}  // namespace redis_test
