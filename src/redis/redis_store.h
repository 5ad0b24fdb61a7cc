// RedisStore: decisions made by the algorithm scripts on Redis, each atomic
// on the subject's one key, through a Client. Decisions of one rule may share
// a script call (one EVALSHA deciding several keys, in order) where every key
// lives on the one server. EVALSHA first; on NOSCRIPT (a restarted server, a
// proxy that cannot SCRIPT LOAD) the same call once more as EVAL, which also
// caches the script.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "absl/functional/any_invocable.h"
#include "core/rule_eval.h"
#include "floodgate/decision.h"
#include "floodgate/status.h"
#include "redis/client.h"

namespace floodgate::redis {

// Thread-safe.
class RedisStore {
 public:
  // `done` runs exactly once, on a client I/O thread (or on the caller's
  // thread when the client refuses at once). Not OK: the backend failed.
  using ThrottleDone = absl::AnyInvocable<void(const Status& status, const ThrottleResult& result)>;
  using ResetDone = absl::AnyInvocable<void(const Status& status)>;

  // INVALID_ARGUMENT for bad options (see Client::Create).
  static Result<std::unique_ptr<RedisStore>> Create(ClientOptions options);

  // Decisions of `rule` (a compiled rule or tier) in one script call: costs[i]
  // on keys[i] (StateKey(rule.name, rule.tier, subject_i)), in order, whose
  // arguments the caller has checked. `fingerprint` is Fingerprint(rule).
  // More than one key only where batches() says so. now_ms: an explicit
  // instant (tests, replays), or nullopt for Redis's TIME; clock_ms: the
  // caller's clock (see AppendCheckCall). `done(i, status, decision)` runs
  // once for each i, in order, on a client I/O thread (or on the caller's
  // thread when the client refuses at once). OK: decision i. Not OK: the
  // backend failed (UNAVAILABLE, DEADLINE_EXCEEDED, an error reply, a
  // malformed reply); the decision is then empty. The command is added to
  // `batch` (sent by the caller with Client::Send), or sent at once when
  // `batch` is null. `rule` must outlive the answers.
  // `alerts` is what decision i fired (core/alerts.h) for a rule with
  // alerts, decided by the script with the count; null otherwise.
  // The answers come by `deadline_ns` (the client's clock, Client::clock();
  // 0: the client's timeout from the send).
  using ManyDone =
      absl::AnyInvocable<void(size_t index, const Status& status, const Decision& decision,
                              const core::AlertOutcome* alerts)>;
  void CheckMany(const core::CompiledRule& rule, std::string_view fingerprint,
                 std::span<const std::string> keys, std::span<const int64_t> costs,
                 std::optional<int64_t> now_ms, int64_t clock_ms, ManyDone done, Batch* batch,
                 int64_t deadline_ns = 0);

  // Whether one script call may decide several keys: only on one standalone
  // server. In a cluster the keys would span slots, and a proxy routes a
  // call by its first key only.
  bool batches() const { return batches_; }

  // Decisions per call at most: a call runs atomically, holding Redis.
  static constexpr size_t kMaxDecisionsPerCall = 128;

  // redis-cell's CL.THROTTLE; INVALID_ARGUMENT (at once) for parameters
  // Limiter::Throttle refuses.
  void Throttle(std::string_view key, int64_t max_burst, int64_t count, int64_t period_s,
                int64_t quantity, std::optional<int64_t> now_ms, ThrottleDone done);

  // Deletes `subject`'s state for rule `rule`: its own limits and each of
  // `tiers` (one DEL per key: behind a proxy, keys of one call may live on
  // different servers).
  void Reset(std::string_view rule, std::span<const std::string> tiers, std::string_view subject,
             ResetDone done);

  // A refund (store::Store::Refund) of `cost` units to `key`
  // (StateKey(rule.name, rule.tier, subject)), checked by the caller, in one
  // script call of its own (one key: it goes to the key's node, and through
  // a proxy). `done(status, result)` runs once, as CheckMany's: OK with the
  // peek at the state as refunded and what each limit gave back (the
  // script's own figures), or the backend's failure. `rule` must outlive
  // the answer.
  using RefundDone =
      absl::AnyInvocable<void(const Status& status, const core::RefundResult& result)>;
  void Refund(const core::CompiledRule& rule, std::string_view fingerprint, std::string_view key,
              int64_t cost, std::optional<int64_t> now_ms, int64_t clock_ms, RefundDone done);

  Client& client() { return *client_; }

 private:
  explicit RedisStore(std::unique_ptr<Client> client);
  // What a command on `key` is routed by. On one server every command goes
  // by the same route, so on the same connection while it is up: a call
  // decides many keys, so calls and FG.RESET's DELs stay in the order sent
  // only if they share one connection. Elsewhere, the key (its slot).
  std::string_view Route(std::string_view key) const { return batches_ ? std::string_view() : key; }
  std::unique_ptr<Client> client_;
  const bool batches_;
};

}  // namespace floodgate::redis
