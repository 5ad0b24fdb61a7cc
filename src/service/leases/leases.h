// Leases: the rooms of concurrency rules (algorithm: concurrency;
// docs/leases.md). A subject holds at most the rule's max_in_flight leases
// (its tier's, its override's) at once; each expires after its TTL unless
// released or renewed. The store keeps the leases (store/lease_ops.h);
// this checks the call as a decision is checked, answers a store failure
// by the rule's fallback policy, and follows the leases granted here for
// the metrics (LeaseLedger).
//
// Thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "floodgate/clock.h"
#include "floodgate/decision.h"
#include "floodgate/status.h"
#include "service/leases/lease_ledger.h"
#include "service/limiter/controls.h"
#include "service/limiter/limiter_core.h"
#include "service/limiter/rule_set.h"
#include "store/backend.h"
#include "store/lease_ops.h"

namespace floodgate::service {

class Leases {
 public:
  // Called after a release through this server freed room for `key` of
  // `rule` (a request waiting for a lease may take it now).
  using OnRelease = std::function<void(std::string_view rule, std::string_view key)>;

  // Each must outlive this; `backend` is the one `store` belongs to.
  Leases(const Clock& clock, store::LeaseStore& store, const store::Backend& backend,
         const RuleBook& rules, const Controls& controls, FallbackCounts& fallbacks);

  // Set once, before any lease is released (the waiting room is made after).
  void SetOnRelease(OnRelease on_release) { on_release_ = std::move(on_release); }

  // A subject holds at most the rule's max_in_flight leases (its tier's,
  // its override's) at once; each expires after its TTL unless released or
  // renewed. Rule, tier and key are checked as Check does; a rule that is
  // not a concurrency rule is INVALID_ARGUMENT (and Check refuses a
  // concurrency rule likewise).
  struct LeaseArgs {
    std::string_view rule = {};
    std::string_view key = {};
    std::string_view tier = {};
    std::string_view lease = {};  // Release, Renew: the lease's id
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
  Result<LeaseAnswer> AndWait(store::LeaseOpKind kind, const LeaseArgs& args);

  // Counts the leases granted here whose TTL ran out by now_ms as expired.
  void Sweep(int64_t now_ms) { ledger_.Sweep(now_ms); }
  // Per rule, for /metrics and the stats.
  std::vector<std::pair<std::string, LeaseLedger::RuleStats>> Stats() const {
    return ledger_.Stats();
  }

 private:
  void ReleaseOrRenew(store::LeaseOpKind kind, const LeaseArgs& args,
                      store::Done<LeaseAnswer> done);

  const Clock& clock_;
  store::LeaseStore& store_;
  const store::Backend& backend_;
  const RuleBook& rules_;
  const Controls& controls_;
  FallbackCounts& fallbacks_;
  OnRelease on_release_;
  LeaseLedger ledger_;
};

}  // namespace floodgate::service
