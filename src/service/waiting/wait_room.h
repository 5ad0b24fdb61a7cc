// WaitRoom: requests held instead of denied (FG.CHECK ... WAIT ms,
// FG.ACQUIRE ... WAIT ms, HTTP wait_ms) until they can succeed or their
// deadline passes.
//
// A held request is decided again when it could succeed: at the retry time
// its last denial named (a window's end, a token's refill, a lease's
// expiry), or at once when something frees room here (a lease released
// through this server: Wake). Room that may come unannounced (a lease
// released through another server) is polled for, up to the deadline
// itself: such a wait ends at its deadline, not a poll interval before it.
// Waiters of one subject are tried in arrival order, the next only once
// the one before it is answered, so that a later arrival never takes the
// room an earlier one waited for. One thread runs the timers and starts
// every attempt; an attempt's answer may come on another thread (a remote
// store's), and the room goes on from there.
//
// Bounded: at most max_waiters held per rule (the caller is told at once
// when there is no room), each held at most until its deadline. A waiter
// whose client has gone (Cancel, by owner) is dropped without a further
// attempt, so a disconnect leaves nothing behind: no held slot, no units
// spent for nobody.
//
// Thread-safe.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <queue>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/functional/any_invocable.h"
#include "floodgate/clock.h"

namespace floodgate::service {

// One held request: how to try it again, and how to answer it.
class HeldRequest {
 public:
  virtual ~HeldRequest() = default;
  // What an attempt found: admitted (the request is done and answered by
  // the attempt's owner), or denied with the time until it could succeed
  // as far as the denial knows (-1: never).
  struct Attempt {
    bool admitted = false;
    int64_t retry_ms = -1;
    // Above 0: room may also come sooner, unannounced (a lease released
    // through another server), so the request is tried at least this often
    // and held to its deadline whatever retry_ms says. 0: retry_ms is when
    // it can succeed, no sooner.
    int64_t poll_ms = 0;

    // How long until it is worth trying again: retry_ms, or poll_ms when
    // that is sooner (or retry_ms is never).
    int64_t NextTryInMs() const;
    // Whether it may succeed within `left_ms`: it is worth holding.
    bool MayTurnWithin(int64_t left_ms) const;
  };
  using AttemptDone = absl::AnyInvocable<void(const Attempt& attempt)>;
  // Decides the request again; `done` runs once, on any thread, maybe
  // before this returns. Admitted: the waiter has answered its client.
  virtual void Try(AttemptDone done) = 0;
  // Answers the client with the last denial, as of `now_ms` (the deadline
  // passed, or it can never succeed within it).
  virtual void GiveUp(int64_t now_ms) = 0;
};

class WaitRoom {
 public:
  // Per rule, for /metrics.
  struct RuleStats {
    int64_t waiting = 0;    // held now
    int64_t held = 0;       // held since start
    int64_t admitted = 0;   // answered with an admission after waiting
    int64_t timed_out = 0;  // answered with a denial at or before the deadline
    int64_t cancelled = 0;  // their client went away while held
    int64_t full = 0;       // answered at once: max_waiters were held
  };

  // `clock` must outlive the room. Starts the room's thread.
  explicit WaitRoom(const Clock& clock);
  // Gives up on every waiter still held (answers them), then stops.
  ~WaitRoom();
  WaitRoom(const WaitRoom&) = delete;
  WaitRoom& operator=(const WaitRoom&) = delete;

  // Holds `waiter` for `subject` (any byte string naming what it waits for:
  // rule, tier and key) of `rule`, owned by `owner` (a client connection's
  // id, for Cancel; 0 for none), until `deadline_ms` on the clock; first
  // tried `retry_ms` from now (at the deadline when that is later), or as
  // soon as the waiters ahead of it are answered. A try due by the deadline
  // is made, late as the room's thread may be to make it; a denial at or
  // past the deadline is answered with GiveUp. False, and nothing held,
  // when `rule` already holds max_waiters (the caller answers at once).
  bool Hold(std::string_view rule, int64_t max_waiters, std::string subject, uint64_t owner,
            int64_t deadline_ms, int64_t retry_ms, std::unique_ptr<HeldRequest> waiter);

  // Whether any request for `subject` is held: a new arrival that would
  // wait must then queue behind them rather than try first.
  bool Busy(std::string_view subject) const;

  // Tries the first waiter of `subject` now (room was freed here); if it is
  // being tried, once more as soon as that attempt is denied.
  void Wake(std::string_view subject);

  // Drops every waiter `owner` holds, unanswered (the client has gone).
  void Cancel(uint64_t owner);

  // Every wait ends by `at_ms` on the clock, those held now and those held
  // later: admitted meanwhile, or answered as at their deadline then. The
  // server is stopping, and each waiter must have its answer before the
  // drain closes its connection. The earliest of several calls holds.
  void EndBy(int64_t at_ms);

  // Runs `fn` every `every_ms` on the room's thread (housekeeping that
  // needs no thread of its own). Set before any Hold.
  void SetTick(int64_t every_ms, absl::AnyInvocable<void(int64_t now_ms)> fn);

  std::vector<std::pair<std::string, RuleStats>> Stats() const;
  int64_t waiting() const { return waiting_.load(std::memory_order_relaxed); }

 private:
  struct Held;
  struct Queue;
  struct Timer {
    int64_t at_ms;
    uint64_t seq;  // ties in order of arming
    std::string subject;
    bool operator>(const Timer& o) const {
      return at_ms != o.at_ms ? at_ms > o.at_ms : seq > o.seq;
    }
  };
  void Run();
  // Answers (GiveUp) the waiters of `q` whose deadline has passed, drops
  // cancelled ones, then tries the first if none is being tried.
  void Step(const std::string& subject, int64_t now_ms, std::vector<std::unique_ptr<Held>>* out)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Arm(const std::string& subject, int64_t at_ms) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void OnAttempt(const std::string& subject, Held* held, const HeldRequest::Attempt& attempt);
  void Finish(Held& held, int64_t RuleStats::*outcome) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const Clock& clock_;
  mutable std::mutex mu_;
  std::condition_variable wake_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t seq_ ABSL_GUARDED_BY(mu_) = 0;
  std::priority_queue<Timer, std::vector<Timer>, std::greater<>> timers_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, std::unique_ptr<Queue>> queues_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, RuleStats> stats_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<uint64_t, std::vector<std::string>> owners_ ABSL_GUARDED_BY(mu_);
  int64_t tick_every_ms_ = 0;
  absl::AnyInvocable<void(int64_t)> tick_;
  int64_t next_tick_ms_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t end_by_ms_ ABSL_GUARDED_BY(mu_) = INT64_MAX;  // EndBy
  std::atomic<int64_t> waiting_{0};
  std::thread thread_;
};

// The room's subjects: what a held request waits for. A check's subject
// is its (rule, tier, key); an acquire's its (rule, key), whatever the
// tier, as the stores keep a subject's leases in one table (a release of
// any of them wakes its waiters).
std::string CheckWaitSubject(std::string_view rule, std::string_view tier, std::string_view key);
std::string LeaseWaitSubject(std::string_view rule, std::string_view key);

}  // namespace floodgate::service
