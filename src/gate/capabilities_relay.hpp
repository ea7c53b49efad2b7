// The capabilities rewrite on the gate's response path: which answers go
// through the rewriter (capabilities.hpp), what the request to the map server
// must not ask for so that the answer can be rewritten (compression, ranges),
// and what the rewrite does to the answer's headers (length, ETag). The
// session calls in at three points (upstream_client.cpp); the policy is here.
// See doc/capabilities.md.
#pragma once
#include <boost/beast/http.hpp>
#include <memory>
#include <string>

#include "gate/capabilities.hpp"
#include "gate/oapi_html.hpp"
#include "gate/oapi_json.hpp"
#include "gate/config.hpp"
#include "gate/net.hpp"
#include "gate/request.hpp"

namespace ot::gate {

namespace caps_http = boost::beast::http;

// The gate's public base URL for this request: capabilities.public_url, else
// http(s)://Host — the scheme and host from X-Forwarded-Proto/-Host when the
// peer is a trusted proxy. Empty when no usable host is known. `forwarded`
// says the answer depends on the forwarded headers (Vary).
std::string caps_public_base(const Config& c, const caps_http::fields& req, const IpAddr& peer, bool* forwarded);

// Before forwarding: a request that may be answered by a document to rewrite
// (any operation the gate does not price: GetCapabilities in every spelling
// and method, DescribeFeatureType, OGC API landing pages…) asks the map server
// for identity encoding and the whole body; the gate's own ETag suffix is
// taken off If-None-Match/If-Match (or the header dropped when the suffix is
// from other settings, so that an old rewrite is not revalidated).
void caps_prepare_upstream(caps_http::request<caps_http::string_body>& up, const OgcRequest& r, const Config& c,
                           const caps_http::fields& client, const IpAddr& peer);

class CapsRelay {
public:
    // Null when the answer passes as it came (not XML, nor OGC API JSON or
    // HTML, compressed, an error status, rewriting off…).
    static std::unique_ptr<CapsRelay> start(const caps_http::response_header<>& up, const OgcRequest& r,
                                            const Config& c, const caps_http::fields& client, const IpAddr& peer,
                                            bool head);
    // The answer's header before it leaves: weak ETag, no Content-Length
    // (and Content-MD5/Digest) when the body is rewritten, Vary. True when
    // the body's length is no longer known (send it chunked).
    bool adjust_headers(caps_http::response_header<>& m) const;
    bool rewrites_body() const { return rw_ != nullptr || json_ != nullptr || html_ != nullptr; }
    // Rewrites one upstream block; the result stays valid until the next call.
    const std::string& rewrite(const char* data, std::size_t n, bool more);
    const RewriteReport* report() const {
        return rw_ ? &rw_->report() : json_ ? &json_->report() : html_ ? &html_->report() : nullptr;
    }

private:
    CapsRelay() = default;
    std::unique_ptr<CapabilitiesRewriter> rw_;
    std::unique_ptr<OapiRewriter> json_;
    std::unique_ptr<OapiHtmlRewriter> html_;
    std::string out_, public_base_, etag_suffix_;
    bool forwarded_ = false;
};

// The ETag suffix for these settings ("-og" and 8 hex digits).
std::string caps_etag_suffix(const CapabilityLimits& l, bool addresses_in_other_xml);
// "W/\"x-ogSUFFIX\"" from "\"x\"" or "W/\"x\"" (other shapes come back unchanged).
std::string caps_weak_etag(const std::string& etag, const std::string& suffix);

// The map server's own addresses seen in its documents (warned about once
// each), for /readyz: "" or lines "capabilities_foreign_origin: ORIGIN (rewritten to BASE)".
std::string caps_readyz_details();

}  // namespace ot::gate
