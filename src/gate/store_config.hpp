// Where the gate keeps its buckets, and what it does when that place fails:
//
//   buckets:
//     store: redis                  # or local (the default: in-process buckets)
//     url: redis://[user:password@]host:port/db
//     timeout_ms: 50
//     on_error: local               # open | closed | local
//     key_prefix: "ogc_throttle:"
//     refusal_cache: 4096           # per I/O thread; 0 = off
//     classes:                      # per cost class (map, tile, coverage, ..., other)
//       tile: {on_error: open}
//       coverage: {on_error: closed}
#pragma once
#include <map>
#include <string>

#include <yaml-cpp/yaml.h>

#include "gate/redis_client.hpp"
#include "gate/redis_metrics.hpp"

namespace ot::gate {

struct StoreConfig {
    enum class Kind : std::uint8_t { Local, Redis };
    Kind store = Kind::Local;
    std::string url;
    redis::Endpoint endpoint;
    int timeout_ms = 50;
    redis::OnError on_error = redis::OnError::Local;
    std::map<std::string, redis::OnError> class_on_error;
    std::string key_prefix = "ogc_throttle:";
    // Entries of each I/O thread's refusal cache (redis_refusal_cache.hpp),
    // 128 bytes each; 0 = every request asks the store.
    std::size_t refusal_cache = 4096;

    // The policy for a cost class ("other" for requests without one).
    redis::OnError policy_for(const std::string& cost_class) const;
};

// Reads the `buckets` mapping over the defaults; throws std::runtime_error
// naming the field at fault.
StoreConfig parse_store_config(const YAML::Node& buckets, const std::string& where = "buckets");

// redis://[[user]:password@]host[:port][/db], host may be [v6]; percent-escapes
// in user and password are decoded. Empty string when fine, else why not.
std::string parse_redis_url(const std::string& url, redis::Endpoint& out);

}  // namespace ot::gate
