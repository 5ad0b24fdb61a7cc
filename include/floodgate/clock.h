// Clocks. Components receive a Clock& and read it once per request; algorithms
// never read a clock themselves (they take `now_ms`).
#pragma once

#include <atomic>
#include <cstdint>

namespace floodgate {

// Wall-clock milliseconds since the Unix epoch. Implementations are thread-safe.
class Clock {
 public:
  virtual ~Clock() = default;
  virtual int64_t NowMs() const = 0;
};

// CLOCK_REALTIME in milliseconds. Thread-safe.
//
// Never goes backwards: a step back of the system clock is absorbed by
// returning the largest value seen so far, so a decision can never be
// refunded by an NTP correction.
//
// Fast: where the kernel itself keeps time with an invariant TSC, NowMs()
// extrapolates from the last CLOCK_REALTIME reading with an unserialised
// rdtsc, re-reading CLOCK_REALTIME every few milliseconds. Why: the vDSO's
// clock_gettime orders its rdtsc after every earlier load, so a decision that
// reads the clock waits for its own cache misses before it can start the
// next ones; this read does not. Elsewhere it is plain clock_gettime.
class SystemClock final : public Clock {
 public:
  SystemClock();
  int64_t NowMs() const override;

 private:
  int64_t ReadSlow() const;

  mutable std::atomic<int64_t> high_water_ms_{0};
  // The extrapolation, published under a sequence lock (odd: being written):
  // realtime ns = base_ns_ + ((tsc - base_tsc_) * ns_per_tick_q32_ >> 32),
  // trusted while tsc - base_tsc_ < resync_ticks_. ns_per_tick_q32_ == 0:
  // not calibrated yet (or no usable TSC), read CLOCK_REALTIME.
  const bool use_tsc_;
  mutable std::atomic<uint64_t> seq_{0};
  mutable std::atomic<uint64_t> base_tsc_{0};
  mutable std::atomic<int64_t> base_ns_{0};
  mutable std::atomic<uint64_t> ns_per_tick_q32_{0};
  mutable std::atomic<uint64_t> resync_ticks_{0};
};

// A clock that moves only when told to. Thread-safe. For tests and `simulate`.
class ManualClock final : public Clock {
 public:
  explicit ManualClock(int64_t now_ms = 0) : now_ms_(now_ms) {}
  int64_t NowMs() const override { return now_ms_.load(std::memory_order_relaxed); }
  void SetMs(int64_t now_ms) { now_ms_.store(now_ms, std::memory_order_relaxed); }
  void AdvanceMs(int64_t delta_ms) { now_ms_.fetch_add(delta_ms, std::memory_order_relaxed); }

 private:
  std::atomic<int64_t> now_ms_;
};

}  // namespace floodgate
