#include "gate/path.hpp"

#include <vector>

#include "gate/text.hpp"

namespace ot::gate {
namespace {

// RFC 3986 pchar minus '%': what may stand unencoded in a segment.
bool pchar(unsigned char c) {
    if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9')) return true;
    for (char s : std::string_view("-._~!$&'()*+,;=:@"))
        if (c == static_cast<unsigned char>(s)) return true;
    return false;
}

void append_segment(std::string& out, std::string_view seg) {
    static constexpr char kHex[] = "0123456789ABCDEF";
    for (char ch : seg) {
        const auto c = static_cast<unsigned char>(ch);
        if (pchar(c)) {
            out.push_back(ch);
        } else {
            out.push_back('%');
            out.push_back(kHex[c >> 4]);
            out.push_back(kHex[c & 15]);
        }
    }
}

}  // namespace

std::optional<NormalPath> normalise_path(std::string_view raw, std::string* why) {
    auto refuse = [why](const char* w) -> std::optional<NormalPath> {
        if (why) *why = w;
        return std::nullopt;
    };
    if (raw.empty() || raw.front() != '/') return refuse("the path must start with '/'");
    // The common case: nothing to decode, no dot or empty segment.
    bool plain = true;
    for (std::size_t i = 0; i < raw.size() && plain; ++i) {
        const auto c = static_cast<unsigned char>(raw[i]);
        if (c == '%' || c == '\\' || !(pchar(c) || c == '/')) plain = false;
        else if (c == '/' && i + 1 < raw.size() && (raw[i + 1] == '/' || raw[i + 1] == '.')) plain = false;
    }
    if (plain) return NormalPath{std::string(raw), std::string(raw)};

    std::vector<std::string> segs;
    const auto parts = split(raw.substr(1), '/');
    bool trailing = false;
    for (std::size_t i = 0; i < parts.size(); ++i) {
        const std::string_view p = parts[i];
        const bool last = i + 1 == parts.size();
        if (p.find('\\') != std::string_view::npos) return refuse("the path contains a backslash");
        auto d = percent_decode(p, false);
        if (!d) return refuse("the path has a malformed percent-escape");
        if (d->find('/') != std::string::npos || d->find('\\') != std::string::npos)
            return refuse("a path segment contains an encoded '/' or '\\'");
        if (d->find('\0') != std::string::npos) return refuse("the path contains a NUL byte");
        if (*d == "." || d->empty()) {
            trailing = last;
            continue;
        }
        if (*d == "..") {
            if (segs.empty()) return refuse("the path climbs above the root ('..')");
            segs.pop_back();
            trailing = last;
            continue;
        }
        segs.push_back(std::move(*d));
        trailing = false;
    }
    NormalPath out;
    out.decoded.reserve(raw.size());
    out.encoded.reserve(raw.size());
    for (const std::string& s : segs) {
        out.decoded += '/';
        out.decoded += s;
        out.encoded += '/';
        append_segment(out.encoded, s);
    }
    if (segs.empty() || trailing) {
        out.decoded += '/';
        out.encoded += '/';
    }
    return out;
}

}  // namespace ot::gate
