#include "gate/identity.hpp"

#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/sha.h>

#include <cstdio>
#include <ctime>

#include "gate/jwt.hpp"
#include "gate/text.hpp"

namespace ot::gate {
namespace {

std::string hex16(const unsigned char* d) {
    char buf[17];
    std::snprintf(buf, sizeof buf, "%02x%02x%02x%02x%02x%02x%02x%02x", d[0], d[1], d[2], d[3], d[4], d[5], d[6], d[7]);
    return buf;
}

bool listed(const Config& c, const std::string& hash) {
    for (const Tier& t : c.tiers)
        for (const std::string& k : t.key_hashes)
            if (k == hash) return true;
    return false;
}

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
    unsigned char d[SHA_DIGEST_LENGTH];
    SHA1(reinterpret_cast<const unsigned char*>(s.data()), s.size(), d);
    return hex16(d);
}

std::string keyed_hash(std::string_view key, std::string_view s) {
    // A kept-alive connection asks for the same address again and again.
    thread_local std::string last_key, last_in, last_out;
    if (!last_out.empty() && last_in == s && last_key == key) return last_out;
    unsigned char d[EVP_MAX_MD_SIZE];
    unsigned int n = 0;
    HMAC(EVP_sha1(), key.data(), static_cast<int>(key.size()), reinterpret_cast<const unsigned char*>(s.data()),
         s.size(), d, &n);
    last_key.assign(key.data(), key.size());
    last_in.assign(s.data(), s.size());
    last_out = hex16(d);
    return last_out;
}

std::string upstream_signature(std::string_view key, std::string_view identity, std::string_view tier,
                               std::string_view request_id) {
    std::string msg;
    msg.reserve(identity.size() + tier.size() + request_id.size() + 2);
    msg.append(identity).append(1, '\n').append(tier).append(1, '\n').append(request_id);
    unsigned char d[EVP_MAX_MD_SIZE];
    unsigned int n = 0;
    HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()), reinterpret_cast<const unsigned char*>(msg.data()),
         msg.size(), d, &n);
    static constexpr char kHex[] = "0123456789abcdef";
    std::string out(2 * n, '0');
    for (unsigned int i = 0; i < n; ++i) {
        out[2 * i] = kHex[d[i] >> 4];
        out[2 * i + 1] = kHex[d[i] & 15];
    }
    return out;
}

std::string credential(std::string_view header, std::string_view value) {
    value = trim(value);
    if (!iequals(header, "Authorization")) return std::string(value);
    // RFC 9110: the scheme is case-insensitive ("bearer" is "Bearer");
    // blanks between it and the token are not part of either.
    const std::size_t sp = value.find_first_of(" \t");
    if (sp == std::string_view::npos) return std::string(value);
    std::string out = to_lower(value.substr(0, sp));
    out += ' ';
    out += trim(value.substr(sp));
    return out;
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
    // A credential keys a bucket of its own only when a tier lists it: made-up
    // keys cost nothing to mint, so they are charged to the address.
    std::string tier_hash, claimed_tier;
    if (!c.jwt_hs256_key.empty()) {
        const auto auth = header_value(h, "Authorization");
        const std::string cred = auth ? credential("Authorization", *auth) : std::string();
        if (cred.rfind("bearer ", 0) == 0)
            if (auto claims = verify_hs256(std::string_view(cred).substr(7), c.jwt_hs256_key,
                                           static_cast<std::int64_t>(std::time(nullptr)))) {
                id.hash = keyed_hash(c.hash_secret, "jwt:" + (claims->sub.empty() ? cred : claims->sub));
                id.key = "jwt:" + id.hash;
                claimed_tier = claims->tier;
            }
    }
    for (const std::string& name : c.key_headers) {
        if (!id.key.empty()) break;
        auto v = header_value(h, name);
        if (!v || trim(*v).empty()) continue;
        const std::string cred = credential(name, *v);
        const std::string plain = hash_secret(cred);
        if (!listed(c, plain)) continue;
        tier_hash = plain;
        id.hash = keyed_hash(c.hash_secret, "key:" + cred);
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
    // A verified token names its tier; listed keys and networks are for the rest.
    if (!claimed_tier.empty())
        for (const Tier& t : c.tiers)
            if (t.name == claimed_tier) {
                id.tier = t.name;
                return id;
            }
    for (const Tier& t : c.tiers) {
        bool match = false;
        for (const std::string& k : t.key_hashes) match |= !tier_hash.empty() && k == tier_hash;
        for (const Cidr& n : t.networks) match |= n.contains(id.client);
        if (match) {
            id.tier = t.name;
            break;
        }
    }
    return id;
}

}  // namespace ot::gate
