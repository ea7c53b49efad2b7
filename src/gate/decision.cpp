#include "gate/decision.hpp"

#include "gate/canonical.hpp"
#include "gate/inimage.hpp"
#include "gate/kvp.hpp"
#include "gate/text.hpp"

#include <charconv>
#include <cmath>
#include <cstring>

namespace ot::gate {
namespace {

std::string fmt_cost(double v) {
    char buf[64];
    // A whole number (a cost or budget in whole units, as most are) is its
    // digits and ".00": the integer conversion costs a fraction of the
    // fixed-precision one and writes the same bytes (-0 keeps the slow path).
    if (v >= 0 && v < 1e15 && !std::signbit(v) && v == std::floor(v)) {
        auto r = std::to_chars(buf, buf + sizeof buf, static_cast<long long>(v));
        std::memcpy(r.ptr, ".00", 3);
        return std::string(buf, r.ptr + 3);
    }
    auto r = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::fixed, 2);
    if (r.ec != std::errc()) r = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::scientific, 2);
    return std::string(buf, r.ptr);
}

long long ceil_at_least(double v, long long floor_value) {
    const double c = std::ceil(v - 1e-9);
    return c < static_cast<double>(floor_value) ? floor_value : static_cast<long long>(c);
}

// With `rate_limit`, the answer's headers are that list (in its own vector)
// after the Cache-Control.
Decision refuse(const Assessment& a, const OgcError& e, const Config& c, std::string verdict,
                HeaderList* rate_limit = nullptr) {
    Decision d;
    Rendered r = render_refusal(a, e, c);
    d.response.status = r.status;
    d.response.content_type = std::move(r.content_type);
    d.response.body = std::move(r.body);
    if (rate_limit) {
        d.response.headers = std::move(*rate_limit);
        d.response.headers.reserve(8);  // and a Retry-After: kept by the connection for its next answer
        d.response.headers.emplace(d.response.headers.begin(), "Cache-Control", "no-store");
    } else {
        d.response.headers.reserve(8);  // and the rate-limit set, at most
        d.response.headers.emplace_back("Cache-Control", "no-store");
    }
    d.verdict = std::move(verdict);
    return d;
}

}  // namespace

Rendered render_refusal(const Assessment& a, const OgcError& e, const Config& c) {
    Rendered r = render_error(a.req.service, a.req.dialect, e, c.exception_status);
    if (auto img = render_in_image(a.req, c, e.text, r.status)) return *img;
    return r;
}

namespace {
// The gate names the client upstream (identity.to_upstream.param); a client
// naming itself, in the query, a form body or a cookie MapServer reads as a
// parameter, is refused rather than quietly overwritten.
void refuse_self_naming(OgcRequest& r, const HttpIn& in, const std::string& param) {
    if (!r.problem.empty()) return;
    const std::string u = to_upper(param);
    bool named = r.query.find(u) || r.form.find(u);
    if (!in.cookie.empty())
        for (const std::string& n : cookie_names(in.cookie)) named |= iequals(n, param);
    if (!named) return;
    r.problem = "the parameter " + param + " is set by this gate, not by the client";
    r.problem_code = "InvalidParameterValue";
    r.problem_locator = param;
}
}  // namespace

Assessment assess(const HttpIn& in, const Config& c) {
    Assessment a;
    a.req = parse_request(in);
    if (!c.to_upstream.param.empty()) refuse_self_naming(a.req, in, c.to_upstream.param);
    a.caps = apply_caps(a.req, in, c.caps);
    a.price = price(a.req, a.caps, c.pricing);
    return a;
}

HeaderList ratelimit_headers(const Tier& tier, double remaining, double reset_s) {
    return ratelimit_headers(tier.name, tier.budget, remaining, reset_s);
}

HeaderList ratelimit_headers(std::string_view policy, core::Budget b, double remaining, double reset_s) {
    HeaderList h;
    ratelimit_headers_into(h, policy, b, remaining, reset_s);
    return h;
}

