// LeaseStore: the leases of concurrency rules on Redis, one sorted set per
// (rule, subject) of lease ids scored by each lease's expiry
// (src/redis/scripts/concurrency.lua), pruned and re-expired by the same
// script call that acquires, releases or renews. The Redis store's
// store::LeaseStore (store/lease_ops.h).
//
// Thread-safe (the Client is; the failure count is atomic).
#pragma once

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "absl/functional/any_invocable.h"
#include "floodgate/status.h"
#include "redis/client.h"
#include "store/lease_ops.h"

namespace floodgate::redis {

// The Redis key of (rule, subject)'s leases: fg:lease:{<rule>:<subject>},
// the hash tag placing it on one cluster slot. As in StateKey, a ':' in the
// rule is written %3A (and a '%' %25), so the rule part ends at the first
// ':' and no two pairs share a key.
std::string LeaseKey(std::string_view rule, std::string_view subject);

class LeaseStore final : public store::LeaseStore {
 public:
  // `client` must outlive this.
  explicit LeaseStore(Client& client) : client_(client) {}

  // Run at op.at_ms, or Redis's TIME: always answers later. A failure is
  // counted (errors()).
  store::Answer Lease(const store::LeaseOp& op, store::LeaseResult* result, Status* status,
                      store::Later<store::LeaseResult> later) override;

  // Runs `op` (arguments checked by the caller) in one script call, sent at
  // once (EVALSHA, then EVAL on NOSCRIPT). now_ms: an explicit instant
  // (tests), or nullopt for Redis's TIME. `done` runs exactly once, on a
  // client I/O thread (or on the caller's thread when the client refuses at
  // once): OK with the result; UNAVAILABLE or DEADLINE_EXCEEDED when Redis
  // failed (a key of another type: UNAVAILABLE "redis: WRONGTYPE ...",
  // noted with the client); INTERNAL for a reply of the wrong shape. The
  // result is all zeros on error.
  using Done = absl::AnyInvocable<void(const Status& status, const store::LeaseResult& result)>;
  void Run(const store::LeaseOp& op, std::optional<int64_t> now_ms, Done done);

  // Lease calls that failed: part of the store's backend errors
  // (store::Store::Usage), as a decision Redis failed is.
  int64_t errors() const { return errors_.load(std::memory_order_relaxed); }

 private:
  Client& client_;
  std::atomic<int64_t> errors_{0};
};

}  // namespace floodgate::redis
