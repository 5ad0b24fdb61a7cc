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
#include <functional>
#include <memory>
#include <string_view>

#include "floodgate/alerts.h"
#include "floodgate/clock.h"
#include "floodgate/config.h"
#include "floodgate/decision.h"
#include "floodgate/expiring_sets.h"
#include "floodgate/loop_driver.h"
#include "floodgate/otp.h"
#include "floodgate/status.h"

namespace floodgate {

// Thread-safe: any number of threads may call any method concurrently.
class Limiter {
 public:
  struct Stats {
    int64_t entries = 0;        // live entries in the store: rule states, sets, OTP subjects
    int64_t rejected_full = 0;  // new entries the full store could not take
    int64_t expired_freed = 0;  // entries freed after expiring
    int64_t store_bytes = 0;    // bytes engine.max_memory bounds (entries and tables)
    // Decisions made by a fallback policy (Decision::fallback), by reason:
    // on_store_full (and CL.THROTTLE's denial at a full store), and
    // on_backend_error.
    int64_t fallback_store_full = 0;
    int64_t fallback_backend_error = 0;
    // Remote stores only (zero on the embedded store):
    int64_t backend_errors = 0;       // decisions answered by on_backend_error
    int64_t local_cache_denials = 0;  // denials answered by the local over-limit cache
    int64_t local_cache_entries = 0;  // subjects in that cache now
    int64_t open_circuits = 0;        // Redis nodes given up on for now (circuit open)
    int64_t backend_timeouts = 0;     // requests Redis did not answer in time
    // Decisions and operations that failed on a Redis key of the wrong type
    // under floodgate's names (someone's SET or LPUSH on it): each follows
    // on_backend_error (or fails) and is logged once per key per minute.
    int64_t wrong_type = 0;
  };

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
  // The same at a given instant instead of reading the clock: for a caller
  // that reads NowMs() once for a batch of requests that arrived together
  // (a pipeline). Time still never runs backwards for a subject's state.
  Status CheckAt(int64_t now_ms, std::string_view rule, std::string_view key, int64_t cost,
                 std::string_view tier, Decision* decision);

  // Check without blocking, for callers that must not wait on a remote
  // store (the server's event loops). `done` runs exactly once: before
  // CheckAsync returns when the answer is known locally (the embedded
  // store, an invalid request, the local over-limit cache, a backend known
  // to be down), otherwise later on one of the store's I/O threads, within
  // the store's timeout. `done` must be quick and must not block. On an
  // error status the decision is empty.
  using CheckCallback = std::function<void(const Status& status, const Decision& decision)>;
  void CheckAsync(std::string_view rule, std::string_view key, int64_t cost, std::string_view tier,
                  CheckCallback done);

  // Remote decisions held back to be sent together. CheckAsync calls given a
  // batch leave their remote decisions in it (answers known locally still
  // come at once); Flush sends them, decisions of one rule in as few script
  // calls as the store allows (one call for many subjects on a standalone
  // Redis), with one wake-up of the store's I/O thread. A server loop keeps
  // one and flushes it after each round of reads. Not thread-safe: one
  // thread's. Destroying it sends what it still holds. The Limiter must
  // outlive it.
  //
  // max_calls_in_flight > 0 bounds the script calls this batch has sent and
  // not yet had answered: Flush then keeps the decisions until one is
  // answered (or until they fill a call), so that under load they gather
  // into fewer, larger calls instead of many small ones (much of a call's
  // cost in Redis is per call). A decision then waits at most one call's
  // round trip longer. Flush must be called again after an answer comes: a
  // server loop does, since every answer reaches it (its callback posts the
  // reply to the loop).
  //
  // Holding a decision back does not extend its timeout: the store's
  // timeout counts from CheckAsync (or from CountTimeoutFrom's instant), so
  // a decision is answered, by on_backend_error if need be, at the latest
  // one timeout after it came. One whose timeout ran out while held is
  // answered by the Flush that would have sent it, without being sent.
  class AsyncBatch {
   public:
    explicit AsyncBatch(Limiter& limiter, int max_calls_in_flight = 0);
    ~AsyncBatch();
    AsyncBatch(const AsyncBatch&) = delete;
    AsyncBatch& operator=(const AsyncBatch&) = delete;

