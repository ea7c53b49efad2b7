// Rewrites a capabilities document on its way to the client so that it states
// the gate's caps (WMS 1.3.0 MaxWidth/MaxHeight/LayerLimit, WFS 2.0
// ImplementsResultPaging/CountDefault) and names the gate, not the map server,
// in its addresses (OnlineResource, xlink:href, WMTS ResourceURL templates,
// schemaLocation). See doc/capabilities.md for what each client reads.
//
// Streaming, bounded memory: the body is fed in chunks and the output comes
// out in chunks. The input bytes pass through unchanged except where a value
// is replaced or an element inserted, so prefixes, comments and formatting
// survive. A document that is not what the rewriter expects (not XML, an
// unknown root, UTF-16, a parse error half-way, a token larger than
// max_pending) is never broken: what has been emitted is the input with
// complete edits up to a point every byte before which was parsed, and
// everything after that point goes out raw. Past the sections that carry caps
// (Service, OperationsMetadata) only addresses are left to rewrite, which a
// byte scan does (see CapabilityLimits::full_parse).
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "gate/config.hpp"

namespace ot::gate {

struct CapabilityLimits {
    // WMS 1.3.0 Service elements; 0 = say nothing. A larger upstream value is
    // lowered, a smaller one kept, a missing one inserted.
    std::int64_t max_width = 0;
    std::int64_t max_height = 0;
    std::int64_t layer_limit = 0;
    // WFS 2.0 CountDefault (OperationsMetadata and its GetFeature operation); 0 = say nothing.
    std::int64_t count_default = 0;
    // Insert ImplementsResultPaging TRUE when the upstream does not state it.
    // An explicit FALSE from the upstream is kept: the gate does not page itself.
    bool paging_when_absent = true;
    // The gate's public base URL ("https://maps.example.org", may carry a path
    // prefix). Empty: addresses are left alone.
    std::string public_base;
    // Origins (scheme://host[:port]) whose URLs are rewritten to public_base:
    // the upstream's, plus any the map server is known to advertise.
    std::vector<std::string> rewrite_origins;
    // A root that is not a capabilities document (a GML FeatureCollection,
    // a DescribeFeatureType schema, an exception report): false passes it
    // unchanged; true rewrites the rewrite origins' URLs in it (the address
    // scan, no parsing) — MapServer names itself in GML's schemaLocation.
    bool addresses_in_other_xml = false;
    // Largest run of input held back (one token, or a value being replaced).
    // Past it the rest of the document goes out raw.
    std::size_t max_pending = 1u << 20;
    // false: once the sections that carry caps are rewritten, the rest of the
    // document is only scanned for the upstream's addresses (no XML parsing:
    // several times faster, and a malformed rest gets its addresses rewritten
    // but is otherwise passed as it came). true: expat parses to the end and a
    // parse error passes the rest completely unchanged.
    bool full_parse = false;
};

// What the gate's caps let it promise: a MaxWidth × MaxHeight map must pass
// the pixel cap, so each side is at most √max_pixels (and max_side when set).
CapabilityLimits capability_limits(const Caps& caps, const std::string& public_base,
                                   const std::vector<std::string>& rewrite_origins);

enum class CapsDocKind { Unknown, Wms111, Wms130, Wfs100, Wfs110, Wfs200, Wmts100, Wcs, OapiJson, OapiHtml, OpenApi };
const char* caps_doc_kind_name(CapsDocKind k);

struct RewriteReport {
    CapsDocKind kind = CapsDocKind::Unknown;
    bool passed_raw = false;          // gave up (or never started): see reason
    std::string reason;               // why, for the log
    std::vector<std::string> changes; // "MaxWidth 8192 -> 4096", "inserted CountDefault 100", …
    std::size_t urls_rewritten = 0;
    std::string first_foreign_origin; // the first upstream origin replaced (warn once, /readyz)
};

class CapabilitiesRewriter {
public:
    explicit CapabilitiesRewriter(CapabilityLimits limits);
    ~CapabilitiesRewriter();
    CapabilitiesRewriter(const CapabilitiesRewriter&) = delete;
    CapabilitiesRewriter& operator=(const CapabilitiesRewriter&) = delete;

    // Appends to `out` whatever can be emitted after this chunk (possibly nothing).
    void feed(const char* data, std::size_t n, std::string& out);
    // End of the body: appends the rest.
    void finish(std::string& out);
    const RewriteReport& report() const;

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

// Whole-body convenience (tests, small documents).
std::string rewrite_capabilities(const std::string& body, const CapabilityLimits& limits,
                                 RewriteReport* report = nullptr);

}  // namespace ot::gate
