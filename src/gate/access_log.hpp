// The access log line of one exchange: a pure function of what the exchange
// recorded and the times measured around it, so its shape is unit-tested.
#pragma once
#include <string>
#include <string_view>

#include "gate/exchange.hpp"

namespace ot::gate {

struct LogTimes {
    double latency_ms = 0;
    double upstream_ms = 0;  // written when the upstream was asked
    std::string_view ts;     // ISO 8601 UTC with milliseconds
};

// One JSON object without the newline; keys in alphabetical order (as they
// have always been written, and as log tooling may rely on).
std::string access_log_line(const Exchange& ex, const LogTimes& t);
// The same line appended to `out` (no newline): the I/O thread's log buffer.
void append_access_log_line(std::string& out, const Exchange& ex, const LogTimes& t);

// The cost class a metric or a log line files the exchange under.
std::string_view log_class(const Exchange& ex);

}  // namespace ot::gate
