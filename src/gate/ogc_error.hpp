// Refusals rendered in the client's own protocol, with the HTTP status chosen
// so that the text reaches the people using GDAL and OWSLib (doc/gate.md).
#pragma once
#include <string>

#include "gate/request.hpp"

namespace ot::gate {

enum class ErrorKind : std::uint8_t {
    BadRequest,       // cannot be understood
    OverCap,          // understood, too big for any client
    NeverFits,        // bigger than the whole budget of the client's tier
    RateLimited,      // budget exhausted for now
    UpstreamDown,     // 502
    UpstreamTimeout,  // 504
    Busy,             // 503: concurrency class full past its queue wait
};

struct OgcError {
    ErrorKind kind;
    std::string code;     // OWS exceptionCode; WMS reports keep it only if their list has it
    std::string locator;  // parameter name, may be empty; WMS 1.1.1 has no place for it
    std::string text;     // what was asked, what the limit is, what to do
};

struct Rendered {
    int status;
    std::string content_type;
    std::string body;
};

// `size_status` is the configured status for BadRequest/OverCap/NeverFits in
// WMS/WFS/WCS XML (200 or 400); WMTS, whose clients read 4xx bodies, always
// gets 400.
Rendered render_error(Service service, Dialect dialect, const OgcError& e, int size_status);

}  // namespace ot::gate
