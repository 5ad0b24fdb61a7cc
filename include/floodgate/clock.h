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
class SystemClock final : public Clock {
 public:
  int64_t NowMs() const override;

 private:
  mutable std::atomic<int64_t> high_water_ms_{0};
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
