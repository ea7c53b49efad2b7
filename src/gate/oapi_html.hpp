// OGC API answers in HTML (f=html, or a browser's Accept): MapServer's
// templates link every page, and each feature's page, to its own address, so a
// browser that follows them leaves the gate (or hits an address it cannot
// reach). An HTML attribute value escapes '&' and quotes as XML does, so the
// capabilities address scan rewrites the map server's origins without parsing
// the page; everything else passes byte for byte.
#pragma once
#include <cstddef>
#include <string>

#include "gate/capabilities.hpp"
#include "gate/capabilities_url.hpp"

namespace ot::gate {

class OapiHtmlRewriter {
public:
    explicit OapiHtmlRewriter(const CapabilityLimits& limits);
    OapiHtmlRewriter(const OapiHtmlRewriter&) = delete;
    OapiHtmlRewriter& operator=(const OapiHtmlRewriter&) = delete;
    void feed(const char* data, std::size_t n, std::string& out);
    void finish(std::string& out);
    const RewriteReport& report() const { return report_; }

private:
    UrlRewriter urls_;
    AddressScanner scan_;  // refers to urls_: declared after it
    RewriteReport report_;
};

}  // namespace ot::gate
