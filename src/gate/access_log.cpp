#include "gate/access_log.hpp"

#include "gate/log_line.hpp"

namespace ot::gate {

std::string_view log_class(const Exchange& ex) {
    const std::string& c = ex.assessment.price.cost_class;
    return c.empty() ? std::string_view("other") : std::string_view(c);
}

std::string access_log_line(const Exchange& ex, const LogTimes& t) {
    std::string out;
    append_access_log_line(out, ex, t);
    return out;
}

void append_access_log_line(std::string& out, const Exchange& ex, const LogTimes& t) {
    const Assessment& a = ex.assessment;
    JsonLine j(out);
    if (ex.final_charge >= 0) j.num("charged", ex.final_charge);
    j.str("class", log_class(ex));
    if (ex.coalesced) j.boolean("coalesced", true);
    if (!ex.slot_class.empty()) j.str("concurrency_class", ex.slot_class);
    j.num("cost", a.price.cost);
    j.str("identity", ex.identity_hash);
    j.num("latency_ms", t.latency_ms);
    if (ex.measured >= 0) j.num("measured_ms", ex.measured);
    j.str("method", ex.method);
    if (!a.caps.note.empty()) j.str("note", a.caps.note);
    j.str("operation", op_name(a.req.op));
    if (ex.refunded > 0) j.num("refunded", ex.refunded);
    j.str("request_id", ex.request_id);
    j.str("service", service_name(a.req.service));
    j.num("status", static_cast<std::int64_t>(ex.status_sent));
    j.str("tier", ex.tier);
    j.str("ts", t.ts);
    if (!ex.upstream_error.empty()) j.str("upstream_error", ex.upstream_error);
    if (ex.upstream_status || ex.decision.verdict.rfind("upstream", 0) == 0)
        j.num("upstream_ms", t.upstream_ms);
    if (ex.retried) j.boolean("upstream_retried", true);
    j.num("upstream_status", static_cast<std::int64_t>(ex.upstream_status));
    j.str("verdict", ex.decision.verdict);
    j.close();
}

}  // namespace ot::gate