    // Sends the decisions held (unless max_calls_in_flight are); does
    // nothing when there are none.
    void Flush();
    // Sends every decision held, whatever the bound (an event loop that is
    // stopping: nothing may be left to send later).
    void FlushAll();
    bool empty() const;
    // Decisions held, not yet sent.
    size_t size() const;
    // The decisions added from now until the next Flush (or FlushAll) count
    // the store's timeout from `monotonic_ns` (CLOCK_MONOTONIC, in ns; 0:
    // from when each is added). For an event loop that waited for the store
    // alone, not reading its clients: their requests came no earlier than
    // when that wait began, and are due one timeout after it, however long
    // they sat unread.
    void CountTimeoutFrom(int64_t monotonic_ns);

    struct Items;  // opaque: what the batch holds

   private:
    friend class Limiter;
    Limiter& limiter_;
    std::unique_ptr<Items> items_;
  };
  void CheckAsync(std::string_view rule, std::string_view key, int64_t cost, std::string_view tier,
                  CheckCallback done, AsyncBatch* batch);

  // Whether decisions need a network round trip (a Redis store): Check,
  // Throttle and Reset then block their caller for up to the store's
  // timeout, and the *Async forms complete on another thread (or inside the
  // caller's own event loop, with a LoopDriver).
  bool remote() const;

  // A remote store's network I/O for one event loop to run on its own
  // thread (floodgate/loop_driver.h): requests made on the thread it is
  // attached to (CheckAsync, AsyncBatch::Flush, ThrottleAsync, ResetAsync,
  // and those of sets() and otp()) are written by its Step and answered
  // inside its PollEvents, with no hand-off to the store's I/O threads. Each
  // driver has connections of its own. Null on the embedded store (nothing
  // to drive). On an attached thread the blocking Check, Throttle and Reset
  // fail with INTERNAL rather than wait for themselves.
  Result<std::unique_ptr<LoopDriver>> NewLoopDriver();

  // Starts loading the memory a Check of (rule, tier, key) will touch. Costs
  // a hash; does nothing for unknown rules. Call it for every request of a
  // batch before checking any, so their cache misses overlap.
  void Prefetch(std::string_view rule, std::string_view key, std::string_view tier = {});
  // The clock the limiter reads.
  int64_t NowMs() const;

  // Forgets `key`'s state for `rule` (every tier). NOT_FOUND for an unknown
  // rule; OK whether or not there was state.
  Status Reset(std::string_view rule, std::string_view key);
  // Reset without blocking; `done` as for CheckAsync.
  using ResetCallback = std::function<void(const Status& status)>;
  void ResetAsync(std::string_view rule, std::string_view key, ResetCallback done);

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
  struct ThrottleResult {
    bool limited = false;
    int64_t limit = 0;
    int64_t remaining = 0;
    int64_t retry_after_s = -1;
    int64_t reset_after_s = 0;
    Fallback fallback = Fallback::kNone;
  };
  Result<ThrottleResult> Throttle(std::string_view key, int64_t max_burst, int64_t count,
                                  int64_t period_s, int64_t quantity);
  Result<ThrottleResult> ThrottleAt(int64_t now_ms, std::string_view key, int64_t max_burst,
                                    int64_t count, int64_t period_s, int64_t quantity);
  void PrefetchThrottle(std::string_view key);
  // Throttle without blocking; `done` as for CheckAsync.
  using ThrottleCallback = std::function<void(const Status& status, const ThrottleResult& result)>;
  void ThrottleAsync(std::string_view key, int64_t max_burst, int64_t count, int64_t period_s,
                     int64_t quantity, ThrottleCallback done);

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
  struct Impl;
  explicit Limiter(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace floodgate
