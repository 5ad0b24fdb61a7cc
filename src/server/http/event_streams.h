// EventStreams: the open GET /v1/admin/events responses (Server-Sent
// Events), and the thread that writes to them once a second.
#pragma once

#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "common/thread_stopper.h"
#include "floodgate/clock.h"
#include "server/net/session.h"

namespace floodgate::server {

// The completion tag of a stream's events (Session::OnCompletion): a
// session streaming events appends what comes with it straight to its
// output, outside its ReplyQueue's order (the stream is its last response).
inline constexpr uint64_t kStreamTag = ~uint64_t{0};

// Streams open at once, across the server; past it the route answers 503.
inline constexpr size_t kMaxEventStreams = 64;

// Thread-safe.
class EventStreams {
 public:
  // `tick(n, streaming)` runs once a second on the streams' thread (n
  // counts from 0), kTickAfterMs past each whole second of `clock`'s wall
  // time, so that the second just ended is whole and each second has its
  // tick (a plain 1 s period drifts by the tick's own work, and now and
  // then would skip a second or report one twice). The wait is timed on
  // `clock` too (its MonotonicNs), so a ManualClock drives the ticks. It
  // does the visibility's periodic work, which may block (publishing
  // sketches to a shared store), and, when `streaming` (a stream is open),
  // returns the second's events as SSE text for every stream (empty: none).
  EventStreams(std::function<std::string(int64_t tick, bool streaming)> tick, const Clock& clock);
  ~EventStreams();  // Stop()
  // Stops the thread: no event is written after this returns (Add and
  // Remove still may be called). Idempotent.
  void Stop();
  EventStreams(const EventStreams&) = delete;
  EventStreams& operator=(const EventStreams&) = delete;

  // A new stream to `ref`; false at kMaxEventStreams.
  bool Add(const ConnectionRef& ref);
  // The stream to `ref` is gone (its session closed). Idempotent.
  void Remove(const ConnectionRef& ref);
  size_t size() const;

 private:
  static constexpr int64_t kTickAfterMs = 20;

  void Run();

  const std::function<std::string(int64_t tick, bool streaming)> tick_;
  const Clock& clock_;
  mutable std::mutex mu_;
  std::vector<ConnectionRef> streams_ ABSL_GUARDED_BY(mu_);
  ThreadStopper ticker_;  // last: Run uses the members above
};

}  // namespace floodgate::server
