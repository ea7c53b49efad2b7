// One JSON object per line for the request log, written field by field: the
// log is on every request's path, and a DOM (a map node per field) cost more
// than the refusal it records. Strings that need escaping go through
// nlohmann's serializer; invalid UTF-8 is replaced, never thrown.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

namespace ot::gate {

class JsonLine {
public:
    JsonLine() : s_(own_) { open(); }
    // Appends the object to `out` (the I/O thread's log buffer): no string
    // of its own per line.
    explicit JsonLine(std::string& out) : s_(out) { open(); }
    JsonLine(const JsonLine&) = delete;
    JsonLine& operator=(const JsonLine&) = delete;
    JsonLine& str(std::string_view key, std::string_view v);
    JsonLine& num(std::string_view key, double v);  // NaN/inf as null
    JsonLine& num(std::string_view key, std::int64_t v);
    JsonLine& boolean(std::string_view key, bool v);
    // The line, closed, without a newline.
    std::string finish() &&;
    // Closes the object in the buffer given to the constructor.
    void close();

private:
    void open() {
        len_ = s_.size();
        s_.resize(len_ + 512);
        s_[len_++] = '{';
        start_ = len_;
    }
    void key(std::string_view k);
    void put(std::string_view a, std::string_view b, std::string_view c);
    // s_ is sized ahead and filled up to len_: a field is then three
    // memcpy, not three string appends.
    std::string own_;
    std::string& s_;
    std::size_t len_ = 0, start_ = 0;
};

// "2026-11-30T11:12:13.456Z" (UTC, milliseconds) for now.
std::string iso_now_ms();
// The same in a buffer of the calling thread's, valid until its next call.
std::string_view iso_now_ms_view();

}  // namespace ot::gate
