// LimiterCore: the Limiter with what a server needs beyond the embedding
// API of floodgate/limiter.h: answers now or later without blocking,
// decisions held in a batch per event loop, the store's I/O on the loop's
// own thread, one clock reading shared by a pipeline. The public Limiter is
// a thin layer over it; the server's fronts use it directly.
//
// Rules and tiers resolve to compiled variants; state lives in the store
// picked at Create (store/store.h): the embedded one, or Redis for a
// `store: redis://…` config. Nothing here or above asks which.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "floodgate/alerts.h"
#include "floodgate/clock.h"
#include "floodgate/config.h"
#include "floodgate/decision.h"
#include "floodgate/expiring_sets.h"
#include "floodgate/limiter.h"
#include "floodgate/loop_driver.h"
#include "floodgate/otp.h"
#include "floodgate/status.h"
#include "store/store.h"

namespace floodgate::service {

// Thread-safe, except the batches it makes (one thread's each).
class LimiterCore {
 public:
  // As Limiter::Create.
  static Result<std::unique_ptr<LimiterCore>> Create(const Config& config, const Clock& clock);
  // Hands pending alert events on, then closes the store (answering what
  // is in flight).
  ~LimiterCore();

  // One decision: may `key` spend `cost` of `rule` (at `tier`)?
  struct CheckArgs {
    std::string_view rule;
    std::string_view key;
    int64_t cost = 1;
    std::string_view tier;
    // An explicit instant (tests, replays), or null for the store's clock.
    // Time never runs backwards for a subject.
    const int64_t* at_ms = nullptr;
    // NowMs() read once for requests read together (a pipeline), or 0: see
    // store::CheckOp::read_ms.
    int64_t read_ms = 0;
  };
  // Answers now (kNow: *status, and *decision when OK) or later (`later` was
  // called once; what it returned runs with the answer, on the thread that
  // runs the store's I/O for this one, within the store's timeout). Errors
  // and fallbacks as Limiter::Check. With `batch`, a decision that needs the
  // store waits in it until the batch is flushed.
  store::Answer Check(const CheckArgs& args, Decision* decision, Status* status,
                      store::Later<Decision> later, store::Batch* batch = nullptr);

  // Check with one callback whenever the answer comes: `done` runs once,
  // before this returns when the answer is known now.
  using CheckCallback = Limiter::CheckCallback;
  void CheckAsync(const CheckArgs& args, CheckCallback done, store::Batch* batch = nullptr);

  // Check, waiting for a later answer: the blocking form of the Limiter.
  // On a thread that runs the store's I/O it cannot wait for itself: it
  // fails with INTERNAL (the request may still reach the store).
  Status CheckAndWait(const CheckArgs& args, Decision* decision);
  Result<Decision> CheckAndWait(std::string_view rule, std::string_view key, int64_t cost = 1,
                                std::string_view tier = {});

  // Decisions held back to be sent together, for one thread (an event
  // loop): Flush after each round of reads sends them, those of one rule in
  // as few script calls as the store allows, with one wake-up of the
  // store's I/O. max_calls_in_flight > 0 bounds the calls sent and not yet
  // answered: Flush then keeps the decisions until one is answered (or
  // until they fill a call), so that under load they gather into fewer,
  // larger calls; Flush must be called again after an answer comes (a loop
  // does: every answer reaches it). A decision is still answered one store
  // timeout after it came (CountTimeoutFrom: after the wait that left it
  // unread), by on_backend_error if need be. FlushAll sends everything
  // whatever the bound. Destroying a batch sends what it holds. On the
  // embedded store nothing is ever held. The core must outlive it.
  std::unique_ptr<store::Batch> NewBatch(int max_calls_in_flight = 0);

  // CL.THROTTLE (Limiter::Throttle), answered now or later as Check.
  store::Answer Throttle(const store::ThrottleOp& op, ThrottleResult* result, Status* status,
                         store::Later<ThrottleResult> later);
  Result<ThrottleResult> ThrottleAndWait(const store::ThrottleOp& op);
  // FG.RESET (Limiter::Reset): `done` runs once, maybe before this returns.
  void Reset(std::string_view rule, std::string_view key, store::Done<> done);

  Status ResetAndWait(std::string_view rule, std::string_view key);

  // The store's I/O for one event loop (floodgate/loop_driver.h); null when
  // the store has none to run.
  Result<std::unique_ptr<LoopDriver>> NewLoopDriver();
  // Whether the calling thread may wait for a later answer (not a thread
  // that runs the store's I/O).
  Status BlockingAllowed() const;

  // Starts loading the memory a Check of (rule, tier, key) will touch: call
  // it for each request of a pipeline before checking any, so that their
  // cache misses overlap. Nothing for unknown rules.
  void Prefetch(std::string_view rule, std::string_view key, std::string_view tier = {});
  void PrefetchThrottle(std::string_view key);
  int64_t NowMs() const;

  // As the Limiter's.
  Status Reload(const Config& config);
  int64_t SweepExpired();
  Limiter::Stats GetStats() const;
  Status StoreHealth() const;
  // Counters and gauges only the store in use has (Redis: its errors,
  // circuits and local cache), for /metrics.
  std::vector<store::Metric> StoreMetrics() const;
  Config config() const;
  ExpiringSets& sets();
  Otp& otp();
  Alerts& alerts();

  struct Impl;

 private:
  explicit LimiterCore(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace floodgate::service
