#include "gate/capabilities_url.hpp"

#include <algorithm>
#include <cctype>
#include <cstring>

#include "gate/text.hpp"

namespace ot::gate {
namespace {

char lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }  // ASCII, no locale
bool ends_authority(char c) {
    switch (c) {
    case '/': case '?': case '#': case '"': case '\'': case '<': case '>': case '&': case ';':
    case ' ': case '\t': case '\r': case '\n': return true;
    default: return false;
    }
}
bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

}  // namespace

std::string url_origin(std::string_view url, std::size_t* authority_end) {
    std::string scheme;
    std::size_t i = 0;
    while (i < url.size() && i < 8 && std::isalpha(static_cast<unsigned char>(url[i]))) scheme += lower(url[i++]);
    if ((scheme != "http" && scheme != "https") || url.substr(i, 3) != "://") return {};
    i += 3;
    std::size_t end = url.find_first_of("/?#", i);
    if (end == std::string_view::npos) end = url.size();
    std::string_view auth = url.substr(i, end - i);
    if (auto at = auth.rfind('@'); at != std::string_view::npos) auth.remove_prefix(at + 1);
    // An escaped or otherwise odd authority is not ours to judge.
    if (auth.empty() || auth.find_first_of("&;<>\"' \t\r\n\\%") != std::string_view::npos) return {};
    std::string_view host = auth, port;
    if (auth.front() == '[') {
        auto close = auth.find(']');
        if (close == std::string_view::npos) return {};
        host = auth.substr(0, close + 1);
        if (close + 1 < auth.size()) {
            if (auth[close + 1] != ':') return {};
            port = auth.substr(close + 2);
        }
    } else if (auto colon = auth.rfind(':'); colon != std::string_view::npos) {
        host = auth.substr(0, colon);
        port = auth.substr(colon + 1);
    }
    for (char c : port)
        if (!std::isdigit(static_cast<unsigned char>(c))) return {};
    if (host.empty()) return {};
    std::string out = scheme + "://";
    for (char c : host) out += lower(c);
    out += ':';
    if (port.empty()) out += scheme == "https" ? "443" : "80";
    else {
        std::size_t z = 0;
        while (z + 1 < port.size() && port[z] == '0') ++z;
        out += port.substr(z);
    }
    if (authority_end) *authority_end = end;
    return out;
}

UrlRewriter::UrlRewriter(const std::vector<std::string>& origins, std::string_view public_base) {
    while (!public_base.empty() && public_base.back() == '/') public_base.remove_suffix(1);
    base_origin_ = url_origin(public_base);
    if (!base_origin_.empty()) base_ = xml_escape(public_base);
    for (const auto& o : origins) add_origin(url_origin(o));
}

void UrlRewriter::add_origin(const std::string& n) {
    // The gate's own origin is never rewritten (to itself, with its path prefix again).
    if (n.empty() || n == base_origin_ || matches(n)) return;
    origins_.push_back(n);
    std::size_t h = n.find("://") + 3, c = n.rfind(':');
    parsed_.push_back({n.compare(0, 5, "https") == 0, n.substr(h, c - h), n.substr(c + 1)});
}

bool UrlRewriter::rewrite_endpoint(std::string_view raw, std::string& out, std::string* matched) {
    if (base_.empty()) return false;
    std::size_t lead = 0;
    while (lead < raw.size() && is_space(raw[lead])) ++lead;
    std::string o = url_origin(raw.substr(lead));
    if (o.empty() || o == base_origin_) return false;
    add_origin(o);
    return rewrite(raw, out, matched);
}

bool UrlRewriter::rewrite(std::string_view raw, std::string& out, std::string* matched) const {
    if (base_.empty()) return false;
    std::size_t lead = 0;
    while (lead < raw.size() && is_space(raw[lead])) ++lead;
    std::size_t end = 0;
    std::string o = url_origin(raw.substr(lead), &end);
    if (o.empty()) return false;
    for (const auto& want : origins_) {
        if (want != o) continue;
        out.append(raw.substr(0, lead));
        out += base_;
        out.append(raw.substr(lead + end));
        if (matched && matched->empty()) *matched = o;
        return true;
    }
    return false;
}

bool UrlRewriter::match(std::string_view scheme, std::string_view authority) const {
    bool https;
    if (scheme.size() == 4 && lower(scheme[0]) == 'h' && lower(scheme[1]) == 't' && lower(scheme[2]) == 't' &&
        lower(scheme[3]) == 'p')
        https = false;
    else if (scheme.size() == 5 && lower(scheme[0]) == 'h' && lower(scheme[1]) == 't' && lower(scheme[2]) == 't' &&
             lower(scheme[3]) == 'p' && lower(scheme[4]) == 's')
        https = true;
    else
        return false;
    if (auto at = authority.rfind('@'); at != std::string_view::npos) authority.remove_prefix(at + 1);
    std::string_view host = authority, port = https ? "443" : "80";
    std::size_t colon = authority.rfind(':');
    if (colon != std::string_view::npos && authority.find(']', colon) == std::string_view::npos) {
        host = authority.substr(0, colon);
        port = authority.substr(colon + 1);
        while (port.size() > 1 && port.front() == '0') port.remove_prefix(1);
    }
    for (const auto& o : parsed_) {
        if (o.https != https || o.host.size() != host.size() || o.port != port) continue;
        std::size_t i = 0;
        while (i < host.size() && o.host[i] == lower(host[i])) ++i;
        if (i == host.size()) return true;
    }
    return false;
}

