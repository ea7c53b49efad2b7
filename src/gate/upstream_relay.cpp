// The upstream connection of an exchange and the relay of its answer: the
// pooled keep-alive connection (one retry for a safe request that meets a
// connection the upstream closed), the request written as head + body in one
// gather write, and the answer relayed in fixed blocks. A body of known
// length that is neither rewritten nor shared is read into the head's buffer
// and written from it (one copy in user space); the rest goes through Beast's
// parser into the relay block. The gate writes the client's head and any chunk framing
// itself, so each piece of the answer is one writev.
#include "gate/capabilities_relay.hpp"
#include "gate/decision.hpp"
#include "gate/http_head.hpp"
#include "gate/relay_blocks.hpp"
#include "gate/session.hpp"
#include "gate/write_now.hpp"

namespace ot::gate {

namespace {

bool safe_method(http::verb v) { return v == http::verb::get || v == http::verb::head; }

}  // namespace

void Session::send_upstream() {
    ex_.up_started = Clock::now();
    ex_.upstream_tried = true;
    // Beast reads no more than the buffer's spare capacity: a growing
    // flat_buffer would take a 20 kB tile in 40 reads of 512 bytes.
    if (!up_.mem) up_.mem = take_block();
    if (!up_.chunk) up_.chunk = take_block();
    up_.buf.emplace(up_.mem.get(), kBlock);
    up_.head_sent = up_.out_chunked = up_.direct = up_.extra = false;
    up_.parser.reset();
    up_timed_out_ = false;
    auto exe = socket_.get_executor();
    if (!ex_.retried) {
        // A GET/HEAD that meets a connection the upstream has closed is
        // retried (upstream_failed); anything else must not meet one, so
        // only it pays a system call to look first.
        const bool safe = safe_method(req_.method());
        auto conn = gate_.pool(worker_).take(Clock::now(), [safe](const std::unique_ptr<Gate::UpstreamSocket>& c) {
            return !safe && idle_conn_dead(c->native_handle());
        });
        if (conn) {
            ex_.reused = true;
            up_.conn = std::move(*conn);
            return write_upstream();
        }
    }
    ex_.reused = false;
    const Upstream& u = gate_.upstream();
    up_.conn = std::make_unique<Gate::UpstreamSocket>(exe);
    upstream_io(cfg_->limits.upstream_connect_timeout_s);
    up_.resolver = std::make_unique<tcp::resolver>(exe);
    up_.resolver->async_resolve(
        u.host, u.port, [self = shared_from_this()](beast::error_code ec, tcp::resolver::results_type rs) {
            self->guard([&] {
                if (self->up_timed_out_) ec = beast::error::timeout;
                if (ec) return self->upstream_failed(self->upstream_io_done(ec));
                asio::async_connect(*self->up_.conn, rs, [self](beast::error_code ec2, const tcp::endpoint&) {
                    self->guard([&] {
                        ec2 = self->upstream_io_done(ec2);
                        if (ec2) return self->upstream_failed(ec2);
                        beast::error_code ignored;
                        self->up_.conn->set_option(tcp::no_delay(true), ignored);
                        self->up_.conn->non_blocking(true, ignored);  // for write_now; kept while pooled
                        self->write_upstream();
                    });
                });
            });
        });
}

void Session::write_upstream() {
    upstream_io(cfg_->limits.upstream_timeout_s);
    ex_.up_sent = Clock::now();
    serialize_head(up_.req.base(), up_.req_head);
    const std::array<asio::const_buffer, 2> bufs{asio::buffer(up_.req_head), asio::buffer(up_.req.body())};
    // Completes inline when the upstream's socket takes the request whole.
    write_now(*up_.conn, bufs, [self = shared_from_this()](beast::error_code ec, std::size_t) {
        self->guard([&] {
            ec = self->upstream_io_done(ec);
            if (ec) return self->upstream_failed(ec);
            self->up_.parser.emplace();
            self->up_.parser->body_limit(self->cfg_->limits.upstream_body_bytes);
            if (self->req_.method() == http::verb::head) self->up_.parser->skip(true);
            self->upstream_io(self->cfg_->limits.upstream_timeout_s);
            http::async_read_header(*self->up_.conn, *self->up_.buf, *self->up_.parser,
                                    [self](beast::error_code ec2, std::size_t) {
                                        self->guard([&] { self->on_upstream_header(self->upstream_io_done(ec2)); });
                                    });
        });
    });
}

void Session::on_upstream_header(beast::error_code ec) {
    if (ec) return upstream_failed(ec);
    auto& m = up_.parser->get();
    ex_.upstream_status = m.result_int();
    up_.keep_alive = m.keep_alive();
    up_.chunked = up_.parser->chunked();
    ex_.body_bytes = 0;
    up_.buffering = false;
    if (ex_.flight_key) {
        const auto len = up_.parser->content_length();
        if (len && *len > cfg_->coalesce.max_body_bytes) finish_flight({FlightResult::Kind::Overflow, nullptr, false, {}});
        else up_.buffering = true;
    }
    up_.acc.clear();
    // A shared (coalesced) answer is a map or tile: never rewritten.
    up_.caps = ex_.flight_key ? nullptr
                              : CapsRelay::start(m.base(), ex_.assessment.req, *cfg_, req_, peer_,
                                                 req_.method() == http::verb::head);
    const auto len = up_.parser->content_length();
    if (!up_.parser->is_done() && len && !up_.chunked && !up_.buffering && !(up_.caps && up_.caps->rewrites_body())) {
        up_.direct = true;
        up_.remaining = *len;
        return direct_fill();
    }
    relay_read();
}

// Direct relay: the body is read into the head's buffer, after what the
// head's read brought, until the block is full or the body complete (as
// the parser path fills its block), then written from there.
void Session::direct_fill() {
    auto& b = *up_.buf;
    const std::size_t have = b.size();
    const std::size_t space = b.max_size() - have;
    if (have < up_.remaining && space > 0) {
        upstream_io(cfg_->limits.upstream_timeout_s);  // an inactivity timeout
        const std::size_t want = static_cast<std::size_t>(std::min<std::uint64_t>(space, up_.remaining - have));
        return up_.conn->async_read_some(b.prepare(want), [self = shared_from_this()](beast::error_code ec, std::size_t n) {
            self->guard([&] {
                ec = self->upstream_io_done(ec);
                if (ec) return self->upstream_broke(ec);
                self->up_.buf->commit(n);
                self->direct_fill();
            });
        });
    }
    const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(have, up_.remaining));
    up_.extra = have > n;  // bytes after the body: the connection is not reused
    up_.remaining -= n;
    const char* data = static_cast<const char*>(b.data().data());
    // The bytes stay where they are until the next read into the buffer,
    // which waits for this piece's write.
    b.consume(have);
    relay_chunk(data, n, up_.remaining > 0);
}

