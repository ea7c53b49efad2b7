// Everything one request/response exchange knows, as one value: a
// kept-alive connection starts each request with `ex = Exchange{}`, so no
// field can be forgotten by a hand-kept reset list (an error answer once
// carried the previous request's X-Request-Id that way).
#pragma once
#include <chrono>
#include <optional>
#include <string>

#include "core/gcra.hpp"
#include "gate/decision.hpp"
#include "gate/settle.hpp"

namespace ot::gate {

struct Exchange {
    using Clock = std::chrono::steady_clock;
    Assessment assessment;
    Decision decision;
    std::string method;  // as sent ("" when the request could not be read)
    std::string request_id;
    std::string identity_hash, tier;
    std::string upstream_error;  // logged beside the verdict
    std::optional<std::string> flight_key;  // set while leading a flight
    std::string slot_class, bucket_key;
    core::Budget budget{1, 1};
    std::optional<CellSpend> cell;  // the area budget's answer, when asked
    double refunded = 0;
    unsigned status_sent = 0, upstream_status = 0;
    std::size_t body_bytes = 0;  // upstream body relayed
    bool coalesced = false, retried = false, reused = false;
    bool holding_slot = false;
    bool keep_alive = false;
    bool counted = false;  // in the in-flight count, not yet logged
    bool upstream_tried = false;  // up_started is meaningful
    Clock::time_point started{}, up_started{};
    // Settlement (settle_session.cpp): the request's bytes went upstream at
    // up_sent, its last byte came back at up_last; writes to the client
    // while the upstream still had more took client_blocked_ms.
    Clock::time_point up_sent{}, up_last{}, client_write_at{};
    double client_blocked_ms = 0;
    double flight_ms = 0;       // a follower's: the flight's measured upstream time
    std::size_t sharers = 1;    // requests that shared this upstream call
    bool from_flight = false;   // flight_ms is this exchange's upstream time
    bool settled = false;
    double final_charge = -1;   // after a measured settlement: the charge in ms
    double measured = -1;       // the upstream's own time, ms
    Ledger ledger = Ledger::Local;
};

}  // namespace ot::gate
