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

void JsonLine::spill() {
    s_.append(buf_, n_);
    n_ = 0;
}

void JsonLine::put(std::string_view a) {
    if (a.size() > sizeof buf_ - n_) {
        spill();
        if (a.size() > sizeof buf_) {
            s_.append(a.data(), a.size());
            return;
        }
    }
    std::memcpy(buf_ + n_, a.data(), a.size());
    n_ += a.size();
}

void JsonLine::long_key(const char* k, std::size_t n) {
    if (!first_) put(",");
    first_ = false;
    put("\"");
    put(std::string_view(k, n));
    put("\":");
}

JsonLine& JsonLine::value(std::string_view v) {
    bool plain = true;
    for (unsigned char c : v) plain &= kPlain.ok[c];
    if (!plain) {
        put(nlohmann::json(std::string(v)).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
        return *this;
    }
    if (v.size() + 2 > sizeof buf_ - n_) {
        put("\"");
        put(v);
        put("\"");
        return *this;
    }
    char* p = buf_ + n_;
    *p++ = '"';
    std::memcpy(p, v.data(), v.size());
    p += v.size();
    *p++ = '"';
    n_ = static_cast<std::size_t>(p - buf_);
    return *this;
}

JsonLine& JsonLine::num(std::string_view k, double v) {
    key(k.data(), k.size());
    if (!std::isfinite(v)) {
        put("null");
        return *this;
    }
    char num[32];
    // A whole number below 1e5 prints as its digits in the shortest form
    // too (its exponent form is never shorter), and the integer conversion
    // is a fraction of the double one: costs are mostly whole units.
    const bool small_whole = v >= 0 && v < 1e5 && !std::signbit(v) && v == static_cast<double>(static_cast<std::int64_t>(v));
    const auto r = small_whole ? std::to_chars(num, num + sizeof num, static_cast<std::int64_t>(v))
                               : std::to_chars(num, num + sizeof num, v);  // shortest round-trip form
    put(std::string_view(num, static_cast<std::size_t>(r.ptr - num)));
    return *this;
}

JsonLine& JsonLine::num(std::string_view k, std::int64_t v) {
    key(k.data(), k.size());
    char num[24];
    const auto r = std::to_chars(num, num + sizeof num, v);
    put(std::string_view(num, static_cast<std::size_t>(r.ptr - num)));
    return *this;
}

JsonLine& JsonLine::boolean(std::string_view k, bool v) {
    key(k.data(), k.size());
    put(v ? "true" : "false");
    return *this;
}

void JsonLine::close() {
    put("}");
    spill();
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
