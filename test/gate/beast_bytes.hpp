#pragma once
// Beast's own bytes for a message head (up to and including the blank line):
// what the gate's hand-written heads are compared with.
#include <boost/beast/http.hpp>
#include <string>

template <bool IsRequest>
std::string beast_head_bytes(const boost::beast::http::message<IsRequest, boost::beast::http::string_body>& m) {
    boost::beast::http::serializer<IsRequest, boost::beast::http::string_body> sr(m);
    std::string out;
    boost::beast::error_code ec;
    while (!sr.is_done() && !ec) {
        sr.next(ec, [&](boost::beast::error_code&, const auto& buffers) {
            std::size_t n = 0;
            for (const auto b : buffers) {
                out.append(static_cast<const char*>(b.data()), b.size());
                n += b.size();
            }
            sr.consume(n);
        });
    }
    return out.substr(0, out.find("\r\n\r\n") + 4);
}
