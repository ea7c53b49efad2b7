#include "gate/coalescer.hpp"

#include <algorithm>

#include "gate/text.hpp"

namespace ot::gate {

bool Coalescer::join(const std::string& key, Waiter w) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = flights_.find(key);
    if (it == flights_.end()) {
        flights_.emplace(key, std::vector<Waiter>{});
        return true;
    }
    it->second.push_back(std::move(w));
    joined_++;
    return false;
}

std::size_t Coalescer::finish(const std::string& key, FlightResult r) {
    std::vector<Waiter> waiters;
    {
        std::lock_guard<std::mutex> lock(mu_);
        auto it = flights_.find(key);
        if (it == flights_.end()) return 1;
        waiters = std::move(it->second);
        flights_.erase(it);
    }
    r.sharers = waiters.size() + 1;
    // Outside the lock: a waiter may start a flight of its own (Overflow).
    for (auto& w : waiters) w(r);
    return r.sharers;
}

std::size_t Coalescer::in_flight() const {
    std::lock_guard<std::mutex> lock(mu_);
    return flights_.size();
}

std::uint64_t Coalescer::joined_total() const {
    std::lock_guard<std::mutex> lock(mu_);
    return joined_;
}

namespace {

bool case_insensitive_value(std::string_view k) {
    for (const char* n : {"SERVICE", "REQUEST", "VERSION", "FORMAT", "CRS", "SRS", "EXCEPTIONS", "TRANSPARENT",
                          "TILEMATRIXSET", "INFO_FORMAT"})
        if (k == n) return true;
    return false;
}

std::string upper(std::string_view v) {
    std::string s(v);
    for (char& ch : s)
        if (ch >= 'a' && ch <= 'z') ch = static_cast<char>(ch - 'a' + 'A');
    return s;
}

void field(std::string& out, std::string_view s) {
    // Length-prefixed, so no value can forge a separator.
    out += std::to_string(s.size());
    out += ':';
    out += s;
}

}  // namespace

std::optional<std::string> coalesce_key(const HttpIn& in, const OgcRequest& r, const HeaderList& h, const Config& c) {
    if (!c.coalesce.enabled) return std::nullopt;
    if (in.method != "GET" && in.method != "HEAD") return std::nullopt;
    if (!in.body.empty() || r.body_kind != BodyKind::None || !r.problem.empty()) return std::nullopt;
    const bool tile_or_map = r.op == Op::GetMap || r.op == Op::GetTile || r.service == Service::Tiles;
    if (!tile_or_map) return std::nullopt;
    if (header_value(h, "Range")) return std::nullopt;

    // The canonical form is what goes upstream: two requests that MapServer
    // could read differently never share a key (LAYERS%20= is refused, not
    // trimmed). Values of case-insensitive parameters are upper-cased.
    std::vector<std::pair<std::string_view, std::string>> params;
    params.reserve(r.query.params.size());
    for (const Param& p : r.query.params)
        params.emplace_back(p.name, case_insensitive_value(p.key) ? upper(p.value) : std::string(p.value));
    std::sort(params.begin(), params.end(), [](const auto& a, const auto& b) {
        return a.first != b.first ? a.first < b.first : a.second < b.second;
    });

    std::string key;
    field(key, in.method);
    field(key, r.canonical_path);
    for (const auto& [k, v] : params) {
        field(key, k);
        field(key, v);
    }
    for (const char* name : {"Accept", "Accept-Encoding", "Accept-Language", "If-None-Match", "If-Modified-Since"}) {
        auto v = header_value(h, name);
        field(key, v ? *v : std::string("-"));
    }
    bool is_public = false;
    // The normalised path: /tiles/../private/x is /private/x.
    for (const std::string& p : c.coalesce.public_paths) is_public |= r.path.rfind(p, 0) == 0;
    if (!is_public) {
        std::string creds;
        std::vector<std::string> names = c.key_headers;
        names.push_back("Authorization");
        names.push_back("Cookie");
        for (const std::string& n : names) {
            auto v = header_value(h, n);
            field(creds, n);
            field(creds, v ? *v : std::string());
        }
        field(key, keyed_hash(c.hash_secret, creds));
    }
    return key;
}

}  // namespace ot::gate
