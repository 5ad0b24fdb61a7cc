// A circuit breaker for one Redis node, shared by every I/O thread that
// talks to it.
//
//   closed --(failure_threshold consecutive failures)--> open
//   open --(open_ms elapsed; one caller wins TryStartProbe)--> half-open
//   half-open --(probe answered)--> closed
//   half-open --(probe failed)--> open (for another open_ms)
//
// While open or half-open, requests are refused at once (Allow() is false):
// nobody waits on a backend that is known to be down. Failures are connect
// errors, lost connections and timeouts; a success is any reply. Times are
// passed in (MonotonicNs readings of the client's Clock), so the breaker
// never reads a clock: the I/O loop reads it once per iteration.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>

#include "absl/base/thread_annotations.h"

namespace floodgate::redis {

// Thread-safe.
class CircuitBreaker {
 public:
  enum class State { kClosed, kOpen, kHalfOpen };

  // `open_gauge`, when given, counts breakers that are not closed: +1 when
  // this one opens, -1 when it closes (and on destruction while open).
  CircuitBreaker(int failure_threshold, int64_t open_ns, std::atomic<int64_t>* open_gauge,
                 std::atomic<uint64_t>* open_counter);
  ~CircuitBreaker();
  CircuitBreaker(const CircuitBreaker&) = delete;
  CircuitBreaker& operator=(const CircuitBreaker&) = delete;

  // Whether a request may be sent. One relaxed-cost atomic load.
  bool Allow() const { return state_.load(std::memory_order_acquire) == State::kClosed; }
  State state() const { return state_.load(std::memory_order_acquire); }

  void RecordSuccess();
  // Returns true when this failure opened the circuit.
  bool RecordFailure(int64_t now_ns);

  // Open and open_ns elapsed: moves to half-open and returns true for
  // exactly one caller, who must send a probe and report its outcome.
  bool TryStartProbe(int64_t now_ns);
  // The probe's outcome. Returns true when the circuit changed state
  // (closed after a success).
  bool ProbeSucceeded();
  void ProbeFailed(int64_t now_ns);

  // When an open circuit may be probed (meaningful only while open).
  int64_t probe_at_ns() const;

 private:
  void OpenLocked(int64_t now_ns) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const int failure_threshold_;
  const int64_t open_ns_;
  std::atomic<int64_t>* const open_gauge_;
  std::atomic<uint64_t>* const open_counter_;

  // Written under mu_, read without it on the request path.
  std::atomic<State> state_{State::kClosed};
  // Consecutive failures while closed. Atomic so that the common success
  // path only reads it.
  std::atomic<int> failures_{0};

  mutable std::mutex mu_;
  int64_t probe_at_ns_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace floodgate::redis
