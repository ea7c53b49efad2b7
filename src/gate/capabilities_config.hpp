// What an operator sets for the capabilities rewrite (doc/capabilities.md):
//
//   capabilities:
//     rewrite: true                 # state the caps and the gate's address in capabilities
//     public_url: https://maps.example.org/ows   # else derived per request (Host, trusted proxies)
//     rewrite_origins: [http://mapserver.internal:8080]  # more addresses the map server may advertise
//     layer_limit: 0                # WMS 1.3.0 LayerLimit to state (0: none)
//     addresses_in_all_xml: true    # also rewrite the map server's address in other XML answers (GML, XSD)
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <yaml-cpp/yaml.h>

namespace ot::gate {

struct CapabilitiesConfig {
    bool rewrite = true;
    std::string public_url;
    std::vector<std::string> rewrite_origins;
    std::int64_t layer_limit = 0;
    bool addresses_in_all_xml = true;
};

// Reads the `capabilities` mapping over the defaults; throws std::runtime_error
// naming the field at fault.
CapabilitiesConfig parse_capabilities_config(const YAML::Node& n, CapabilitiesConfig c = {});
// Empty when usable, else what is wrong (config_problem calls it: the
// command line's --public-url is checked there too).
std::string capabilities_config_problem(const CapabilitiesConfig& c);

}  // namespace ot::gate
