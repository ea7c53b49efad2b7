// write_now (src/gate/write_now.hpp): inline when the socket takes the
// buffers whole; through async_write, with the right total, when the peer
// stops reading; errors reach the handler once.
#include <gtest/gtest.h>

#include <array>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <string>
#include <thread>

#include "gate/write_now.hpp"

namespace {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;

// A connected pair on loopback: `a` writes (non-blocking mode, as the gate's
// sockets), `b` reads.
struct Pair {
    asio::io_context io;
    tcp::socket a{io}, b{io};
    Pair() {
        tcp::acceptor acc(io, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
        a.connect(acc.local_endpoint());
        acc.accept(b);
        a.non_blocking(true);
    }
};

std::string pattern(std::size_t n) {
    std::string s(n, '\0');
    for (std::size_t i = 0; i < n; ++i) s[i] = static_cast<char>('a' + (i * 7 + i / 251) % 26);
    return s;
}

}  // namespace

TEST(WriteNow, ASmallWriteCompletesInline) {
    Pair p;
    const std::string head = "HTTP/1.1 200 OK\r\n\r\n", body = "hello";
    const std::array<asio::const_buffer, 2> bufs{asio::buffer(head), asio::buffer(body)};
    int calls = 0;
    std::size_t got = 0;
    const bool inline_done = ot::gate::write_now(p.a, bufs, [&](boost::beast::error_code ec, std::size_t n) {
        EXPECT_FALSE(ec);
        ++calls;
        got = n;
    });
    EXPECT_TRUE(inline_done);
    EXPECT_EQ(calls, 1) << "the handler ran before write_now returned";
    EXPECT_EQ(got, head.size() + body.size());
    EXPECT_EQ(p.io.poll(), 0u) << "nothing was queued on the io_context";
    std::string r(got, '\0');
    asio::read(p.b, asio::buffer(r));
    EXPECT_EQ(r, head + body);
}

// The peer stops reading: the socket takes part, the rest waits for the
// peer's window, and the answer still arrives whole and in order.
TEST(WriteNow, APeerThatStopsReadingGetsTheRestAsynchronously) {
    Pair p;
    p.a.set_option(asio::socket_base::send_buffer_size(16 * 1024));
    p.b.set_option(asio::socket_base::receive_buffer_size(16 * 1024));
    const std::string head = "HEAD\r\n", body = pattern(8u << 20);  // far beyond both buffers
    const std::array<asio::const_buffer, 3> bufs{asio::buffer(head), asio::buffer(body), asio::buffer("\r\n", 2)};
    int calls = 0;
    std::size_t got = 0;
    boost::beast::error_code err;
    const bool inline_done = ot::gate::write_now(p.a, bufs, [&](boost::beast::error_code ec, std::size_t n) {
        ++calls;
        got = n;
        err = ec;
    });
    EXPECT_FALSE(inline_done);
    EXPECT_EQ(calls, 0);
    std::string received;
    std::thread reader([&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(200));  // not reading, for a while
        char buf[65536];
        boost::system::error_code ec;
        for (std::size_t n; (n = p.b.read_some(asio::buffer(buf), ec)) > 0 || !ec;) received.append(buf, n);
    });
    p.io.run();  // until the async remainder completes
    EXPECT_EQ(calls, 1);
    EXPECT_FALSE(err) << err.message();
    EXPECT_EQ(got, head.size() + body.size() + 2);
    p.a.shutdown(tcp::socket::shutdown_send);
    reader.join();
    EXPECT_TRUE(received == head + body + "\r\n") << "received " << received.size() << " bytes";
}

TEST(WriteNow, AClosedPeerIsAnErrorOnce) {
    Pair p;
    p.b.set_option(asio::socket_base::linger(true, 0));
    p.b.close();  // a reset
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    const std::string body = pattern(1u << 20);
    const std::array<asio::const_buffer, 1> bufs{asio::buffer(body)};
    int calls = 0;
    boost::beast::error_code err;
    ot::gate::write_now(p.a, bufs, [&](boost::beast::error_code ec, std::size_t) {
        ++calls;
        err = ec;
    });
    p.io.run();
    EXPECT_EQ(calls, 1);
    EXPECT_TRUE(err);
}

TEST(WriteNow, NothingToWriteCompletesInline) {
    Pair p;
    const std::array<asio::const_buffer, 2> bufs{};
    int calls = 0;
    EXPECT_TRUE(ot::gate::write_now(p.a, bufs, [&](boost::beast::error_code ec, std::size_t n) {
        EXPECT_FALSE(ec);
        EXPECT_EQ(n, 0u);
        ++calls;
    }));
    EXPECT_EQ(calls, 1);
}
