// Clocks. Components receive a Clock& and read it once per request; algorithms
// never read a clock themselves (they take `now_ms`, or `now_ns`).
//
// A Clock has two readings, as a time source has system and monotonic time:
//
//  - NowMs(): wall-clock milliseconds since the Unix epoch. For decisions
//    and state: windows, expiries, event timestamps, anything that is
//    stored, shared with other servers or shown to people.
//  - MonotonicNs(): nanoseconds since an arbitrary origin. For timeouts,
//    back-off, retry schedules, intervals and latency: how long something
//    has taken or may still take. Never goes backwards and does not follow
//    steps of the wall clock (NTP, an operator), so a step can neither
//    expire nor extend a timeout. Meaningless outside the process: never
//    stored, never compared with NowMs or with another clock's reading.
//
// Waiting: a thread that waits for a MonotonicNs() deadline sleeps in real
// time (epoll, poll, a condition variable) and reads the clock again when
// it wakes; whether the deadline has come is decided by that reading, never
// by the sleep having run out. SleepNs() says how long it may sleep: until
// the deadline on a clock that follows real time, at most MaxSleepNs() on
// one that does not (ManualClock), so that a test that moves the clock
// wakes it within about that long.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>

namespace floodgate {

// Implementations are thread-safe.
class Clock {
 public:
  virtual ~Clock() = default;
  // Wall-clock milliseconds since the Unix epoch (see above).
  virtual int64_t NowMs() const = 0;
  // Monotonic nanoseconds (see above).
  virtual int64_t MonotonicNs() const = 0;
  // The longest a thread waiting for a MonotonicNs() deadline may sleep, in
  // real nanoseconds, before it reads the clock again; -1: no bound (the
  // clock follows real time, so sleeping until the deadline is exact).
  // Constant for a given clock (callers may keep it).
  virtual int64_t MaxSleepNs() const { return -1; }

  // How long a thread waiting at `now_ns` for `deadline_ns` (both
  // MonotonicNs readings) may sleep, in real nanoseconds: what is left (0
  // once due), at most MaxSleepNs().
  int64_t SleepNs(int64_t now_ns, int64_t deadline_ns) const {
    const int64_t left = std::max<int64_t>(0, deadline_ns - now_ns);
    const int64_t max = MaxSleepNs();
    return max >= 0 ? std::min(left, max) : left;
  }
};

// NowMs: CLOCK_REALTIME in milliseconds; MonotonicNs: CLOCK_MONOTONIC.
// Thread-safe.
//
// NowMs never goes backwards: a step back of the system clock is absorbed
// by returning the largest value seen so far, so a decision can never be
// refunded by an NTP correction.
//
// NowMs is fast: where the kernel itself keeps time with an invariant TSC,
// it extrapolates from the last CLOCK_REALTIME reading with an unserialised
// rdtsc, re-reading CLOCK_REALTIME every few milliseconds. Why: the vDSO's
// clock_gettime orders its rdtsc after every earlier load, so a decision that
// reads the clock waits for its own cache misses before it can start the
// next ones; this read does not. Elsewhere it is plain clock_gettime.
// MonotonicNs is plain clock_gettime: it times waits, not decisions.
class SystemClock final : public Clock {
 public:
  SystemClock();
  int64_t NowMs() const override;
  int64_t MonotonicNs() const override;

  // One for the whole process, for components whose creator gave them no
  // clock (an option left null). Never destroyed.
  static const SystemClock& Default();

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
//
// The two readings move together forward: AdvanceMs and SetMs move the
// monotonic reading by as much as they move the wall clock forward, and
// leave it where it is when they move the wall clock back (a test that
// winds the wall clock back does not un-expire a timeout). AdvanceNs and
// SetMonotonicNs move the monotonic reading alone (a timeout runs out,
// decisions see the same time). The monotonic reading never goes backwards:
// a negative advance, or an earlier value to set, leaves it unchanged.
//
// Timeouts and back-off measured on it run out only when it is moved.
// Threads waiting for them read it again at least every MaxSleepNs() (1 ms
// of real time), so a test that moves it sees them fire promptly.
class ManualClock final : public Clock {
 public:
  // The monotonic reading starts here unless told otherwise: as if the
  // process had run for a while, so that 0 ("none" in many a deadline
  // field) is never a reading.
  static constexpr int64_t kStartMonotonicNs = int64_t{1'000} * 1'000'000'000;
  static constexpr int64_t kMaxSleepNs = 1'000'000;

  explicit ManualClock(int64_t now_ms = 0, int64_t monotonic_ns = kStartMonotonicNs)
      : now_ms_(now_ms), monotonic_ns_(monotonic_ns) {}
  int64_t NowMs() const override { return now_ms_.load(std::memory_order_relaxed); }
  int64_t MonotonicNs() const override { return monotonic_ns_.load(std::memory_order_relaxed); }
  int64_t MaxSleepNs() const override { return kMaxSleepNs; }

  void SetMs(int64_t now_ms) {
    const int64_t before = now_ms_.exchange(now_ms, std::memory_order_relaxed);
    if (now_ms > before) AdvanceNs((now_ms - before) * 1'000'000);
  }
  void AdvanceMs(int64_t delta_ms) {
    now_ms_.fetch_add(delta_ms, std::memory_order_relaxed);
    if (delta_ms > 0) AdvanceNs(delta_ms * 1'000'000);
  }
  void AdvanceNs(int64_t delta_ns) {
    if (delta_ns > 0) monotonic_ns_.fetch_add(delta_ns, std::memory_order_relaxed);
  }
  void SetMonotonicNs(int64_t monotonic_ns) {
    int64_t seen = monotonic_ns_.load(std::memory_order_relaxed);
    while (monotonic_ns > seen &&
           !monotonic_ns_.compare_exchange_weak(seen, monotonic_ns, std::memory_order_relaxed)) {
    }
  }

 private:
  std::atomic<int64_t> now_ms_;
  std::atomic<int64_t> monotonic_ns_;
};

}  // namespace floodgate
