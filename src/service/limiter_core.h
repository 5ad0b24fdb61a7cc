// LimiterCore: the Limiter with what a server needs beyond the embedding
// API of floodgate/limiter.h: answers now or later without blocking,
// decisions held in a batch per event loop, the store's I/O on the loop's
// own thread, one clock reading shared by a pipeline. The public Limiter is
// a thin layer over it; the server's fronts use it directly.
//
// Rules and tiers resolve to compiled variants; state lives in the store
// given at Create (store/store.h), picked once from the config by
// api/open_store.h: the embedded one, or Redis for a `store: redis://…`
// config. Nothing here or above asks which; this layer does not even link
// them (the fronts are tested on a fake store).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "floodgate/alerts.h"
#include "floodgate/clock.h"
#include "floodgate/config.h"
#include "floodgate/decision.h"
#include "floodgate/expiring_sets.h"
#include "floodgate/limiter_types.h"
#include "floodgate/loop_driver.h"
#include "floodgate/otp.h"
#include "floodgate/status.h"
#include "service/lease_ledger.h"
#include "service/wait_room.h"
#include "store/rooms.h"

namespace floodgate::service {

class ControlPlane;
class StateKeeper;

// Thread-safe, except the batches it makes (one thread's each).
class LimiterCore {
 public:
  // As Limiter::Create, on `rooms` (a store and its features' rooms, which
  // the core owns from here on; made with `clock`). api::OpenLimiterCore
  // opens the store config.store names and calls this.
  static Result<std::unique_ptr<LimiterCore>> Create(const Config& config, const Clock& clock,
                                                     store::Rooms rooms);
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
    // The subject's usage even if it is blocked (a subject's state, with
    // cost 0), rather than the block's denial.
    bool ignore_blocks = false;
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
  using CheckCallback = floodgate::CheckCallback;
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
  // timeout after it came (CountTimeoutFrom, on the core's clock: after
  // the wait that left it unread), by on_backend_error if need be. FlushAll sends everything
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

  // Refunds: gives back up to `cost` units of `rule` (at `tier`) to `key`,
  // for a request that was admitted but failed upstream: every limit gets
  // back what its algorithm counts of them (core/refund.h), never below
  // nothing used; a subject with no state is left without one (not an
  // error). `done` runs once, maybe before this returns, with the subject's
  // state right after, as the decision a cost-0 Check at that instant would
  // report (RefundResult::after), and what each limit gave back
  // (RefundResult::refunded: 1 when one unit was used and 100 are
  // refunded), both from the store's one atomic step. Rule, tier and key
  // are checked as Check does; `cost` must be in [1, kMaxLimitCount]
  // (INVALID_ARGUMENT otherwise). A store failure is an error, not a
  // fallback decision: the units may or may not have come back. A refund
  // fires no alert and does not clear alert bits: a threshold reached
  // again in the same window is not reported again.
  struct RefundArgs {
    std::string_view rule;
    std::string_view key;
    int64_t cost = 1;
    std::string_view tier;
    // An explicit instant (tests, replays), or null for the store's clock.
    const int64_t* at_ms = nullptr;
  };
  void Refund(const RefundArgs& args, store::Done<core::RefundResult> done);
  void Refund(std::string_view rule, std::string_view key, int64_t cost, std::string_view tier,
              store::Done<core::RefundResult> done);
  // Refund, waiting for the answer (BlockingAllowed's rule applies).
  Result<core::RefundResult> RefundAndWait(const RefundArgs& args);
  Result<core::RefundResult> RefundAndWait(std::string_view rule, std::string_view key,
                                           int64_t cost, std::string_view tier = {});

