// tiers[].cells: a tier's area budget (cells.hpp), read and checked.
//
//   tiers:
//     - name: public
//       rate: 100
//       burst: 1000
//       cells:
//         grid: 0.1            # degrees, or z12: the tiles of a zoom level
//         rate: 2              # per cell and client, cost units per second
//         burst: 40
//         classes: [map, tile] # cost classes it applies to (the default)
//         keyed_clients: false # API keys and JWTs too (default: addresses only)
#pragma once
#include <string>

#include <yaml-cpp/yaml.h>

#include "gate/config.hpp"

namespace ot::gate {

// Throws std::runtime_error naming the field at fault.
CellPolicy parse_cell_policy(const YAML::Node& n, const std::string& where);

// Empty when every tier's area budget is usable, else what is wrong.
std::string cells_problem(const Config& c);

}  // namespace ot::gate
