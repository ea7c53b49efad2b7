#include <gtest/gtest.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <ctime>
#include <string>

#include "gate/config.hpp"
#include "gate/identity.hpp"
#include "gate/jwt.hpp"

using namespace ot::gate;

namespace {

std::string b64url(const std::string& s) {
    std::string out(4 * ((s.size() + 2) / 3) + 1, '\0');
    const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                  reinterpret_cast<const unsigned char*>(s.data()), static_cast<int>(s.size()));
    out.resize(static_cast<std::size_t>(n));
    while (!out.empty() && out.back() == '=') out.pop_back();
    for (char& c : out) c = c == '+' ? '-' : c == '/' ? '_' : c;
    return out;
}

std::string token(const std::string& header, const std::string& payload, const std::string& key) {
    const std::string signing = b64url(header) + "." + b64url(payload);
    unsigned char mac[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()), reinterpret_cast<const unsigned char*>(signing.data()),
         signing.size(), mac, &len);
    return signing + "." + b64url(std::string(reinterpret_cast<char*>(mac), len));
}

const std::string kHs = R"({"alg":"HS256","typ":"JWT"})";

}  // namespace

TEST(Jwt, VerifiesHs256Only) {
    const auto t = token(kHs, R"({"sub":"alice","tier":"partner","exp":4102444800})", "k");
    auto c = verify_hs256(t, "k", 1700000000);
    ASSERT_TRUE(c);
    EXPECT_EQ(c->sub, "alice");
    EXPECT_EQ(c->tier, "partner");
    EXPECT_FALSE(verify_hs256(t, "other-key", 1700000000));
    EXPECT_FALSE(verify_hs256(t, "k", 4102444800));  // expired
    EXPECT_FALSE(verify_hs256(token(R"({"alg":"none"})", R"({"sub":"a"})", "k"), "k", 0));
    EXPECT_FALSE(verify_hs256(token(R"({"alg":"HS512"})", R"({"sub":"a"})", "k"), "k", 0));
    EXPECT_FALSE(verify_hs256(token(kHs, R"({"sub":"a","nbf":2000})", "k"), "k", 1000));
    std::string tampered = t;
    tampered[tampered.find('.') + 2] ^= 1;
    EXPECT_FALSE(verify_hs256(tampered, "k", 0));
    for (const char* junk : {"", ".", "a.b", "a.b.c.d", "!!.??.**", "e30.e30."})
        EXPECT_FALSE(verify_hs256(junk, "k", 0)) << junk;
    EXPECT_FALSE(verify_hs256(t, "", 0));
}

TEST(Jwt, VerifiedTokenKeysItsOwnBucketAndTier) {
    Config c;
    c.hash_secret = "s";
    c.jwt_hs256_key = "k";
    c.tiers.push_back({"partner", {5000, 500}, {}, {}});
    const auto t = token(kHs, R"({"sub":"alice","tier":"partner"})", "k");
    const auto a = identify({{"authorization", "bearer " + t}}, *parse_ip("192.0.2.1"), c);
    EXPECT_EQ(a.key, "jwt:" + keyed_hash("s", "jwt:alice"));
    EXPECT_EQ(a.tier, "partner");
    // Another token for the same subject shares the bucket; a forged one pays from the address.
    const auto again = identify({{"Authorization", "Bearer " + token(kHs, R"({"sub":"alice","iat":1})", "k")}},
                                *parse_ip("192.0.2.2"), c);
    EXPECT_EQ(again.key, a.key);
    EXPECT_EQ(again.tier, "public");
    const auto forged = identify({{"Authorization", "Bearer " + token(kHs, R"({"sub":"alice"})", "guess")}},
                                 *parse_ip("192.0.2.1"), c);
    EXPECT_EQ(forged.key, identify({}, *parse_ip("192.0.2.1"), c).key);
}
