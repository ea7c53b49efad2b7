#include <gtest/gtest.h>

#include "gate/buckets.hpp"
#include "gate/decision.hpp"
#include "gate/identity.hpp"
#include "gate/ogc_error.hpp"

using namespace ot::gate;
using ot::core::SpendOutcome;
using ot::core::SpendResult;

namespace {
std::string header(const HeaderList& h, const std::string& k) { return header_value(h, k).value_or(""); }
const std::string kMap =
    "/?SERVICE=WMS&REQUEST=GetMap&VERSION=1.1.1&SRS=EPSG:4326&BBOX=0,0,1,1&LAYERS=pts&WIDTH=256&HEIGHT=256";
}  // namespace

TEST(Decide, PassForwardsUnchangedWithBudgetHeaders) {
    Config c;
    HttpIn in{"GET", kMap, "", ""};
    auto a = assess(in, c);
    SpendResult s{SpendOutcome::Allowed, 0, 990.4, 0, 0.1};
    auto d = decide(in, a, c.tiers[0], s, c);
    EXPECT_TRUE(d.forward);
    EXPECT_EQ(d.target, kMap);
    EXPECT_EQ(d.verdict, "pass");
    EXPECT_EQ(header(d.headers, "X-RateLimit-Remaining"), "990");
    EXPECT_EQ(header(d.headers, "RateLimit-Policy"), "\"public\";q=1000;w=10");
    EXPECT_EQ(header(d.headers, "RateLimit"), "\"public\";r=990;t=1");
    EXPECT_GT(d.charged, 0);
}

TEST(Decide, CapRefusalNeedsNoBudget) {
    Config c;
    HttpIn in{"GET", kMap + "0", "", ""};  // HEIGHT=2560 ... WIDTH 256: fine; make it big instead
    in.target = "/?SERVICE=WMS&REQUEST=GetMap&VERSION=1.1.1&WIDTH=99999&HEIGHT=99999";
    auto a = assess(in, c);
    EXPECT_FALSE(a.needs_budget(false));
    EXPECT_TRUE(a.needs_budget(true));
    auto d = decide(in, a, c.tiers[0], std::nullopt, c);
    EXPECT_FALSE(d.forward);
    EXPECT_EQ(d.verdict, "cap");
    EXPECT_EQ(d.response.status, 200);
    EXPECT_EQ(d.response.content_type, "application/vnd.ogc.se_xml");
    EXPECT_NE(d.response.body.find("<ServiceExceptionReport version=\"1.1.1\">"), std::string::npos);
}

TEST(Decide, ThrottledIs429WithRetryAfter) {
    Config c;
    HttpIn in{"GET", kMap, "", ""};
    auto a = assess(in, c);
    SpendResult s{SpendOutcome::Refused, 0, 0.4, 2.2, 9.0};
    auto d = decide(in, a, c.tiers[0], s, c);
    EXPECT_FALSE(d.forward);
    EXPECT_EQ(d.response.status, 429);
    EXPECT_EQ(header(d.response.headers, "Retry-After"), "3");
    EXPECT_EQ(header(d.response.headers, "X-RateLimit-Remaining"), "0");
    EXPECT_NE(d.response.body.find("Retry after 3 s"), std::string::npos);
}

TEST(Decide, RetryAfterAtLeastOne) {
    Config c;
    HttpIn in{"GET", kMap, "", ""};
    auto d = decide(in, assess(in, c), c.tiers[0], SpendResult{SpendOutcome::Refused, 0, 0, 0.001, 0}, c);
    EXPECT_EQ(header(d.response.headers, "Retry-After"), "1");
}

TEST(Decide, NeverFitsHasNoRetryAfter) {
    Config c;
    HttpIn in{"GET", kMap, "", ""};
    auto d = decide(in, assess(in, c), c.tiers[0], SpendResult{SpendOutcome::NeverFits, 0, 1000, 0, 0}, c);
    EXPECT_FALSE(d.forward);
    EXPECT_EQ(d.verdict, "never_fits");
    EXPECT_FALSE(header_value(d.response.headers, "Retry-After"));
    EXPECT_NE(d.response.body.find("never succeed"), std::string::npos);
}

