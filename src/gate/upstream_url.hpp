// The two addresses an operator writes: the upstream URL and a listen
// address. Pure (no sockets), unit-tested and fuzzed with the other parsers.
#pragma once
#include <boost/asio/ip/tcp.hpp>
#include <string>

namespace ot::gate {

struct Upstream {
    std::string host;
    std::string port;
    std::string prefix;  // path prefix, "" for none
};
// "http://host:port[/prefix]"; throws std::runtime_error.
Upstream parse_upstream(const std::string& url);
// "HOST:PORT" or "[v6]:PORT" with HOST an IP address (empty: all IPv4);
// throws std::runtime_error.
boost::asio::ip::tcp::endpoint parse_listen(const std::string& hostport);

}  // namespace ot::gate
