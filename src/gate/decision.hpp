// The decision, as two pure functions around the one stateful step (the
// bucket): assess (parse, caps, price) → [bucket] → decide (respond or
// forward, with headers). The server only moves bytes between them; later
// stages (coalescer slot, concurrency slot) go between decide and upstream.
#pragma once
#include <optional>
#include <string>
#include <string_view>

#include "core/gcra.hpp"
#include "gate/caps.hpp"
#include "gate/config.hpp"
#include "gate/identity.hpp"
#include "gate/pricing.hpp"
#include "gate/request.hpp"

namespace ot::gate {

struct Assessment {
    OgcRequest req;
    CapOutcome caps;
    Price price;
    // Whether the bucket must be consulted (a refused request costs nothing).
    bool needs_budget(bool shadow) const { return shadow || !caps.error; }
};

Assessment assess(const HttpIn& in, const Config& c);

struct Response {
    int status = 200;
    std::string content_type;
    std::string body;
    HeaderList headers;
};

struct Decision {
    bool forward = false;
    Response response;                // when !forward
    std::string target;               // when forward
    std::optional<std::string> body;  // when forward and rewritten
    HeaderList headers;               // added to whatever goes back to the client
    std::string verdict;              // pass, rewritten, cap, invalid, throttled, never_fits, shadow_*
    double charged = 0;
};

// The area budget's answer (tiers[].cells), asked only once the address
// bucket admitted; when it refuses, the caller has given the address bucket
// its charge back.
struct CellSpend {
    std::string cell;  // as /buckets names it
    core::SpendResult spent;
};

// `spent` is the bucket's answer for this identity and cost (absent when the
// bucket was not consulted); `cell` the area budget's, when it was asked.
// `spare`, when given, is a header list whose pairs the rate-limit set is
// written into (a connection hands in its previous answer's): the same headers,
// without allocating their strings again.
Decision decide(const HttpIn& in, const Assessment& a, const Tier& tier,
                const std::optional<core::SpendResult>& spent, const Config& c, const CellSpend* cell = nullptr,
                HeaderList* spare = nullptr);

// A refusal in the client's protocol: OGC exception document, problem JSON,
// plain text, or for a WMS GetMap with EXCEPTIONS=INIMAGE/BLANK an image.
Rendered render_refusal(const Assessment& a, const OgcError& e, const Config& c);

// The rate-limit header set for a bucket state.
HeaderList ratelimit_headers(const Tier& tier, double remaining, double reset_s);
// The same for any named budget (the area budget is "<tier>.cell").
HeaderList ratelimit_headers(std::string_view policy, core::Budget b, double remaining, double reset_s);
// The same set written into `h`, whatever it held, reusing its pairs' strings.
void ratelimit_headers_into(HeaderList& h, std::string_view policy, core::Budget b, double remaining, double reset_s);

}  // namespace ot::gate