TEST(Decide, ShadowNeverRefusesAndForwardsAsSent) {
    Config c;
    c.shadow = true;
    HttpIn big{"GET", "/?SERVICE=WFS&REQUEST=GetFeature&VERSION=2.0.0&COUNT=99999", "", ""};
    auto a = assess(big, c);
    auto d = decide(big, a, c.tiers[0], SpendResult{SpendOutcome::Allowed, 0, 5, 0, 0}, c);
    EXPECT_TRUE(d.forward);
    EXPECT_EQ(d.verdict, "shadow_cap");
    EXPECT_EQ(d.target, big.target);
    HttpIn in{"GET", kMap, "", ""};
    auto t = decide(in, assess(in, c), c.tiers[0], SpendResult{SpendOutcome::Refused, 0, 0, 3, 3}, c);
    EXPECT_TRUE(t.forward);
    EXPECT_EQ(t.verdict, "shadow_throttled");
}

TEST(Decide, RewrittenTargetForwarded) {
    Config c;
    HttpIn in{"GET", "/?SERVICE=WFS&REQUEST=GetFeature&VERSION=1.0.0&TYPENAME=pts", "", ""};
    auto d = decide(in, assess(in, c), c.tiers[0], SpendResult{SpendOutcome::Allowed, 0, 5, 0, 0}, c);
    EXPECT_TRUE(d.forward);
    EXPECT_EQ(d.verdict, "rewritten");
    EXPECT_EQ(d.target, in.target + "&MAXFEATURES=1000");
}

TEST(Render, EachDialect) {
    OgcError e{ErrorKind::OverCap, "InvalidParameterValue", "WIDTH", "too <big> & wide"};
    auto w111 = render_error(Service::Wms, Dialect::Wms111, e, 200);
    EXPECT_EQ(w111.status, 200);
    EXPECT_EQ(w111.body.rfind("<?xml", 0), 0u);
    EXPECT_NE(w111.body.find("too &lt;big&gt; &amp; wide"), std::string::npos);
    auto w130 = render_error(Service::Wms, Dialect::Wms130, e, 200);
    EXPECT_EQ(w130.content_type, "text/xml");
    EXPECT_NE(w130.body.find("xmlns=\"http://www.opengis.net/ogc\""), std::string::npos);
    auto f100 = render_error(Service::Wfs, Dialect::Wfs100, e, 200);
    EXPECT_NE(f100.body.find("version=\"1.2.0\""), std::string::npos);
    auto f110 = render_error(Service::Wfs, Dialect::Wfs110, e, 200);
    EXPECT_NE(f110.body.find("<ows:ExceptionReport xmlns:ows=\"http://www.opengis.net/ows\""), std::string::npos);
    auto f200 = render_error(Service::Wfs, Dialect::Ows11, e, 400);
    EXPECT_EQ(f200.status, 400);
    EXPECT_EQ(f200.content_type, "application/xml");
    EXPECT_NE(f200.body.find("ows/1.1\" version=\"2.0.0\""), std::string::npos);
    EXPECT_NE(f200.body.find("locator=\"WIDTH\""), std::string::npos);
    auto wmts = render_error(Service::Wmts, Dialect::Ows11, e, 200);
    EXPECT_NE(wmts.body.find("version=\"1.0.0\""), std::string::npos);
    auto api = render_error(Service::Features, Dialect::OgcApi, e, 200);
    EXPECT_EQ(api.status, 400);
    EXPECT_EQ(api.content_type, "application/problem+json");
    EXPECT_NE(api.body.find("\"detail\":\"too <big> & wide\""), std::string::npos);
    OgcError down{ErrorKind::UpstreamDown, "NoApplicableCode", "", "down"};
    EXPECT_EQ(render_error(Service::Wms, Dialect::Wms130, down, 200).status, 502);
    OgcError slow{ErrorKind::UpstreamTimeout, "NoApplicableCode", "", "slow"};
    EXPECT_EQ(render_error(Service::Wfs, Dialect::Ows11, slow, 200).status, 504);
    OgcError rl{ErrorKind::RateLimited, "NoApplicableCode", "", "later"};
    EXPECT_EQ(render_error(Service::Tiles, Dialect::Plain, rl, 200).status, 429);
}

