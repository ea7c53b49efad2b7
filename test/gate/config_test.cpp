#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <stdexcept>
#include <string>

#include "gate/config.hpp"

using namespace ot::gate;

namespace {
// Writes `yaml` to a temporary file and loads it over the defaults.
Config load(const std::string& yaml) {
    char path[] = "/tmp/gate_config_testXXXXXX";
    const int fd = mkstemp(path);
    if (fd < 0) throw std::runtime_error("mkstemp");
    std::ofstream(path) << yaml;
    try {
        Config c = load_config_file(path, Config{});
        std::remove(path);
        return c;
    } catch (...) {
        std::remove(path);
        throw;
    }
}
}  // namespace

TEST(ConfigFile, ReadsEverySection) {
    Config c = load(
        "listen: 127.0.0.1:9000\n"
        "mode: shadow\n"
        "exception_status: 400\n"
        "caps: {max_pixels: 1000, max_side: 50, max_features: 7, features_over_cap: clamp, max_zoom: 12}\n"
        "limits: {body_bytes: 4096, upstream_timeout: 2.5, max_keys: 64}\n"
        "identity: {key_headers: [X-Key], trusted_proxies: [10.0.0.0/8, '::1']}\n"
        "default_tier: gold\n"
        "tiers:\n"
        "  - {name: gold, rate: 5, burst: 50, keys: [abc], networks: [192.0.2.0/24]}\n"
        "cost: {density_per_km2: 0.5, other: 2, weights: {map: {per_megapixel: 9}}}\n");
    EXPECT_EQ(c.listen, "127.0.0.1:9000");
    EXPECT_TRUE(c.shadow);
    EXPECT_EQ(c.exception_status, 400);
    EXPECT_EQ(c.caps.max_pixels, 1000);
    EXPECT_EQ(c.caps.max_side, 50);
    EXPECT_TRUE(c.caps.clamp_features);
    EXPECT_EQ(c.caps.max_zoom, 12);
    EXPECT_EQ(c.limits.body_bytes, 4096u);
    EXPECT_DOUBLE_EQ(c.limits.upstream_timeout_s, 2.5);
    EXPECT_EQ(c.key_headers, std::vector<std::string>{"X-Key"});
    ASSERT_EQ(c.trusted_proxies.size(), 2u);
    ASSERT_EQ(c.tiers.size(), 1u);
    EXPECT_EQ(c.tier("gold").budget.capacity, 50);
    EXPECT_EQ(c.tier("gold").key_hashes, std::vector<std::string>{"abc"});
    EXPECT_DOUBLE_EQ(c.pricing.model.density_per_km2, 0.5);
    EXPECT_DOUBLE_EQ(c.pricing.model.of(ot::core::CostClass::Map).per_megapixel, 9);
    EXPECT_DOUBLE_EQ(c.pricing.model.of(ot::core::CostClass::Map).fixed, 2);  // untouched default
}

TEST(ConfigFile, EmptyFileKeepsDefaults) {
    Config c = load("");
    EXPECT_EQ(c.caps.max_features, 1000);
}

TEST(ConfigFile, RejectsMistakes) {
    for (const char* bad : {
             "max_pixel: 5\n",                                 // unknown key (typo)
             "caps: {max_pixels: -1}\n",                       // negative cap
             "caps: {max_pixels: lots}\n",                     // wrong type
             "caps: {features_over_cap: maybe}\n",             // bad enum
             "mode: loud\n",                                   // bad enum
             "tiers: [{name: a, rate: 1}]\ndefault_tier: a\n", // missing burst
             "tiers: [{name: a, rate: 1, burst: 5}]\n",        // default tier 'public' missing
             "identity: {trusted_proxies: [not-an-ip]}\n",     // bad CIDR
             "cost: {weights: {maps: {fixed: 1}}}\n",          // unknown class
             "cost: {weights: {map: {fixed: -1}}}\n",          // negative weight
             "exception_status: 500\n",
             "[unclosed\n",                                    // not YAML
         }) {
        EXPECT_THROW(load(bad), std::runtime_error) << bad;
    }
}

TEST(ConfigFile, OperationsPassThroughAndCgi) {
    const Config c = load(
        "operations:\n"
        "  mapserver_cgi: allow\n"
        "  passthrough:\n"
        "    - {service: wfs, request: Transaction, cost: 25}\n"
        "    - {service: SOS, request: '*', cost: 3}\n"
        "cost: {coverage_default_megapixels: 4}\n");
    EXPECT_TRUE(c.caps.mapserver_cgi);
    ASSERT_EQ(c.caps.passthrough.size(), 2u);
    EXPECT_EQ(c.caps.passthrough[0].service, "WFS");
    EXPECT_EQ(c.caps.passthrough[0].request, "TRANSACTION");
    EXPECT_EQ(c.caps.passthrough[0].cost, 25);
    EXPECT_EQ(c.caps.coverage_default_megapixels, 4);
    EXPECT_FALSE(Config{}.caps.mapserver_cgi);
    EXPECT_THROW(load("operations: {mapserver_cgi: yes-please}\n"), std::runtime_error);
    EXPECT_THROW(load("operations: {passthrough: [{service: WFS, request: Transaction}]}\n"), std::runtime_error);
    EXPECT_THROW(load("operations: {passthrough: [{service: WFS, request: X, cost: -1}]}\n"), std::runtime_error);
    EXPECT_THROW(load("operations: {pass_through: []}\n"), std::runtime_error);
}
