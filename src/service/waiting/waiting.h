// Waiting: requests that would be denied but could succeed within their
// wait_ms are held in a WaitRoom (service/waiting/wait_room.h), never blocking the
// caller's thread, and decided again when they could succeed, then
// answered: admitted, or denied by the deadline. Checks of rate rules
// (LimiterCore) and acquires of leases (Leases) alike.
//
// A request first goes as any other (in the caller's batch), unless
// others already wait for the same subject: then it queues behind them
// without trying, so that the subject's waiters are served in arrival
// order. A denial that names a retry time within the wait is held; the
// room tries it again at that time, with no batch (sent at once).
//
// Thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "floodgate/clock.h"
#include "service/leases/leases.h"
#include "service/limiter/limiter_core.h"
#include "service/waiting/wait_room.h"

namespace floodgate::service {

class Waiting {
 public:
  // Each must outlive this. Its room's thread also counts the leases
  // granted here whose TTL ran out (Leases::Sweep), and a release through
  // this server wakes the acquires waiting for its subject.
  Waiting(const Clock& clock, LimiterCore& core, Leases& leases);
  // Answers what it holds (denied as of now).
  ~Waiting();

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
  // A check, waiting up to wait.wait_ms for room (done as CheckAsync's).
  void Check(const LimiterCore::CheckArgs& args, const WaitArgs& wait,
             LimiterCore::CheckCallback done, store::Batch* batch = nullptr);
  // An acquire, waiting up to wait.wait_ms for a lease (done as Acquire's).
  void Acquire(const Leases::LeaseArgs& args, const WaitArgs& wait,
               store::Done<Leases::LeaseAnswer> done);
  // The client `owner` has gone: its held requests are dropped unanswered,
  // and never decided again.
  void Cancel(uint64_t owner) { room_->Cancel(owner); }
  // The server is stopping: every wait ends by `at_ms` (WaitRoom::EndBy).
  void EndBy(int64_t at_ms) { room_->EndBy(at_ms); }
  // Per rule, for /metrics.
  std::vector<std::pair<std::string, WaitRoom::RuleStats>> Stats() const { return room_->Stats(); }

 private:
  // The rule's max_waiters, or -1 for an unknown rule.
  int64_t MaxWaiters(std::string_view rule) const;

  const Clock& clock_;
  LimiterCore& core_;
  Leases& leases_;
  std::shared_ptr<WaitRoom> room_;  // shared only with the release hook (weakly)
};

}  // namespace floodgate::service
