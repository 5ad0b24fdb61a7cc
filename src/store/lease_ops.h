// LeaseStore: where the leases of concurrency rules (algorithm:
// concurrency; docs/leases.md) live. A subject holds at most max_in_flight
// of them at once, each live until it is released or its expiry passes
// (core/concurrency.h has the semantics both stores share). The leases of
// (rule, subject) are one table whatever the tier or override: a tier
// changes how many may be held, never which are.
//
// Apart from the decisions (store/store.h) because a lease is not a
// decision on a rule's state: it names its lease, lives until released,
// and is never held in a batch. It answers now or later as the decisions
// do (store.h: Answer, Later). Implemented by the embedded store's
// engine/lease_store.h and the Redis store's redis/lease_store.h.
//
// Thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "floodgate/status.h"
#include "store/store.h"

namespace floodgate::store {

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

class LeaseStore {
 public:
  virtual ~LeaseStore() = default;
  // Acquires, releases or renews a lease in one atomic step on the store
  // (one script call on one slot for Redis, under the shard lock for the
  // embedded store). Expired leases are dropped first; the table's expiry
  // is its last lease's, so a subject's leases vanish with their TTL
  // whatever the callers do. Errors as Store::Check's: RESOURCE_EXHAUSTED
  // for a first lease of a subject in a full embedded store; UNAVAILABLE /
  // DEADLINE_EXCEEDED / INTERNAL when Redis failed. Not held in a batch.
  virtual Answer Lease(const LeaseOp& op, LeaseResult* result, Status* status,
                       Later<LeaseResult> later) = 0;
};

}  // namespace floodgate::store
