#include "gate/log_line.hpp"

#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <nlohmann/json.hpp>

namespace ot::gate {

void JsonLine::key(std::string_view k) {
    if (s_.size() > 1) s_ += ',';
    s_ += '"';
    s_ += k;  // keys are our own literals
    s_ += "\":";
}

JsonLine& JsonLine::str(std::string_view k, std::string_view v) {
    key(k);
    bool plain = true;
    for (unsigned char c : v)
        if (c < 0x20 || c >= 0x7f || c == '"' || c == '\\') {
            plain = false;
            break;
        }
    if (plain) {
        s_ += '"';
        s_ += v;
        s_ += '"';
    } else {
        s_ += nlohmann::json(std::string(v)).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    }
    return *this;
}

JsonLine& JsonLine::num(std::string_view k, double v) {
    key(k);
    if (!std::isfinite(v)) {
        s_ += "null";
        return *this;
    }
    char buf[32];
    const auto r = std::to_chars(buf, buf + sizeof buf, v);  // shortest round-trip form
    s_.append(buf, r.ptr);
    return *this;
}

JsonLine& JsonLine::num(std::string_view k, std::int64_t v) {
    key(k);
    char buf[24];
    const auto r = std::to_chars(buf, buf + sizeof buf, v);
    s_.append(buf, r.ptr);
    return *this;
}

JsonLine& JsonLine::boolean(std::string_view k, bool v) {
    key(k);
    s_ += v ? "true" : "false";
    return *this;
}

std::string JsonLine::finish() && {
    s_ += '}';
    return std::move(s_);
}

std::string iso_now_ms() {
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
    char buf[80];
    std::snprintf(buf, sizeof buf, "%s.%03dZ", prefix, static_cast<int>(ms_total % 1000));
    return buf;
}

}  // namespace ot::gate
