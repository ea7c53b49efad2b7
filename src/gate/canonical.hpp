// The last step of parsing: refuse what the map server could read
// differently from the gate, then write down what will be forwarded. After
// it, canonical_target() (and canonical_form() for a form body) is the only
// text of the request that goes upstream.
#pragma once
#include <string>

#include "gate/request.hpp"

namespace ot::gate {

// Sets r.problem on an ambiguity (cookies named like parameters, OGC
// parameters in both a form body and the query string, a query beside an
// XML body, names MapServer matches by prefix, OGC API names in another
// case); otherwise gives the parsed pairs their canonical names (known OGC
// names upper case in KVP requests) and marks the request canonical.
// `encoded_path` is the normalised path (path.hpp).
void canonicalise(OgcRequest& r, const HttpIn& in, const std::string& encoded_path);

// The normalised path and the pairs, percent-encoding the gate's own.
std::string canonical_target(const OgcRequest& r);
std::string canonical_form(const OgcRequest& r);

// canonical_target with the one parameter `upper_key` set to `value` (spelt
// `name` when it has to be added).
std::string canonical_target_with(const OgcRequest& r, const std::string& upper_key, const std::string& name,
                                  const std::string& value);

}  // namespace ot::gate