  // --- Leases (algorithm: concurrency; docs/leases.md) ---
  // A subject holds at most the rule's max_in_flight leases (its tier's,
  // its override's) at once; each expires after its TTL unless released or
  // renewed. Rule, tier and key are checked as Check does; a rule that is
  // not a concurrency rule is INVALID_ARGUMENT (and Check refuses a
  // concurrency rule likewise).
  struct LeaseArgs {
    std::string_view rule;
    std::string_view key;
    std::string_view tier;
    std::string_view lease;  // Release, Renew: the lease's id
    int64_t ttl_ms = 0;      // Acquire, Renew: 0 for the rule's lease_ttl
    // An explicit instant (tests, replays), or null for the store's clock.
    const int64_t* at_ms = nullptr;
  };
  struct LeaseAnswer {
    // Acquire: granted. Release: the lease was live and is gone. Renew: it
    // was live and now expires ttl from now.
    bool ok = false;
    std::string lease;      // Acquire, granted: the new lease's id
    int64_t in_flight = 0;  // the subject's live leases after (-1: unknown, a fallback)
    int64_t limit = 0;      // the max_in_flight in force for the subject
    // Granted or renewed: the lease's time to live. Refused: ms until the
    // held leases' expiries, as they stand, free room (store::LeaseResult;
    // -1: never; a block's time left; a fallback's retry). Otherwise 0.
    int64_t ms = 0;
    // An Acquire the store could not decide, answered by on_store_full or
    // on_backend_error: a granted lease then is one the store does not
    // hold (releasing it answers 0).
    Fallback fallback = Fallback::kNone;
    bool blocked = false;  // refused: the subject is blocked (control plane)
    std::string block_reason;
  };
  // `done` runs once, maybe before this returns, on the thread that runs
  // the store's I/O for this call otherwise. A lease id is 128 random bits
  // (32 hex digits) from the system's CSPRNG. Release and Renew of a lease
  // that is not live (expired, released, made up, another subject's) answer
  // ok false and change nothing; their store failures are errors.
  void Acquire(const LeaseArgs& args, store::Done<LeaseAnswer> done);
  void Release(const LeaseArgs& args, store::Done<LeaseAnswer> done);
  void Renew(const LeaseArgs& args, store::Done<LeaseAnswer> done);
  Result<LeaseAnswer> LeaseAndWait(store::LeaseOpKind kind, const LeaseArgs& args);

  // --- Waiting instead of rejecting (service/wait_room.h) ---
  // A request that would be denied but could succeed within wait_ms is
  // held (never blocking the caller's thread) and decided again when it
  // could succeed, then answered: admitted, or denied by the deadline. At
  // most the rule's max_waiters are held; past that, and for wait_ms 0, the
  // answer is immediate. `owner` names the client (CancelWaits), 0 for none.
  struct WaitArgs {
    int64_t wait_ms = 0;  // in [0, kMaxWaitMs]; checked by the fronts
    uint64_t owner = 0;
  };
  static constexpr int64_t kMaxWaitMs = 300'000;
  void CheckWaiting(const CheckArgs& args, const WaitArgs& wait, CheckCallback done,
                    store::Batch* batch = nullptr);
  void AcquireWaiting(const LeaseArgs& args, const WaitArgs& wait, store::Done<LeaseAnswer> done);
  // The client `owner` has gone: its held requests are dropped unanswered,
  // and never decided again.
  void CancelWaits(uint64_t owner);
  // The server is stopping: every wait ends by `at_ms` (WaitRoom::EndBy).
  void EndWaitsBy(int64_t at_ms);
  // Per rule, for /metrics.
  std::vector<std::pair<std::string, WaitRoom::RuleStats>> WaitStats() const;
  std::vector<std::pair<std::string, LeaseLedger::RuleStats>> LeaseStats() const;

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
  // The clock given at Create: the store's deadlines are on its MonotonicNs.
  const Clock& clock() const;

  // As the Limiter's.
  Status Reload(const Config& config);
  int64_t SweepExpired();
  LimiterStats GetStats() const;
  Status StoreHealth() const;
  // Counters and gauges only the store in use has (Redis: its errors,
  // circuits and local cache), for /metrics.
  std::vector<store::Metric> StoreMetrics() const;
  Config config() const;
  // Where the servers sharing the store leave each other their top-subjects
  // sketches; null on a store of this process's alone (store::SketchBoard).
  std::unique_ptr<store::SketchBoard> NewSketchBoard();
  // The store's nodes, probed now (store::Backend::ProbeNodes); blocking.
  std::vector<store::NodeHealth> ProbeStoreNodes();
  // What keeps the store's state in data_dir across restarts
  // (service/state_keeper.h); null without a data_dir or for a store whose
  // state lives outside the process (Redis). Must not outlive this.
  std::unique_ptr<StateKeeper> NewStateKeeper(const std::string& data_dir, int64_t interval_ms);
  ExpiringSets& sets();
  Otp& otp();
  Alerts& alerts();
  // Overrides, blocks, runtime rules (service/control_plane.h).
  ControlPlane& control();
  // Whether an override of `rule` is in force for `key` (what checks use).
  bool HasOverride(std::string_view rule, std::string_view key) const;

  struct Impl;

 private:
  explicit LimiterCore(std::unique_ptr<Impl> impl);
  void ReleaseOrRenew(store::LeaseOpKind kind, const LeaseArgs& args,
                      store::Done<LeaseAnswer> done);
  // For the waiting forms (limiter_waiting.cc).
  WaitRoom& room();
  // The rule's max_waiters, or -1 for an unknown rule.
  int64_t MaxWaiters(std::string_view rule) const;
  std::unique_ptr<Impl> impl_;
};

}  // namespace floodgate::service
