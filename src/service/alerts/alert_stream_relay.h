// AlertStreamRelay: the Redis store's side of alert delivery. One thread
// moves events between this server and the shared stream
// (redis/alert_stream.h):
//
//  - events this server emitted wait in a bounded outbox and are appended
//    to the stream (kept there while Redis is down; past the bound, Publish
//    refuses and the caller counts the drop);
//  - it claims events from the stream (new ones, and those a stopped server
//    held for claim_after_ms) as far as the delivery has room, and hands
//    them to it: with several servers, each event is delivered by the one
//    that claimed it;
//  - it acknowledges finished events, and tells the group every third of
//    claim_after_ms that it still works on those it holds (retrying);
//  - with the touches, it forgets the group's consumers that hold nothing
//    and have been idle for kForgetAfterClaims * claim_after_ms (servers
//    gone without leaving: what they held was claimed first);
//  - Stop hands unfinished events back to the stream, where any server
//    (this one after a restart) takes them at once, and leaves the group
//    if this server then holds nothing.
//
// Its rounds (poll_ms) and touches (claim_after_ms / 3) are timed on the
// Clock in Options (MonotonicNs); between them the thread sleeps at most
// the clock's MaxSleepNs, so on a ManualClock rounds come when it is moved
// (or when something is published or finished).
//
// Thread-safe.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "floodgate/clock.h"
#include "service/alerts/alert_delivery.h"
#include "store/alert_log.h"
#include "store/pending_alert.h"

namespace floodgate::service {

class AlertStreamRelay {
 public:
  // A consumer idle this many claim_after_ms and holding nothing is
  // forgotten. Never one holding entries, so never an event.
  static constexpr int64_t kForgetAfterClaims = 3;

  struct Options {
    size_t outbox_capacity = 10'000;
    int64_t claim_after_ms = 60'000;
    // How often the stream is read for other servers' events when nothing
    // wakes the relay sooner.
    int64_t poll_ms = 100;
    // Called when events leave the outbox for the stream (event ids), and
    // when the stream's length bound trimmed entries (how many).
    std::function<void(const std::vector<std::string>& event_ids)> on_queued;
    std::function<void(int64_t trimmed)> on_trimmed;
    // Must outlive the relay. Null: SystemClock::Default().
    const Clock* clock = nullptr;
  };

  // `stream` and `delivery` must outlive the relay. Nothing runs before
  // Start, so that whoever holds the relay has it before its thread can
  // hand the delivery an event (whose end comes back to Finished).
  AlertStreamRelay(store::AlertLog& stream, AlertDelivery& delivery, Options options);
  // Starts the thread. Once.
  void Start();
  ~AlertStreamRelay();  // Stop({})
  AlertStreamRelay(const AlertStreamRelay&) = delete;
  AlertStreamRelay& operator=(const AlertStreamRelay&) = delete;

  // Queues an event emitted here for the stream. False when the outbox is
  // full (or stopped).
  bool Publish(PendingAlert alert);

  // The delivery finished an event it got from the stream: acknowledged on
  // the next round. Call from AlertDelivery's on_finished.
  void Finished(const PendingAlert& alert);

  // Stops the thread, then (one try each, within the client's timeout)
  // appends what the outbox holds, acknowledges finished events and hands
  // `unfinished` (what AlertDelivery::Stop returned) back to the stream.
  // Returns how many events could not be kept (Redis down). Idempotent.
  int64_t Stop(std::vector<PendingAlert> unfinished);

  size_t outbox_size() const;

  // Waits until the outbox is empty and every finished event is
  // acknowledged; false on timeout (real time: how long the caller will
  // block, whatever the clock). For tests.
  bool WaitFlushed(std::chrono::milliseconds timeout);

 private:
  void Run();
  // One round: publish, acknowledge, touch when due, claim. Returns whether
  // it claimed a full batch (more may be waiting).
  bool Round(bool touch);
  // Logs a failed stream call, at most once per 10 s.
  void NoteFailure(const char* what, const Status& status);

  store::AlertLog& stream_;
  AlertDelivery& delivery_;
  const Options options_;
  const Clock& clock_;

  mutable std::mutex mu_;
  std::condition_variable wake_;
  std::condition_variable flushed_;
  std::vector<PendingAlert> outbox_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> acks_ ABSL_GUARDED_BY(mu_);
  bool kick_ ABSL_GUARDED_BY(mu_) = false;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
  int64_t next_failure_log_ns_ ABSL_GUARDED_BY(mu_) = 0;  // a line before this is dropped
  std::thread thread_;
};

}  // namespace floodgate::service
