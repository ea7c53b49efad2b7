#include "gate/upstream_url.hpp"

#include <stdexcept>

#include "gate/net.hpp"
#include "gate/text.hpp"

namespace ot::gate {

Upstream parse_upstream(const std::string& url) {
    if (url.rfind("http://", 0) != 0) throw std::runtime_error("upstream must be an http:// URL: " + url);
    std::string rest = url.substr(7);
    Upstream u;
    const std::size_t slash = rest.find('/');
    if (slash != std::string::npos) {
        u.prefix = rest.substr(slash);
        while (!u.prefix.empty() && u.prefix.back() == '/') u.prefix.pop_back();
        rest = rest.substr(0, slash);
    }
    // A query or fragment has no place in a prefix the target is appended to.
    if (u.prefix.find_first_of("?#") != std::string::npos)
        throw std::runtime_error("upstream URL must not have a query or fragment: " + url);
    if (!rest.empty() && rest.front() == '[') {
        const std::size_t close = rest.find(']');
        if (close == std::string::npos) throw std::runtime_error("upstream: unclosed [ in " + url);
        u.host = rest.substr(1, close - 1);
        const std::string after = rest.substr(close + 1);
        if (after.empty()) u.port = "80";
        else if (after.front() == ':') u.port = after.substr(1);
        else throw std::runtime_error("upstream: junk after ] in " + url);
    } else {
        const std::size_t colon = rest.find(':');
        if (colon == std::string::npos) {
            u.host = rest;
            u.port = "80";
        } else {
            u.host = rest.substr(0, colon);
            u.port = rest.substr(colon + 1);
        }
    }
    const auto port = parse_int(u.port);
    if (u.host.empty() || !port || *port < 1 || *port > 65535 || u.port.front() == '+' || u.port.front() == '-')
        throw std::runtime_error("upstream needs a host and a port 1-65535: " + url);
    const bool bracketed = rest.front() == '[';
    if (bracketed ? !parse_ip(u.host) : u.host.find_first_of("@[] \t\r\n") != std::string::npos)
        throw std::runtime_error("upstream host is not a name or address: " + url);
    return u;
}

boost::asio::ip::tcp::endpoint parse_listen(const std::string& hostport) {
    const std::size_t colon = hostport.rfind(':');
    if (colon == std::string::npos) throw std::runtime_error("listen address must be HOST:PORT: " + hostport);
    std::string host = hostport.substr(0, colon);
    if (!host.empty() && host.front() == '[') {
        if (host.size() < 2 || host.back() != ']') throw std::runtime_error("listen address: unbalanced [ ]: " + hostport);
        host = host.substr(1, host.size() - 2);
    }
    const std::string port_text = hostport.substr(colon + 1);
    const auto port = parse_int(port_text);
    if (!port || *port < 0 || *port > 65535 || port_text.front() == '+' || port_text.front() == '-')
        throw std::runtime_error("bad port in " + hostport);
    boost::system::error_code ec;
    const auto addr = boost::asio::ip::make_address(host.empty() ? "0.0.0.0" : host, ec);
    if (ec) throw std::runtime_error("listen host must be an IP address: " + hostport);
    return {addr, static_cast<unsigned short>(*port)};
}

}  // namespace ot::gate
