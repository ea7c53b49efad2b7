#include "gate/capabilities_relay.hpp"

#include <cstdio>
#include <iostream>
#include <map>
#include <mutex>

#include "gate/capabilities_url.hpp"
#include "gate/text.hpp"

namespace ot::gate {
namespace {

namespace http = caps_http;

std::string_view sv(boost::beast::string_view s) { return {s.data(), s.size()}; }

// The first element of a comma-separated forwarded header, trimmed.
std::string first_of(std::string_view v) {
    v = v.substr(0, v.find(','));
    while (!v.empty() && (v.front() == ' ' || v.front() == '\t')) v.remove_prefix(1);
    while (!v.empty() && (v.back() == ' ' || v.back() == '\t')) v.remove_suffix(1);
    return std::string(v);
}

// A host[:port] as it may appear in a URL: nothing that could end the
// authority early or smuggle markup into the document.
bool plain_authority(std::string_view h) {
    if (h.empty() || h.size() > 255) return false;
    for (char ch : h) {
        const bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '.' ||
                        ch == '-' || ch == ':' || ch == '[' || ch == ']' || ch == '_';
        if (!ok) return false;
    }
    return true;
}

bool trusted_peer(const Config& c, const IpAddr& peer) {
    for (const Cidr& n : c.trusted_proxies)
        if (n.contains(peer)) return true;
    return false;
}

CapabilityLimits limits_for(const Config& c, const std::string& base) {
    std::vector<std::string> origins = c.capabilities.rewrite_origins;
    origins.push_back(c.upstream);
    CapabilityLimits l = capability_limits(c.caps, base, origins);
    l.layer_limit = c.capabilities.layer_limit;
    l.addresses_in_other_xml = c.capabilities.addresses_in_all_xml;
    return l;
}

std::uint32_t fnv1a(std::uint32_t h, std::string_view s) {
    for (unsigned char ch : s) h = (h ^ ch) * 16777619u;
    return (h ^ 0xFF) * 16777619u;  // a separator, so "ab","c" != "a","bc"
}

// The gate's ETag suffix in one entity-tag ("-og" and 8 hex digits before the closing quote).
bool has_og_suffix(std::string_view tag, std::string_view* suffix) {
    if (tag.size() < 13 || tag.back() != '"') return false;
    std::string_view s = tag.substr(tag.size() - 12, 11);
    if (s.substr(0, 3) != "-og") return false;
    for (char ch : s.substr(3))
        if (!((ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f'))) return false;
    *suffix = s;
    return true;
}

// If-None-Match / If-Match: our suffix off; a tag of other settings makes
// the header go (the upstream would say 304 for a rewrite that is stale).
void strip_etag_suffix(http::request<http::string_body>& up, http::field f, const std::string& mine) {
    if (up.count(f) == 0) return;
    std::string v(sv(up[f])), out;
    std::size_t i = 0;
    while (i < v.size()) {
        std::size_t j = v.find(',', i);
        if (j == std::string::npos) j = v.size();
        std::string tag = first_of(std::string_view(v).substr(i, j - i));
        std::string_view suffix;
        if (has_og_suffix(tag, &suffix)) {
            if (suffix != mine) {
                up.erase(f);
                return;
            }
            tag.erase(tag.size() - 12, 11);
            if (tag.rfind("W/", 0) == 0) tag.erase(0, 2);  // the upstream's tag may be strong
        }
        if (!out.empty()) out += ", ";
        out += tag;
        i = j + 1;
    }
    up.set(f, out);
}

// Origins the map server advertised, each warned about once.
struct Notices {
    std::mutex mu;
    std::map<std::string, std::string> seen;  // origin -> the base it was rewritten to
};
Notices& notices() {
    static Notices n;
    return n;
}

void note_foreign(const std::string& origin, const std::string& base) {
    if (origin.empty()) return;
    Notices& n = notices();
    {
        std::lock_guard<std::mutex> lock(n.mu);
        if (n.seen.size() >= 16 || !n.seen.emplace(origin, base).second) return;
    }
    std::cerr << "ogc-gate: warning: capabilities: the map server advertises " << origin << "; rewritten to " << base
              << " (set the map server's public URL, e.g. MapServer's ows_onlineresource, to the gate's)\n";
}

// Every origin the map server has advertised as its own so far: a JSON
// answer (items) has no endpoint of its own to learn it from.
std::vector<std::string> learnt_origins() {
    Notices& n = notices();
    std::lock_guard<std::mutex> lock(n.mu);
    std::vector<std::string> v;
    for (const auto& e : n.seen) v.push_back(e.first);
    return v;
}

// OGC API answers that may name the map server: landing page, conformance,
// collections, /api (Op::Other) and the feature answers (items, search).
bool oapi_answer(const OgcRequest& r) {
    return r.op == Op::Other || r.op == Op::Items || r.op == Op::Item || r.op == Op::Search;
}

// How much of a JSON answer is held to be parsed (0: streamed). Items are
// streamed from the first byte; an OpenAPI document may be large.
std::size_t json_buffer_limit(const OgcRequest& r, const std::string& ct) {
    if (r.op != Op::Other) return 0;
    std::string_view p = r.path;
    while (!p.empty() && p.back() == '/') p.remove_suffix(1);
    const std::string_view last = p.substr(p.rfind('/') == std::string_view::npos ? 0 : p.rfind('/') + 1);
    const bool api = ct.find("openapi") != std::string::npos || last == "api" || last == "openapi" ||
                     last == "api.json" || last == "openapi.json";
    return api ? std::size_t{8} << 20 : std::size_t{1} << 20;
}

}  // namespace

std::string caps_public_base(const Config& c, const http::fields& req, const IpAddr& peer, bool* forwarded) {
    if (forwarded) *forwarded = false;
    if (!c.capabilities.public_url.empty()) return c.capabilities.public_url;
    std::string host = first_of(sv(req[http::field::host])), scheme = "http";
    if (trusted_peer(c, peer)) {
        const std::string fh = first_of(sv(req["X-Forwarded-Host"])), fp = to_lower(first_of(sv(req["X-Forwarded-Proto"])));
        if (!fh.empty() || !fp.empty()) {
            if (forwarded) *forwarded = true;
            if (!fh.empty()) host = fh;
            if (fp == "https" || fp == "http") scheme = fp;
        }
    }
    if (!plain_authority(host)) return {};
    return scheme + "://" + host;
}

std::string caps_etag_suffix(const CapabilityLimits& l, bool addresses_in_other_xml) {
    std::uint32_t h = 2166136261u;
    for (std::int64_t v : {l.max_width, l.max_height, l.layer_limit, l.count_default}) h = fnv1a(h, std::to_string(v));
    h = fnv1a(h, l.public_base);
    for (const auto& o : l.rewrite_origins) h = fnv1a(h, o);
    h = fnv1a(h, addresses_in_other_xml ? "1" : "0");
    char buf[16];
    std::snprintf(buf, sizeof buf, "-og%08x", h);
    return buf;
}

std::string caps_weak_etag(const std::string& etag, const std::string& suffix) {
    std::string_view t = etag;
    if (t.rfind("W/", 0) == 0) t.remove_prefix(2);
    if (t.size() < 2 || t.front() != '"' || t.back() != '"') return etag;
    return "W/" + std::string(t.substr(0, t.size() - 1)) + suffix + "\"";
}

void caps_prepare_upstream(http::request<http::string_body>& up, const OgcRequest& r, const Config& c,
                           const http::fields& client, const IpAddr& peer) {
    if (!c.capabilities.rewrite) return;
    if (oapi_answer(r)) {
        // A compressed or partial body cannot be rewritten: capabilities (or
        // OGC API JSON) asked for gzip or a byte range would carry the map
        // server's address.
        up.erase(http::field::accept_encoding);
        up.erase(http::field::range);
        up.erase(http::field::if_range);
    }
    // Only a conditional request has a tag to strip: the suffix (its public
    // base and limits) cost a passed tile more than its head's parsing.
    if (up.count(http::field::if_none_match) == 0 && up.count(http::field::if_match) == 0) return;
    const std::string suffix = caps_etag_suffix(limits_for(c, caps_public_base(c, client, peer, nullptr)),
                                                c.capabilities.addresses_in_all_xml);
    strip_etag_suffix(up, http::field::if_none_match, suffix);
    strip_etag_suffix(up, http::field::if_match, suffix);
}

std::unique_ptr<CapsRelay> CapsRelay::start(const http::response_header<>& up, const OgcRequest& r, const Config& c,
                                            const http::fields& client, const IpAddr& peer, bool head) {
    if (!c.capabilities.rewrite) return nullptr;
    const unsigned status = up.result_int();
    const std::string ce = to_lower(first_of(sv(up[http::field::content_encoding])));
    if (!ce.empty() && ce != "identity") return nullptr;  // not asked for; passed as it came
    const std::string ct = to_lower(sv(up[http::field::content_type]));
    const bool xml = ct.find("xml") != std::string::npos;
    const bool json = !xml && ct.find("json") != std::string::npos && oapi_answer(r);
    const bool html = !xml && !json && ct.find("text/html") != std::string::npos && oapi_answer(r);
    // A 304 (no body) gets the ETag a 200 would have had; the rest must be XML or OGC API JSON or HTML.
    if (!(status == 200 && (xml || json || html)) && !(status == 304 && r.op == Op::Other)) return nullptr;
    if (xml && r.op != Op::Other && !c.capabilities.addresses_in_all_xml) return nullptr;
    std::unique_ptr<CapsRelay> cr(new CapsRelay());
    cr->public_base_ = caps_public_base(c, client, peer, &cr->forwarded_);
    CapabilityLimits l = limits_for(c, cr->public_base_);
    cr->etag_suffix_ = caps_etag_suffix(l, c.capabilities.addresses_in_all_xml);
    if (status != 200 || head) return cr;
    if (json || html) for (auto& o : learnt_origins()) l.rewrite_origins.push_back(std::move(o));
    if (json) {
        cr->json_ = std::make_unique<OapiRewriter>(std::move(l), json_buffer_limit(r, ct));
    } else if (html) {
        cr->html_ = std::make_unique<OapiHtmlRewriter>(l);
    } else {
        cr->rw_ = std::make_unique<CapabilitiesRewriter>(std::move(l));
    }
    return cr;
}

bool CapsRelay::adjust_headers(http::response_header<>& m) const {
    if (m.count(http::field::etag)) m.set(http::field::etag, caps_weak_etag(std::string(sv(m[http::field::etag])), etag_suffix_));
    if (forwarded_) {
        std::string vary(sv(m[http::field::vary]));
        m.set(http::field::vary, (vary.empty() ? "" : vary + ", ") + "X-Forwarded-Host, X-Forwarded-Proto");
    }
    if (m.result_int() != 200) return false;
    // The length and digests describe the upstream's bytes (HEAD included: its GET is rewritten).
    m.erase(http::field::content_length);
    m.erase(http::field::content_md5);
    m.erase("Digest");
    m.erase("Repr-Digest");
    m.erase("Content-Digest");
    return rewrites_body();
}

const std::string& CapsRelay::rewrite(const char* data, std::size_t n, bool more) {
    out_.clear();
    if (json_) {
        json_->feed(data, n, out_);
        if (!more) json_->finish(out_);
    } else if (html_) {
        html_->feed(data, n, out_);
        if (!more) html_->finish(out_);
    } else {
        rw_->feed(data, n, out_);
        if (!more) rw_->finish(out_);
    }
    if (!more) note_foreign(report()->first_foreign_origin, public_base_);
    return out_;
}

std::string caps_readyz_details() {
    Notices& n = notices();
    std::lock_guard<std::mutex> lock(n.mu);
    std::string s;
    for (const auto& [origin, base] : n.seen)
        s += "\ncapabilities_foreign_origin: " + origin + " (rewritten to " + base + ")";
    return s;
}

}  // namespace ot::gate
