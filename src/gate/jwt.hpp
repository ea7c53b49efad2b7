// HS256 JSON Web Tokens (RFC 7519), verified with a configured key: a token
// the gate can verify costs its issuer something to mint, so it may key a
// bucket of its own (by its "sub") and name its tier ("tier" claim).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace ot::gate {

struct JwtClaims {
    std::string sub;   // empty when the token has none
    std::string tier;  // the "tier" claim, if any
};

// The claims of `token` when its header says HS256, its signature verifies
// under `key`, and `now` (Unix seconds) is within its nbf/exp; else nullopt.
std::optional<JwtClaims> verify_hs256(std::string_view token, std::string_view key, std::int64_t now);

}  // namespace ot::gate
