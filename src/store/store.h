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
#include <utility>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/functional/function_ref.h"
#include "core/alerts.h"
#include "core/rule_eval.h"
#include "floodgate/decision.h"
#include "floodgate/loop_driver.h"
#include "floodgate/set_types.h"
#include "floodgate/status.h"
#include "store/control.h"
#include "store/otp_policy.h"
#include "store/pending_alert.h"

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
// service/limiter_core.h's NewBatch for the contract. Not thread-safe.
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

// Leases of a concurrency rule (algorithm: concurrency): a subject holds at
// most max_in_flight of them at once, each live until it is released or its
// expiry passes (core/concurrency.h has the semantics both stores share).
// The leases of (rule, subject) are one table whatever the tier or
// override: a tier changes how many may be held, never which are.
enum class LeaseOpKind { kAcquire, kRelease, kRenew };
struct LeaseOp {
  LeaseOpKind kind = LeaseOpKind::kAcquire;
  std::string_view rule;     // the rule's name
  std::string_view subject;  // checked above: non-empty, within kMaxKeyBytes
  // kAcquire: the new lease's id (made above, unguessable); kRelease and
  // kRenew: the lease named. At most kMaxLeaseIdBytes.
  std::string_view lease;
  int64_t ttl_ms = 0;         // kAcquire, kRenew: in [1, kMaxLeaseTtlMs]
  int64_t max_in_flight = 0;  // kAcquire: in [0, kMaxInFlight]
  // An explicit instant (tests, replays), or null for the store's clock
  // (Redis: its TIME).
  const int64_t* at_ms = nullptr;
};
inline constexpr size_t kMaxLeaseIdBytes = 64;
// What a lease operation did (core::LeaseOutcome, as the stores report it).
struct LeaseResult {
  // kAcquire: the lease was granted; kRelease: it was live and is gone;
  // kRenew: it was live and now expires ttl_ms from now.
  bool ok = false;
  int64_t in_flight = 0;  // the subject's live leases right after
  // kAcquire granted, kRenew done: the lease's time to live (ttl_ms).
  // kAcquire refused: ms until enough of the held leases expire, as their
  // expiries stand, for one more to fit (a release brings room sooner, a
  // renewal moves it later; -1: never, max_in_flight 0). Otherwise 0.
  int64_t ms = 0;
  int64_t now_ms = 0;  // the store's instant
};

// What the service reports of a store, as counters and gauges it knows.
struct Metric {
  const char* name;
  const char* type;  // "counter" or "gauge"
  const char* help;
  int64_t value;
};

// What saving or loading a store's own state in a file did (Store::SaveState).
struct StateFigures {
  int64_t entries = 0;          // written, or loaded
  int64_t bytes = 0;            // the file's size
  int64_t duration_ms = 0;      // how long it took
  int64_t skipped_expired = 0;  // load: expired since they were written
  int64_t skipped_unknown = 0;  // load: of a rule (or limit) the config no longer has
  int64_t refused_full = 0;     // load: no room in the store
  int64_t written_at_ms = 0;    // when the state was saved
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
  // Forgets the other readers that hold nothing and have not read for
  // idle_ms (servers that stopped without leaving); how many.
  virtual Result<int64_t> Forget(int64_t idle_ms) = 0;
  // This server leaves the readers, if it holds nothing (a clean stop).
  virtual Status Leave() = 0;
};

// The first variant id Describe is given: the ids below are a store's own
// (CL.THROTTLE's, the expiring sets', OTP's, the lease tables').
inline constexpr uint32_t kFirstRuleId = 4;
// CL.THROTTLE's state: Prefetch(kThrottleId, key) before a Throttle of `key`.
inline constexpr uint32_t kThrottleId = 0;
static_assert(kThrottleId < kFirstRuleId);

// Thread-safe.
// The servers sharing a store publish their top-subjects sketches here,
// each under its own name with a lifetime, so that GET /v1/admin/top can
// merge every live server's (docs/visibility.md). Thread-safe; blocking
// (never on a thread that runs the store's I/O).
class SketchBoard {
 public:
  virtual ~SketchBoard() = default;
  // Leaves `blob` as `server`'s, replacing its last, for `ttl_ms`.
  virtual Status Publish(std::string_view server, std::string_view blob, int64_t ttl_ms) = 0;
  // Every server's blob that has not expired, as (server, blob) pairs.
  virtual Result<std::vector<std::pair<std::string, std::string>>> Read() = 0;
};

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

  // --- Leases (algorithm: concurrency) ---
  // Acquires, releases or renews a lease in one atomic step on the store
  // (one script call on one slot for Redis, under the shard lock for the
  // embedded store). Expired leases are dropped first; the table's expiry
  // is its last lease's, so a subject's leases vanish with their TTL
  // whatever the callers do. Errors as Check's: RESOURCE_EXHAUSTED for a
  // first lease of a subject in a full embedded store; UNAVAILABLE /
  // DEADLINE_EXCEEDED / INTERNAL when Redis failed. Not held in a batch.
  virtual Answer Lease(const LeaseOp& op, LeaseResult* result, Status* status,
                       Later<LeaseResult> later) = 0;

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
  // The shared log of pending alert events, when the store has one (a
  // Redis stream every server reads: see AlertLog), with those options.
  // Null: the events stay in this process (the alerts keep a spool file).
  struct AlertLogOptions {
    std::string consumer;  // this server's name among the log's readers
    int64_t max_len = 100'000;
    int64_t ttl_ms = 0;
  };
  virtual std::unique_ptr<AlertLog> NewAlertLog(const AlertLogOptions& options) = 0;
  // Where the control plane keeps its records (store/control.h): in Redis
  // for a Redis store, shared by every server on it; in memory (and a
  // data_dir) for the embedded one.
  virtual Result<std::unique_ptr<ControlStore>> NewControlStore(
      const ControlStoreOptions& options) = 0;
  // Where the servers sharing this store leave each other their
  // top-subjects sketches (SketchBoard). Null: the store is this process's
  // alone (the embedded one), there is nobody to share with.
  virtual std::unique_ptr<SketchBoard> NewSketchBoard() { return nullptr; }
  // A remote store's nodes as one round trip finds them now (PING each):
  // blocking, never on a thread that runs the store's I/O. Empty for a
  // store without nodes (the embedded one).
  struct NodeHealth {
    std::string address;        // "host:port"
    bool up = false;            // answered the PING
    bool circuit_open = false;  // refused at once: its circuit breaker is open
    double latency_ms = 0;      // the PING's round trip, when up
    std::string error;          // why not up
  };
  virtual std::vector<NodeHealth> ProbeNodes() { return {}; }
  // Whether the store's state is this process's own, which SaveState and
  // LoadState keep across restarts (the embedded store). A shared store's
  // state outlives the process anyway: false, and the two are never called.
  virtual bool KeepsStateInProcess() const { return false; }
  // Writes the whole state atomically to `path` (a crash mid-write leaves
  // the previous file whole). Blocking, for a background thread: decisions
  // go on meanwhile. Thread-safe.
  virtual Result<StateFigures> SaveState(const std::string& path) {
    return InternalError("this store keeps no state in the process: nothing to save to " + path);
  }
  // Loads what SaveState wrote, skipping what has expired since; before
  // the store answers anything. NOT_FOUND without a file; INVALID_ARGUMENT,
  // and nothing loaded, for a file that is damaged or not a snapshot.
  virtual Result<StateFigures> LoadState(const std::string& path) {
    return InternalError("this store keeps no state in the process: nothing to load from " + path);
  }
};

}  // namespace floodgate::store
