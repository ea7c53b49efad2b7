#include "gate/store_config.hpp"

#include <set>
#include <stdexcept>

#include "core/cost_model.hpp"
#include "gate/text.hpp"

namespace ot::gate {
namespace {

[[noreturn]] void bad(const std::string& where, const std::string& why) { throw std::runtime_error(where + ": " + why); }

void check_keys(const YAML::Node& n, const std::set<std::string>& allowed, const std::string& where) {
    if (!n.IsMap()) bad(where, "must be a mapping");
    for (const auto& kv : n) {
        const std::string k = kv.first.as<std::string>();
        if (!allowed.count(k)) bad(where, "unknown key '" + k + "'");
    }
}

std::string scalar(const YAML::Node& n, const std::string& where) {
    if (!n.IsScalar()) bad(where, "must be a single value");
    return n.as<std::string>();
}

redis::OnError policy(const YAML::Node& n, const std::string& where) {
    const std::string v = scalar(n, where);
    if (v == "open") return redis::OnError::Open;
    if (v == "closed") return redis::OnError::Closed;
    if (v == "local") return redis::OnError::Local;
    bad(where, "must be open, closed or local (got '" + v + "')");
}

bool known_class(const std::string& name) {
    if (name == "other") return true;
    for (int i = 0; i < core::kCostClasses; ++i)
        if (name == core::cost_class_name(static_cast<core::CostClass>(i))) return true;
    return false;
}

}  // namespace

redis::OnError StoreConfig::policy_for(const std::string& cost_class) const {
    const auto it = class_on_error.find(cost_class.empty() ? "other" : cost_class);
    return it == class_on_error.end() ? on_error : it->second;
}

std::string parse_redis_url(const std::string& url, redis::Endpoint& out) {
    const std::string scheme = "redis://";
    if (url.compare(0, scheme.size(), scheme) != 0) return "must start with redis:// (TLS is not supported)";
    std::string rest = url.substr(scheme.size());
    redis::Endpoint ep;
    if (const auto at = rest.rfind('@'); at != std::string::npos) {
        const std::string auth = rest.substr(0, at);
        rest = rest.substr(at + 1);
        const auto colon = auth.find(':');
        const auto user = percent_decode(auth.substr(0, colon), false);
        const auto pass = colon == std::string::npos ? std::optional<std::string>("") : percent_decode(auth.substr(colon + 1), false);
        if (!user || !pass) return "has a bad percent-escape in its user or password";
        if (colon == std::string::npos) ep.password = *user;  // redis://secret@host: a password alone
        else {
            ep.username = *user;
            ep.password = *pass;
        }
    }
    std::string hostport = rest, db;
    if (const auto slash = rest.find('/'); slash != std::string::npos) {
        hostport = rest.substr(0, slash);
        db = rest.substr(slash + 1);
    }
    std::string port = "6379";
    if (!hostport.empty() && hostport[0] == '[') {
        const auto close = hostport.find(']');
        if (close == std::string::npos) return "has an unclosed [ in its host";
        ep.host = hostport.substr(1, close - 1);
        if (close + 1 < hostport.size()) {
            if (hostport[close + 1] != ':') return "has junk after its [host]";
            port = hostport.substr(close + 2);
        }
    } else {
        const auto colon = hostport.rfind(':');
        ep.host = hostport.substr(0, colon);
        if (colon != std::string::npos) port = hostport.substr(colon + 1);
    }
    if (ep.host.empty()) return "has no host";
    if (port.empty() || port.size() > 5 || port.find_first_not_of("0123456789") != std::string::npos ||
        std::stoi(port) < 1 || std::stoi(port) > 65535)
        return "has a bad port '" + port + "'";
    ep.port = port;
    if (!db.empty()) {
        if (db.size() > 5 || db.find_first_not_of("0123456789") != std::string::npos) return "has a bad database number '" + db + "'";
        ep.db = std::stoi(db);
    }
    out = ep;
    return "";
}

StoreConfig parse_store_config(const YAML::Node& n, const std::string& where) {
    StoreConfig c;
    if (!n || n.IsNull()) return c;
    check_keys(n, {"store", "url", "timeout_ms", "on_error", "key_prefix", "refusal_cache", "classes"}, where);
    if (n["store"]) {
        const std::string s = scalar(n["store"], where + ".store");
        if (s == "redis") c.store = StoreConfig::Kind::Redis;
        else if (s != "local") bad(where + ".store", "must be local or redis (got '" + s + "')");
    }
    if (n["url"]) {
        c.url = scalar(n["url"], where + ".url");
        const std::string why = parse_redis_url(c.url, c.endpoint);
        if (!why.empty()) bad(where + ".url", why);
    }
    if (c.store == StoreConfig::Kind::Redis && c.url.empty()) bad(where + ".url", "is required with store: redis");
    if (n["timeout_ms"]) {
        try {
            c.timeout_ms = n["timeout_ms"].as<int>();
        } catch (const YAML::Exception&) {
            bad(where + ".timeout_ms", "must be a whole number of milliseconds");
        }
        if (c.timeout_ms < 1 || c.timeout_ms > 60000) bad(where + ".timeout_ms", "must be between 1 and 60000");
    }
    if (n["on_error"]) c.on_error = policy(n["on_error"], where + ".on_error");
    if (n["key_prefix"]) {
        c.key_prefix = scalar(n["key_prefix"], where + ".key_prefix");
        if (c.key_prefix.size() > 200) bad(where + ".key_prefix", "is longer than 200 bytes");
    }
    if (n["refusal_cache"]) {
        long long v = -1;
        try {
            v = n["refusal_cache"].as<long long>();
        } catch (const YAML::Exception&) {
            bad(where + ".refusal_cache", "must be a whole number of entries");
        }
        if (v < 0 || v > 1'000'000) bad(where + ".refusal_cache", "must be between 0 (off) and 1000000");
        c.refusal_cache = static_cast<std::size_t>(v);
    }
    if (const YAML::Node classes = n["classes"]) {
        if (!classes.IsMap()) bad(where + ".classes", "must be a mapping of cost class to settings");
        for (const auto& kv : classes) {
            const std::string name = kv.first.as<std::string>();
            const std::string w = where + ".classes." + name;
            if (!known_class(name)) bad(w, "is not a cost class (map, tile, coverage, features, bbox, ..., other)");
            check_keys(kv.second, {"on_error"}, w);
            if (!kv.second["on_error"]) bad(w, "needs on_error");
            c.class_on_error[name] = policy(kv.second["on_error"], w + ".on_error");
        }
    }
    return c;
}

}  // namespace ot::gate