bool Session::upstream_complete() const { return up_.direct ? up_.remaining == 0 : up_.parser->is_done(); }

void Session::relay_read() {
    if (up_.direct) return direct_fill();
    // An inactivity timeout: a 50 MB download may take longer in total.
    upstream_io(cfg_->limits.upstream_timeout_s);
    if (up_.parser->is_done()) {
        up_pending_ = false;
        return relay_chunk(up_.chunk.get(), 0, false);
    }
    auto& b = up_.parser->get().body();
    b.data = up_.chunk.get();
    b.size = kBlock;
    http::async_read(*up_.conn, *up_.buf, *up_.parser, [self = shared_from_this()](beast::error_code ec, std::size_t) {
        self->guard([&] {
            ec = self->upstream_io_done(ec);
            if (ec == http::error::need_buffer) ec = {};
            if (ec) return self->upstream_broke(ec);
            const std::size_t n = kBlock - self->up_.parser->get().body().size;
            self->relay_chunk(self->up_.chunk.get(), n, !self->up_.parser->is_done());
        });
    });
}

void Session::relay_chunk(const char* data, std::size_t n, bool more) {
    ex_.body_bytes += n;
    if (!more) {
        // The upstream's last byte: its time is known, the charge too.
        ex_.up_last = Clock::now();
        if (!up_.buffering) settle(Ending::Complete);
    }
    if (up_.buffering) {
        up_.acc.append(data, n);
        if (up_.acc.size() <= cfg_->coalesce.max_body_bytes) {
            if (more) return relay_read();
            return publish();
        }
        // Too big to share after all: the others fetch their own copy.
        up_.buffering = false;
        finish_flight({FlightResult::Kind::Overflow, nullptr, false, {}});
        return write_client(up_.acc.data(), up_.acc.size(), more);
    }
    if (up_.caps && up_.caps->rewrites_body()) {
        const std::string& out = up_.caps->rewrite(data, n, more);
        if (out.empty() && more) return relay_read();
        return write_client(out.data(), out.size(), more);
    }
    write_client(data, n, more);
}

