// IP addresses and CIDR blocks (v4 and v6), without sockets.
#pragma once
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace ot::gate {

struct IpAddr {
    std::array<std::uint8_t, 16> bytes{};  // v4 stored as ::ffff:a.b.c.d
    bool operator==(const IpAddr& o) const { return bytes == o.bytes; }
};

std::optional<IpAddr> parse_ip(std::string_view s);
std::string ip_to_string(const IpAddr& a);

struct Cidr {
    IpAddr base;
    int prefix = 128;  // over the 128-bit form
    std::string text;
    bool contains(const IpAddr& a) const;
};

std::optional<Cidr> parse_cidr(std::string_view s);

}  // namespace ot::gate
