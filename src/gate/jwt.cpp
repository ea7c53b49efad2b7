#include "gate/jwt.hpp"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <nlohmann/json.hpp>
#include <vector>

namespace ot::gate {
namespace {

// base64url without padding (RFC 7515 §2), through OpenSSL's decoder.
std::optional<std::string> b64url(std::string_view s) {
    if (s.empty() || s.size() > 8192 || s.size() % 4 == 1) return std::nullopt;
    std::string t(s);
    for (char& c : t) {
        if (c == '-') c = '+';
        else if (c == '_') c = '/';
        else if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'))) return std::nullopt;
    }
    const std::size_t pad = (4 - t.size() % 4) % 4;
    t.append(pad, '=');
    std::vector<unsigned char> out(t.size() / 4 * 3 + 1);
    const int n = EVP_DecodeBlock(out.data(), reinterpret_cast<const unsigned char*>(t.data()), static_cast<int>(t.size()));
    if (n < 0 || static_cast<std::size_t>(n) < pad) return std::nullopt;
    return std::string(reinterpret_cast<const char*>(out.data()), static_cast<std::size_t>(n) - pad);
}

}  // namespace

std::optional<JwtClaims> verify_hs256(std::string_view token, std::string_view key, std::int64_t now) {
    if (key.empty()) return std::nullopt;
    const std::size_t d1 = token.find('.');
    const std::size_t d2 = d1 == std::string_view::npos ? d1 : token.find('.', d1 + 1);
    if (d2 == std::string_view::npos || token.find('.', d2 + 1) != std::string_view::npos) return std::nullopt;
    const auto header = b64url(token.substr(0, d1));
    const auto payload = b64url(token.substr(d1 + 1, d2 - d1 - 1));
    const auto sig = b64url(token.substr(d2 + 1));
    if (!header || !payload || !sig || sig->size() != 32) return std::nullopt;
    // Only HS256: "none" and algorithm confusion are refused by construction.
    const auto h = nlohmann::json::parse(*header, nullptr, false);
    if (!h.is_object() || h.value("alg", std::string()) != "HS256") return std::nullopt;
    unsigned char mac[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    const std::string_view signed_part = token.substr(0, d2);
    HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()), reinterpret_cast<const unsigned char*>(signed_part.data()),
         signed_part.size(), mac, &len);
    if (len != 32 || CRYPTO_memcmp(mac, sig->data(), 32) != 0) return std::nullopt;
    const auto p = nlohmann::json::parse(*payload, nullptr, false);
    if (!p.is_object()) return std::nullopt;
    if (auto it = p.find("exp"); it != p.end() && (!it->is_number() || it->get<double>() <= static_cast<double>(now)))
        return std::nullopt;
    if (auto it = p.find("nbf"); it != p.end() && (!it->is_number() || it->get<double>() > static_cast<double>(now)))
        return std::nullopt;
    JwtClaims c;
    if (auto it = p.find("sub"); it != p.end() && it->is_string()) c.sub = it->get<std::string>();
    if (auto it = p.find("tier"); it != p.end() && it->is_string()) c.tier = it->get<std::string>();
    return c;
}

}  // namespace ot::gate
