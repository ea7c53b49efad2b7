#include "gate/log_line.hpp"

#include <charconv>
#include <algorithm>
#include <cstring>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <nlohmann/json.hpp>

namespace ot::gate {

namespace {

// Printable ASCII other than the quote and the backslash goes into a JSON
// string as it is.
struct PlainTable {
    bool ok[256] = {};
    constexpr PlainTable() {
        for (int c = 0x20; c < 0x7f; ++c) ok[c] = c != '"' && c != '\\';
    }
};
constexpr PlainTable kPlain;

}  // namespace

void JsonLine::put(std::string_view a, std::string_view b, std::string_view c) {
    const std::size_t need = len_ + a.size() + b.size() + c.size() + 1;  // and the closing brace
    if (need > s_.size()) s_.resize(std::max(need, 2 * s_.size()));
    char* p = s_.data() + len_;
    std::memcpy(p, a.data(), a.size());
    std::memcpy(p + a.size(), b.data(), b.size());
    std::memcpy(p + a.size() + b.size(), c.data(), c.size());
    len_ = need - 1;
}

void JsonLine::key(std::string_view k) {
    // Keys are our own literals.
    put(len_ > start_ ? std::string_view(",\"") : std::string_view("\""), k, "\":");
}

JsonLine& JsonLine::str(std::string_view k, std::string_view v) {
    key(k);
    bool plain = true;
    for (unsigned char c : v) plain &= kPlain.ok[c];
    if (plain) put("\"", v, "\"");
    else put(nlohmann::json(std::string(v)).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace), {}, {});
    return *this;
}

JsonLine& JsonLine::num(std::string_view k, double v) {
    key(k);
    if (!std::isfinite(v)) {
        put("null", {}, {});
        return *this;
    }
    char buf[32];
    const auto r = std::to_chars(buf, buf + sizeof buf, v);  // shortest round-trip form
    put(std::string_view(buf, static_cast<std::size_t>(r.ptr - buf)), {}, {});
    return *this;
}

JsonLine& JsonLine::num(std::string_view k, std::int64_t v) {
    key(k);
    char buf[24];
    const auto r = std::to_chars(buf, buf + sizeof buf, v);
    put(std::string_view(buf, static_cast<std::size_t>(r.ptr - buf)), {}, {});
    return *this;
}

JsonLine& JsonLine::boolean(std::string_view k, bool v) {
    key(k);
    put(v ? "true" : "false", {}, {});
    return *this;
}

void JsonLine::close() {
    s_[len_++] = '}';  // put() kept room for it
    s_.resize(len_);
}

std::string JsonLine::finish() && {
    close();
    return std::move(s_);
}

std::string iso_now_ms() { return std::string(iso_now_ms_view()); }

std::string_view iso_now_ms_view() {
    // gmtime_r takes glibc's time-zone lock: once a second per thread, not
    // once a request.
    thread_local std::time_t cached_sec = -1;
    thread_local char prefix[64];
    const auto t = std::chrono::system_clock::now();
    const auto ms_total = std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
    const std::time_t sec = static_cast<std::time_t>(ms_total / 1000);
    if (sec != cached_sec) {
        std::tm tm{};
        gmtime_r(&sec, &tm);
        std::snprintf(prefix, sizeof prefix, "%04d-%02d-%02dT%02d:%02d:%02d", tm.tm_year + 1900, tm.tm_mon + 1,
                      tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec);
        cached_sec = sec;
    }
    const int ms = static_cast<int>(ms_total % 1000);
    thread_local char out[sizeof prefix + 8];
    const std::size_t n = std::strlen(prefix);
    std::memcpy(out, prefix, n);
    const char tail[] = {'.', static_cast<char>('0' + ms / 100), static_cast<char>('0' + ms / 10 % 10),
                         static_cast<char>('0' + ms % 10), 'Z'};
    std::memcpy(out + n, tail, sizeof tail);
    return std::string_view(out, n + sizeof tail);
}

}  // namespace ot::gate
