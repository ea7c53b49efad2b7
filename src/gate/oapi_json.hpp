// OGC API – Features answers on their way to the client (JSON): the OpenAPI
// document (`/api`) states the gate's maximum `limit`, and every answer names
// the gate instead of the map server (links[].href, servers[].url, any other
// URL of a rewrite origin, JSON's escaped "http:\/\/" form too).
//
// Two ways through, chosen up front by the caller:
// - buffered (landing page, conformance, collections, /api): the body is held
//   up to a bound and parsed with nlohmann-json. A document that does not parse
//   passes unchanged; one that parses has its endpoints learnt (servers[].url,
//   the top-level "self" link: whatever host they name is the map server) and,
//   when it is an OpenAPI document, its `limit` parameters capped. Only a
//   document whose limits changed is re-serialised; otherwise its own bytes go
//   out with the addresses replaced. Past the bound: the streaming way.
// - streaming (items: GeoJSON can be any size): the address scan over the
//   bytes, bounded memory, after a check that the body starts like JSON.
// See doc/capabilities.md.
#pragma once
#include <cstddef>
#include <memory>
#include <string>

#include "gate/capabilities.hpp"

namespace ot::gate {

class OapiRewriter {
public:
    // `buffer_limit` 0: stream from the first byte.
    OapiRewriter(CapabilityLimits limits, std::size_t buffer_limit);
    ~OapiRewriter();
    OapiRewriter(const OapiRewriter&) = delete;
    OapiRewriter& operator=(const OapiRewriter&) = delete;
    void feed(const char* data, std::size_t n, std::string& out);
    void finish(std::string& out);
    const RewriteReport& report() const;

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

// Whole-body convenience (tests, the CLI).
std::string rewrite_oapi(const std::string& body, const CapabilityLimits& limits, std::size_t buffer_limit,
                         RewriteReport* report = nullptr);

}  // namespace ot::gate
