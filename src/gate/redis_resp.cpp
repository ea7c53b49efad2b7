#include "gate/redis_resp.hpp"

#include <hiredis/hiredis.h>

#include <stdexcept>

namespace ot::gate::redis {
namespace {

Reply convert(const redisReply* r) {
    Reply out;
    switch (r->type) {
        case REDIS_REPLY_STATUS: out.type = Reply::Type::Status; break;
        case REDIS_REPLY_ERROR: out.type = Reply::Type::Error; break;
        case REDIS_REPLY_INTEGER: out.type = Reply::Type::Integer; break;
        case REDIS_REPLY_STRING: out.type = Reply::Type::String; break;
        case REDIS_REPLY_ARRAY: out.type = Reply::Type::Array; break;
        default: out.type = Reply::Type::Nil; break;
    }
    if (r->type == REDIS_REPLY_INTEGER) out.integer = r->integer;
    if (r->str != nullptr) out.str.assign(r->str, r->len);
    if (r->type == REDIS_REPLY_ARRAY) {
        out.elements.reserve(r->elements);
        for (std::size_t i = 0; i < r->elements; ++i) out.elements.push_back(convert(r->element[i]));
    }
    return out;
}

}  // namespace

void encode_command(const std::vector<std::string>& args, std::string& out) {
    std::vector<const char*> argv;
    std::vector<std::size_t> lens;
    argv.reserve(args.size());
    lens.reserve(args.size());
    for (const std::string& a : args) {
        argv.push_back(a.data());
        lens.push_back(a.size());
    }
    char* cmd = nullptr;
    const int n = redisFormatCommandArgv(&cmd, static_cast<int>(args.size()), argv.data(), lens.data());
    if (n < 0 || cmd == nullptr) throw std::bad_alloc();
    out.append(cmd, static_cast<std::size_t>(n));
    redisFreeCommand(cmd);
}

void ReplyParser::Deleter::operator()(void* r) const { redisReaderFree(static_cast<redisReader*>(r)); }

ReplyParser::ReplyParser() { reset(); }
ReplyParser::~ReplyParser() = default;

void ReplyParser::reset() {
    reader_.reset(redisReaderCreate());
    if (!reader_) throw std::bad_alloc();
    error_.clear();
}

bool ReplyParser::feed(const char* data, std::size_t n) {
    auto* r = static_cast<redisReader*>(reader_.get());
    if (redisReaderFeed(r, data, n) != REDIS_OK) {
        error_ = r->errstr;
        return false;
    }
    return true;
}

std::optional<Reply> ReplyParser::next() {
    auto* r = static_cast<redisReader*>(reader_.get());
    void* raw = nullptr;
    if (redisReaderGetReply(r, &raw) != REDIS_OK) {
        error_ = r->errstr[0] ? r->errstr : "protocol error";
        return std::nullopt;
    }
    if (raw == nullptr) return std::nullopt;
    Reply out = convert(static_cast<redisReply*>(raw));
    freeReplyObject(raw);
    return out;
}

}  // namespace ot::gate::redis
