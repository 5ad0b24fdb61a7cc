// LeaseLedger: the leases this server granted, for the metrics of
// concurrency rules: leases held per rule, and expirations (leases never
// released, whose TTL ran out).
//
// A store keeps the leases themselves (store::LeaseStore::Lease); the ledger
// only follows the ones granted here, so that a lease's end is told apart:
// released or renewed through this server, or expired. With several
// servers on one store, a lease granted here and released or renewed
// through another is not seen here: it counts as expired when its TTL
// ends (docs/leases.md). Bounded: past kMaxTracked leases, new ones are
// counted but not followed (`untracked`).
//
// Thread-safe.
#pragma once

#include <cstdint>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"

namespace floodgate::service {

class LeaseLedger {
 public:
  static constexpr size_t kMaxTracked = 1 << 20;

  struct RuleStats {
    int64_t held = 0;       // granted here, neither released nor expired
    int64_t acquired = 0;   // granted
    int64_t refused = 0;    // refused: max_in_flight held (or blocked)
    int64_t released = 0;   // released while live
    int64_t expired = 0;    // TTL ran out unreleased
    int64_t untracked = 0;  // granted past kMaxTracked: not followed
  };

  void Granted(std::string_view rule, std::string_view lease, int64_t expires_at_ms);
  void Refused(std::string_view rule);
  // A release that found the lease live.
  void Released(std::string_view rule, std::string_view lease);
  void Renewed(std::string_view rule, std::string_view lease, int64_t expires_at_ms);
  // Counts the leases whose expiry is <= now_ms as expired; how many.
  int64_t Sweep(int64_t now_ms);

  std::vector<std::pair<std::string, RuleStats>> Stats() const;

 private:
  struct Tracked {
    std::string rule;
    int64_t expires_at_ms;
  };
  RuleStats& StatsOf(std::string_view rule) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable std::mutex mu_;
  // (rule NUL lease) -> its rule and expiry; by expiry for the sweep.
  absl::flat_hash_map<std::string, Tracked> leases_ ABSL_GUARDED_BY(mu_);
  std::set<std::pair<int64_t, std::string>> by_expiry_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, RuleStats> stats_ ABSL_GUARDED_BY(mu_);
};

}  // namespace floodgate::service
