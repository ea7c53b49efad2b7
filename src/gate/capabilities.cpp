// The stream half of the capabilities rewrite: expat reports where each tag
// lies in the input, edits are recorded against those byte offsets, and bytes
// leave only up to the end of the last complete event (and never past a value
// that may still be replaced). So an error at any later point can only stop
// further edits: the rest goes out as it came.
#include "gate/capabilities.hpp"

#include <expat.h>

#include <algorithm>
#include <cmath>
#include <deque>
#include <string_view>

#include "gate/capabilities_doc.hpp"

namespace ot::gate {

CapabilityLimits capability_limits(const Caps& caps, const std::string& public_base,
                                   const std::vector<std::string>& rewrite_origins) {
    CapabilityLimits l;
    std::int64_t side = caps.max_pixels > 0 ? static_cast<std::int64_t>(std::sqrt(static_cast<double>(caps.max_pixels))) : 0;
    while (side > 0 && side * side > caps.max_pixels) --side;  // sqrt of a double may round up
    if (caps.max_side > 0 && (side == 0 || caps.max_side < side)) side = caps.max_side;
    l.max_width = l.max_height = side;
    l.count_default = caps.max_features > 0 ? caps.max_features : 0;
    l.public_base = public_base;
    l.rewrite_origins = rewrite_origins;
    return l;
}

const char* caps_doc_kind_name(CapsDocKind k) {
    switch (k) {
    case CapsDocKind::Wms111: return "WMS 1.1.1";
    case CapsDocKind::Wms130: return "WMS 1.3.0";
    case CapsDocKind::Wfs100: return "WFS 1.0.0";
    case CapsDocKind::Wfs110: return "WFS 1.1.0";
    case CapsDocKind::Wfs200: return "WFS 2.0";
    case CapsDocKind::Wmts100: return "WMTS 1.0.0";
    case CapsDocKind::Wcs: return "WCS";
    case CapsDocKind::OapiJson: return "OGC API JSON";
    case CapsDocKind::OapiHtml: return "OGC API HTML";
    case CapsDocKind::OpenApi: return "OpenAPI";
    default: return "unknown";
    }
}

struct CapabilitiesRewriter::Impl final : DocSink {
    explicit Impl(CapabilityLimits l) : doc(std::move(l), *this), scanner(doc.urls()) {}
    ~Impl() override { drop_parser(); }

    CapsDocRules doc;
    AddressScanner scanner;
    XML_Parser parser = nullptr;
    bool raw = false;
    bool scanning = false;         // past the structural part: addresses only
    bool switch_to_scan = false;   // asked for by the rules, done after XML_Parse returns
    std::size_t parsed_urls = 0;   // rewritten while parsing
    std::string pending;        // input bytes from `base` on, not yet emitted
    std::uint64_t base = 0;     // input offset of pending[0]
    std::uint64_t total = 0;    // input bytes seen
    std::uint64_t safe = 0;     // end of the last complete event
    std::uint64_t hold = UINT64_MAX;
    struct Edit {
        std::uint64_t off, len;
        std::string text;
    };
    std::deque<Edit> edits;
    bool edits_out_of_order = false;

    // DocSink
    std::string_view bytes(std::uint64_t off, std::uint64_t len) override {
        if (off < base || off + len > base + pending.size()) return {};
        return std::string_view(pending).substr(off - base, len);
    }
    void edit(std::uint64_t off, std::uint64_t len, std::string text) override {
        if (!edits.empty() && off < edits.back().off + edits.back().len) {
            edits_out_of_order = true;
            return;
        }
        edits.push_back({off, len, std::move(text)});
    }
    void set_hold(std::uint64_t off) override { hold = off; }
    void release_hold() override { hold = UINT64_MAX; }
    void structural_done() override {
        switch_to_scan = true;
        XML_StopParser(parser, XML_FALSE);
    }
    void stop(const std::string& why) override {
        if (!raw && doc.report.reason.empty()) doc.report.reason = why;
        XML_StopParser(parser, XML_FALSE);
    }

    void drop_parser() {
        if (parser) XML_ParserFree(parser);
        parser = nullptr;
    }

    void start_parser() {
        parser = XML_ParserCreateNS(nullptr, kNsSep);
        XML_SetReturnNSTriplet(parser, 1);
        XML_SetUserData(parser, this);
        XML_SetElementHandler(parser, &Impl::on_start, &Impl::on_end);
        XML_SetCharacterDataHandler(parser, &Impl::on_text);
    }

    std::uint64_t event_off() const { return static_cast<std::uint64_t>(XML_GetCurrentByteIndex(parser)); }
    std::uint64_t event_end() const {
        return event_off() + static_cast<std::uint64_t>(std::max(0, XML_GetCurrentByteCount(parser)));
    }

    static void on_start(void* ud, const XML_Char* name, const XML_Char** atts) {
        auto* self = static_cast<Impl*>(ud);
        std::uint64_t off = self->event_off(), end = self->event_end();
        self->doc.on_start(name, atts, XML_GetSpecifiedAttributeCount(self->parser) / 2, off, end);
        self->safe = std::max(self->safe, end);
    }
    static void on_end(void* ud, const XML_Char* name) {
        auto* self = static_cast<Impl*>(ud);
        std::uint64_t off = self->event_off(), end = self->event_end();
        self->doc.on_end(name, off, end);
        self->safe = std::max(self->safe, end);
    }
    static void on_text(void* ud, const XML_Char* s, int len) {
        auto* self = static_cast<Impl*>(ud);
        self->doc.on_text(std::string_view(s, static_cast<std::size_t>(len)));
        self->safe = std::max(self->safe, self->event_end());
    }

