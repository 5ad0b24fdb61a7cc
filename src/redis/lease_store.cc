// LeaseStore on Redis: see lease_store.h and scripts/concurrency.lua.
#include "redis/lease_store.h"

#include <span>
#include <utility>
#include <vector>

#include "common/enum_table.h"
#include "redis/eval.h"
#include "redis/reply_util.h"
#include "redis/scripts.h"

namespace floodgate::redis {
namespace {

constexpr std::string_view kScript = "concurrency";

constexpr EnumName<store::LeaseOpKind> kOpArguments[] = {{store::LeaseOpKind::kAcquire, "acquire"},
                                                         {store::LeaseOpKind::kRelease, "release"},
                                                         {store::LeaseOpKind::kRenew, "renew"}};

std::string_view OpArgument(store::LeaseOpKind kind) { return ValueIn(kOpArguments, kind, ""); }

// The script's reply {ok, in_flight, ms, now_ms, expired} as a LeaseResult.
Status Decode(const redisReply& reply, store::LeaseResult* out) {
  if (Status s = ErrorReplyStatus(reply); !s.ok()) return s;
  int64_t ok = 0, expired = 0;
  if (reply.type != REDIS_REPLY_ARRAY || reply.elements != 5 || !ReplyInteger(reply, 0, &ok) ||
      !ReplyInteger(reply, 1, &out->in_flight) || !ReplyInteger(reply, 2, &out->ms) ||
      !ReplyInteger(reply, 3, &out->now_ms) || !ReplyInteger(reply, 4, &expired)) {
    return MalformedReply(kScript, "not {ok, in_flight, ms, now_ms, expired}", &reply);
  }
  if ((ok != 0 && ok != 1) || out->in_flight < 0 || out->ms < -1 || expired < 0) {
    return MalformedReply(kScript, "a field out of range", &reply);
  }
  out->ok = ok == 1;
  return Status::Ok();
}

}  // namespace

std::string LeaseKey(std::string_view rule, std::string_view subject) {
  std::string key;
  key.reserve(11 + rule.size() + subject.size());
  key.append("fg:lease:{");
  for (char c : rule) {
    if (c == ':') {
      key.append("%3A");
    } else if (c == '%') {
      key.append("%25");
    } else {
      key.push_back(c);
    }
  }
  key.append(":").append(subject).append("}");
  return key;
}

store::Answer LeaseStore::Lease(const store::LeaseOp& op, store::LeaseResult*, Status*,
                                store::Later<store::LeaseResult> later) {
  Run(op, op.at_ms != nullptr ? std::optional<int64_t>(*op.at_ms) : std::nullopt,
      [this, done = later()](const Status& s, const store::LeaseResult& r) mutable {
        if (!s.ok()) errors_.fetch_add(1, std::memory_order_relaxed);
        done(s, r);
      });
  return store::Answer::kLater;
}

void LeaseStore::Run(const store::LeaseOp& op, std::optional<int64_t> now_ms, Done done) {
  const Script& script = ScriptFor(Feature::kConcurrency);
  std::string key = LeaseKey(op.rule, op.subject);
  std::vector<std::string> argv = {"EVALSHA",
                                   std::string(script.sha1),
                                   "1",
                                   key,
                                   std::string(OpArgument(op.kind)),
                                   now_ms.has_value() ? NumberArgument(*now_ms) : std::string(),
                                   std::string(op.lease)};
  switch (op.kind) {
    case store::LeaseOpKind::kAcquire:
      argv.push_back(NumberArgument(op.ttl_ms));
      argv.push_back(NumberArgument(op.max_in_flight));
      break;
    case store::LeaseOpKind::kRenew:
      argv.push_back(NumberArgument(op.ttl_ms));
      break;
    case store::LeaseOpKind::kRelease:
      break;
  }
  SendScript(client_, nullptr, key, script.source, std::move(argv),
             [client = &client_, key, done = std::move(done)](const Status& s,
                                                              const redisReply* reply) mutable {
               store::LeaseResult out;
               Status result = s;
               if (result.ok()) {
                 result =
                     reply == nullptr ? InternalError("redis: no reply") : Decode(*reply, &out);
               }
               if (!result.ok()) {
                 client->NoteWrongType(result.message(), std::span<const std::string>(&key, 1));
                 out = store::LeaseResult{};
               }
               done(result, out);
             });
}

}  // namespace floodgate::redis
