// RedisStore: decisions made by the algorithm scripts on Redis, one script
// call per decision on the subject's one key, through a Client. EVALSHA
// first; on NOSCRIPT (a restarted server, a proxy that cannot SCRIPT LOAD)
// the same call once more as EVAL, which also caches the script.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "absl/functional/any_invocable.h"
#include "core/rule_eval.h"
#include "floodgate/decision.h"
#include "floodgate/limiter.h"
#include "floodgate/status.h"
#include "redis/client.h"

namespace floodgate::redis {

// Thread-safe.
class RedisStore {
 public:
  // `done` runs exactly once, on a client I/O thread (or on the caller's
  // thread when the client refuses at once). OK: the decision and Redis's
  // instant. Not OK: the backend failed (UNAVAILABLE, DEADLINE_EXCEEDED,
  // an error reply, a malformed reply); the decision is then empty.
  using CheckDone = absl::AnyInvocable<void(const Status& status, const Decision& decision)>;
  using ThrottleDone =
      absl::AnyInvocable<void(const Status& status, const Limiter::ThrottleResult& result)>;
  using ResetDone = absl::AnyInvocable<void(const Status& status)>;

  // INVALID_ARGUMENT for bad options (see Client::Create).
  static Result<std::unique_ptr<RedisStore>> Create(ClientOptions options);

  // One decision of `rule` (a compiled rule or tier) for `subject`, whose
  // arguments the caller has checked. `fingerprint` is Fingerprint(rule).
  // now_ms: an explicit instant (tests, replays), or nullopt for Redis's
  // TIME; clock_ms: the caller's clock (see AppendCheckCall).
  void Check(const core::CompiledRule& rule, std::string_view fingerprint, std::string_view subject,
             int64_t cost, std::optional<int64_t> now_ms, int64_t clock_ms, CheckDone done);

  // redis-cell's CL.THROTTLE; INVALID_ARGUMENT (at once) for parameters
  // Limiter::Throttle refuses.
  void Throttle(std::string_view key, int64_t max_burst, int64_t count, int64_t period_s,
                int64_t quantity, std::optional<int64_t> now_ms, ThrottleDone done);

  // Deletes `subject`'s state for rule `rule`: its own limits and each of
  // `tiers` (one DEL per key: behind a proxy, keys of one call may live on
  // different servers).
  void Reset(std::string_view rule, std::span<const std::string> tiers, std::string_view subject,
             ResetDone done);

  Client& client() { return *client_; }

 private:
  explicit RedisStore(std::unique_ptr<Client> client) : client_(std::move(client)) {}
  std::unique_ptr<Client> client_;
};

}  // namespace floodgate::redis