bool UrlRewriter::matches(const std::string& origin) const {
    for (const auto& o : origins_)
        if (o == origin) return true;
    return false;
}

void AddressScanner::feed(const char* data, std::size_t n, std::string& out, bool final) {
    // What is held back from the last block (a few bytes, or a URL's start of
    // at most ~264) is joined to this block's first kJoin bytes only, not
    // copied in front of the whole block: what is held back after that join
    // is a suffix of those bytes, so the rest of the block is scanned in place.
    constexpr std::size_t kJoin = 1024;
    if (!carry_.empty() && n > 2 * kJoin) {
        std::string head;
        head.swap(carry_);
        head.append(data, kJoin);
        scan(head, out, false);
        const std::size_t c = carry_.size();  // <= 264 < kJoin
        carry_.clear();
        data += kJoin - c;
        n -= kJoin - c;
    }
    if (carry_.empty()) return scan(std::string_view(data, n), out, final);
    std::string joined;
    joined.swap(carry_);
    joined.append(data, n);
    scan(joined, out, final);
}

void AddressScanner::scan(std::string_view buf, std::string& out, bool final) {
    std::size_t done = 0;  // bytes of buf already emitted
    std::size_t from = 0;
    std::size_t keep = std::string_view::npos;  // where an incomplete URL starts
    for (;;) {
        // memchr for ':' then a look at the next two bytes: several times
        // faster than memmem's general search, though ':' is frequent (prefixes, EPSG:…).
        std::size_t h = std::string_view::npos;
        while (from < buf.size()) {
            const void* c = std::memchr(buf.data() + from, ':', buf.size() - from);
            if (!c) break;
            std::size_t at = static_cast<std::size_t>(static_cast<const char*>(c) - buf.data());
            if (at + 2 < buf.size() && buf[at + 1] == '/' && buf[at + 2] == '/') {
                h = at;
                break;
            }
            from = at + 1;
        }
        if (h == std::string_view::npos) break;
        from = h + 3;
        std::size_t s = h >= 5 && lower(buf[h - 1]) == 's' ? h - 5 : h >= 4 ? h - 4 : std::string_view::npos;
        if (s == std::string_view::npos || s < done) continue;
        // An authority longer than this is not one of ours, however the body is cut.
        constexpr std::size_t kMaxAuthority = 256;
        std::size_t end = h + 3;
        while (end < buf.size() && end - (h + 3) <= kMaxAuthority && !ends_authority(buf[end])) ++end;
        if (end - (h + 3) > kMaxAuthority) continue;
        if (end < buf.size() && (buf[end] == '&' || buf[end] == ';')) continue;  // escaped: not ours to judge
        if (end == buf.size() && !final) {
            keep = s;
            break;
        }
        std::string_view scheme = buf.substr(s, h - s);
        if (scheme.size() == 5 && lower(scheme[0]) != 'h') scheme.remove_prefix(1);  // "xhttp://"
        if (!urls_.match(scheme, buf.substr(h + 3, end - h - 3))) continue;
        out.append(buf.substr(done, s - done));
        out += urls_.escaped_base();
        done = end;
        from = done;
        ++rewritten;
        if (first_origin.empty()) first_origin = url_origin(buf.substr(s, end - s));
    }
    // Hold back what may be the start of a URL cut by the chunk ("http", "://").
    std::size_t cut = buf.size();
    if (!final) cut = keep != std::string_view::npos ? keep : std::max(done, buf.size() >= 7 ? buf.size() - 7 : std::size_t{0});
    cut = std::max(cut, done);
    out.append(buf.substr(done, cut - done));
    std::string rest(buf.substr(cut));
    carry_.swap(rest);
}

bool UrlRewriter::rewrite_tokens(std::string_view raw, std::string& out, std::string* matched) const {
    bool any = false;
    std::size_t i = 0;
    while (i < raw.size()) {
        std::size_t j = i;
        while (j < raw.size() && is_space(raw[j])) ++j;
        out.append(raw.substr(i, j - i));
        std::size_t k = j;
        while (k < raw.size() && !is_space(raw[k])) ++k;
        std::string_view tok = raw.substr(j, k - j);
        if (!tok.empty() && !rewrite(tok, out, matched)) out.append(tok);
        else if (!tok.empty()) any = true;
        i = k;
    }
    return any;
}

bool scan_start_tag(std::string_view tag, std::vector<RawAttr>& attrs) {
    attrs.clear();
    if (tag.size() < 3 || tag[0] != '<') return false;
    std::size_t i = 1;
    while (i < tag.size() && !is_space(tag[i]) && tag[i] != '>' && tag[i] != '/') ++i;
    for (;;) {
        while (i < tag.size() && is_space(tag[i])) ++i;
        if (i >= tag.size()) return false;
        if (tag[i] == '>' || tag[i] == '/') return true;
        std::size_t n0 = i;
        while (i < tag.size() && !is_space(tag[i]) && tag[i] != '=') ++i;
        std::string_view name = tag.substr(n0, i - n0);
        while (i < tag.size() && is_space(tag[i])) ++i;
        if (i >= tag.size() || tag[i] != '=') return false;
        ++i;
        while (i < tag.size() && is_space(tag[i])) ++i;
        if (i >= tag.size() || (tag[i] != '"' && tag[i] != '\'')) return false;
        char q = tag[i++];
        std::size_t v0 = i;
        while (i < tag.size() && tag[i] != q) ++i;
        if (i >= tag.size()) return false;
        if (name != "xmlns" && name.substr(0, 6) != "xmlns:") attrs.push_back({name, v0, i});
        ++i;
    }
}

}  // namespace ot::gate
