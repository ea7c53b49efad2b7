#include "gate/text.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <limits>

namespace ot::gate {
namespace {

int hex_value(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

char upper(char c) { return (c >= 'a' && c <= 'z') ? static_cast<char>(c - 'a' + 'A') : c; }
char lower(char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c; }

}  // namespace

std::optional<std::string> percent_decode(std::string_view in, bool plus_is_space) {
    // Most keys and values have nothing to decode.
    if (in.find('%') == std::string_view::npos && (!plus_is_space || in.find('+') == std::string_view::npos))
        return std::string(in);
    std::string out;
    out.reserve(in.size());
    for (std::size_t i = 0; i < in.size(); ++i) {
        const char c = in[i];
        if (c == '%') {
            if (in.size() - i < 3) return std::nullopt;
            const int hi = hex_value(in[i + 1]);
            const int lo = hex_value(in[i + 2]);
            if (hi < 0 || lo < 0) return std::nullopt;
            out.push_back(static_cast<char>(hi * 16 + lo));
            i += 2;
        } else if (c == '+' && plus_is_space) {
            out.push_back(' ');
        } else {
            out.push_back(c);
        }
    }
    return out;
}

std::string to_upper(std::string_view s) {
    std::string r(s);
    for (char& c : r) c = upper(c);
    return r;
}

std::string to_lower(std::string_view s) {
    std::string r(s);
    for (char& c : r) c = lower(c);
    return r;
}

bool iequals(std::string_view a, std::string_view b) {
    if (a.size() != b.size()) return false;
    for (std::size_t i = 0; i < a.size(); ++i)
        if (upper(a[i]) != upper(b[i])) return false;
    return true;
}

bool istarts_with(std::string_view s, std::string_view prefix) {
    return s.size() >= prefix.size() && iequals(s.substr(0, prefix.size()), prefix);
}

std::optional<std::int64_t> parse_int(std::string_view s) {
    s = trim(s);
    if (s.empty()) return std::nullopt;
    bool neg = false;
    std::size_t i = 0;
    if (s[0] == '+' || s[0] == '-') {
        neg = s[0] == '-';
        i = 1;
    }
    if (i == s.size()) return std::nullopt;
    // Accumulate negatively so that INT64_MIN parses and nothing overflows.
    std::int64_t v = 0;
    constexpr std::int64_t kMin = std::numeric_limits<std::int64_t>::min();
    for (; i < s.size(); ++i) {
        if (s[i] < '0' || s[i] > '9') return std::nullopt;
        const int d = s[i] - '0';
        if (v < (kMin + d) / 10) return std::nullopt;
        v = v * 10 - d;
    }
    if (!neg) {
        if (v == kMin) return std::nullopt;
        v = -v;
    }
    return v;
}

std::optional<double> parse_double(std::string_view s) {
    s = trim(s);
    if (s.empty() || s.size() > 64) return std::nullopt;
    for (char c : s) {
        const bool allowed = (c >= '0' && c <= '9') || c == '.' || c == '-' || c == '+' || c == 'e' || c == 'E';
        if (!allowed) return std::nullopt;  // rejects "inf", "nan", hex floats
    }
    const std::string tmp(s);
    char* end = nullptr;
    errno = 0;
    const double v = std::strtod(tmp.c_str(), &end);
    if (end != tmp.c_str() + tmp.size() || !std::isfinite(v)) return std::nullopt;
    return v;
}

std::vector<std::string_view> split(std::string_view s, char sep) {
    std::vector<std::string_view> parts;
    parts.reserve(static_cast<std::size_t>(std::count(s.begin(), s.end(), sep)) + 1);
    std::size_t start = 0;
    while (true) {
        const std::size_t pos = s.find(sep, start);
        if (pos == std::string_view::npos) {
            parts.push_back(s.substr(start));
            return parts;
        }
        parts.push_back(s.substr(start, pos - start));
        start = pos + 1;
    }
}

std::string_view trim(std::string_view s) {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r' || s.front() == '\n'))
        s.remove_prefix(1);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r' || s.back() == '\n'))
        s.remove_suffix(1);
    return s;
}

namespace {

struct XmlSpecial {
    bool text[256] = {}, attr[256] = {};
    constexpr XmlSpecial() {
        for (int c = 0; c < 0x20; ++c) text[c] = attr[c] = true;
        for (int c : {'&', '<', '>'}) text[c] = attr[c] = true;
        attr[static_cast<int>('"')] = attr[static_cast<int>('\'')] = true;
    }
};
constexpr XmlSpecial kXml;

std::string escape_xml(std::string_view s, bool quotes) {
    const bool* special = quotes ? kXml.attr : kXml.text;
    std::size_t i = 0;
    while (i < s.size() && !special[static_cast<unsigned char>(s[i])]) ++i;
    std::string r(s.substr(0, i));
    if (i == s.size()) return r;
    r.reserve(s.size() + 16);
    for (; i < s.size(); ++i) {
        const char c = s[i];
        switch (c) {
            case '&': r += "&amp;"; break;
            case '<': r += "&lt;"; break;
            case '>': r += "&gt;"; break;
            case '"': r += quotes ? "&quot;" : "\""; break;
            case '\'': r += quotes ? "&apos;" : "'"; break;
            default:
                // Control characters are not allowed in XML 1.0 at all.
                if (static_cast<unsigned char>(c) < 0x20 && c != '\t' && c != '\n' && c != '\r')
                    r += '?';
                else
                    r += c;
        }
    }
    return r;
}

}  // namespace

std::string xml_escape(std::string_view s) { return escape_xml(s, true); }

std::string xml_escape_text(std::string_view s) { return escape_xml(s, false); }

std::string echo_value(std::string_view s, std::size_t max_bytes) {
    std::string out;
    out.reserve(std::min(s.size(), max_bytes));
    std::size_t i = 0;
    while (i < s.size()) {
        const auto c = static_cast<unsigned char>(s[i]);
        std::size_t len = 0;
        std::uint32_t cp = 0;
        if (c < 0x80) len = 1, cp = c;
        else if ((c & 0xE0) == 0xC0) len = 2, cp = c & 0x1F;
        else if ((c & 0xF0) == 0xE0) len = 3, cp = c & 0x0F;
        else if ((c & 0xF8) == 0xF0) len = 4, cp = c & 0x07;
        bool ok = len > 0 && i + len <= s.size();
        for (std::size_t k = 1; ok && k < len; ++k) {
            const auto d = static_cast<unsigned char>(s[i + k]);
            if ((d & 0xC0) != 0x80) ok = false;
            else cp = (cp << 6) | (d & 0x3F);
        }
        // Overlong forms, surrogates and values past U+10FFFF are not UTF-8.
        if (ok && ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10FFFF)) ||
                   (cp >= 0xD800 && cp <= 0xDFFF) || cp == 0xFFFE || cp == 0xFFFF))
            ok = false;
        if (ok && cp < 0x20 && cp != '\t') ok = false;
        const std::size_t take = ok ? len : 1;
        if (out.size() + (ok ? len : 1) > max_bytes) break;
        if (ok) out.append(s.substr(i, len));
        else out += '?';
        i += take;
    }
    return out;
}

}  // namespace ot::gate
