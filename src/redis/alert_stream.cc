// AlertStream: see alert_stream.h and scripts/alert_stream.lua.
#include "redis/alert_stream.h"

#include <utility>

#include "redis/feature_script_call.h"
#include "redis/reply_util.h"
#include "redis/script_call.h"
#include "redis/scripts.h"

namespace floodgate::redis {
namespace {

constexpr std::string_view kScript = "alert_stream";

void AppendFields(const PendingAlert& a, std::vector<std::string>* argv) {
  argv->push_back(a.event_id);
  argv->push_back(a.url);
  argv->push_back(a.body);
  argv->push_back(a.signature);
  argv->push_back(NumberArgument(a.created_ms));
  argv->push_back(NumberArgument(a.attempts));
}

// One entry of a claim reply, {id, {field, value, ...}}, into *out; false
// when it is not one of ours.
bool ParseEntry(const redisReply& entry, PendingAlert* out) {
  if (entry.type != REDIS_REPLY_ARRAY || entry.elements != 2) return false;
  const redisReply* id = entry.element[0];
  const redisReply* fields = entry.element[1];
  if (id == nullptr || id->type != REDIS_REPLY_STRING || fields == nullptr ||
      fields->type != REDIS_REPLY_ARRAY || fields->elements % 2 != 0) {
    return false;
  }
  out->stream_id.assign(id->str, id->len);
  int found = 0;
  for (size_t i = 0; i + 1 < fields->elements; i += 2) {
    std::string_view name, value;
    if (!ReplyString(*fields, i, &name) || !ReplyString(*fields, i + 1, &value)) return false;
    int64_t n = 0;
    if (name == "id") {
      out->event_id = std::string(value);
    } else if (name == "url") {
      out->url = std::string(value);
    } else if (name == "body") {
      out->body = std::string(value);
    } else if (name == "sig") {
      out->signature = std::string(value);
    } else if (name == "created" && ParseInteger(value, &n)) {
      out->created_ms = n;
    } else if (name == "attempts" && ParseInteger(value, &n) && n >= 0 && n < (int64_t{1} << 30)) {
      out->attempts = static_cast<int>(n);
    } else {
      continue;  // a field a later version added: ignored
    }
    ++found;
  }
  return found == 6;
}

}  // namespace

AlertStream::AlertStream(Client& client, Options options)
    : client_(client), options_(std::move(options)) {}

Result<OwnedReply> AlertStream::Run(std::vector<std::string> argv) {
  static const std::string key(kKey);
  return CallFeatureScript(client_, Feature::kAlertStream, std::span<const std::string>(&key, 1),
                           argv);
}

Result<int64_t> AlertStream::Add(std::span<const PendingAlert> alerts) {
  if (alerts.empty()) return int64_t{0};
  std::vector<std::string> argv = {"add", options_.group, NumberArgument(options_.max_len),
                                   NumberArgument(options_.ttl_ms)};
  for (const PendingAlert& a : alerts) AppendFields(a, &argv);
  auto reply = Run(std::move(argv));
  if (!reply.ok()) return reply.status();
  if ((*reply)->type != REDIS_REPLY_INTEGER) {
    return MalformedReply(kScript, "add: not an integer", reply->get());
  }
  return (*reply)->integer;
}

Result<std::vector<PendingAlert>> AlertStream::Claim(size_t count, int64_t min_idle_ms) {
  std::vector<PendingAlert> out;
  if (count == 0) return out;
  auto reply = Run({"claim", options_.group, options_.consumer, NumberArgument(min_idle_ms),
                    NumberArgument(static_cast<int64_t>(count))});
  if (!reply.ok()) return reply.status();
  const redisReply& r = **reply;
  if (r.type != REDIS_REPLY_ARRAY) return MalformedReply(kScript, "claim: not an array", &r);
  for (size_t i = 0; i < r.elements; ++i) {
    PendingAlert a;
    if (r.element[i] != nullptr && ParseEntry(*r.element[i], &a)) {
      out.push_back(std::move(a));
    } else if (r.element[i] != nullptr && r.element[i]->type == REDIS_REPLY_ARRAY &&
               r.element[i]->elements == 2 && r.element[i]->element[0] != nullptr &&
               r.element[i]->element[0]->type == REDIS_REPLY_STRING) {
      // Not an event (written by something else): acknowledged and dropped,
      // or every claim would return it again.
      const std::string id(r.element[i]->element[0]->str, r.element[i]->element[0]->len);
      (void)Ack(std::span<const std::string>(&id, 1));
    }
  }
  return out;
}

Status AlertStream::Touch(std::span<const std::string> stream_ids) {
  if (stream_ids.empty()) return Status::Ok();
  std::vector<std::string> argv = {"touch", options_.group, options_.consumer};
  argv.insert(argv.end(), stream_ids.begin(), stream_ids.end());
  auto reply = Run(std::move(argv));
  return reply.status();
}

Status AlertStream::Ack(std::span<const std::string> stream_ids) {
  if (stream_ids.empty()) return Status::Ok();
  std::vector<std::string> argv = {"ack", options_.group};
  argv.insert(argv.end(), stream_ids.begin(), stream_ids.end());
  auto reply = Run(std::move(argv));
  return reply.status();
}

Status AlertStream::Release(std::span<const PendingAlert> alerts) {
  if (alerts.empty()) return Status::Ok();
  std::vector<std::string> argv = {"release", options_.group, options_.consumer,
                                   NumberArgument(options_.max_len),
                                   NumberArgument(options_.ttl_ms)};
  for (const PendingAlert& a : alerts) {
    argv.push_back(a.stream_id);
    AppendFields(a, &argv);
  }
  auto reply = Run(std::move(argv));
  return reply.status();
}

Result<int64_t> AlertStream::Forget(int64_t idle_ms) {
  auto reply = Run({"forget", options_.group, options_.consumer, NumberArgument(idle_ms)});
  if (!reply.ok()) return reply.status();
  if ((*reply)->type != REDIS_REPLY_INTEGER) {
    return MalformedReply(kScript, "forget: not an integer", reply->get());
  }
  return (*reply)->integer;
}

Status AlertStream::Leave() { return Run({"leave", options_.group, options_.consumer}).status(); }

}  // namespace floodgate::redis
