// The Redis wire protocol (RESP2), spoken through hiredis's encoder and
// incremental reply parser; the sockets are Asio's (see redis_client.hpp).
// hiredis's own event loop adapters cannot be used as they are: 0.14 has no
// per-command timeout and resolves host names with a blocking getaddrinfo.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace ot::gate::redis {

struct Reply {
    enum class Type : std::uint8_t { Nil, Status, Error, Integer, String, Array };
    Type type = Type::Nil;
    std::string str;  // status, error or string
    long long integer = 0;
    std::vector<Reply> elements;

    bool is_error() const { return type == Type::Error; }
};

// Appends the RESP encoding of one command to `out`.
void encode_command(const std::vector<std::string>& args, std::string& out);

// Feeds bytes as they arrive; whole replies come out in order.
class ReplyParser {
public:
    ReplyParser();
    ~ReplyParser();
    ReplyParser(const ReplyParser&) = delete;
    ReplyParser& operator=(const ReplyParser&) = delete;

    // False when the stream is not RESP (the connection must be dropped).
    bool feed(const char* data, std::size_t n);
    // The next complete reply; nullopt when more bytes are needed or the
    // stream is broken (then error() is non-empty).
    std::optional<Reply> next();
    const std::string& error() const { return error_; }
    void reset();

private:
    struct Deleter {
        void operator()(void* r) const;
    };
    std::unique_ptr<void, Deleter> reader_;
    std::string error_;
};

}  // namespace ot::gate::redis