TEST(Identity, ApiKeyHashedNeverRaw) {
    Config c;
    c.hash_secret = "s";
    c.tiers.push_back({"partner", {5000, 500}, {hash_secret("bearer secret-token")}, {}});
    HeaderList h{{"authorization", "Bearer secret-token"}};
    auto id = identify(h, *parse_ip("10.0.0.1"), c);
    EXPECT_EQ(id.key, "key:" + keyed_hash("s", "key:bearer secret-token"));
    EXPECT_EQ(id.tier, "partner");
    EXPECT_EQ(id.key.find("secret"), std::string::npos);
    // Never the bare SHA-1 of the secret: that one is in the config file.
    EXPECT_EQ(id.key.find(hash_secret("bearer secret-token")), std::string::npos);
    EXPECT_EQ(hash_secret("abc"), "a9993e364706816a");  // SHA-1("abc") prefix
}

TEST(Identity, SchemeAndHeaderNameCaseInsensitive) {
    Config c;
    c.tiers.push_back({"partner", {5000, 500}, {hash_secret("bearer t1")}, {}});
    const auto a = identify({{"AUTHORIZATION", "BEARER   t1"}}, *parse_ip("10.0.0.1"), c);
    const auto b = identify({{"authorization", "Bearer t1"}}, *parse_ip("10.0.0.2"), c);
    EXPECT_EQ(a.key, b.key);
    EXPECT_EQ(a.tier, "partner");
    EXPECT_NE(identify({{"Authorization", "Bearer T1"}}, *parse_ip("10.0.0.1"), c).tier, "partner");
}

TEST(Identity, MadeUpCredentialsPayFromTheAddress) {
    Config c;
    c.tiers.push_back({"partner", {5000, 500}, {hash_secret("k1")}, {}});
    const auto ip = identify({}, *parse_ip("192.0.2.9"), c);
    for (const char* k : {"k2", "Bearer zzz", "whatever"}) {
        EXPECT_EQ(identify({{"X-Api-Key", k}}, *parse_ip("192.0.2.9"), c).key, ip.key) << k;
        EXPECT_EQ(identify({{"Authorization", k}}, *parse_ip("192.0.2.9"), c).key, ip.key) << k;
    }
    // A listed key behind an unlisted one still counts.
    const auto both = identify({{"Authorization", "junk"}, {"X-Api-Key", "k1"}}, *parse_ip("192.0.2.9"), c);
    EXPECT_EQ(both.tier, "partner");
    EXPECT_NE(both.key, ip.key);
}

TEST(Identity, ForwardedForOnlyFromTrustedProxy) {
    Config c;
    c.trusted_proxies = {*parse_cidr("10.0.0.0/8")};
    HeaderList spoof{{"X-Forwarded-For", "1.2.3.4"}};
    EXPECT_EQ(ip_to_string(client_address(spoof, *parse_ip("192.0.2.7"), c.trusted_proxies)), "192.0.2.7");
    HeaderList chain{{"X-Forwarded-For", "6.6.6.6, 203.0.113.9, 10.1.1.1"}};
    EXPECT_EQ(ip_to_string(client_address(chain, *parse_ip("10.0.0.2"), c.trusted_proxies)), "203.0.113.9");
    HeaderList junk{{"X-Forwarded-For", "not-an-ip, 10.1.1.1"}};
    EXPECT_EQ(ip_to_string(client_address(junk, *parse_ip("10.0.0.2"), c.trusted_proxies)), "10.1.1.1");
}

