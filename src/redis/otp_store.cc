// OtpStore on Redis: see otp_store.h and scripts/otp.lua.
#include "redis/otp_store.h"

#include <utility>
#include <vector>

#include "redis/eval.h"
#include "redis/reply_util.h"
#include "redis/scripts.h"

namespace floodgate::redis {
namespace {

constexpr std::string_view kScript = "otp";

// EVALSHA otp 3 codes issues attempts <step> <now>
std::vector<std::string> Head(std::string_view subject, std::string_view step,
                              std::optional<int64_t> now_ms) {
  const Script& script = ScriptFor(Feature::kOtp);
  auto keys = OtpKeys(subject);
  return {"EVALSHA",
          std::string(script.sha1),
          "3",
          std::move(keys[0]),
          std::move(keys[1]),
          std::move(keys[2]),
          std::string(step),
          now_ms.has_value() ? NumberArgument(*now_ms) : std::string()};
}

// {now, ok, ...}: the first two elements, or an error.
Status DecodeHead(const Status& s, const redisReply* reply, int64_t* now_ms, int64_t* ok) {
  if (!s.ok()) return s;
  if (reply == nullptr) return InternalError("redis: no reply");
  if (Status e = ErrorReplyStatus(*reply); !e.ok()) return e;
  if (reply->type != REDIS_REPLY_ARRAY || reply->elements < 2 || !ReplyInteger(*reply, 0, now_ms) ||
      !ReplyInteger(*reply, 1, ok) || (*ok != 0 && *ok != 1)) {
    return MalformedReply(kScript, "not {now, 0|1, ...}", reply);
  }
  return Status::Ok();
}

void Send(Client& client, std::vector<std::string> argv,
          absl::AnyInvocable<void(Status, const redisReply*)> decode) {
  // Routed by the codes key: all three share its hash tag, so its slot.
  const std::string route = argv[3];
  // EVALSHA sha 3 codes issues attempts ...: the keys, for a WRONGTYPE error.
  std::array<std::string, 3> keys = {argv[3], argv[4], argv[5]};
  SendScript(client, nullptr, route, ScriptFor(Feature::kOtp).source, std::move(argv),
             [client = &client, keys = std::move(keys), decode = std::move(decode)](
                 Status s, const redisReply* reply) mutable {
               if (!s.ok()) {
                 client->NoteWrongType(s.message(), keys);
               } else if (reply != nullptr && reply->type == REDIS_REPLY_ERROR) {
                 client->NoteWrongType(std::string_view(reply->str, reply->len), keys);
               }
               decode(s, reply);
             });
}

}  // namespace

std::array<std::string, 3> OtpKeys(std::string_view subject) {
  std::string base;
  base.reserve(9 + subject.size());
  base.append("fg:otp:{").append(subject).append("}");
  return {base + ":codes", base + ":issues", base + ":attempts"};
}

store::Answer OtpStore::Issue(std::string_view subject, std::string_view code_hash,
                              std::string_view event_id, const OtpPolicy& policy, OtpIssueOutcome*,
                              Status*, store::Later<OtpIssueOutcome> later) {
  Issue(subject, code_hash, event_id, policy, std::nullopt, later());
  return store::Answer::kLater;
}

store::Answer OtpStore::Attempt(std::string_view subject, std::string_view event_id,
                                const OtpPolicy& policy, OtpAttemptOutcome*, Status*,
                                store::Later<OtpAttemptOutcome> later) {
  Attempt(subject, event_id, policy, std::nullopt, later());
  return store::Answer::kLater;
}

store::Answer OtpStore::Consume(std::string_view subject, std::string_view code_hash, bool*,
                                Status*, store::Later<bool> later) {
  Consume(subject, code_hash, std::nullopt, later());
  return store::Answer::kLater;
}

void OtpStore::Issue(std::string_view subject, std::string_view code_hash,
                     std::string_view event_id, const OtpPolicy& policy,
                     std::optional<int64_t> now_ms, IssueDone done) {
  std::vector<std::string> argv = Head(subject, "issue", now_ms);
  argv.emplace_back(code_hash);
  argv.emplace_back(event_id);
  argv.push_back(NumberArgument(policy.code_ttl_ms));
  argv.push_back(NumberArgument(policy.max_live_codes));
  argv.push_back(NumberArgument(policy.issue_count));
  argv.push_back(NumberArgument(policy.issue_period_ms));
  Send(client_, std::move(argv),
       [done = std::move(done)](Status s, const redisReply* reply) mutable {
         OtpIssueOutcome out;
         int64_t ok = 0, figure = 0;
         s = DecodeHead(s, reply, &out.now_ms, &ok);
         if (s.ok() && (reply->elements != 3 || !ReplyInteger(*reply, 2, &figure))) {
           s = MalformedReply(kScript, "issue: not {now, ok, figure}", reply);
         }
         if (!s.ok()) return done(s, OtpIssueOutcome{});
         out.issued = ok == 1;
         (out.issued ? out.expires_at_ms : out.retry_after_ms) = figure;
         done(s, out);
       });
}

void OtpStore::Attempt(std::string_view subject, std::string_view event_id, const OtpPolicy& policy,
                       std::optional<int64_t> now_ms, AttemptDone done) {
  std::vector<std::string> argv = Head(subject, "attempt", now_ms);
  argv.emplace_back(event_id);
  argv.push_back(NumberArgument(policy.verify_count));
  argv.push_back(NumberArgument(policy.verify_period_ms));
  Send(client_, std::move(argv),
       [done = std::move(done)](Status s, const redisReply* reply) mutable {
         OtpAttemptOutcome out;
         int64_t ok = 0;
         s = DecodeHead(s, reply, &out.now_ms, &ok);
         if (s.ok() && ok == 0 &&
             (reply->elements != 3 || !ReplyInteger(*reply, 2, &out.retry_after_ms))) {
           s = MalformedReply(kScript, "attempt: not {now, 0, retry_after}", reply);
         }
         if (s.ok() && ok == 1) {
           out.allowed = true;
           for (size_t i = 2; i < reply->elements && s.ok(); ++i) {
             std::string_view code;
             if (!ReplyString(*reply, i, &code)) {
               s = MalformedReply(kScript, "attempt: a code is not a string", reply);
             } else {
               out.codes.emplace_back(code);
             }
           }
         }
         if (!s.ok()) return done(s, OtpAttemptOutcome{});
         done(s, out);
       });
}

void OtpStore::Consume(std::string_view subject, std::string_view code_hash,
                       std::optional<int64_t> now_ms, ConsumeDone done) {
  std::vector<std::string> argv = Head(subject, "consume", now_ms);
  argv.emplace_back(code_hash);
  Send(client_, std::move(argv),
       [done = std::move(done)](Status s, const redisReply* reply) mutable {
         int64_t now = 0, ok = 0;
         s = DecodeHead(s, reply, &now, &ok);
         if (s.ok() && reply->elements != 2) {
           s = MalformedReply(kScript, "consume: not {now, ok}", reply);
         }
         done(s, s.ok() && ok == 1);
       });
}

}  // namespace floodgate::redis
