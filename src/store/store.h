// Store: where the state of decisions and features lives, behind one
// interface. The embedded store (engine/embedded_store.h) and the Redis
// store (redis/remote_store.h) implement it; the service picks one at
// Limiter creation and nothing above it asks which one it has.
//
// Every operation answers now or later, and says which:
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
// event loop when it has a LoopDriver attached (NewLoopDriver), else one of
// the store's I/O threads, always within the store's timeout.
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
#include "common/otp_policy.h"
#include "common/pending_alert.h"
#include "core/alerts.h"
#include "core/rule_eval.h"
#include "floodgate/decision.h"
#include "floodgate/loop_driver.h"
#include "floodgate/set_types.h"
#include "floodgate/status.h"

namespace floodgate::store {

enum class Answer { kNow, kLater };

// A callback for an answer that comes later, and how the caller makes one.
template <typename... Args>
using Done = absl::AnyInvocable<void(const Status& status, const Args&... result)>;
template <typename... Args>
using Later = absl::FunctionRef<Done<Args...>()>;

// A compiled rule (or tier) as a store decides it. `id` names its state:
// variants with the same definition share one (see service/rule_set.h).
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
};
// A later answer: the decision, and for a variant with alerts what it fired
// (null otherwise).
using CheckDone = absl::AnyInvocable<void(const Status& status, const Decision& decision,
                                          const core::AlertOutcome* alerts)>;
using CheckLater = absl::FunctionRef<CheckDone()>;

// Decisions held back to be sent together (a remote store); see
// service/limiter_core.h's AsyncBatch for the contract. Not thread-safe.
class Batch {
 public:
  virtual ~Batch() = default;
  virtual void Flush() = 0;
  virtual void FlushAll() = 0;
  virtual size_t size() const = 0;
  virtual void CountTimeoutFrom(int64_t monotonic_ns) = 0;
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

// What the service reports of a store, as counters and gauges it knows.
struct Metric {
  const char* name;
  const char* type;  // "counter" or "gauge"
  const char* help;
  int64_t value;
};

// Pending quota alert events shared by every server on one store, each
// delivered by one of them (the Redis store: one stream, one consumer
// group; redis/alert_stream.h has the details). Blocking calls: for a
// background thread only. Thread-safe.
class AlertLog {
 public:
  virtual ~AlertLog() = default;
  // Appends `alerts`; how many old entries the length bound trimmed.
  virtual Result<int64_t> Add(std::span<const PendingAlert> alerts) = 0;
  // Up to `count` events for this server: those another server has held
  // for min_idle_ms first, then new ones; each with its stream_id.
  virtual Result<std::vector<PendingAlert>> Claim(size_t count, int64_t min_idle_ms) = 0;
  // This server still works on these (others leave them alone).
  virtual Status Touch(std::span<const std::string> stream_ids) = 0;
  // Finished: acknowledged and deleted.
  virtual Status Ack(std::span<const std::string> stream_ids) = 0;
  // Handed back unfinished (a graceful stop), for any server to take.
  virtual Status Release(std::span<const PendingAlert> alerts) = 0;
};

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
  // where there is nothing to load.
  virtual void Prefetch(uint32_t id, std::string_view subject) = 0;
  // A batch for one thread (an event loop); max_calls_in_flight as in
  // AsyncBatch.
  virtual std::unique_ptr<Batch> NewBatch(int max_calls_in_flight) = 0;

  virtual Answer Throttle(const ThrottleOp& op, ThrottleResult* result, Status* status,
                          Later<ThrottleResult> later) = 0;
  virtual void PrefetchThrottle(std::string_view key) = 0;
  virtual Answer Reset(const ResetOp& op, Status* status, Later<> later) = 0;

  // --- Expiring sets and OTP (floodgate/expiring_sets.h, otp.h) ---
  virtual Answer RunSet(const SetRequest& request, int64_t max_members, SetReply* reply,
                        Status* status, Later<SetReply> later) = 0;
  virtual Answer OtpIssue(std::string_view subject, std::string_view code_hash,
                          std::string_view event_id, const OtpPolicy& policy, OtpIssueOutcome* out,
                          Status* status, Later<OtpIssueOutcome> later) = 0;
  virtual Answer OtpAttempt(std::string_view subject, std::string_view event_id,
                            const OtpPolicy& policy, OtpAttemptOutcome* out, Status* status,
                            Later<OtpAttemptOutcome> later) = 0;
  virtual Answer OtpConsume(std::string_view subject, std::string_view code_hash, bool* consumed,
                            Status* status, Later<bool> later) = 0;

  // --- Running it ---
  // Whether a caller may wait here for a later answer: not on a thread
  // that runs this store's I/O (it would wait for itself).
  virtual Status BlockingAllowed() const = 0;
  // The store's I/O run by one event loop (floodgate/loop_driver.h); null
  // when there is none to run.
  virtual Result<std::unique_ptr<LoopDriver>> NewLoopDriver() = 0;
  // Whether the store can be expected to answer now (see Limiter::StoreHealth).
  virtual Status Health() const = 0;
  // Frees what expired by `now_ms`; how many entries.
  virtual int64_t SweepExpired(int64_t now_ms) = 0;
  // What the store holds and how it has fared; each store fills what it
  // knows (the rest stays 0).
  struct Usage {
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
  // The shared log of pending alert events, when the store has one (a
  // Redis stream every server reads: see AlertLog), with those options.
  // Null: the events stay in this process (the alerts keep a spool file).
  struct AlertLogOptions {
    std::string consumer;  // this server's name among the log's readers
    int64_t max_len = 100'000;
    int64_t ttl_ms = 0;
  };
  virtual std::unique_ptr<AlertLog> NewAlertLog(const AlertLogOptions& options) = 0;
};

}  // namespace floodgate::store
