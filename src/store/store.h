// Store: where the state of decisions lives: the rules' and tiers' states,
// checked, refunded and reset, and CL.THROTTLE's. The embedded store
// (engine/embedded_store.h) and the Redis store (redis/remote_store.h)
// implement it; api/open_store.h picks one, and nothing above it asks which
// one it has. Each feature's own state (leases, sets, OTP, the alert log,
// the control records, the sketch board, snapshots) is behind an interface
// of its own, and how the store's I/O runs behind store/backend.h: a store
// is opened as store/rooms.h, which holds them all. This interface grows
// with the decisions, never with a feature.
//
// Every operation answers now or later, and says which (the feature
// interfaces answer likewise):
//
//   Decision d;
//   Status s;
//   if (store.Check(op, &d, &s, later, batch) == Answer::kNow) { use s, d }
//   // else `later()` was called once, and what it returned runs with the answer
//
// `later` is called only when the answer will come later, to get the
// callback that receives it: answering now (the embedded store, a refusal,
// a local cache) costs no callback, so no allocation. A later answer comes
// on the thread that runs the store's I/O for the caller: the caller's own
// event loop when it has a LoopDriver attached (Backend::NewLoopDriver),
// else one of the store's I/O threads, always within the store's timeout.
//
// Arguments are checked above (service/): keys non-empty and within
// kMaxKeyBytes, costs in range. A store reports what went wrong with the
// store itself: RESOURCE_EXHAUSTED when a new entry does not fit (the
// embedded store's memory bound), UNAVAILABLE / DEADLINE_EXCEEDED / INTERNAL
// when a remote store failed. The service turns those into the rule's
// fallback decision.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/functional/function_ref.h"
#include "core/alerts.h"
#include "core/rule_eval.h"
#include "floodgate/decision.h"
#include "floodgate/status.h"

namespace floodgate::store {

enum class Answer { kNow, kLater };

// A callback for an answer that comes later, and how the caller makes one.
template <typename... Args>
using Done = absl::AnyInvocable<void(const Status& status, const Args&... result)>;
template <typename... Args>
using Later = absl::FunctionRef<Done<Args...>()>;

// A compiled rule (or tier) as a store decides it. `id` names its state:
// variants with the same definition share one (see service/limiter/rule_set.h).
// `tag` is what the store said of it in Describe.
struct VariantRef {
  const core::CompiledRule* rule = nullptr;
  uint32_t id = 0;
  std::string_view tag;
};

// One decision: may `subject` spend `cost` of `variant`?
struct CheckOp {
  VariantRef variant;
  std::string_view subject;
  int64_t cost = 1;
  // An explicit instant (tests, replays), or null for the store's clock
  // (Redis: its TIME).
  const int64_t* at_ms = nullptr;
  // The caller's clock, read once for requests read together (a pipeline),
  // or 0. A store that keeps time by the caller's clock (the embedded one)
  // decides at this instant rather than read it again; one with a clock of
  // its own (Redis) ignores it.
  int64_t read_ms = 0;
  // Answered now: what the decision took to which alert threshold, when the
  // variant has alerts (else null, untouched).
  core::AlertOutcome* alerts = nullptr;
  // What Store::Prefetch returned for this very (variant id, subject), or
  // 0: the store may skip work it did there (the embedded store: the hash).
  size_t prefetched = 0;
};
// A later answer: the decision, and for a variant with alerts what it fired
// (null otherwise).
using CheckDone = absl::AnyInvocable<void(const Status& status, const Decision& decision,
                                          const core::AlertOutcome* alerts)>;
using CheckLater = absl::FunctionRef<CheckDone()>;

// Decisions held back to be sent together (a remote store); see
// service/limiter/limiter_core.h's NewBatch for the contract. Not thread-safe.
class Batch {
 public:
  virtual ~Batch() = default;
  virtual void Flush() = 0;
  virtual void FlushAll() = 0;
  virtual size_t size() const = 0;
  // A MonotonicNs() reading of the store's Clock (the one given at Create).
  virtual void CountTimeoutFrom(int64_t monotonic_ns) = 0;
};

// The batch of a store that never holds a decision back: it answers at
// once (the embedded store), or sends each decision as it comes.
class ImmediateBatch final : public Batch {
 public:
  void Flush() override {}
  void FlushAll() override {}
  size_t size() const override { return 0; }
  void CountTimeoutFrom(int64_t) override {}
};

// redis-cell's CL.THROTTLE on its own GCRA state per key.
struct ThrottleOp {
  std::string_view key;
  int64_t max_burst = 0;
  int64_t count = 0;
  int64_t period_s = 0;
  int64_t quantity = 1;
  const int64_t* at_ms = nullptr;
  int64_t read_ms = 0;  // as CheckOp's
};

// Forgets a subject's state of one rule: its own limits and every tier.
struct ResetOp {
  std::string_view rule;
  std::span<const std::string> tiers;  // the rule's tier names
  std::span<const uint32_t> ids;       // the state ids of the rule and its tiers
  std::string_view subject;
};

// Gives back units of a decision that was admitted but whose request failed
// upstream (see Store::Refund).
struct RefundOp {
  VariantRef variant;
  std::string_view subject;
  int64_t cost = 1;  // the units to give back, in [1, kMaxLimitCount]
  // An explicit instant (tests, replays), or null for the store's clock, as
  // CheckOp's.
  const int64_t* at_ms = nullptr;
};

// What the service reports of a store, as counters and gauges it knows.
struct Metric {
  const char* name;
  const char* type;  // "counter" or "gauge"
  const char* help;
  int64_t value;
};

// The first variant id Describe is given: the ids below are a store's own
// (CL.THROTTLE's, the expiring sets', OTP's, the lease tables', the
// reservations').
inline constexpr uint32_t kFirstRuleId = 5;
// CL.THROTTLE's state: Prefetch(kThrottleId, key) before a Throttle of `key`.
inline constexpr uint32_t kThrottleId = 0;
static_assert(kThrottleId < kFirstRuleId);

// Thread-safe.
class Store {
 public:
  virtual ~Store() = default;

