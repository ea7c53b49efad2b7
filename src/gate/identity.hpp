// Who pays: a credential listed in a tier, else the client address. The
// address comes from X-Forwarded-For only through configured trusted proxies,
// and then it is the right-most hop that is not one of them, so a client can
// never pick its own key by sending the header itself.
#pragma once
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gate/config.hpp"
#include "gate/net.hpp"

namespace ot::gate {

using HeaderList = std::vector<std::pair<std::string, std::string>>;

// All values of a header joined with ", " (names compared case-insensitively).
std::optional<std::string> header_value(const HeaderList& h, std::string_view name);

// First 16 hex digits of SHA-1: what tiers[].keys lists, computable by
// operators (`ogc-gate --hash-key`). Never shown on /buckets or in logs.
std::string hash_secret(std::string_view s);

// HMAC-SHA1 (OpenSSL) of `s` under `key`, first 16 hex digits. Bucket keys,
// logs and /buckets use it for addresses and credentials alike: 2^32 IPv4
// addresses, or a weak API key, are too few to hide behind a bare hash.
std::string keyed_hash(std::string_view key, std::string_view s);

// A credential header's value as compared: trimmed, and for Authorization
// with the scheme in lower case ("Bearer x" and "bearer  x" are one key).
std::string credential(std::string_view header, std::string_view value);

struct Identity {
    std::string key;   // bucket key: "key:<hash>" or "ip:<hash>"
    std::string hash;  // the <hash> part, safe to log
    std::string tier;
    IpAddr client;     // never logged raw
};

// X-OT-Signature: HMAC-SHA256 (hex) of "identity\ntier\nrequest id" under `key`,
// so an upstream that checks it knows the gate named this client for this request.
std::string upstream_signature(std::string_view key, std::string_view identity, std::string_view tier,
                               std::string_view request_id);

IpAddr client_address(const HeaderList& h, const IpAddr& peer, const std::vector<Cidr>& trusted);
Identity identify(const HeaderList& h, const IpAddr& peer, const Config& c);

}  // namespace ot::gate
