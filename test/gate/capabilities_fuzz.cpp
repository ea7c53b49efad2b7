// libFuzzer target for the capabilities rewriter (test/gate/capabilities_fuzz.t.sh).
// Invariants on any input: no crash or sanitizer report; the output does not
// depend on where the body is cut into chunks; with nothing to state and no
// origin to rewrite, the output is the input; a body passed raw from its first
// byte is the input.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "gate/capabilities.hpp"
#include "gate/oapi_json.hpp"

using namespace ot::gate;

namespace {

std::string run(const std::string& in, const CapabilityLimits& l, std::size_t cut, std::size_t chunk, RewriteReport* rep) {
    CapabilitiesRewriter r(l);
    std::string out;
    std::size_t i = 0;
    if (cut > 0 && cut < in.size()) {
        r.feed(in.data(), cut, out);
        i = cut;
    }
    for (; i < in.size(); i += chunk) r.feed(in.data() + i, std::min(chunk, in.size() - i), out);
    r.finish(out);
    if (rep) *rep = r.report();
    return out;
}

std::string run_json(const std::string& in, const CapabilityLimits& l, std::size_t buffer, std::size_t cut,
                     std::size_t chunk, RewriteReport* rep) {
    OapiRewriter r(l, buffer);
    std::string out;
    std::size_t i = 0;
    if (cut > 0 && cut < in.size()) {
        r.feed(in.data(), cut, out);
        i = cut;
    }
    for (; i < in.size(); i += chunk) r.feed(in.data() + i, std::min(chunk, in.size() - i), out);
    r.finish(out);
    if (rep) *rep = r.report();
    return out;
}

// The OGC API JSON path: streamed and buffered, the output does not depend
// on the chunking; what is not JSON, or has nothing to rewrite, is the input;
// the map server's address never survives a streamed answer; a buffered
// answer that was re-serialised is JSON.
void json_invariants(const std::string& in, std::size_t cut, std::size_t chunk) {
    CapabilityLimits l;
    l.count_default = 100;
    l.public_base = "https://gate.example/p\"q";
    l.rewrite_origins = {"http://127.0.0.1:18900", "http://map"};
    l.max_pending = 4096;
    for (std::size_t buffer : {std::size_t{0}, std::size_t{256}, std::size_t{1} << 20}) {
        RewriteReport a, b;
        const std::string whole = run_json(in, l, buffer, 0, in.size() + 1, &a);
        const std::string parts = run_json(in, l, buffer, cut, chunk, &b);
        if (parts != whole) std::abort();  // chunking changed the output
        if (a.passed_raw && whole != in) std::abort();
        if (a.changes.empty() && a.urls_rewritten == 0 && whole != in) std::abort();
        if (buffer == 0 && !a.passed_raw && whole.find("http://127.0.0.1:18900/") != std::string::npos &&
            in.find("http://127.0.0.1:18900/") != std::string::npos && a.urls_rewritten == 0)
            std::abort();
        CapabilityLimits none;
        none.max_pending = 4096;
        if (run_json(in, none, buffer, cut, chunk, nullptr) != in) std::abort();
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size < 2) return 0;
    const std::size_t cut = data[0] * 7u, chunk = 1 + data[1] % 64;
    const std::string in(reinterpret_cast<const char*>(data) + 2, size - 2);
    json_invariants(in, cut, chunk);
    for (bool full : {false, true}) {
        CapabilityLimits l;
        l.max_width = l.max_height = 2048;
        l.layer_limit = 3;
        l.count_default = 100;
        l.public_base = "https://gate.example/p&q";
        l.rewrite_origins = {"http://127.0.0.1:18900", "http://map"};
        l.max_pending = 4096;
        l.full_parse = full;
        RewriteReport a, b;
        const std::string whole = run(in, l, 0, in.size() + 1, &a);
        const std::string parts = run(in, l, cut, chunk, &b);
        // max_pending is about the longest run held at once, which chunking does change.
        const bool held_too_much = a.reason.find("max_pending") != std::string::npos ||
                                   b.reason.find("max_pending") != std::string::npos;
        // After a parse error the output is what had been emitted (edits
        // included) and then the input as it came: how much had been emitted
        // depends on the chunks, the tail from the error on does not.
        const auto err = b.reason.find("XML error at byte ");
        // Fast mode: a capabilities document's rest after the error has its
        // map-server addresses replaced (never leaked), so its bytes differ.
        const bool scanned_rest = b.reason.find("addresses only") != std::string::npos;
        if (err != std::string::npos && scanned_rest) {
            if (parts.empty() && !in.empty()) std::abort();
        } else if (err != std::string::npos) {
            const std::size_t at = std::strtoull(b.reason.c_str() + err + 18, nullptr, 10);
            if (at > in.size()) std::abort();
            const std::size_t tail = in.size() - at;
            if (parts.size() < tail || parts.compare(parts.size() - tail, tail, in, at, tail) != 0) std::abort();
        } else if (!held_too_much && a.reason.find("XML error") == std::string::npos && parts != whole) {
            std::abort();  // chunking changed the output
        }
        if (a.passed_raw && a.kind == CapsDocKind::Unknown && whole != in) std::abort();
        CapabilityLimits none;
        none.full_parse = full;
        none.max_pending = 4096;
        // paging_when_absent is on by default: a WFS 2.0 OperationsMetadata without
        // ImplementsResultPaging gets it inserted, which is something to do.
        none.paging_when_absent = false;
        RewriteReport c;
        const std::string same = run(in, none, cut, chunk, &c);
        // Comments are inserted only when there is a cap to state: none here.
        if (same != in) std::abort();  // nothing to do must change nothing
    }
    return 0;
}