void ratelimit_headers_into(HeaderList& h, std::string_view policy, core::Budget b, double remaining, double reset_s) {
    const auto q = static_cast<long long>(std::floor(b.capacity));
    const long long w = ceil_at_least(b.capacity / b.rate, 1);
    const auto r = static_cast<long long>(std::floor(remaining < 0 ? 0 : remaining));
    const long long t = ceil_at_least(reset_s, 0);
    // '"<policy>";<k1>=<v1>;<k2>=<v2>', sized once and filled in place.
    const auto item = [policy](std::string& s, char k1, long long v1, char k2, long long v2) {
        char n1[24], n2[24];
        const auto e1 = std::to_chars(n1, n1 + sizeof n1, v1).ptr;
        const auto e2 = std::to_chars(n2, n2 + sizeof n2, v2).ptr;
        const auto l1 = static_cast<std::size_t>(e1 - n1), l2 = static_cast<std::size_t>(e2 - n2);
        s.assign(policy.size() + 8 + l1 + l2, '\0');
        char* p = s.data();
        *p++ = '"';
        std::memcpy(p, policy.data(), policy.size());
        p += policy.size();
        *p++ = '"';
        *p++ = ';';
        *p++ = k1;
        *p++ = '=';
        std::memcpy(p, n1, l1);
        p += l1;
        *p++ = ';';
        *p++ = k2;
        *p++ = '=';
        std::memcpy(p, n2, l2);
    };
    const auto number = [](std::string& s, long long v) {
        char n[24];
        s.assign(n, std::to_chars(n, n + sizeof n, v).ptr);
    };
    // Assigned into the pairs already there: their strings keep their buffers.
    if (h.size() > 5) h.erase(h.begin() + 5, h.end());
    h.resize(5);
    h[0].first.assign("RateLimit-Policy");
    item(h[0].second, 'q', q, 'w', w);
    h[1].first.assign("RateLimit");
    item(h[1].second, 'r', r, 't', t);
    h[2].first.assign("X-RateLimit-Limit");
    number(h[2].second, q);
    h[3].first.assign("X-RateLimit-Remaining");
    number(h[3].second, r);
    h[4].first.assign("X-RateLimit-Reset");
    number(h[4].second, t);
}

namespace {
// The area budget refused (the address bucket had admitted, and has its
// charge back): say which budget, which cell and when it refills.
Decision refuse_cell(const Assessment& a, const Tier& tier, const CellSpend& cell, const Config& c) {
    const core::Budget& b = tier.cells->budget;
    const bool never = cell.spent.outcome == core::SpendOutcome::NeverFits;
    const long long retry = ceil_at_least(cell.spent.retry_after_s, 1);
    // Appended into one buffer, as the address refusal is.
    std::string text;
    text.reserve(240 + tier.name.size() + cell.cell.size());
    text += "Area rate limit of the '";
    text += tier.name;
    text += "' tier reached for map cell ";
    text += cell.cell;
    text += " (grid ";
    text += grid_name(tier.cells->grid);
    text += "): this request costs ";
    text += fmt_cost(a.price.cost);
    text += " units and ";
    if (never) {
        text += "the whole cell budget is ";
        text += fmt_cost(b.capacity);
        text += " units, so it can never succeed here. Ask for a smaller area.";
    } else {
        text += fmt_cost(cell.spent.remaining);
        text += " are left in this cell. Retry after ";
        text += std::to_string(retry);
        text += " s; requests for other areas are not affected.";
    }
    OgcError e{never ? ErrorKind::NeverFits : ErrorKind::RateLimited, never ? "InvalidParameterValue" : "NoApplicableCode",
               "", std::move(text)};
    Decision n = refuse(a, e, c, never ? "cell_never_fits" : "cell_throttled");
    std::string policy;
    policy.reserve(tier.name.size() + 5);
    policy += tier.name;
    policy += ".cell";
    for (auto& h : ratelimit_headers(policy, b, cell.spent.remaining, cell.spent.reset_after_s))
        n.response.headers.push_back(std::move(h));
    if (!never) n.response.headers.push_back({"Retry-After", std::to_string(retry)});
    return n;
}
}  // namespace

