// One JSON object per line for the request log, written field by field: the
// log is on every request's path, and a DOM (a map node per field) cost more
// than the refusal it records. Strings that need escaping go through
// nlohmann's serializer; invalid UTF-8 is replaced, never thrown.
#pragma once
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace ot::gate {

class JsonLine {
public:
    JsonLine() : s_(own_) { buf_[0] = '{'; }
    // Appends the object to `out` (the I/O thread's log buffer): no string
    // of its own per line.
    explicit JsonLine(std::string& out) : s_(out) { buf_[0] = '{'; }
    JsonLine(const JsonLine&) = delete;
    JsonLine& operator=(const JsonLine&) = delete;
    // A key given as a literal is copied with its length known at compile
    // time: the access log writes about fifteen of them per request.
    template <std::size_t N>
    JsonLine& str(const char (&k)[N], std::string_view v) {
        key(k, N - 1);
        return value(v);
    }
    JsonLine& str(std::string_view k, std::string_view v) {
        key(k.data(), k.size());
        return value(v);
    }
    JsonLine& num(std::string_view key, double v);  // NaN/inf as null
    JsonLine& num(std::string_view key, std::int64_t v);
    JsonLine& boolean(std::string_view key, bool v);
    // The line, closed, without a newline.
    std::string finish() &&;
    // Closes the object in the buffer given to the constructor.
    void close();

private:
    void key(const char* k, std::size_t n) {
        if (n + 4 > sizeof buf_ - n_) return long_key(k, n);
        char* p = buf_ + n_;
        *p = ',';
        p += !first_;
        first_ = false;
        *p++ = '"';
        std::memcpy(p, k, n);
        p += n;
        *p++ = '"';
        *p++ = ':';
        n_ = static_cast<std::size_t>(p - buf_);
    }
    void long_key(const char* k, std::size_t n);  // one that does not fit in what is left of buf_
    JsonLine& value(std::string_view v);
    void put(std::string_view a);
    // buf_ into s_; empty again.
    void spill();
    // The line is built in buf_ (on the caller's stack) and appended to s_
    // at close or when buf_ fills: a field is a few stores and a memcpy,
    // not string appends, and no zero-filled reserve per line.
    std::string own_;
    std::string& s_;
    std::size_t n_ = 1;
    bool first_ = true;
    char buf_[768];  // not zero-filled: only [0, n_) is ever read
};

// "2026-11-30T11:12:13.456Z" (UTC, milliseconds) for now.
std::string iso_now_ms();
// The same in a buffer of the calling thread's, valid until its next call.
std::string_view iso_now_ms_view();

}  // namespace ot::gate