TEST(Identity, TiersByKeyAndNetwork) {
    Config c;
    Tier partner{"partner", {5000, 500}, {hash_secret("k1")}, {*parse_cidr("198.51.100.0/24")}};
    c.tiers.push_back(partner);
    EXPECT_EQ(identify({{"X-Api-Key", "k1"}}, *parse_ip("1.1.1.1"), c).tier, "partner");
    EXPECT_EQ(identify({}, *parse_ip("198.51.100.20"), c).tier, "partner");
    EXPECT_EQ(identify({}, *parse_ip("1.1.1.1"), c).tier, "public");
}

TEST(Net, CidrV4V6) {
    EXPECT_TRUE(parse_cidr("127.0.0.0/8")->contains(*parse_ip("127.4.5.6")));
    EXPECT_FALSE(parse_cidr("127.0.0.0/8")->contains(*parse_ip("128.0.0.1")));
    EXPECT_TRUE(parse_cidr("2001:db8::/32")->contains(*parse_ip("2001:db8::1")));
    EXPECT_FALSE(parse_cidr("10.0.0.0/33"));
    EXPECT_EQ(ip_to_string(*parse_ip("[::1]:80")), "::1");
    EXPECT_EQ(ip_to_string(*parse_ip("1.2.3.4:5678")), "1.2.3.4");
}

TEST(Buckets, SpendsRefusesAndStaysBounded) {
    BucketTable t(64);
    ot::core::Budget b{10, 1};
    EXPECT_EQ(t.spend("a", 6, b, 1'000'000).outcome, SpendOutcome::Allowed);
    EXPECT_EQ(t.spend("a", 6, b, 1'000'000).outcome, SpendOutcome::Refused);
    EXPECT_EQ(t.spend("a", 11, b, 1'000'000).outcome, SpendOutcome::NeverFits);
    for (int i = 0; i < 10000; ++i) t.spend("k" + std::to_string(i), 1, b, 2'000'000 + i);
    EXPECT_LE(t.size(), 64u);
    auto snap = t.snapshot(3'000'000, 1000);
    EXPECT_EQ(snap.size(), t.size());
}

TEST(Config, ProblemsFound) {
    Config c;
    EXPECT_EQ(config_problem(c), "");
    c.default_tier = "nope";
    EXPECT_NE(config_problem(c), "");
    Config d;
    d.tiers[0].budget.rate = 0;
    EXPECT_NE(config_problem(d), "");
}

// A connection hands decide() its previous answer's header pairs to write the
// rate-limit set into: whatever they held, the answer is the same as without.
TEST(Decide, SpareHeaderListGivesTheSameHeaders) {
    Config c;
    HttpIn in{"GET", kMap, "", ""};
    auto a = assess(in, c);
    const SpendResult pass{SpendOutcome::Allowed, 0, 990.4, 0, 0.1};
    const SpendResult refused{SpendOutcome::Refused, 0, 0.4, 2.2, 9.0};
    const SpendResult never{SpendOutcome::NeverFits, 0, 12.0, 0, 0};
    const std::vector<HeaderList> spares{
        {},
        {{"a", "b"}},
        {{"Cache-Control", "no-store"}, {"a-rather-long-header-name", std::string(100, 'x')}},
        HeaderList(9, {"X-Some-Long-Header-Name", "a value longer than sixteen bytes"}),
        ratelimit_headers("another-tier.cell", {5, 0.5}, 1, 2),
    };
    for (const SpendResult& s : {pass, refused, never})
        for (HeaderList spare : spares) {
            const Decision plain = decide(in, a, c.tiers[0], s, c);
            const Decision reused = decide(in, a, c.tiers[0], s, c, nullptr, &spare);
            EXPECT_EQ(plain.headers, reused.headers);
            EXPECT_EQ(plain.response.headers, reused.response.headers);
            EXPECT_EQ(plain.response.body, reused.response.body);
            EXPECT_EQ(plain.verdict, reused.verdict);
        }
    HeaderList h(7, {"Retry-After", "1"});
    ratelimit_headers_into(h, "public", {1000, 100}, 990.4, 0.1);
    EXPECT_EQ(h, ratelimit_headers("public", {1000, 100}, 990.4, 0.1));
}