Decision decide(const HttpIn& in, const Assessment& a, const Tier& tier,
                const std::optional<core::SpendResult>& spent, const Config& c, const CellSpend* cell,
                HeaderList* spare) {
    const OgcRequest& r = a.req;
    Decision d;
    if (a.caps.error && !c.shadow)
        return refuse(a, *a.caps.error, c, a.caps.error->kind == ErrorKind::OverCap ? "cap" : "invalid");

    std::string verdict = a.caps.error ? (a.caps.error->kind == ErrorKind::OverCap ? "shadow_cap" : "shadow_invalid")
                                       : (a.caps.new_target || a.caps.new_body ? "rewritten" : "pass");
    HeaderList rl;
    if (spent) {
        // The area budget refused what the address admitted: its headers, not the address's.
        const bool cell_refused = spent->outcome == core::SpendOutcome::Allowed && cell && tier.cells &&
                                  cell->spent.outcome != core::SpendOutcome::Allowed;
        if (cell_refused && !c.shadow) return refuse_cell(a, tier, *cell, c);
        if (spare) rl = std::move(*spare);
        ratelimit_headers_into(rl, tier.name, tier.budget, spent->remaining, spent->reset_after_s);
        if (spent->outcome == core::SpendOutcome::NeverFits) {
            if (!c.shadow) {
                OgcError e{ErrorKind::NeverFits, "InvalidParameterValue", "",
                           "This " + std::string(op_name(r.op)) + " request costs " + fmt_cost(a.price.cost) +
                               " units, more than the whole budget of " + fmt_cost(tier.budget.capacity) +
                               " units of the '" + tier.name +
                               "' tier, so it can never succeed: waiting will not help. Ask for a smaller area, "
                               "size or count."};
                return refuse(a, e, c, "never_fits", &rl);
            }
            verdict = "shadow_never_fits";
        } else if (spent->outcome == core::SpendOutcome::Refused) {
            const long long retry = ceil_at_least(spent->retry_after_s, 1);
            if (!c.shadow) {
                // Appended into one buffer: this is the text of every 429.
                std::string text;
                text.reserve(160 + tier.name.size());
                text += "Rate limit of the '";
                text += tier.name;
                text += "' tier reached: this request costs ";
                text += fmt_cost(a.price.cost);
                text += " units and ";
                text += fmt_cost(spent->remaining);
                text += " are left. Retry after ";
                text += std::to_string(retry);
                text += " s, or send fewer or smaller requests.";
                OgcError e{ErrorKind::RateLimited, "NoApplicableCode", "", std::move(text)};
                Decision n = refuse(a, e, c, "throttled", &rl);
                n.response.headers.push_back({"Retry-After", std::to_string(retry)});
                return n;
            }
            verdict = "shadow_throttled";
        } else if (cell_refused) {
            verdict = "shadow_cell_throttled";
        } else {
            d.charged = a.price.cost;
        }
    }
    d.forward = true;
    d.verdict = verdict;
    d.headers = std::move(rl);
    // Shadow mode forwards the request exactly as sent; enforce mode only
    // what the gate itself wrote from what it read.
    if (c.shadow || !r.canonical) {
        d.target = in.target;
        return d;
    }
    d.target = a.caps.new_target ? *a.caps.new_target : canonical_target(r);
    if (a.caps.new_body)
        d.body = a.caps.new_body;
    else if (r.body_kind == BodyKind::Form)
        d.body = canonical_form(r);
    else if (in.method == "GET" || in.method == "HEAD")
        d.body = std::string();  // nobody reads it; nothing unchecked goes up
    return d;
}

}  // namespace ot::gate