    // Emits input up to `upto`, applying the edits that start before it.
    void emit(std::uint64_t upto, std::string& out) {
        upto = std::min(upto, base + pending.size());
        std::uint64_t at = base;
        while (!edits.empty() && (edits.front().off < upto || (edits.front().off == upto && edits.front().len == 0))) {
            Edit& e = edits.front();
            if (e.off + e.len > upto) break;  // cannot happen while holds are kept; stay safe
            out.append(pending, at - base, e.off - at);
            out += e.text;
            at = e.off + e.len;
            edits.pop_front();
        }
        if (upto > at) out.append(pending, at - base, upto - at);
        else upto = at;
        pending.erase(0, upto - base);
        base = upto;
    }

    void give_up(const std::string& why, std::string& out) {
        if (doc.report.reason.empty()) doc.report.reason = why;
        doc.report.passed_raw = true;
        raw = true;
        edits.clear();
        out += pending;  // everything after the last emitted byte, as it came
        base += pending.size();
        pending.clear();
        std::string().swap(pending);
        drop_parser();
    }

    void scan(const char* data, std::size_t n, std::string& out, bool final) {
        if (!doc.urls().active()) out.append(data, n);
        else scanner.feed(data, n, out, final);
        doc.report.urls_rewritten = parsed_urls + scanner.rewritten;
        if (doc.report.first_foreign_origin.empty()) doc.report.first_foreign_origin = scanner.first_origin;
    }

    // The rules have made every structural edit: emit what was parsed, scan the rest.
    void begin_scan(std::string& out) {
        emit(std::min(safe, hold), out);
        parsed_urls = doc.report.urls_rewritten;
        scanning = true;
        drop_parser();
        std::string rest;
        rest.swap(pending);
        base += rest.size();
        edits.clear();
        scan(rest.data(), rest.size(), out, false);
    }

    void feed(const char* data, std::size_t n, std::string& out) {
        if (raw) {
            out.append(data, n);
            return;
        }
        if (scanning) {
            scan(data, n, out, false);
            return;
        }
        if (n == 0) return;
        pending.append(data, n);
        total += n;
        if (!parser) {
            // Two bytes tell UTF-16/32 from ASCII-compatible input, whose byte
            // offsets the edits rely on.
            if (pending.size() < 2) return;
            auto b0 = static_cast<unsigned char>(pending[0]), b1 = static_cast<unsigned char>(pending[1]);
            if (b0 == 0xFE || b0 == 0xFF || b0 == 0x00 || b1 == 0x00) return give_up("not UTF-8 (UTF-16/32 byte order)", out);
            start_parser();
            data = pending.data();
            n = pending.size();
        }
        if (XML_Parse(parser, data, static_cast<int>(n), XML_FALSE) != XML_STATUS_OK) {
            if (switch_to_scan && !edits_out_of_order) return begin_scan(out);
            fail(out);
            return;
        }
        after_parse(out);
    }

    // A parse error in a capabilities document: its own bytes go on as they
    // came, but (fast mode) still with the map server's addresses replaced —
    // a malformed document must not lead clients around the gate.
    void fail(std::string& out, bool final = false) {
        std::string why = doc.report.reason;
        const bool stopped = !why.empty();
        if (why.empty())
            why = std::string("XML error at byte ") + std::to_string(XML_GetCurrentByteIndex(parser)) + ": " +
                  XML_ErrorString(XML_GetErrorCode(parser));
        if (!stopped && !doc.limits.full_parse && doc.report.kind != CapsDocKind::Unknown && !edits_out_of_order &&
            doc.urls().active()) {
            doc.report.reason = why + " (the rest: addresses only)";
            begin_scan(out);
            if (final) scan(nullptr, 0, out, true);
            return;
        }
        give_up(why, out);
    }

    void after_parse(std::string& out) {
        if (edits_out_of_order) return give_up("internal: edits out of order", out);
        emit(std::min(safe, hold), out);
        if (pending.size() > doc.limits.max_pending) give_up("a token or held value larger than max_pending", out);
    }

    void finish(std::string& out) {
        if (raw) return;
        if (scanning) return scan(nullptr, 0, out, true);
        if (!parser) {  // empty, or one byte
            give_up("too short for a document", out);
            return;
        }
        if (XML_Parse(parser, nullptr, 0, XML_TRUE) != XML_STATUS_OK) {
            if (switch_to_scan && !edits_out_of_order) {
                begin_scan(out);
                return scan(nullptr, 0, out, true);
            }
            return fail(out, true);
        }
        if (edits_out_of_order) return give_up("internal: edits out of order", out);
        emit(base + pending.size(), out);
        drop_parser();
    }
};

CapabilitiesRewriter::CapabilitiesRewriter(CapabilityLimits limits)
    : impl_(std::make_unique<Impl>(std::move(limits))) {}
CapabilitiesRewriter::~CapabilitiesRewriter() = default;
void CapabilitiesRewriter::feed(const char* data, std::size_t n, std::string& out) { impl_->feed(data, n, out); }
void CapabilitiesRewriter::finish(std::string& out) { impl_->finish(out); }
const RewriteReport& CapabilitiesRewriter::report() const { return impl_->doc.report; }

std::string rewrite_capabilities(const std::string& body, const CapabilityLimits& limits, RewriteReport* report) {
    CapabilitiesRewriter r(limits);
    std::string out;
    out.reserve(body.size() + 256);
    r.feed(body.data(), body.size(), out);
    r.finish(out);
    if (report) *report = r.report();
    return out;
}

}  // namespace ot::gate
