// A response's start line and fields as one string, byte for byte what
// Beast's serializer writes for them (test/gate/http_head_test.cpp compares
// the two). The gate's own answers — refusals above all — then go out as two
// plain buffers in one sendmsg, without a node allocation per field and the
// serializer's generic buffer-sequence machinery, which together cost more
// per refusal than deciding it.
#pragma once
#include <boost/beast/http/message.hpp>
#include <string>
#include <string_view>

namespace ot::gate {

class HeadWriter {
public:
    // Replaces `out` with the start line; reason phrase as Beast's.
    HeadWriter(std::string& out, unsigned version, unsigned status);
    HeadWriter& field(std::string_view name, std::string_view value);
    HeadWriter& field(std::string_view name, std::size_t value);
    void end();  // the blank line

private:
    std::string& out_;
};

// The head of a Beast response header, reason included.
void serialize_head(const boost::beast::http::response_header<>& h, std::string& out);
// The head of a request as Beast's serializer writes it: the upstream leg
// sends it and the body in one gather write.
void serialize_head(const boost::beast::http::request_header<>& h, std::string& out);

// A chunk's size line ("1f4\r\n", lower-case hex as Beast writes it) into
// `buf` (at least 18 bytes); returns its length.
std::size_t chunk_size_line(std::size_t n, char* buf);
// What ends a chunked body without trailers.
inline constexpr std::string_view kLastChunk = "0\r\n\r\n";

}  // namespace ot::gate
