// SetStore on Redis: see set_store.h and scripts/expiring_set.lua.
#include "redis/set_store.h"

#include <utility>
#include <vector>

#include "common/enum_table.h"
#include "redis/eval.h"
#include "redis/reply_util.h"
#include "redis/scripts.h"

namespace floodgate::redis {
namespace {

constexpr std::string_view kScript = "expiring_set";

constexpr EnumName<SetOp> kOpArguments[] = {{SetOp::kAdd, "add"},
                                            {SetOp::kRemove, "rem"},
                                            {SetOp::kContains, "has"},
                                            {SetOp::kCount, "card"},
                                            {SetOp::kMembers, "members"}};

std::string_view OpArgument(SetOp op) { return ValueIn(kOpArguments, op, ""); }

// The script's reply to `op` as a SetReply (see the script's header).
Status Decode(SetOp op, int64_t max_members, const redisReply& reply, SetReply* out) {
  if (Status s = ErrorReplyStatus(reply); !s.ok()) return s;
  if (reply.type != REDIS_REPLY_ARRAY || reply.elements < 2 ||
      !ReplyInteger(reply, 0, &out->now_ms) || !ReplyInteger(reply, 1, &out->value)) {
    return MalformedReply(kScript, "not {now, value, ...}", &reply);
  }
  if (op == SetOp::kAdd && out->value == -1) {
    return ResourceExhaustedError("set is full: " + std::to_string(max_members) +
                                  " live members (sets.max_members)");
  }
  if (op != SetOp::kMembers) {
    return reply.elements == 2 ? Status::Ok() : MalformedReply(kScript, "extra elements", &reply);
  }
  if (out->value < 0 || reply.elements != 2 + 2 * static_cast<size_t>(out->value)) {
    return MalformedReply(kScript, "member count does not match", &reply);
  }
  out->members.reserve(static_cast<size_t>(out->value));
  for (size_t i = 2; i < reply.elements; i += 2) {
    std::string_view member;
    int64_t expires_at_ms = 0;
    if (!ReplyString(reply, i, &member) || !ReplyInteger(reply, i + 1, &expires_at_ms)) {
      return MalformedReply(kScript, "member " + std::to_string(i / 2) + " is malformed", &reply);
    }
    out->members.push_back(SetMember{std::string(member), expires_at_ms});
  }
  return Status::Ok();
}

}  // namespace

std::string SetKey(std::string_view key) {
  std::string out;
  out.reserve(9 + key.size());
  out.append("fg:set:{").append(key).append("}");
  return out;
}

store::Answer SetStore::Run(const SetRequest& request, int64_t max_members, SetReply*, Status*,
                            store::Later<SetReply> later) {
  Run(request, max_members, std::nullopt, later());
  return store::Answer::kLater;
}

void SetStore::Run(const SetRequest& request, int64_t max_members, std::optional<int64_t> now_ms,
                   Done done) {
  const Script& script = ScriptFor(Feature::kExpiringSet);
  std::string key = SetKey(request.key);
  std::vector<std::string> argv = {"EVALSHA",
                                   std::string(script.sha1),
                                   "1",
                                   key,
                                   std::string(OpArgument(request.op)),
                                   now_ms.has_value() ? NumberArgument(*now_ms) : std::string()};
  switch (request.op) {
    case SetOp::kAdd:
      argv.emplace_back(request.member);
      argv.push_back(NumberArgument(request.ttl_ms));
      argv.push_back(NumberArgument(max_members));
      break;
    case SetOp::kRemove:
    case SetOp::kContains:
      argv.emplace_back(request.member);
      break;
    case SetOp::kCount:
    case SetOp::kMembers:
      break;
  }
  SendScript(client_, nullptr, key, script.source, std::move(argv),
             [client = &client_, key, op = request.op, max_members, done = std::move(done)](
                 const Status& s, const redisReply* reply) mutable {
               SetReply out;
               Status result = s;
               if (result.ok()) {
                 result = reply == nullptr ? InternalError("redis: no reply")
                                           : Decode(op, max_members, *reply, &out);
               }
               if (!result.ok()) {
                 client->NoteWrongType(result.message(), std::span<const std::string>(&key, 1));
                 out = SetReply{};
               }
               done(result, out);
             });
}

}  // namespace floodgate::redis