// The upstream's head, end-to-end fields only, with the gate's own.
void Session::prepare_client_head() {
    auto& m = up_.parser->get();
    for (auto it = m.begin(); it != m.end();) {
        if (hop_by_hop(it->name_string())) it = m.erase(it);
        else ++it;
    }
    m.version(11);
    for (const auto& [k, v] : ex_.decision.headers) m.set(k, v);
    m.set("X-Request-Id", ex_.request_id);
    if (up_.caps && up_.caps->adjust_headers(m.base())) up_.chunked = true;  // rewritten: length unknown
    // An HTTP/1.0 client cannot read chunks: the end of its body is the
    // end of the connection.
    if (up_.chunked && req_.method() != http::verb::head) {
        if (req_.version() >= 11) {
            m.chunked(true);
            up_.out_chunked = true;
        } else {
            ex_.keep_alive = false;
        }
    }
    m.keep_alive(ex_.keep_alive && !gate_.draining());
    if (ex_.final_charge >= 0) m.set("X-OT-Cost", format_ms(ex_.final_charge));
    ex_.status_sent = m.result_int();
    serialize_head(m.base(), up_.res_head);
}

void Session::write_client(const char* data, std::size_t n, bool more) {
    std::array<asio::const_buffer, 5> bufs{};
    std::size_t k = 0;
    if (!up_.head_sent) {
        prepare_client_head();
        up_.head_sent = true;
        bufs[k++] = asio::buffer(up_.res_head);
    }
    if (req_.method() != http::verb::head) {
        if (up_.out_chunked && n > 0) {
            bufs[k++] = asio::buffer(up_.chunk_line, chunk_size_line(n, up_.chunk_line));
            bufs[k++] = asio::buffer(data, n);
            bufs[k++] = asio::buffer("\r\n", 2);
        } else if (n > 0) {
            bufs[k++] = asio::buffer(data, n);
        }
        if (up_.out_chunked && !more) bufs[k++] = asio::buffer(kLastChunk.data(), kLastChunk.size());
    }
    if (k == 0) return client_written({}, more);  // nothing to say yet (a rewrite holding back)
    client_io(cfg_->limits.idle_timeout_s);
    ex_.client_write_at = Clock::now();
    // Inline when the client's socket takes the piece; a client that reads
    // slowly gets the rest through async_write (write_now.hpp).
    write_now(socket_, bufs, [self = shared_from_this(), more](beast::error_code ec, std::size_t) {
        self->guard([&] {
            self->client_io_done();
            if (more)  // the upstream waited on this client meanwhile
                self->ex_.client_blocked_ms +=
                    std::chrono::duration<double, std::milli>(Clock::now() - self->ex_.client_write_at).count();
            self->client_written(ec, more);
        });
    });
}

void Session::client_written(beast::error_code ec, bool more) {
    if (!up_.acc.empty()) std::string().swap(up_.acc);
    if (ec) {
        // The client left mid-body: nothing more can be said to it.
        drop_upstream();
        release_slot();
        ex_.upstream_error = "client gone: " + ec.message();
        ex_.up_last = Clock::now();
        settle(Ending::Abandoned);
        return close();
    }
    if (more) return relay_read();
    upstream_done();
    const bool again = up_.parser->get().keep_alive();
    finished();
    if (!again) return close();
    read();
}

void Session::upstream_broke(beast::error_code ec) {
    if (!up_.head_sent) return upstream_failed(ec);  // nothing sent yet: a proper error answer
    drop_upstream();
    release_slot();
    gate_.metrics().upstream(worker_, std::chrono::duration<double>(Clock::now() - ex_.up_started).count(), true);
    ex_.upstream_error = "upstream broke off mid-body: " + ec.message();
    ex_.up_last = Clock::now();
    settle(Ending::Broken);
    close();
}

void Session::upstream_done() {
    gate_.metrics().upstream(worker_, std::chrono::duration<double>(Clock::now() - ex_.up_started).count(), false);
    if (up_.conn && up_.keep_alive && upstream_complete() && !up_.extra && up_.buf->size() == 0)
        gate_.pool(worker_).put(std::move(up_.conn), Clock::now());
    drop_upstream();
    release_slot();
    maybe_refund(ex_.upstream_status, ex_.body_bytes == 0);
    settle(Ending::Complete);
}

}  // namespace ot::gate
