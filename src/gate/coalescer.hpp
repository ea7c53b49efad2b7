// Request coalescing: identical in-flight map/tile GETs share one upstream
// call. The first arrival leads (does the call), later ones register a
// waiter and get the leader's result. A flight leaves the table the moment
// it finishes, so an error is delivered to the waiters of that flight only
// and the next arrival goes upstream again.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "gate/config.hpp"
#include "gate/identity.hpp"
#include "gate/request.hpp"

namespace ot::gate {

struct SharedResponse {
    unsigned status = 200;
    HeaderList headers;  // end-to-end headers only
    std::string body;
};

struct FlightResult {
    enum class Kind : std::uint8_t {
        Response,       // `response` is what the upstream said
        UpstreamError,  // connect/read failure; `timeout` tells which
        Busy,           // the leader found its concurrency class full
        Overflow,       // body above coalesce.max_body_bytes: go upstream yourself
    };
    Kind kind = Kind::UpstreamError;
    std::shared_ptr<const SharedResponse> response;
    bool timeout = false;
    std::string error;
    double upstream_ms = 0;   // the upstream's measured time for the whole flight
    std::size_t sharers = 1;  // leader and followers (set by finish)
};

class Coalescer {
public:
    using Waiter = std::function<void(const FlightResult&)>;
    // True: the caller leads and must call finish(key, ...) exactly once.
    // False: `w` was registered and will be called (from finish's thread).
    bool join(const std::string& key, Waiter w);
    // Returns how many shared the flight (the leader and its waiters).
    std::size_t finish(const std::string& key, FlightResult r);
    std::size_t in_flight() const;
    std::uint64_t joined_total() const;

private:
    mutable std::mutex mu_;
    std::unordered_map<std::string, std::vector<Waiter>> flights_;
    std::uint64_t joined_ = 0;
};

// The flight key for a request, or nullopt when it must not be shared (not a
// GET/HEAD, not a map or tile, a body, a Range). Query keys are case-folded
// and sorted, values of case-insensitive parameters upper-cased; headers the
// upstream may vary on are included, and so is a keyed hash of every
// credential the client sent unless the path is declared public.
std::optional<std::string> coalesce_key(const HttpIn& in, const OgcRequest& r, const HeaderList& h, const Config& c);

}  // namespace ot::gate