  // Makes a variant's state known before its first decision: the embedded
  // store registers the layout under `id` (ids come in order, from
  // kFirstRuleId up); the Redis store returns its script fingerprint. The
  // result goes in VariantRef::tag.
  virtual Result<std::string> Describe(const core::CompiledRule& rule, uint32_t id) = 0;

  // --- Decisions ---
  // A decision that goes to the store waits in `batch` (one this store's
  // NewBatch made) until it is flushed, or is sent at once without one.
  virtual Answer Check(const CheckOp& op, Decision* decision, Status* status, CheckLater later,
                       Batch* batch) = 0;
  // Starts loading the memory a Check of (id, subject) will touch; nothing
  // where there is nothing to load. Returns a hint for that Check
  // (CheckOp::prefetched), 0 for none. With kThrottleId, the state a
  // Throttle of `subject` will touch (the hint is then unused).
  virtual size_t Prefetch(uint32_t id, std::string_view subject) = 0;
  // A batch for one thread (an event loop); max_calls_in_flight as in
  // LimiterCore::NewBatch.
  virtual std::unique_ptr<Batch> NewBatch(int max_calls_in_flight) = 0;

  virtual Answer Throttle(const ThrottleOp& op, ThrottleResult* result, Status* status,
                          Later<ThrottleResult> later) = 0;
  virtual Answer Reset(const ResetOp& op, Status* status, Later<> later) = 0;

  // --- Refunds ---
  // Gives back up to op.cost units to every limit of op.variant for
  // op.subject, at the store's instant (op.at_ms when set), each limit as
  // its algorithm defines a refund (core/refund.h): never below nothing
  // used. A subject with no state of the variant (never seen, expired; on
  // Redis, one stored under another definition's fingerprint, which is left
  // alone) gets none: a refund never creates state, never keeps one longer
  // than it would have lived, and drops one that holds nothing afterwards;
  // alert bits already set stay set. result->after is the subject's state
  // right after, as the decision a cost-0 peek at that instant reports (no
  // alert fires), and result->refunded what each limit gave back, both from
  // the one atomic step that gave them back. Errors as Check's, but a
  // refund never fails for a full store (it adds nothing). A remote store
  // also forgets the subject in its local over-limit cache. A refund is not
  // held in a batch: it goes to the store at once.
  virtual Answer Refund(const RefundOp& op, core::RefundResult* result, Status* status,
                        Later<core::RefundResult> later) = 0;

  // --- Its state ---
  // Frees what expired by `now_ms`; how many entries.
  virtual int64_t SweepExpired(int64_t now_ms) = 0;
  // What the store is, what it holds and how it has fared; each store
  // fills what it knows (the rest stays 0).
  struct Usage {
    // Which store this is, in the words /v1/admin/stats shows: "memory"
    // (the embedded store), "redis". A static string. The store says it,
    // so that nobody above guesses it from what else is set.
    std::string_view kind;
    // The embedded store's entries and memory (engine/memory_store.h).
    int64_t entries = 0;
    int64_t rejected_full = 0;
    int64_t expired_freed = 0;
    int64_t bytes = 0;
    // A remote store's failures and its local over-limit cache.
    int64_t backend_errors = 0;
    int64_t backend_timeouts = 0;
    int64_t open_circuits = 0;
    int64_t wrong_type = 0;
    int64_t local_cache_denials = 0;
    int64_t local_cache_entries = 0;
  };
  virtual Usage GetUsage() const = 0;
  // The store's own counters and gauges for /metrics.
  virtual std::vector<Metric> Metrics() const = 0;
};

}  // namespace floodgate::store
