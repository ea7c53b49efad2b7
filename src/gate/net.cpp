#include "gate/net.hpp"

#include <arpa/inet.h>

#include "gate/text.hpp"

namespace ot::gate {

std::optional<IpAddr> parse_ip(std::string_view s) {
    s = trim(s);
    // "[v6]:port" and "v4:port" appear in X-Forwarded-For from some proxies.
    if (!s.empty() && s.front() == '[') {
        const std::size_t close = s.find(']');
        if (close == std::string_view::npos) return std::nullopt;
        s = s.substr(1, close - 1);
    } else if (s.find('.') != std::string_view::npos && s.find(':') != std::string_view::npos &&
               s.find(':') == s.rfind(':')) {
        s = s.substr(0, s.find(':'));
    }
    if (s.empty() || s.size() > 45) return std::nullopt;
    const std::string tmp(s);
    IpAddr a;
    in_addr v4{};
    if (inet_pton(AF_INET, tmp.c_str(), &v4) == 1) {
        a.bytes[10] = 0xff;
        a.bytes[11] = 0xff;
        const auto* b = reinterpret_cast<const std::uint8_t*>(&v4.s_addr);
        for (int i = 0; i < 4; ++i) a.bytes[12 + i] = b[i];
        return a;
    }
    in6_addr v6{};
    if (inet_pton(AF_INET6, tmp.c_str(), &v6) == 1) {
        for (int i = 0; i < 16; ++i) a.bytes[i] = v6.s6_addr[i];
        return a;
    }
    return std::nullopt;
}

std::string ip_to_string(const IpAddr& a) {
    char buf[INET6_ADDRSTRLEN] = {};
    bool v4 = a.bytes[10] == 0xff && a.bytes[11] == 0xff;
    for (int i = 0; i < 10 && v4; ++i) v4 = a.bytes[i] == 0;
    if (v4) {
        in_addr x{};
        auto* b = reinterpret_cast<std::uint8_t*>(&x.s_addr);
        for (int i = 0; i < 4; ++i) b[i] = a.bytes[12 + i];
        inet_ntop(AF_INET, &x, buf, sizeof buf);
    } else {
        in6_addr x{};
        for (int i = 0; i < 16; ++i) x.s6_addr[i] = a.bytes[i];
        inet_ntop(AF_INET6, &x, buf, sizeof buf);
    }
    return buf;
}

bool Cidr::contains(const IpAddr& a) const {
    int bits = prefix;
    for (int i = 0; i < 16 && bits > 0; ++i, bits -= 8) {
        const std::uint8_t mask = bits >= 8 ? 0xff : static_cast<std::uint8_t>(0xff << (8 - bits));
        if ((a.bytes[i] & mask) != (base.bytes[i] & mask)) return false;
    }
    return true;
}

std::optional<Cidr> parse_cidr(std::string_view s) {
    s = trim(s);
    Cidr c;
    c.text = std::string(s);
    const std::size_t slash = s.find('/');
    auto ip = parse_ip(s.substr(0, slash));
    if (!ip) return std::nullopt;
    c.base = *ip;
    const bool v4 = s.substr(0, slash).find(':') == std::string_view::npos;
    if (slash == std::string_view::npos) {
        c.prefix = 128;
        return c;
    }
    auto p = parse_int(s.substr(slash + 1));
    const int max = v4 ? 32 : 128;
    if (!p || *p < 0 || *p > max) return std::nullopt;
    c.prefix = static_cast<int>(*p) + (v4 ? 96 : 0);
    return c;
}

}  // namespace ot::gate
