#include "gate/identity.hpp"

#include <boost/uuid/detail/sha1.hpp>
#include <cstdio>

#include "gate/text.hpp"

namespace ot::gate {
namespace {

bool trusted_hop(const IpAddr& a, const std::vector<Cidr>& trusted) {
    for (const Cidr& c : trusted)
        if (c.contains(a)) return true;
    return false;
}

}  // namespace

std::optional<std::string> header_value(const HeaderList& h, std::string_view name) {
    std::optional<std::string> out;
    for (const auto& [k, v] : h) {
        if (!iequals(k, name)) continue;
        if (out) *out += ", " + v;
        else out = v;
    }
    return out;
}

std::string hash_secret(std::string_view s) {
    boost::uuids::detail::sha1 sha;
    sha.process_bytes(s.data(), s.size());
    boost::uuids::detail::sha1::digest_type d;
    sha.get_digest(d);
    char buf[17];
    std::snprintf(buf, sizeof buf, "%08x%08x", d[0], d[1]);
    return buf;
}

IpAddr client_address(const HeaderList& h, const IpAddr& peer, const std::vector<Cidr>& trusted) {
    if (!trusted_hop(peer, trusted)) return peer;
    const auto xff = header_value(h, "X-Forwarded-For");
    if (!xff) return peer;
    IpAddr last = peer;
    const auto hops = split(*xff, ',');
    for (std::size_t i = hops.size(); i-- > 0;) {
        auto a = parse_ip(hops[i]);
        // Junk can only come from the untrusted side: the hop after it (a
        // trusted proxy, or the peer) is the best we know.
        if (!a) return last;
        if (!trusted_hop(*a, trusted)) return *a;
        last = *a;
    }
    return last;
}

Identity identify(const HeaderList& h, const IpAddr& peer, const Config& c) {
    Identity id;
    id.client = client_address(h, peer, c.trusted_proxies);
    for (const std::string& name : c.key_headers) {
        auto v = header_value(h, name);
        if (!v || trim(*v).empty()) continue;
        id.hash = hash_secret(trim(*v));
        id.key = "key:" + id.hash;
        break;
    }
    if (id.key.empty()) {
        id.hash = hash_secret(ip_to_string(id.client));
        id.key = "ip:" + id.hash;
    }
    id.tier = c.default_tier;
    for (const Tier& t : c.tiers) {
        bool match = false;
        for (const std::string& k : t.key_hashes) match |= k == id.hash;
        for (const Cidr& n : t.networks) match |= n.contains(id.client);
        if (match) {
            id.tier = t.name;
            break;
        }
    }
    return id;
}

}  // namespace ot::gate
