// The feature scripts' arguments and replies: see reply_util.h.
#include "redis/reply_util.h"

#include <charconv>

#include "redis/wire.h"

namespace floodgate::redis {

std::string NumberArgument(int64_t v) {
  char buf[24];
  const auto r = std::to_chars(buf, buf + sizeof(buf), v);
  return std::string(buf, r.ptr);
}

bool ParseInteger(std::string_view text, int64_t* out) {
  const char* end = text.data() + text.size();
  const auto [p, ec] = std::from_chars(text.data(), end, *out);
  return !text.empty() && ec == std::errc() && p == end;
}

Status ErrorReplyStatus(const redisReply& reply) {
  if (reply.type != REDIS_REPLY_ERROR) return Status::Ok();
  return UnavailableError("redis: " + std::string(reply.str != nullptr ? reply.str : "",
                                                  reply.str != nullptr ? reply.len : 0));
}

bool ReplyInteger(const redisReply& reply, size_t index, int64_t* out) {
  if (reply.type != REDIS_REPLY_ARRAY || reply.element == nullptr || index >= reply.elements) {
    return false;
  }
  const redisReply* e = reply.element[index];
  if (e == nullptr) return false;
  if (e->type == REDIS_REPLY_INTEGER) {
    *out = e->integer;
    return true;
  }
  if (e->type != REDIS_REPLY_STRING || e->str == nullptr) return false;
  return ParseInteger(std::string_view(e->str, e->len), out);
}

bool ReplyString(const redisReply& reply, size_t index, std::string_view* out) {
  if (reply.type != REDIS_REPLY_ARRAY || reply.element == nullptr || index >= reply.elements) {
    return false;
  }
  const redisReply* e = reply.element[index];
  if (e == nullptr || e->type != REDIS_REPLY_STRING || e->str == nullptr) return false;
  *out = std::string_view(e->str, e->len);
  return true;
}

Status MalformedReply(std::string_view script, std::string_view what, const redisReply* reply) {
  return InternalError("redis: unexpected reply from the " + std::string(script) +
                       " script: " + std::string(what) + " (" + DescribeReply(reply) + ")");
}

}  // namespace floodgate::redis
