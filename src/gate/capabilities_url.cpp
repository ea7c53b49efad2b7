#include "gate/capabilities_url.hpp"

#include <algorithm>
#include <cctype>
#include <cstring>
#include "gate/text.hpp"

namespace ot::gate {
namespace {

char lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }  // ASCII, no locale
struct AuthorityEnds {
    bool at[256] = {};
    AuthorityEnds() {
        for (unsigned char c : std::string_view("/?#\"'<>&; \t\r\n")) at[c] = true;
    }
};
const AuthorityEnds kEnds;
bool ends_authority(char c) { return kEnds.at[static_cast<unsigned char>(c)]; }
bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

std::string json_escape(std::string_view s) {
    std::string o;
    for (char c : s) {
        if (c == '"' || c == '\\') {
            o += '\\';
            o += c;
        } else if (static_cast<unsigned char>(c) < 0x20) {
            static const char hex[] = "0123456789abcdef";
            o += "\\u00";
            o += hex[(c >> 4) & 0xF];
            o += hex[c & 0xF];
        } else {
            o += c;
        }
    }
    return o;
}

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
    if (!base_origin_.empty()) {
        base_ = xml_escape(public_base);
        json_base_ = json_escape(public_base);
    }
    for (const auto& o : origins) add_origin(url_origin(o));
}

void UrlRewriter::add_origin(const std::string& n) {
    // The gate's own origin is never rewritten (to itself, with its path prefix again).
    if (n.empty() || n == base_origin_ || matches(n)) return;
    origins_.push_back(n);
    std::size_t h = n.find("://") + 3, c = n.rfind(':');
    const bool https = n.compare(0, 5, "https") == 0;
    const std::string host = n.substr(h, c - h), port = n.substr(c + 1);
    parsed_.push_back({https, host, port, host + ":" + port, port == (https ? "443" : "80")});
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
    // Nearly every URL of a map server spells its origin the one usual way.
    for (const auto& o : parsed_)
        if (o.https == https && (authority == o.exact || (o.default_port && authority == o.host))) return true;
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

std::size_t UrlRewriter::exact_prefix(bool https, std::string_view rest) const {
    for (const auto& o : parsed_) {
        if (o.https != https) continue;
        if (rest.size() > o.exact.size() && rest.compare(0, o.exact.size(), o.exact) == 0) return o.exact.size();
        if (o.default_port && rest.size() > o.host.size() && rest.compare(0, o.host.size(), o.host) == 0 &&
            rest[o.host.size()] != ':')
            return o.host.size();
    }
    return 0;
}

bool UrlRewriter::matches(const std::string& origin) const {
    for (const auto& o : origins_)
        if (o == origin) return true;
    return false;
}

void AddressScanner::feed(const char* data, std::size_t n, std::string& out, bool final) {
    // What is held back from the last block (a few bytes, or a URL's start of
    // at most ~267) is joined to this block's first kJoin bytes only, not
    // copied in front of the whole block: what is held back after that join
    // is a suffix of those bytes, so the rest of the block is scanned in place.
    constexpr std::size_t kJoin = 1024;
    if (!carry_.empty() && n > 2 * kJoin) {
        std::string head;
        head.swap(carry_);
        head.append(data, kJoin);
        scan(head, out, false);
        const std::size_t c = carry_.size();  // <= 267 < kJoin
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

namespace {

// 0 http, 1 https, -1 neither (ASCII case-insensitive).
int scheme_kind(std::string_view s) {
    if (s.size() < 4 || s.size() > 5 || lower(s[0]) != 'h' || lower(s[1]) != 't' || lower(s[2]) != 't' || lower(s[3]) != 'p')
        return -1;
    if (s.size() == 4) return 0;
    return lower(s[4]) == 's' ? 1 : -1;
}

}  // namespace


void AddressScanner::scan(std::string_view buf, std::string& out, bool final) {
    std::size_t done = 0;  // bytes of buf already emitted
    std::size_t from = 0;
    std::size_t keep = std::string_view::npos;  // where an incomplete URL starts
    for (;;) {
        std::size_t sep = 0;
        const std::size_t h = find_scheme_separator(buf, from, json_, &sep);
        if (h == std::string_view::npos) break;
        from = h + sep;
        std::size_t s = h >= 5 && lower(buf[h - 1]) == 's' ? h - 5 : h >= 4 ? h - 4 : std::string_view::npos;
        if (s == std::string_view::npos || s < done) continue;
        std::string_view scheme = buf.substr(s, h - s);
        if (scheme.size() == 5 && lower(scheme[0]) != 'h') scheme.remove_prefix(1);  // "xhttp://"
        const int kind = scheme_kind(scheme);
        const std::size_t a0 = h + sep;
        // An authority longer than this is not one of ours, however the body is cut.
        constexpr std::size_t kMaxAuthority = 256;
        std::size_t end = a0;
        // Fast path: the origin spelled the usual way, then a byte that ends an authority.
        const std::size_t len = kind >= 0 ? urls_.exact_prefix(kind == 1, buf.substr(a0)) : 0;
        end += len;
        const std::size_t lim = std::min(buf.size(), a0 + kMaxAuthority + 1);
        while (end < lim && !ends_authority(buf[end]) && !(json_ && buf[end] == '\\')) ++end;
        if (end - a0 > kMaxAuthority) continue;
        if (!json_ && end < buf.size() && (buf[end] == '&' || buf[end] == ';')) continue;  // escaped: not ours to judge
        if (end == buf.size() && !final) {
            keep = s;
            break;
        }
        const bool exact = len > 0 && end == a0 + len;
        if (kind < 0 || (!exact && !urls_.match(scheme, buf.substr(a0, end - a0)))) continue;
        out.append(buf.substr(done, s - done));
        out += json_ ? urls_.json_base() : urls_.escaped_base();
        done = end;
        from = done;
        ++rewritten;
        if (first_origin.empty())
            first_origin = url_origin(std::string(scheme) + "://" + std::string(buf.substr(a0, end - a0)));
    }
    // Hold back what may be the start of a URL cut by the chunk ("https", ":\\/\\/").
    constexpr std::size_t kTail = 11;
    std::size_t cut = buf.size();
    if (!final) cut = keep != std::string_view::npos ? keep : std::max(done, buf.size() >= kTail ? buf.size() - kTail : std::size_t{0});
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
