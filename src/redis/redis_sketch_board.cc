// RedisSketchBoard: see sketch_board.h and scripts/top_board.lua.
#include "redis/redis_sketch_board.h"

#include <algorithm>
#include <array>

#include "redis/feature_script_call.h"
#include "redis/reply_util.h"
#include "redis/scripts.h"

namespace floodgate::redis {
namespace {

const std::array<std::string, 2>& Keys() {
  static const std::array<std::string, 2> keys = {std::string(RedisSketchBoard::kServersKey),
                                                  std::string(RedisSketchBoard::kBlobsKey)};
  return keys;
}

Status InStep(std::string_view step, const Status& s) {
  return Status(s.code(), "top-subjects board " + std::string(step) + ": " + s.message());
}

Status ErrorReply(std::string_view step, const redisReply* r) {
  return UnavailableError("top-subjects board " + std::string(step) + ": " + DescribeReply(r));
}

}  // namespace

Status RedisSketchBoard::Publish(std::string_view server, std::string_view blob, int64_t ttl_ms) {
  const std::string args[] = {"publish", std::to_string(clock_.NowMs()), std::string(server),
                              std::to_string(std::max<int64_t>(1, ttl_ms)), std::string(blob)};
  auto reply = CallFeatureScript(client_, Feature::kTopBoard, Keys(), args);
  if (!reply.ok()) return InStep("publish", reply.status());
  if ((*reply)->type != REDIS_REPLY_INTEGER) return ErrorReply("publish", reply->get());
  return Status::Ok();
}

Result<std::vector<std::pair<std::string, std::string>>> RedisSketchBoard::Read() {
  const std::string args[] = {"read", std::to_string(clock_.NowMs()), std::to_string(kMaxServers)};
  auto reply = CallFeatureScript(client_, Feature::kTopBoard, Keys(), args);
  if (!reply.ok()) return InStep("read", reply.status());
  const redisReply* r = reply->get();
  if (r->type != REDIS_REPLY_ARRAY || r->elements % 2 != 0) return ErrorReply("read", r);
  std::vector<std::pair<std::string, std::string>> out;
  for (size_t i = 0; i + 1 < r->elements; i += 2) {
    const redisReply* name = r->element[i];
    const redisReply* blob = r->element[i + 1];
    if (name->type != REDIS_REPLY_STRING || blob->type != REDIS_REPLY_STRING) {
      return ErrorReply("read", r);
    }
    out.emplace_back(std::string(name->str, name->len), std::string(blob->str, blob->len));
  }
  return out;
}

}  // namespace floodgate::redis
