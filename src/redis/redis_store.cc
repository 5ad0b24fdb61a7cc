// RedisStore: see redis_store.h.
#include "redis/redis_store.h"

#include <atomic>
#include <utility>
#include <vector>

#include "redis/script_call.h"
#include "redis/scripts.h"

namespace floodgate::redis {
namespace {

// Sends `argv` (an EVALSHA call) routed by `key`; on NOSCRIPT, rebuilds it
// as EVAL with `rebuild` and sends it once more. `decode` then turns the
// reply into the caller's answer.
template <typename Decode>
void SendScript(Client& client, std::string key, std::vector<std::string> argv,
                absl::AnyInvocable<void(std::vector<std::string>*)> rebuild, Decode decode) {
  Client* c = &client;
  std::string route = key;
  client.Send(route, argv,
              [c, key = std::move(key), rebuild = std::move(rebuild), decode = std::move(decode)](
                  Status s, const redisReply* reply) mutable {
                if (s.ok() && reply != nullptr && IsNoScript(*reply)) {
                  std::vector<std::string> eval;
                  rebuild(&eval);
                  c->Send(key, eval,
                          [decode = std::move(decode)](Status s2, const redisReply* r2) mutable {
                            decode(s2, r2);
                          });
                  return;
                }
                decode(s, reply);
              });
}

}  // namespace

Result<std::unique_ptr<RedisStore>> RedisStore::Create(ClientOptions options) {
  // Every connection loads the scripts before its first request: see
  // ClientOptions::preload_scripts (NOSCRIPT's resend would break the order
  // of pipelined requests on one key).
  for (const Script& script : AllScripts()) options.preload_scripts.emplace_back(script.source);
  auto client = Client::Create(std::move(options));
  if (!client.ok()) return client.status();
  return std::unique_ptr<RedisStore>(new RedisStore(std::move(*client)));
}

void RedisStore::Check(const core::CompiledRule& rule, std::string_view fingerprint,
                       std::string_view subject, int64_t cost, std::optional<int64_t> now_ms,
                       int64_t clock_ms, CheckDone done) {
  std::string key = StateKey(rule.name, rule.tier, subject);
  std::vector<std::string> argv;
  argv.reserve(8 + 6 * rule.limits.size());
  AppendCheckCall(ScriptCall::kEvalSha, rule, fingerprint, key, cost, now_ms, clock_ms, &argv);
  // The rebuild and the decoder outlive this call: they hold what they need.
  // `rule` is kept alive by the caller's rule set snapshot (see Limiter).
  const core::CompiledRule* r = &rule;
  auto rebuild = [r, fp = std::string(fingerprint), key, cost, now_ms,
                  clock_ms](std::vector<std::string>* out) {
    AppendCheckCall(ScriptCall::kEval, *r, fp, key, cost, now_ms, clock_ms, out);
  };
  SendScript(*client_, std::move(key), std::move(argv), std::move(rebuild),
             [r, done = std::move(done)](const Status& s, const redisReply* reply) mutable {
               Decision d;
               if (!s.ok()) return done(s, Decision{});
               if (reply == nullptr) return done(InternalError("no reply"), Decision{});
               const Status decoded = DecodeCheckReply(*r, *reply, &d, nullptr);
               done(decoded, decoded.ok() ? d : Decision{});
             });
}

void RedisStore::Throttle(std::string_view key, int64_t max_burst, int64_t count, int64_t period_s,
                          int64_t quantity, std::optional<int64_t> now_ms, ThrottleDone done) {
  std::string tkey = ThrottleKey(key);
  std::vector<std::string> argv;
  const Status s = AppendThrottleCall(ScriptCall::kEvalSha, tkey, max_burst, count, period_s,
                                      quantity, now_ms, &argv);
  if (!s.ok()) return done(s, Limiter::ThrottleResult{});
  auto rebuild = [tkey, max_burst, count, period_s, quantity,
                  now_ms](std::vector<std::string>* out) {
    (void)AppendThrottleCall(ScriptCall::kEval, tkey, max_burst, count, period_s, quantity, now_ms,
                             out);
  };
  SendScript(*client_, std::move(tkey), std::move(argv), std::move(rebuild),
             [done = std::move(done)](const Status& st, const redisReply* reply) mutable {
               Limiter::ThrottleResult r;
               if (!st.ok()) return done(st, r);
               if (reply == nullptr) return done(InternalError("no reply"), r);
               const Status decoded = DecodeThrottleReply(*reply, &r, nullptr);
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
    client_->Send(key, args, [join](Status s, const redisReply* reply) {
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

}  // namespace floodgate::redis
