// Limiter: the library's entry point. Rules from a Config, state in the
// embedded store, time from a Clock.
//
//   floodgate::SystemClock clock;
//   auto limiter = floodgate::Limiter::Create(*floodgate::LoadConfigFile("f.yaml"), clock);
//   auto d = (*limiter)->Check("api", "user:42");
//   if (d.ok() && d->allowed) { ... }
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>

#include "floodgate/alerts.h"
#include "floodgate/clock.h"
#include "floodgate/config.h"
#include "floodgate/decision.h"
#include "floodgate/expiring_sets.h"
#include "floodgate/limiter_types.h"
#include "floodgate/otp.h"
#include "floodgate/status.h"

namespace floodgate {
namespace service {
struct Services;  // what a server uses of it: src/service/services.h
}

// Thread-safe: any number of threads may call any method concurrently.
class Limiter {
 public:
  using Stats = LimiterStats;  // floodgate/limiter_types.h

  // Validates and compiles the config's rules. INVALID_ARGUMENT naming the
  // rule and limit when one cannot be compiled, or when the config has an
  // otp section and no secret (see Otp). `clock` must outlive the Limiter.
  static Result<std::unique_ptr<Limiter>> Create(const Config& config, const Clock& clock);
  ~Limiter();

  // May `key` spend `cost` units of `rule` (optionally at `tier`) now?
  // Reads the clock once. Errors: NOT_FOUND for an unknown rule or tier;
  // INVALID_ARGUMENT for an empty key, a key over kMaxKeyBytes, or a cost
  // outside [0, kMaxLimitCount]. An error changes no state. A decision the
  // store could not make is not an error: a new subject the embedded store
  // has no room for is decided by the rule's on_store_full, a remote store
  // that fails or is late by its on_backend_error, each marked in
  // Decision::fallback and counted in Stats.
  Result<Decision> Check(std::string_view rule, std::string_view key, int64_t cost = 1,
                         std::string_view tier = {});
  // The same, writing into `*decision` (no copy of the Decision): for hot paths.
  Status Check(std::string_view rule, std::string_view key, int64_t cost, std::string_view tier,
               Decision* decision);
  // Check without blocking. `done` runs exactly once: before CheckAsync
  // returns when the answer is known at once (the embedded store, an
  // invalid request, a subject known to be over its limit, a backend known
  // to be down), otherwise later on one of the store's I/O threads, within
  // the store's timeout. `done` must be quick and must not block. On an
  // error status the decision is empty.
  using CheckCallback = floodgate::CheckCallback;  // floodgate/limiter_types.h
  void CheckAsync(std::string_view rule, std::string_view key, int64_t cost, std::string_view tier,
                  CheckCallback done);

  // Forgets `key`'s state for `rule` (every tier). NOT_FOUND for an unknown
  // rule; OK whether or not there was state.
  Status Reset(std::string_view rule, std::string_view key);
  // redis-cell's CL.THROTTLE: GCRA with the call's own parameters (no rule
  // needed), `count` per `period_s` seconds with `max_burst`, spending
  // `quantity`. One state per key, whatever the parameters, as in
  // redis-cell. Figures are redis-cell's: retry/reset in whole seconds,
  // rounded up when at least a millisecond is cut off; retry -1 when not
  // limited or when the quantity can never fit. INVALID_ARGUMENT for
  // max_burst < 0, count < 1, period_s < 1, quantity < 0 or a rate finer
  // than one unit per microsecond. A new key the embedded store has no
  // room for is limited (no rule, so no on_store_full: the rules' default),
  // with remaining and reset_after_s -1 (unknown), retry_after_s 1 and
  // `fallback` kStoreFull.
  using ThrottleResult = floodgate::ThrottleResult;  // floodgate/decision.h
  Result<ThrottleResult> Throttle(std::string_view key, int64_t max_burst, int64_t count,
                                  int64_t period_s, int64_t quantity);
  // Replaces the rules with `config`'s. A rule or tier whose state-relevant
  // definition (algorithm, limits, burst, time zone, alert thresholds) is
  // unchanged keeps its subjects' state; a changed one starts fresh; a
  // removed one's state expires by itself. Engine settings take effect only
  // on restart. On error (including a rule with alerts whose secret is not
  // set) nothing changes.
  Status Reload(const Config& config);

  // Frees expired entries now (a background thread also does, every
  // engine.sweep_interval_ms). Returns how many were freed.
  int64_t SweepExpired();

  Stats GetStats() const;
  // Whether the store can be expected to answer now, for a readiness check:
  // always OK for the embedded store; for Redis, UNAVAILABLE with the
  // reason ("redis circuit open for 127.0.0.1:6379") while a node it needs
  // is known to be down (see docs/redis.md, "Circuit breaker"). Reads what
  // the store already knows: no round trip, never blocks on the store.
  Status StoreHealth() const;
  // The config in force (a copy: Reload may replace it concurrently).
  Config config() const;

  // Expiring sets on this limiter's store (embedded or Redis), with the
  // config's sets section (read once, at Create). Thread-safe; lives as
  // long as the Limiter.
  ExpiringSets& sets();
  // One-time passwords on this limiter's store, with the config's otp
  // section (read once, at Create; disabled without one). Thread-safe;
  // lives as long as the Limiter.
  Otp& otp();
  // The quota alerts of the rules (Rule::alerts): recent events, delivery
  // counters. Delivery settings are the config's alert_delivery section,
  // read once, at Create; a rule's thresholds and webhook reload. Create
  // and Reload refuse a rule with alerts whose secret is not set.
  // Thread-safe; lives as long as the Limiter.
  Alerts& alerts();

 private:
  explicit Limiter(std::unique_ptr<service::Services> services);
  std::unique_ptr<service::Services> services_;
};

}  // namespace floodgate
