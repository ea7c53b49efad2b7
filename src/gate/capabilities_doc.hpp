// The document half of the capabilities rewrite: which element of which
// capabilities document carries a cap, and what to insert or lower there.
// Driven by the stream half (capabilities.cpp) with expat's events and the
// byte offsets of each; answers with edits against those offsets.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "gate/capabilities.hpp"
#include "gate/capabilities_url.hpp"

namespace ot::gate {

// Separates namespace URI, local name and prefix in expat's names.
constexpr char kNsSep = '\x1F';

// What the document rules may ask of the stream.
class DocSink {
public:
    virtual ~DocSink() = default;
    // Input bytes not yet emitted (empty view when out of range).
    virtual std::string_view bytes(std::uint64_t off, std::uint64_t len) = 0;
    // Replace [off, off+len) with text (len 0: insert); in increasing order.
    virtual void edit(std::uint64_t off, std::uint64_t len, std::string text) = 0;
    // Emit nothing from `off` on until released (a value that may be replaced).
    virtual void set_hold(std::uint64_t off) = 0;
    virtual void release_hold() = 0;
    // Not a document to rewrite: the rest goes out raw.
    virtual void stop(const std::string& why) = 0;
    // Every structural edit is made: the rest needs its addresses rewritten only.
    virtual void structural_done() = 0;
};

class CapsDocRules {
public:
    CapsDocRules(CapabilityLimits limits, DocSink& sink);
    void on_start(const char* name, const char** atts, int specified, std::uint64_t off, std::uint64_t end);
    void on_end(const char* name, std::uint64_t off, std::uint64_t end);
    void on_text(std::string_view s);

    CapabilityLimits limits;
    RewriteReport report;
    const UrlRewriter& urls() const { return urls_; }

private:
    // Capability/Request (WMS, WFS 1.0, WCS 1.0) and the OWS OperationsMetadata
    // name the operations' endpoints (HTTP/Get, HTTP/Post): parsed, not scanned,
    // so that every endpoint is rewritten whatever host it names.
    enum class Role : std::uint8_t { Other, Service, OpsMeta, GetFeatureOp, Constraint, Capability, Request, Operations, Http, GetPost };
    enum class Val : std::uint8_t { None, LayerLimit, MaxWidth, MaxHeight, CountDefault, Paging, UrlText, EndpointText };
    struct Frame {
        Role role = Role::Other;
        Val constraint = Val::None;  // for Role::Constraint: which one
        bool op_level = false;       // a Constraint inside the GetFeature Operation
        std::uint64_t start_off = 0;
        std::string prefix;          // of containers we insert into
    };
    struct Value {
        Val what = Val::None;
        std::size_t depth = 0;  // frames.size() when it started
        bool op_level = false;
        std::uint64_t start_off = 0, text_start = 0;
        std::string qname, text;
    };

    void classify_root(std::string_view uri, std::string_view local, const char** atts);
    void begin_value(Val what, bool op_level, std::uint64_t off, std::uint64_t end, std::string_view qname);
    void abort_value();
    void done_structure();  // the rest needs addresses only (once)
    void end_value(std::uint64_t off, bool empty_element);
    void insert_wms_before(Val upto, std::uint64_t off);
    void insert_constraints(bool op_level, std::uint64_t off);
    void rewrite_attributes(const char** atts, int specified, std::uint64_t off, std::uint64_t end, bool endpoint);
    std::string qualify(std::string_view local) const { return prefix_.empty() ? std::string(local) : prefix_ + ":" + std::string(local); }

    DocSink& sink_;
    UrlRewriter urls_;
    bool structural_done_ = false;
    CapsDocKind kind_ = CapsDocKind::Unknown;
    std::vector<Frame> frames_;
    Value value_;
    std::string prefix_;  // of the element being inserted into
    // Seen (or already inserted) in this document.
    bool layer_limit_ = false, max_width_ = false, max_height_ = false;
    bool paging_ = false, count_ = false, count_op_ = false;
    std::vector<RawAttr> raw_attrs_;
};

}  // namespace ot::gate
