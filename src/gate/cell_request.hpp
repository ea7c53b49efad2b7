// The cell a request is keyed on for a tier's area budget (cells.hpp), read
// from what the gate parsed: a tile's matrix, column and row, or a box and
// its CRS. A request the gate cannot place is never let through unkeyed: it
// gets a coarse cell (a CRS it cannot convert, a tile matrix set it does not
// know) or the one catch-all cell "x" of its client (no place at all, a tile
// outside its matrix).
#pragma once
#include <optional>
#include <string>

#include "gate/buckets.hpp"
#include "gate/cells.hpp"
#include "gate/decision.hpp"
#include "gate/identity.hpp"

namespace ot::gate {

std::string request_cell(const OgcRequest& r, const CellGrid& g);

// The cell when the tier's area budget applies to this request (its cost
// class is listed, and the client is an address or keyed_clients is set),
// else nullopt.
std::optional<std::string> cell_for(const Assessment& a, const Identity& id, const Tier& t);

// The bucket key of a client's cell: "<identity key>@<cell>".
std::string cell_bucket_key(const std::string& identity_key, const std::string& cell);

// The area budget's step, once the address bucket admitted `cost` under
// `t.budget`: charges the cell bucket and, when it refuses, gives the address
// bucket its charge back, so the refused request costs neither anything.
CellSpend spend_cell(BucketTable& cells, BucketTable& addresses, const std::string& identity_key,
                     const std::string& cell, double cost, const Tier& t, std::int64_t now_us);

}  // namespace ot::gate
