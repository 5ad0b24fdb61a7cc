// LimiterCore: decides, and nothing else: a check (now, later or blocking),
// CL.THROTTLE, a reset, a refund, a prefetch, decisions held in a batch per
// event loop. It answers without blocking, with the store's I/O on the
// loop's own thread and one clock reading shared by a pipeline.
//
// Rules and tiers resolve to compiled variants (service/limiter/rule_set.h); state
// lives in the store it is given (store/store.h), picked once from the
// config by api/open_store.h: the embedded one, or Redis for a
// `store: redis://…` config. Nothing here or above asks which; this layer
// does not even link them (the fronts are tested on a fake store).
//
// What else a server runs (leases, waiting, the control plane, sets, OTP,
// alerts, snapshots) is a room of its own beside it, wired once in
// api/open_services.cc into service::Services (service/services.h).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "floodgate/clock.h"
#include "floodgate/config.h"
#include "floodgate/decision.h"
#include "floodgate/limiter_types.h"
#include "floodgate/status.h"
#include "service/limiter/rule_set.h"
#include "store/backend.h"
#include "store/store.h"

namespace floodgate::service {

class AlertsImpl;
class Controls;
class RuleBook;

// Decisions answered by a rule's fallback policy, by reason: what the
// store could not decide (LimiterStats' fallback_*). Shared by every room
// that answers by a rule's policy (decisions, leases).
struct FallbackCounts {
  std::atomic<int64_t> backend_error{0};
  std::atomic<int64_t> store_full{0};
  // Counts `s` (a store error): store_full for RESOURCE_EXHAUSTED, else
  // backend_error. Whether it is a full store.
  bool Count(const Status& s) {
    const bool full = s.code() == StatusCode::kResourceExhausted;
    (full ? store_full : backend_error).fetch_add(1, std::memory_order_relaxed);
    return full;
  }
};

// Thread-safe, except the batches it makes (one thread's each).
class LimiterCore {
 public:
  // Decides with `rules` on `store` (whose `backend` says whether a thread
  // may wait), reading `controls` (blocks, overrides), emitting to
  // `alerts`, counting fallbacks in `fallbacks`; each must outlive the
  // core, `store` made with `clock`.
  LimiterCore(const Clock& clock, store::Store& store, const store::Backend& backend,
              const RuleBook& rules, Controls& controls, AlertsImpl& alerts,
              FallbackCounts& fallbacks);

  // One decision: may `key` spend `cost` of `rule` (at `tier`)?
  struct CheckArgs {
    std::string_view rule = {};
    std::string_view key = {};
    int64_t cost = 1;
    std::string_view tier = {};
    // An explicit instant (tests, replays), or null for the store's clock.
    // Time never runs backwards for a subject.
    const int64_t* at_ms = nullptr;
    // NowMs() read once for requests read together (a pipeline), or 0: see
    // store::CheckOp::read_ms.
    int64_t read_ms = 0;
    // The subject's usage even if it is blocked (a subject's state, with
    // cost 0), rather than the block's denial.
    bool ignore_blocks = false;
    // The check's priority class (Rule::priorities); empty: "default".
    std::string_view priority = {};
    // Decided against the whole limit whatever the classes (a settle's
    // look at the subject afterwards), and not counted as any class's.
    bool whole_limit = false;
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
  // fails with INTERNAL (the request may still reach the store). The other
  // blocking forms are in service/limiter/blocking.h.
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
  // FG.RESET (Limiter::Reset): `done` runs once, maybe before this returns.
  void Reset(std::string_view rule, std::string_view key, store::Done<> done);

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
    std::string_view rule = {};
    std::string_view key = {};
    int64_t cost = 1;
    std::string_view tier = {};
    // An explicit instant (tests, replays), or null for the store's clock.
    const int64_t* at_ms = nullptr;
  };
  void Refund(const RefundArgs& args, store::Done<core::RefundResult> done);

  // Charges args.cost of args.rule (at args.tier) to args.key whatever the
  // limit: the overrun of a reservation's settle (service/reservations/),
  // which may leave the subject in debt (variant_views.h says what debt
  // means for each algorithm). `done` runs once, maybe before this returns,
  // with the charge's decision as the store made it: admitted, and its
  // figures against capacities out of reach (a peek with Check reports the
  // subject against its limit). Blocks and priorities do not apply: the
  // units were spent already. Errors as Check's; a store failure is an
  // error, not a fallback (the units may or may not be counted).
  void Charge(const CheckArgs& args, CheckCallback done);

  // Starts loading the memory a Check of (rule, tier, key) will touch: call
  // it for each request of a pipeline before checking any, so that their
  // cache misses overlap. Nothing for unknown rules.
  void Prefetch(std::string_view rule, std::string_view key, std::string_view tier = {});
  // Likewise for a CL.THROTTLE of `key`.
  void PrefetchThrottle(std::string_view key);

  // Whether the calling thread may wait for a later answer (not a thread
  // that runs the store's I/O).
  Status BlockingAllowed() const;
  // The store's figures and the fallbacks' (LimiterStats).
  LimiterStats GetStats() const;
  // The rules it decides with.
  const RuleBook& rules() const { return rules_; }

 private:
  // The store's decision for `op` of `variant`, finished (Finish) now or
  // when it comes. Inlined into Check: a decision on the embedded store is
  // tens of nanoseconds, and each call frame on its way shows.
  [[gnu::always_inline]] inline store::Answer Decide(const store::CheckOp& op,
                                                     const Variant& variant, Decision* decision,
                                                     Status* status, store::Later<Decision> later,
                                                     store::Batch* batch);
  // Decide for a rule with alerts (the store decides the alert bits with
  // the count) or block_for (a denial blocks the subject). Out of line, so
  // that a decision without them does not make room for the bits: GCC
  // zeroes the ~250 bytes of an AlertOutcome (even an empty std::optional
  // of one) on every call, a fifth of a hot-key decision.
  [[gnu::noinline]] store::Answer DecideSlow(store::CheckOp op, const Variant& variant,
                                             Decision* decision, Status* status,
                                             store::Later<Decision> later, store::Batch* batch);
  // What follows the store's answer `s` for `subject` of `variant`, now or
  // later: a decision the store could not make becomes the rule's fallback
  // (a full store kept nothing, so no alert fired); what it took to an
  // alert threshold is emitted before the caller sees the decision, so that
  // a caller who sees it can see its events.
  Status Finish(const Variant& variant, std::string_view subject, const Status& s,
                Decision* decision, const core::AlertOutcome* fired);
  // Blocks `subject` of `variant`'s rule when the rule says so (block_for)
  // and *d just denied it; *d then answers as that block does.
  void MaybeBlockFor(const Variant& variant, std::string_view subject, Decision* d);
  // Fills *decision for `subject` if a block of `variant`'s rule holds it:
  // a block of the subject, or, when the subject is an IP address
  // (IpAddress::Parse), of a network holding it.
  bool Blocked(const Variant& variant, std::string_view subject, Decision* decision) const;

  const Clock& clock_;
  store::Store& store_;
  const store::Backend& backend_;
  const RuleBook& rules_;
  Controls& controls_;
  AlertsImpl& alerts_;
  FallbackCounts& fallbacks_;
};

// *decision becomes the denial of a block of `rule` with `left_ms` to run:
// every limit at its capacity with nothing remaining, retry and reset the
// block's time left.
void DenyAsBlocked(const core::CompiledRule& rule, int64_t left_ms, std::string_view reason,
                   Decision* decision);

}  // namespace floodgate::service
