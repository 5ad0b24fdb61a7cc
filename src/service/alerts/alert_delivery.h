// AlertDelivery: alert events POSTed to their webhooks by worker threads,
// off the request path, retried until they are answered 2xx or their time
// is up.
//
//  - Bounded: at most `capacity` events waiting, retrying or being sent;
//    past it Add refuses (the caller counts and logs the drop) rather than
//    block a decision or grow memory behind a dead webhook.
//  - Each POST carries X-Floodgate-Signature (computed when the event was
//    emitted, over the body's exact bytes) and Idempotency-Key (the event
//    id), and must be answered within timeout_ms.
//  - A failed POST (no connection, timeout, any status but 2xx) is tried
//    again after backoff_initial_ms, then twice as long each time up to
//    backoff_max_ms, each wait drawn at random from its upper half so that
//    events failed together do not come back together. An event is given
//    up once retry_for_ms have passed since it was emitted (its last try
//    comes at that instant).
//  - Time comes from the Clock in Options: the back-off and the POST
//    timeout on its MonotonicNs (a wall-clock step cannot bring retries
//    forward), the give-up time on its NowMs (it counts from the emission,
//    possibly on another server or before a restart). Workers sleeping
//    until the next event is due wake at least every MaxSleepNs to read
//    the clock again, so on a ManualClock retries come when a test moves it.
//  - Stop hands back what was not finished, for the caller to keep (a
//    spool file, the Redis stream).
//
// Unlike the OTP delivery queue (webhook_queue.h), which never retries (a
// user asks for a new code sooner) and wipes bodies holding codes, alerts
// are worth retrying for a day and carry nothing secret.
//
// Thread-safe.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "floodgate/clock.h"
#include "store/pending_alert.h"

namespace floodgate::service {

class AlertDelivery {
 public:
  enum class Outcome { kDelivered, kExpired };

  struct Options {
    int workers = 2;
    int64_t timeout_ms = 5000;
    int64_t retry_for_ms = 24LL * 3'600'000;
    int64_t backoff_initial_ms = 1000;
    int64_t backoff_max_ms = 300'000;
    size_t capacity = 10'000;
    // Called once per event that leaves: answered 2xx, or given up. On a
    // worker thread (or Add's caller, for an event already too old),
    // without the delivery's lock; must not block for long.
    std::function<void(const PendingAlert&, Outcome)> on_finished;
    // Called after each failed POST, before the event waits for its next
    // try (or is given up), with what went wrong. Same thread rules.
    std::function<void(const PendingAlert&, const std::string& error)> on_failed;
    // Must outlive the delivery. Null: SystemClock::Default().
    const Clock* clock = nullptr;
  };

  struct Stats {
    int64_t delivered = 0;
    int64_t retried = 0;  // failed POSTs scheduled again
    int64_t expired = 0;  // given up: retry_for passed
    int64_t pending = 0;  // gauge: waiting, retrying or being sent
  };

  explicit AlertDelivery(Options options);
  ~AlertDelivery();  // Stop(), dropping what it returns
  AlertDelivery(const AlertDelivery&) = delete;
  AlertDelivery& operator=(const AlertDelivery&) = delete;

  // Queues `alert` for delivery now. False when `capacity` events are
  // already here (or after Stop): the caller counts the drop.
  bool Add(PendingAlert alert);
  // Places left before Add refuses.
  size_t Room() const;

  // Stops the workers (a POST in progress finishes first, within its
  // timeout) and returns every event not finished, with its attempts.
  // Add refuses from now on. Idempotent: later calls return nothing.
  std::vector<PendingAlert> Stop();

  // Copies of every event not finished (waiting, retrying or being sent).
  std::vector<PendingAlert> Snapshot() const;
  // Bumped whenever the set of unfinished events changes: a spool writer
  // compares it to know whether to write.
  uint64_t version() const;

  // Waits until no event is left; false if that takes longer than `timeout`
  // (real time: how long the caller will block, whatever the clock).
  bool WaitIdle(std::chrono::milliseconds timeout);

  Stats GetStats() const;

 private:
  struct Item {
    PendingAlert alert;
    int64_t due_ns;  // clock_.MonotonicNs()
    bool sending = false;
  };

  // At most one failure line per second, however many events fail: a dead
  // webhook with thousands of events waiting must not flood the log.
  class FailureLog {
   public:
    void Note(const PendingAlert& alert, const std::string& error, bool given_up, int64_t now_ns);

   private:
    std::mutex mu_;
    int64_t next_line_ns_ ABSL_GUARDED_BY(mu_) = 0;  // a line before this waits
    int64_t since_last_ ABSL_GUARDED_BY(mu_) = 0;
  };

  void Run();
  // The wait before try number `attempts` + 1, jittered.
  int64_t BackoffMs(int attempts);

  const Options options_;
  const Clock& clock_;
  FailureLog failures_;
  mutable std::mutex mu_;
  std::condition_variable wake_;  // workers: an event is due, or stop
  std::condition_variable idle_;  // WaitIdle: nothing left
  std::map<uint64_t, Item> items_ ABSL_GUARDED_BY(mu_);
  std::set<std::pair<int64_t, uint64_t>> queue_ ABSL_GUARDED_BY(mu_);  // not being sent, by due_ns
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t version_ ABSL_GUARDED_BY(mu_) = 0;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;  // Stop has returned the events
  Stats stats_ ABSL_GUARDED_BY(mu_);
  std::vector<std::thread> workers_;
};

}  // namespace floodgate::service
