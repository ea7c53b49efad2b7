#include "gate/config.hpp"

#include <yaml-cpp/yaml.h>

#include <cctype>
#include <cstring>
#include <set>
#include <stdexcept>

#include "gate/cell_config.hpp"
#include "gate/kvp.hpp"
#include "gate/text.hpp"

namespace ot::gate {
namespace {

[[noreturn]] void bad(const std::string& where, const std::string& why) {
    throw std::runtime_error(where + ": " + why);
}

template <typename T>
void get(const YAML::Node& n, const char* key, T& out, const std::string& where) {
    const YAML::Node v = n[key];
    if (!v) return;
    try {
        out = v.as<T>();
    } catch (const YAML::Exception&) {
        bad(where + "." + key, "has the wrong type");
    }
}

std::vector<Cidr> cidrs(const YAML::Node& n, const std::string& where) {
    std::vector<Cidr> out;
    if (!n) return out;
    if (!n.IsSequence()) bad(where, "must be a list of addresses or CIDR blocks");
    for (const auto& e : n) {
        auto c = parse_cidr(e.as<std::string>());
        if (!c) bad(where, "'" + e.as<std::string>() + "' is not an address or CIDR block");
        out.push_back(*c);
    }
    return out;
}

void check_keys(const YAML::Node& n, const std::set<std::string>& allowed, const std::string& where) {
    if (!n) return;
    if (!n.IsMap()) bad(where, "must be a mapping");
    for (const auto& kv : n) {
        const std::string k = kv.first.as<std::string>();
        if (!allowed.count(k)) bad(where, "unknown key '" + k + "'");
    }
}

core::CostClass class_named(const std::string& name, const std::string& where) {
    for (int i = 0; i < core::kCostClasses; ++i) {
        const auto c = static_cast<core::CostClass>(i);
        if (name == core::cost_class_name(c)) return c;
    }
    bad(where, "unknown cost class '" + name + "' (" + std::string(core::cost_class_list()) + ")");
}

}  // namespace

const Tier& Config::tier(const std::string& name) const {
    for (const Tier& t : tiers)
        if (t.name == name) return t;
    return tiers.front();
}

namespace {
bool all_of_chars(const std::string& s, const char* extra) {
    for (char ch : s)
        if (!std::isalnum(static_cast<unsigned char>(ch)) && !std::strchr(extra, ch)) return false;
    return !s.empty();
}

std::string to_upstream_problem(const Config& c) {
    const ToUpstream& u = c.to_upstream;
    if (u.header.empty() && u.param.empty()) return u.hmac_key.empty() ? "" : "identity.to_upstream.hmac_key needs a header";
    if (c.hash_secret.empty())
        return "identity.to_upstream needs identity.hash_secret: without it every start (and every gate) names the "
               "same client differently upstream";
    if (!u.param.empty() && (u.param.size() > 40 || !all_of_chars(u.param, "_") ||
                             known_ogc_name(to_upper(u.param)) || mapserver_cgi_name(to_upper(u.param))))
        return "identity.to_upstream.param must be a name of letters, digits and '_' that no OGC or MapServer "
               "request uses (e.g. OT_CLIENT)";
    if (!u.header.empty()) {
        if (!all_of_chars(u.header, "-")) return "identity.to_upstream.header must be a header name (letters, digits, '-')";
        for (const char* reserved : {"Host", "Authorization", "Cookie", "X-Request-Id", "X-Forwarded-For", "X-OT-Tier",
                                     "X-OT-Signature", "Content-Length", "Content-Type", "Transfer-Encoding"})
            if (iequals(u.header, reserved)) return "identity.to_upstream.header cannot be " + std::string(reserved);
        for (const std::string& k : c.key_headers)
            if (iequals(u.header, k)) return "identity.to_upstream.header cannot be a key header (" + k + ")";
    }
    return "";
}
}  // namespace

std::string config_problem(const Config& c) {
    if (c.tiers.empty()) return "at least one tier is needed";
    if (c.buckets.store == StoreConfig::Kind::Redis && c.hash_secret.empty())
        return "buckets.store redis needs identity.hash_secret: without it each gate names the same client differently";
    if (std::string p = to_upstream_problem(c); !p.empty()) return p;
    if (std::string p = capabilities_config_problem(c.capabilities); !p.empty()) return p;
    bool have_default = false;
    std::set<std::string> names;
    for (const Tier& t : c.tiers) {
        if (t.name.empty()) return "every tier needs a name";
        if (!names.insert(t.name).second) return "tier '" + t.name + "' is defined twice";
        if (const char* p = core::budget_problem(t.budget)) return "tier '" + t.name + "': " + p;
        have_default |= t.name == c.default_tier;
    }
    if (!have_default) return "default_tier '" + c.default_tier + "' is not a defined tier";
    if (std::string p = cells_problem(c); !p.empty()) return p;
    if (const char* p = core::cost_model_problem(c.pricing.model)) return std::string("cost: ") + p;
    if (!(c.pricing.other_cost >= 0) || !(c.pricing.coverage_default_megapixels > 0) || !(c.pricing.default_limit >= 0))
        return "cost: other, coverage_default_megapixels and default_limit must be non-negative numbers";
    if (c.caps.max_pixels <= 0) return "caps.max_pixels must be above zero";
    if (c.caps.max_side < 0) return "caps.max_side must be zero (off) or above";
    if (c.caps.max_features <= 0) return "caps.max_features must be above zero";
    for (const PassThrough& p : c.caps.passthrough)
        if (p.service.empty() || p.request.empty() || !(p.cost >= 0))
            return "operations.passthrough: every entry needs a service, a request and a cost of zero or more";
    if (c.caps.max_zoom < 0 || c.caps.max_zoom > core::kMaxZoom) return "caps.max_zoom must be between 0 and 31";
    if (c.exception_status != 200 && c.exception_status != 400) return "exception_status must be 200 or 400";
    if (c.limits.header_bytes < 1024 || c.limits.body_bytes < 1024) return "limits: header_bytes and body_bytes must be at least 1024";
    if (!(c.limits.idle_timeout_s > 0) || !(c.limits.upstream_timeout_s > 0) || !(c.limits.upstream_connect_timeout_s > 0))
        return "limits: timeouts must be above zero";
    if (c.limits.max_keys < 16) return "limits.max_keys must be at least 16";
    if (!(c.refund_fraction >= 0 && c.refund_fraction <= 1)) return "refund_fraction must be between 0 and 1";
    if (c.limits.inimage_max_pixels < 0) return "limits.inimage_max_pixels must be zero (never draw) or above";
    if (!(c.limits.upstream_idle_timeout_s > 0)) return "limits.upstream_idle_timeout must be above zero";
    if (!(c.concurrency.queue_timeout_s >= 0)) return "concurrency.queue_timeout must be zero or above";
    {
        std::set<std::string> cls;
        for (const ConcurrencyClass& k : c.concurrency.classes) {
            if (k.name.empty() || !cls.insert(k.name).second) return "concurrency classes need distinct names";
            if (k.limit < 1) return "concurrency class '" + k.name + "': limit must be at least 1";
            if (k.match.empty()) return "concurrency class '" + k.name + "': match must list operations or cost classes";
        }
    }
    if (c.threads < 0 || c.threads > 256) return "threads must be between 0 and 256";
    if (!c.admin.token.empty() && c.admin.token.size() < 16) return "admin.token must be at least 16 characters";
    if (c.admin_listen != "off" && c.admin.token.empty() && c.admin.allow.empty()) {
        // The listen address itself is validated at start (parse_listen); here
        // only whether it is loopback: 127.0.0.0/8 or ::1.
        const std::size_t colon = c.admin_listen.rfind(':');
        std::string host = colon == std::string::npos ? c.admin_listen : c.admin_listen.substr(0, colon);
        if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
        const auto ip = parse_ip(host);
        static const Cidr lo4 = *parse_cidr("127.0.0.0/8"), lo6 = *parse_cidr("::1/128");
        if (!ip || !(lo4.contains(*ip) || lo6.contains(*ip)))
            return "admin_listen " + c.admin_listen +
                   " is not loopback: set admin.token or admin.allow (see doc/gate.md, \"Admin listener\")";
    }
    return {};
}

Config load_config_file(const std::string& path, Config c) {
    YAML::Node root;
    try {
        root = YAML::LoadFile(path);
    } catch (const YAML::Exception& e) {
        bad(path, e.what());
    }
    if (root.IsNull()) return c;
    check_keys(root,
               {"listen", "upstream", "admin_listen", "threads", "mode", "exception_status", "caps", "limits", "identity",
                "tiers", "default_tier", "cost", "coalesce", "concurrency", "refund_fraction", "operations", "admin", "buckets", "charge",
                "capabilities"},
               path);
    get(root, "listen", c.listen, path);
    get(root, "upstream", c.upstream, path);
    get(root, "admin_listen", c.admin_listen, path);
    get(root, "threads", c.threads, path);
    get(root, "exception_status", c.exception_status, path);
    if (root["mode"]) {
        const std::string m = root["mode"].as<std::string>();
        if (m != "enforce" && m != "shadow") bad("mode", "must be 'enforce' or 'shadow'");
        c.shadow = m == "shadow";
    }
    if (const YAML::Node caps = root["caps"]) {
        check_keys(caps, {"max_pixels", "max_side", "max_features", "features_over_cap", "max_zoom"}, "caps");
        get(caps, "max_pixels", c.caps.max_pixels, "caps");
        get(caps, "max_side", c.caps.max_side, "caps");
        get(caps, "max_features", c.caps.max_features, "caps");
        get(caps, "max_zoom", c.caps.max_zoom, "caps");
        if (caps["features_over_cap"]) {
            const std::string v = caps["features_over_cap"].as<std::string>();
            if (v != "reject" && v != "clamp") bad("caps.features_over_cap", "must be 'reject' or 'clamp'");
            c.caps.clamp_features = v == "clamp";
        }
    }
    if (const YAML::Node ops = root["operations"]) {
        check_keys(ops, {"mapserver_cgi", "passthrough"}, "operations");
        if (ops["mapserver_cgi"]) {
            const std::string v = ops["mapserver_cgi"].as<std::string>();
            if (v != "refuse" && v != "allow") bad("operations.mapserver_cgi", "must be 'refuse' or 'allow'");
            c.caps.mapserver_cgi = v == "allow";
        }
        if (const YAML::Node pt = ops["passthrough"]) {
            if (!pt.IsSequence()) bad("operations.passthrough", "must be a list");
            c.caps.passthrough.clear();
            for (const auto& e : pt) {
                check_keys(e, {"service", "request", "cost"}, "operations.passthrough[]");
                PassThrough p;
                get(e, "service", p.service, "operations.passthrough[]");
                get(e, "request", p.request, "operations.passthrough[]");
                if (!e["service"] || !e["request"] || !e["cost"])
                    bad("operations.passthrough[]", "needs service, request and cost");
                get(e, "cost", p.cost, "operations.passthrough[" + p.request + "]");
                for (auto* s : {&p.service, &p.request})
                    for (char& ch : *s)
                        if (ch >= 'a' && ch <= 'z') ch = static_cast<char>(ch - 'a' + 'A');
                c.caps.passthrough.push_back(std::move(p));
            }
        }
    }
    if (const YAML::Node l = root["limits"]) {
        check_keys(l,
                   {"header_bytes", "body_bytes", "upstream_body_bytes", "idle_timeout", "upstream_timeout",
                    "upstream_connect_timeout", "max_keys", "upstream_keepalive", "upstream_idle_timeout", "inimage_max_pixels",
                    "max_connections", "max_connections_per_address"},
                   "limits");
        get(l, "header_bytes", c.limits.header_bytes, "limits");
        get(l, "body_bytes", c.limits.body_bytes, "limits");
        get(l, "upstream_body_bytes", c.limits.upstream_body_bytes, "limits");
        get(l, "idle_timeout", c.limits.idle_timeout_s, "limits");
        get(l, "upstream_timeout", c.limits.upstream_timeout_s, "limits");
        get(l, "upstream_connect_timeout", c.limits.upstream_connect_timeout_s, "limits");
        get(l, "max_keys", c.limits.max_keys, "limits");
        get(l, "upstream_keepalive", c.limits.upstream_keepalive, "limits");
        get(l, "upstream_idle_timeout", c.limits.upstream_idle_timeout_s, "limits");
        get(l, "inimage_max_pixels", c.limits.inimage_max_pixels, "limits");
        get(l, "max_connections", c.limits.max_connections, "limits");
        get(l, "max_connections_per_address", c.limits.max_connections_per_address, "limits");
    }
    get(root, "refund_fraction", c.refund_fraction, path);
    if (const YAML::Node ch = root["charge"]) {
        if (!ch.IsScalar()) bad("charge", "must be 'estimate' or 'measured'");
        c.charge = parse_charge_mode(ch.as<std::string>());
    }
    if (const YAML::Node b = root["buckets"]) c.buckets = parse_store_config(b);
    c.capabilities = parse_capabilities_config(root["capabilities"], c.capabilities);
    if (const YAML::Node ad = root["admin"]) {
        check_keys(ad, {"token", "allow"}, "admin");
        get(ad, "token", c.admin.token, "admin");
        c.admin.allow = cidrs(ad["allow"], "admin.allow");
    }
    if (const YAML::Node co = root["coalesce"]) {
        check_keys(co, {"enabled", "max_body_bytes", "public_paths"}, "coalesce");
        get(co, "enabled", c.coalesce.enabled, "coalesce");
        get(co, "max_body_bytes", c.coalesce.max_body_bytes, "coalesce");
        get(co, "public_paths", c.coalesce.public_paths, "coalesce");
    }
    if (const YAML::Node cc = root["concurrency"]) {
        check_keys(cc, {"queue_timeout", "max_queue", "classes"}, "concurrency");
        get(cc, "queue_timeout", c.concurrency.queue_timeout_s, "concurrency");
        get(cc, "max_queue", c.concurrency.max_queue, "concurrency");
        if (const YAML::Node cl = cc["classes"]) {
            if (!cl.IsSequence()) bad("concurrency.classes", "must be a list");
            c.concurrency.classes.clear();
            for (const auto& k : cl) {
                check_keys(k, {"name", "match", "limit"}, "concurrency.classes[]");
                ConcurrencyClass x;
                get(k, "name", x.name, "concurrency.classes[]");
                get(k, "match", x.match, "concurrency.classes[" + x.name + "]");
                get(k, "limit", x.limit, "concurrency.classes[" + x.name + "]");
                c.concurrency.classes.push_back(std::move(x));
            }
        }
    }
    if (const YAML::Node id = root["identity"]) {
        check_keys(id, {"key_headers", "trusted_proxies", "hash_secret", "jwt_hs256_key", "to_upstream"}, "identity");
        if (const YAML::Node up = id["to_upstream"]) {
            check_keys(up, {"header", "param", "hmac_key"}, "identity.to_upstream");
            get(up, "header", c.to_upstream.header, "identity.to_upstream");
            get(up, "param", c.to_upstream.param, "identity.to_upstream");
            get(up, "hmac_key", c.to_upstream.hmac_key, "identity.to_upstream");
        }
        get(id, "jwt_hs256_key", c.jwt_hs256_key, "identity");
        get(id, "hash_secret", c.hash_secret, "identity");
        get(id, "key_headers", c.key_headers, "identity");
        c.trusted_proxies = cidrs(id["trusted_proxies"], "identity.trusted_proxies");
    }
    get(root, "default_tier", c.default_tier, path);
    if (const YAML::Node tiers = root["tiers"]) {
        if (!tiers.IsSequence()) bad("tiers", "must be a list");
        c.tiers.clear();
        for (const auto& t : tiers) {
            check_keys(t, {"name", "rate", "burst", "keys", "networks", "cells"}, "tiers[]");
            Tier tier;
            get(t, "name", tier.name, "tiers[]");
            get(t, "rate", tier.budget.rate, "tiers[" + tier.name + "]");
            get(t, "burst", tier.budget.capacity, "tiers[" + tier.name + "]");
            if (!t["rate"] || !t["burst"]) bad("tiers[" + tier.name + "]", "needs rate and burst");
            get(t, "keys", tier.key_hashes, "tiers[" + tier.name + "]");
            tier.networks = cidrs(t["networks"], "tiers[" + tier.name + "].networks");
            if (t["cells"]) tier.cells = parse_cell_policy(t["cells"], "tiers[" + tier.name + "].cells");
            c.tiers.push_back(std::move(tier));
        }
    }
    if (const YAML::Node cost = root["cost"]) {
        check_keys(cost,
                   {"density_per_km2", "tile_max_rows", "cost_max", "other", "coverage_default_megapixels",
                    "default_limit", "weights", "unit"},
                   "cost");
        // Costs are milliseconds of upstream time, as in the database; a
        // config written for another unit must not be read as ms silently.
        if (const YAML::Node u = cost["unit"])
            if (!u.IsScalar() || u.as<std::string>() != "ms")
                bad("cost.unit", "costs are milliseconds of upstream time: the only unit is 'ms' (scale the weights, "
                                 "cost_max, other, passthrough costs and tier rate/burst to ms and set unit: ms)");
        get(cost, "density_per_km2", c.pricing.model.density_per_km2, "cost");
        get(cost, "tile_max_rows", c.pricing.model.tile_max_rows, "cost");
        get(cost, "cost_max", c.pricing.model.cost_max, "cost");
        get(cost, "other", c.pricing.other_cost, "cost");
        get(cost, "coverage_default_megapixels", c.pricing.coverage_default_megapixels, "cost");
        get(cost, "default_limit", c.pricing.default_limit, "cost");
        if (const YAML::Node w = cost["weights"]) {
            if (!w.IsMap()) bad("cost.weights", "must be a mapping of class to weights");
            for (const auto& kv : w) {
                const std::string name = kv.first.as<std::string>();
                core::ClassWeights& cw = c.pricing.model.of(class_named(name, "cost.weights"));
                check_keys(kv.second, {"fixed", "per_row", "per_megapixel"}, "cost.weights." + name);
                get(kv.second, "fixed", cw.fixed, "cost.weights." + name);
                get(kv.second, "per_row", cw.per_row, "cost.weights." + name);
                get(kv.second, "per_megapixel", cw.per_megapixel, "cost.weights." + name);
            }
        }
    }
    c.caps.coverage_default_megapixels = c.pricing.coverage_default_megapixels;
    const std::string problem = config_problem(c);
    if (!problem.empty()) bad(path, problem);
    return c;
}

}  // namespace ot::gate
