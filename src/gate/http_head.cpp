#include "gate/http_head.hpp"

#include <charconv>
#include <cstring>

namespace ot::gate {

namespace http = boost::beast::http;

namespace {

void start_line(std::string& out, unsigned version, unsigned status, std::string_view reason) {
    out.clear();
    out.reserve(512);
    out += "HTTP/";
    out += static_cast<char>('0' + version / 10);
    out += '.';
    out += static_cast<char>('0' + version % 10);
    out += ' ';
    char num[16];
    const auto r = std::to_chars(num, num + sizeof num, status);
    out.append(num, r.ptr);
    out += ' ';
    out += reason;
    out += "\r\n";
}

}  // namespace

HeadWriter::HeadWriter(std::string& out, unsigned version, unsigned status) : out_(out) {
    const auto reason = http::obsolete_reason(static_cast<http::status>(status));
    start_line(out_, version, status, std::string_view(reason.data(), reason.size()));
}

HeadWriter& HeadWriter::field(std::string_view name, std::string_view value) {
    const std::size_t n = out_.size();
    out_.resize(n + name.size() + value.size() + 4);
    char* p = out_.data() + n;
    std::memcpy(p, name.data(), name.size());
    p += name.size();
    std::memcpy(p, ": ", 2);
    std::memcpy(p + 2, value.data(), value.size());
    std::memcpy(p + 2 + value.size(), "\r\n", 2);
    return *this;
}

HeadWriter& HeadWriter::field(std::string_view name, std::size_t value) {
    char num[24];
    const auto r = std::to_chars(num, num + sizeof num, value);
    return field(name, std::string_view(num, static_cast<std::size_t>(r.ptr - num)));
}

void HeadWriter::end() { out_ += "\r\n"; }

namespace {

template <class Fields>
void append_fields(const Fields& h, std::string& out) {
    for (const auto& f : h) {
        const auto name = f.name_string();
        const auto value = f.value();
        out.append(name.data(), name.size());
        out += ": ";
        out.append(value.data(), value.size());
        out += "\r\n";
    }
    out += "\r\n";
}

}  // namespace

void serialize_head(const http::request_header<>& h, std::string& out) {
    out.clear();
    const auto m = h.method_string();
    const auto t = h.target();
    out.reserve(512 + t.size());
    out.append(m.data(), m.size());
    out += ' ';
    out.append(t.data(), t.size());
    out += " HTTP/";
    out += static_cast<char>('0' + h.version() / 10);
    out += '.';
    out += static_cast<char>('0' + h.version() % 10);
    out += "\r\n";
    append_fields(h, out);
}

std::size_t chunk_size_line(std::size_t n, char* buf) {
    const auto r = std::to_chars(buf, buf + 16, n, 16);
    std::size_t len = static_cast<std::size_t>(r.ptr - buf);
    buf[len++] = '\r';
    buf[len++] = '\n';
    return len;
}

void serialize_head(const http::response_header<>& h, std::string& out) {
    const auto reason = h.reason();
    start_line(out, h.version(), h.result_int(), std::string_view(reason.data(), reason.size()));
    append_fields(h, out);
}

}  // namespace ot::gate
