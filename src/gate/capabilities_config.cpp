#include "gate/capabilities_config.hpp"

#include <stdexcept>

#include "gate/capabilities_url.hpp"

namespace ot::gate {
namespace {

[[noreturn]] void bad(const std::string& field, const std::string& why) {
    throw std::runtime_error("capabilities." + field + ": " + why);
}
template <typename T>
void get(const YAML::Node& n, const char* key, T& out) {
    const YAML::Node v = n[key];
    if (!v) return;
    try {
        out = v.as<T>();
    } catch (const YAML::Exception&) {
        bad(key, "has the wrong type");
    }
}

}  // namespace

CapabilitiesConfig parse_capabilities_config(const YAML::Node& n, CapabilitiesConfig c) {
    if (!n) return c;
    if (!n.IsMap()) throw std::runtime_error("capabilities: must be a mapping");
    for (const auto& kv : n) {
        const std::string k = kv.first.as<std::string>();
        if (k != "rewrite" && k != "public_url" && k != "rewrite_origins" && k != "layer_limit" &&
            k != "addresses_in_all_xml")
            throw std::runtime_error("capabilities: unknown key '" + k + "'");
    }
    get(n, "rewrite", c.rewrite);
    get(n, "public_url", c.public_url);
    get(n, "rewrite_origins", c.rewrite_origins);
    get(n, "layer_limit", c.layer_limit);
    get(n, "addresses_in_all_xml", c.addresses_in_all_xml);
    return c;
}

std::string capabilities_config_problem(const CapabilitiesConfig& c) {
    if (!c.public_url.empty() && url_origin(c.public_url).empty())
        return "capabilities.public_url: '" + c.public_url + "' is not an http:// or https:// URL with a host";
    if (c.public_url.find_first_of("?#") != std::string::npos) return "capabilities.public_url: must have no query or fragment";
    for (const auto& o : c.rewrite_origins)
        if (url_origin(o).empty()) return "capabilities.rewrite_origins: '" + o + "' is not an http:// or https:// URL";
    if (c.layer_limit < 0) return "capabilities.layer_limit: must be zero (unstated) or above";
    return {};
}

}  // namespace ot::gate
