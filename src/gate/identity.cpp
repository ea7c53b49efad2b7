#include "gate/identity.hpp"

#include <boost/uuid/detail/sha1.hpp>
#include <array>
#include <memory>
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

namespace {
using Digest = std::array<unsigned, 5>;
Digest sha1_of(std::string_view a, std::string_view b) {
    boost::uuids::detail::sha1 sha;
    sha.process_bytes(a.data(), a.size());
    sha.process_bytes(b.data(), b.size());
    boost::uuids::detail::sha1::digest_type d;
    sha.get_digest(d);
    Digest out;
    for (int i = 0; i < 5; ++i) out[i] = d[i];
    return out;
}
}  // namespace

namespace {

std::string digest_bytes(const Digest& d) {
    std::string out;
    for (unsigned w : d)
        for (int i = 3; i >= 0; --i) out.push_back(static_cast<char>((w >> (8 * i)) & 0xff));
    return out;
}

// HMAC's two padded-key blocks, hashed once per key and thread: each hash
// then costs two SHA-1 blocks, not four.
struct HmacKey {
    std::string key;
    boost::uuids::detail::sha1 inner, outer;
    explicit HmacKey(std::string_view k) : key(k) {
        constexpr std::size_t kBlock = 64;
        std::string kb(k);
        if (kb.size() > kBlock) kb = digest_bytes(sha1_of(kb, {}));
        kb.resize(kBlock, '\0');
        std::string ipad(kBlock, '\0'), opad(kBlock, '\0');
        for (std::size_t i = 0; i < kBlock; ++i) {
            ipad[i] = static_cast<char>(kb[i] ^ 0x36);
            opad[i] = static_cast<char>(kb[i] ^ 0x5c);
        }
        inner.process_bytes(ipad.data(), ipad.size());
        outer.process_bytes(opad.data(), opad.size());
    }
};

}  // namespace

std::string keyed_hash(std::string_view key, std::string_view s) {
    thread_local std::unique_ptr<HmacKey> k;
    // A kept-alive connection asks for the same address again and again.
    thread_local std::string last_in, last_out;
    if (!k || k->key != key) {
        k = std::make_unique<HmacKey>(key);
        last_in.clear();
        last_out.clear();
    }
    if (!last_out.empty() && last_in == s) return last_out;
    boost::uuids::detail::sha1 inner = k->inner;
    inner.process_bytes(s.data(), s.size());
    boost::uuids::detail::sha1::digest_type di;
    inner.get_digest(di);
    Digest d1;
    for (int i = 0; i < 5; ++i) d1[i] = di[i];
    const std::string in_bytes = digest_bytes(d1);
    boost::uuids::detail::sha1 outer = k->outer;
    outer.process_bytes(in_bytes.data(), in_bytes.size());
    boost::uuids::detail::sha1::digest_type d;
    outer.get_digest(d);
    char buf[17];
    std::snprintf(buf, sizeof buf, "%08x%08x", d[0], d[1]);
    last_in.assign(s.data(), s.size());
    last_out = buf;
    return last_out;
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
        // Formatting the address (inet_ntop) cost more than the hash it
        // keys, which keyed_hash already caches: remember the last one.
        thread_local IpAddr last_ip;
        thread_local std::string last_secret, last_hash;
        if (last_hash.empty() || !(last_ip == id.client) || last_secret != c.hash_secret) {
            last_hash = keyed_hash(c.hash_secret, ip_to_string(id.client));
            last_ip = id.client;
            last_secret = c.hash_secret;
        }
        id.hash = last_hash;
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
