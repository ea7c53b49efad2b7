// A write that completes inline when the socket takes it whole. Asio's
// async_write sends at once too (a speculative sendmsg), but it always
// *posts* its completion: the I/O thread then goes round its scheduler, and
// with a handler queued that round is an epoll_wait with a zero timeout —
// at one connection one extra system call per write, two per passed request
// (the request upstream, the answer to the client). Here the first sendmsg
// is made directly on a socket in non-blocking mode (non_blocking(true):
// only synchronous calls see it; Asio's own async operations set the
// descriptor non-blocking anyway); when it takes everything, `done(ec, n)`
// runs before write_now returns. Whatever it does not take (the peer's
// window is full: EAGAIN, or a partial write) goes through async_write, whose
// completion `done` then gets with the total. Errors other than EAGAIN are
// handed to `done` inline, as async_write would have handed them later.
//
// A caller must not use its state after write_now returns on the
// assumption that `done` has not run yet.
#pragma once
#include <boost/asio/buffer.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/buffers_suffix.hpp>
#include <boost/beast/core/error.hpp>
#include <cstddef>
#include <utility>

namespace ot::gate {

// Returns true when `done` ran inline (for tests and counters).
template <class Socket, class Buffers, class Done>
bool write_now(Socket& s, const Buffers& bufs, Done&& done) {
    boost::beast::error_code ec;
    const std::size_t total = boost::asio::buffer_size(bufs);
    std::size_t n = 0;
    if (total > 0) {
        n = s.write_some(bufs, ec);
        if (ec == boost::asio::error::would_block || ec == boost::asio::error::try_again) {
            ec = {};
            n = 0;
        } else if (ec) {
            done(ec, n);
            return true;
        }
    }
    if (n == total) {
        done(ec, n);
        return true;
    }
    boost::beast::buffers_suffix<Buffers> rest(bufs);
    rest.consume(n);
    boost::asio::async_write(s, rest, [n, done = std::forward<Done>(done)](boost::beast::error_code e, std::size_t m) mutable {
        done(e, n + m);
    });
    return false;
}

}  // namespace ot::gate
