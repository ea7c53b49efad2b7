// Everything an operator can set, with the defaults the gate runs with when
// given flags alone. Loaded from YAML (yaml-cpp); validated before use so a
// bad reload leaves the running config in place.
#pragma once
#include "gate/store_config.hpp"
#include "gate/capabilities_config.hpp"
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/cost_model.hpp"
#include "gate/settle.hpp"
#include "core/gcra.hpp"
#include "gate/cells.hpp"
#include "gate/net.hpp"

namespace ot::gate {

// An operation the gate does not price itself, let through at a fixed cost.
struct PassThrough {
    std::string service;  // WMS, WFS, WCS, WMTS or another SERVICE value, upper case
    std::string request;  // REQUEST (or XML root) upper case; "*" for any
    double cost = 1;
};

struct Caps {
    std::int64_t max_pixels = 4096LL * 4096LL;  // WIDTH × HEIGHT
    std::int64_t max_side = 0;                  // per side; 0 = no per-side limit
    std::int64_t max_features = 1000;           // WFS COUNT/MAXFEATURES, OGC API limit
    bool clamp_features = false;                // WFS over the cap: clamp instead of refusing
    std::int64_t max_zoom = 24;
    // What is refused unless listed (see doc/gate.md, "What is refused").
    // A coverage asked for at its native grid is taken to be this large
    // (the gate cannot see the grid); copied from cost.coverage_default_megapixels.
    double coverage_default_megapixels = 16;
    bool mapserver_cgi = false;            // mode=, mapsize=, map.* ... (MapServer's own CGI)
    std::vector<PassThrough> passthrough;  // operations beyond the ones the gate knows
};

struct Tier {
    std::string name;
    core::Budget budget;
    std::vector<std::string> key_hashes;  // identity hashes (see identity.hpp) that belong here
    std::vector<Cidr> networks;           // client addresses that belong here
    std::optional<CellPolicy> cells = std::nullopt;  // the area budget (cell_config.hpp), when set
};

struct Pricing {
    core::CostModel model = core::default_cost_model();
    double other_cost = 1.0;                  // GetCapabilities, DescribeFeatureType, unknown paths
    double coverage_default_megapixels = 16;  // GetCoverage without WIDTH/HEIGHT
    double default_limit = 10;                // OGC API items without limit
};

struct Limits {
    std::size_t header_bytes = 16 * 1024;
    std::size_t body_bytes = 1024 * 1024;
    std::size_t upstream_body_bytes = 256u * 1024 * 1024;
    double idle_timeout_s = 30;
    double upstream_timeout_s = 60;
    double upstream_connect_timeout_s = 5;
    std::size_t max_keys = 100000;
    std::size_t upstream_keepalive = 32;   // idle upstream connections kept
    double upstream_idle_timeout_s = 4;    // below lighttpd's 5 s and nginx's 75 s
    std::int64_t inimage_max_pixels = 2048LL * 2048LL;  // largest refusal drawn (EXCEPTIONS=INIMAGE)
    // Client connections held at once: in all (0: the descriptor limit less
    // a reserve, see doc/gate.md) and per client address (0: no limit).
    std::size_t max_connections = 0;
    std::size_t max_connections_per_address = 1000;
};

// Who may read the admin listener. Required (a token or a list) whenever it
// listens beyond loopback.
struct AdminAccess {
    std::string token;           // "Authorization: Bearer <token>"
    std::vector<Cidr> allow;     // peer addresses let in without the token
};

struct Coalesce {
    bool enabled = true;
    std::size_t max_body_bytes = 4u * 1024 * 1024;  // larger answers stream to each client
    std::vector<std::string> public_paths;           // path prefixes shared across credentials
};

struct ConcurrencyClass {
    std::string name;
    std::vector<std::string> match;  // operations (GetMap, GetFeature, …) or cost classes (map, tile, …)
    int limit = 1;
};

struct Concurrency {
    // Unlisted requests are unlimited; an empty list in the file turns the limits off.
    std::vector<ConcurrencyClass> classes = {{"maps", {"GetMap", "GetTile"}, 8},
                                             {"features", {"GetFeature", "items", "search"}, 4},
                                             {"downloads", {"GetCoverage"}, 2}};
    double queue_timeout_s = 2;
    std::size_t max_queue = 64;  // per class
};

// Who asked, told to the map server (identity.to_upstream), so that the
// database behind it charges that client and not the map server's one role:
// the bucket key ("ip:<hash>", "key:<hash>", "jwt:<hash>") in a header and/or
// a query parameter. Client-sent copies are removed (headers) or refused (the parameter).
struct ToUpstream {
    std::string header;    // e.g. X-OT-Identity; the tier goes in X-OT-Tier
    std::string param;     // e.g. OT_CLIENT, for MapServer's runtime substitution
    std::string hmac_key;  // when set, X-OT-Signature: HMAC-SHA256 of identity, tier and request id
};

struct Config {
    std::string listen = "127.0.0.1:8000";
    std::string upstream = "http://127.0.0.1:8080";
    std::string admin_listen = "127.0.0.1:8001";
    AdminAccess admin;
    int threads = 0;  // 0: one per core
    bool shadow = false;
    // HTTP status of a cap or tier-size refusal in OGC XML: 200, because GDAL
    // shows the exception text only on 200 (see doc/gate.md); 400 for strict
    // WFS 2.0 behaviour.
    int exception_status = 200;
    Caps caps;
    Pricing pricing;
    Limits limits;
    Coalesce coalesce;
    Concurrency concurrency;
    // Share of the cost given back for 304, 204/empty bodies and upstream
    // failures: a client that caches properly is not punished.
    double refund_fraction = 0.9;
    // estimate (default): the estimate stands, less refund_fraction as above;
    // measured: the upstream's measured time in ms replaces it (settle.hpp).
    ChargeMode charge = ChargeMode::Estimate;
    // Key for the address hashes (identity.hash_secret); empty in the file
    // means a random one per process start.
    std::string hash_secret;
    std::vector<std::string> key_headers = {"Authorization", "X-Api-Key"};
    // When set, "Authorization: Bearer <HS256 JWT>" verified with this key
    // keys a bucket by its "sub" and may name its tier ("tier" claim).
    std::string jwt_hs256_key;
    std::vector<Cidr> trusted_proxies;
    ToUpstream to_upstream;
    CapabilitiesConfig capabilities;  // the capabilities rewrite (doc/capabilities.md)
    StoreConfig buckets;  // where the buckets live (doc/shared-buckets.md); read at start only
    // A burst above cost_max (500) means no single request is "never fits" by default.
    std::vector<Tier> tiers = {{"public", {1000.0, 100.0}, {}, {}}};
    std::string default_tier = "public";

    const Tier& tier(const std::string& name) const;
};

// Empty string when usable, else what is wrong.
std::string config_problem(const Config& c);

// Reads FILE over `base`; throws std::runtime_error with the reason.
Config load_config_file(const std::string& path, Config base);

}  // namespace ot::gate
