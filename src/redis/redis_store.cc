// RedisStore: see redis_store.h.
#include "redis/redis_store.h"

#include <atomic>
#include <utility>
#include <vector>

#include "redis/eval.h"
#include "redis/script_call.h"
#include "redis/scripts.h"

namespace floodgate::redis {

Result<std::unique_ptr<RedisStore>> RedisStore::Create(ClientOptions options) {
  // Every connection loads the scripts before its first request: see
  // ClientOptions::preload_scripts (NOSCRIPT's resend would break the order
  // of pipelined requests on one key).
  for (const Script& script : AllScripts()) options.preload_scripts.emplace_back(script.source);
  for (const Script& script : FeatureScripts()) options.preload_scripts.emplace_back(script.source);
  auto client = Client::Create(std::move(options));
  if (!client.ok()) return client.status();
  return std::unique_ptr<RedisStore>(new RedisStore(std::move(*client)));
}

RedisStore::RedisStore(std::unique_ptr<Client> client)
    : client_(std::move(client)),
      batches_(client_->options().url.mode == StoreMode::kStandalone ||
               client_->options().url.mode == StoreMode::kSentinel) {}

void RedisStore::CheckMany(const core::CompiledRule& rule, std::string_view fingerprint,
                           std::span<const std::string> keys, std::span<const int64_t> costs,
                           std::optional<int64_t> now_ms, int64_t clock_ms, ManyDone done,
                           Batch* batch, int64_t deadline_ns) {
  const size_t k = keys.size();
  std::vector<std::string> argv;
  AppendCheckCall(ScriptCall::kEvalSha, rule, fingerprint, keys, costs, now_ms, clock_ms, &argv);
  const core::CompiledRule* r = &rule;
  SendScript(
      *client_, batch, Route(keys.front()), ScriptFor(rule.algorithm).source, std::move(argv),
      [r, k, done = std::move(done)](const Status& s, const redisReply* reply) mutable {
        static const Decision kEmpty{};
        Status shape = s;
        if (shape.ok()) {
          shape = reply == nullptr ? InternalError("no reply")
                                   : CheckReplyShape(r->algorithm, *reply, k);
        }
        if (!shape.ok()) {
          for (size_t i = 0; i < k; ++i) done(i, shape, kEmpty, nullptr);
          return;
        }
        Decision d;
        core::AlertOutcome alerts;
        core::AlertOutcome* fired = r->alerts.enabled() ? &alerts : nullptr;
        for (size_t i = 0; i < k; ++i) {
          const Status decoded = DecodeCheckReply(*r, *reply, i, &d, nullptr, fired);
          done(i, decoded, decoded.ok() ? d : kEmpty, decoded.ok() ? fired : nullptr);
        }
      },
      deadline_ns);
}

void RedisStore::Throttle(std::string_view key, int64_t max_burst, int64_t count, int64_t period_s,
                          int64_t quantity, std::optional<int64_t> now_ms, ThrottleDone done) {
  std::string tkey = ThrottleKey(key);
  std::vector<std::string> argv;
  const Status s = AppendThrottleCall(ScriptCall::kEvalSha, tkey, max_burst, count, period_s,
                                      quantity, now_ms, &argv);
  if (!s.ok()) return done(s, ThrottleResult{});
  SendScript(*client_, nullptr, Route(tkey), ScriptFor(Algorithm::kGcra).source, std::move(argv),
             [client = client_.get(), tkey, done = std::move(done)](
                 const Status& st, const redisReply* reply) mutable {
               ThrottleResult r;
               if (!st.ok()) return done(st, r);
               if (reply == nullptr) return done(InternalError("no reply"), r);
               const Status decoded = DecodeThrottleReply(*reply, &r, nullptr);
               if (!decoded.ok()) {
                 client->NoteWrongType(decoded.message(), std::span<const std::string>(&tkey, 1));
               }
               done(decoded, r);
             });
}

void RedisStore::Reset(std::string_view rule, std::span<const std::string> tiers,
                       std::string_view subject, ResetDone done) {
  std::vector<std::string> keys;
  keys.push_back(StateKey(rule, "", subject));
  for (const std::string& tier : tiers) keys.push_back(StateKey(rule, tier, subject));
  // Answers once every DEL has: the first failure, else OK.
  struct Join {
    std::atomic<size_t> left;
    std::atomic<bool> failed{false};
    Status first_error;  // written by the one that sets `failed`
    ResetDone done;
  };
  auto join = std::make_shared<Join>();
  join->left = keys.size();
  join->done = std::move(done);
  for (const std::string& key : keys) {
    const std::string_view args[] = {"DEL", key};
    client_->Send(Route(key), args, [join](Status s, const redisReply* reply) {
      if (s.ok() && reply != nullptr && reply->type == REDIS_REPLY_ERROR) {
        s = UnavailableError(std::string("Redis: ") + std::string(reply->str, reply->len));
      }
      if (!s.ok() && !join->failed.exchange(true)) join->first_error = s;
      if (join->left.fetch_sub(1) == 1) {
        join->done(join->failed.load() ? join->first_error : Status::Ok());
      }
    });
  }
}

void RedisStore::Refund(const core::CompiledRule& rule, std::string_view fingerprint,
                        std::string_view key, int64_t cost, std::optional<int64_t> now_ms,
                        int64_t clock_ms, RefundDone done) {
  std::vector<std::string> argv;
  AppendRefundCall(ScriptCall::kEvalSha, rule, fingerprint, key, cost, now_ms, clock_ms, &argv);
  const core::CompiledRule* r = &rule;
  SendScript(*client_, nullptr, Route(key), ScriptFor(rule.algorithm).source, std::move(argv),
             [client = client_.get(), r, key = std::string(key), done = std::move(done)](
                 const Status& s, const redisReply* reply) mutable {
               core::RefundResult result;
               if (!s.ok()) return done(s, result);
               if (reply == nullptr) return done(InternalError("no reply"), result);
               const Status decoded = DecodeRefundReply(*r, *reply, &result, nullptr);
               if (!decoded.ok()) {
                 // A key of another type: counted and logged as a decision's.
                 client->NoteWrongType(decoded.message(), std::span<const std::string>(&key, 1));
               }
               done(decoded, result);
             });
}

}  // namespace floodgate::redis
