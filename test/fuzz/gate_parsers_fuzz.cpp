// libFuzzer target: arbitrary bytes through the gate's request parsers, caps,
// pricing, exception rendering, the coalescing key, the area budget's cell and the address parsers. The first byte picks the method and
// content type; the rest splits at the first newline into target and body.
// Property: what the gate forwards is a fixed point. Parsed again, the
// canonical request is accepted with the same service, operation, price
// and size, and serialises to itself: the upstream reads what was checked.
#include <cstddef>
#include <cstdint>
#include <string>

#include "gate/cell_request.hpp"
#include "gate/coalescer.hpp"
#include "gate/decision.hpp"
#include "gate/identity.hpp"
#include "gate/jwt.hpp"
#include "gate/kvp.hpp"
#include "gate/path.hpp"
#include "gate/text.hpp"
#include "gate/upstream_url.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size == 0) return 0;
    static const ot::gate::Config config;
    const std::uint8_t sel = data[0];
    const std::string rest(reinterpret_cast<const char*>(data + 1), size - 1);
    const std::size_t nl = rest.find('\n');
    ot::gate::HttpIn in;
    in.method = (sel & 1) ? "POST" : "GET";
    static const char* types[] = {"text/xml", "application/json", "application/x-www-form-urlencoded", ""};
    in.content_type = types[(sel >> 1) & 3];
    in.target = "/" + rest.substr(0, nl);
    if (nl != std::string::npos) in.body = rest.substr(nl + 1);

    const ot::gate::Assessment a = ot::gate::assess(in, config);
    const ot::core::SpendResult spent{static_cast<ot::core::SpendOutcome>((sel >> 3) % 3), 0, 1, 1.5, 2};
    const ot::gate::Decision d = ot::gate::decide(in, a, config.tiers[0], spent, config);
    if (!d.forward && d.response.body.empty()) __builtin_trap();
    if (a.price.cost < 0 || a.price.cost != a.price.cost) __builtin_trap();

    // The flight key never shares a request it must not: no POST, no body.
    if (ot::gate::coalesce_key(in, a.req, {{"Authorization", rest}}, config) && (in.method == "POST" || !in.body.empty()))
        __builtin_trap();

    if (d.forward && spent.outcome == ot::core::SpendOutcome::Allowed) {
        ot::gate::HttpIn again = in;
        again.target = d.target;
        if (d.body) again.body = *d.body;
        const ot::gate::Assessment b = ot::gate::assess(again, config);
        if (b.caps.error || !b.req.problem.empty()) __builtin_trap();
        if (b.req.service != a.req.service || b.req.op != a.req.op) __builtin_trap();
        if (b.price.cost != a.price.cost || b.caps.width != a.caps.width || b.caps.height != a.caps.height)
            __builtin_trap();
        if (b.caps.count != a.caps.count) __builtin_trap();
        const ot::gate::Decision e = ot::gate::decide(again, b, config.tiers[0], spent, config);
        if (!e.forward || e.target != d.target) __builtin_trap();
        if (a.req.body_kind == ot::gate::BodyKind::Form && (!e.body || !d.body || *e.body != *d.body)) __builtin_trap();
        // The area budget charged the cell of what the upstream is sent.
        for (const ot::gate::CellGrid& g : {ot::gate::CellGrid{0.1, -1}, ot::gate::CellGrid{0.1, 12}})
            if (ot::gate::request_cell(b.req, g) != ot::gate::request_cell(a.req, g)) __builtin_trap();
    }
    // Every request has a cell (at worst the catch-all), whatever its numbers.
    for (const ot::gate::CellGrid& g : {ot::gate::CellGrid{0.001, -1}, ot::gate::CellGrid{90, -1}, ot::gate::CellGrid{0, 24}})
        if (ot::gate::request_cell(a.req, g).empty()) __builtin_trap();

    (void)ot::gate::verify_hs256(rest, "k", 1700000000);
    (void)ot::gate::normalise_path(rest, nullptr);
    (void)ot::gate::cookie_names(rest);
    (void)ot::gate::percent_decode(rest, sel & 16);
    (void)ot::gate::parse_double(rest);
    (void)ot::gate::parse_cidr(rest);
    // The address parsers throw std::runtime_error and nothing else; what
    // they accept they read back the same way.
    try {
        const ot::gate::Upstream u = ot::gate::parse_upstream(rest);
        if (u.host.empty() || u.port.empty()) __builtin_trap();
        const std::string again = "http://" + (u.host.find(':') != std::string::npos ? "[" + u.host + "]" : u.host) + ":" +
                                  u.port + u.prefix;
        const ot::gate::Upstream v = ot::gate::parse_upstream(again);
        if (v.host != u.host || v.port != u.port || v.prefix != u.prefix) __builtin_trap();
    } catch (const std::runtime_error&) {
    }
    try {
        (void)ot::gate::parse_listen(rest);
    } catch (const std::runtime_error&) {
    }
    (void)ot::gate::echo_value(rest, sel);
    (void)ot::gate::client_address({{"X-Forwarded-For", rest}}, *ot::gate::parse_ip("10.0.0.1"),
                                   {*ot::gate::parse_cidr("10.0.0.0/8")});
    return 0;
}
