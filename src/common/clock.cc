// SystemClock: NowMs is CLOCK_REALTIME, made monotonic by a high-water mark,
// read through the TSC where the kernel trusts it (see clock.h for why);
// MonotonicNs is CLOCK_MONOTONIC.
#include "floodgate/clock.h"

#include <time.h>

#include <fstream>
#include <string>

#if defined(__x86_64__)
#include <x86intrin.h>
#endif

namespace floodgate {
namespace {

constexpr int64_t kNsPerMs = 1'000'000;
// How long an extrapolation is trusted before CLOCK_REALTIME is read again:
// short, so NTP slewing and a wrong rate estimate cost microseconds at most.
constexpr int64_t kResyncNs = 4 * kNsPerMs;
// The shortest interval a rate is estimated from.
constexpr int64_t kMinCalibrationNs = 1 * kNsPerMs;

// The kernel keeps time with the TSC only when it found it invariant and
// synchronised across CPUs; then so can we.
bool KernelUsesTsc() {
#if defined(__x86_64__)
  std::ifstream f("/sys/devices/system/clocksource/clocksource0/current_clocksource");
  std::string source;
  f >> source;
  return source == "tsc";
#else
  return false;
#endif
}

uint64_t ReadTsc() {
#if defined(__x86_64__)
  return __rdtsc();  // deliberately unfenced
#else
  return 0;
#endif
}

int64_t RealtimeNs() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

// ns per tick in 32.32 fixed point from an interval, or 0 when the interval
// says the TSC runs outside 100 MHz..10 GHz (it does not: the wall clock was
// stepped during the interval).
uint64_t RateQ32(int64_t ns, uint64_t ticks) {
  if (ns <= 0 || ticks == 0) return 0;
  const unsigned __int128 q = (static_cast<unsigned __int128>(ns) << 32) / ticks;
  constexpr uint64_t kMin = (uint64_t{1} << 32) / 10;  // 10 GHz
  constexpr uint64_t kMax = uint64_t{10} << 32;        // 100 MHz
  return q < kMin || q > kMax ? 0 : static_cast<uint64_t>(q);
}

}  // namespace

SystemClock::SystemClock() : use_tsc_(KernelUsesTsc()) {}

const SystemClock& SystemClock::Default() {
  static const SystemClock* const clock = new SystemClock();  // read by threads until exit
  return *clock;
}

int64_t SystemClock::MonotonicNs() const {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

int64_t SystemClock::NowMs() const {
  int64_t now_ns;
  if (!use_tsc_) {
    now_ns = RealtimeNs();
  } else {
    const uint64_t tsc = ReadTsc();
    const uint64_t seq = seq_.load(std::memory_order_acquire);
    const uint64_t base_tsc = base_tsc_.load(std::memory_order_relaxed);
    const int64_t base_ns = base_ns_.load(std::memory_order_relaxed);
    const uint64_t rate = ns_per_tick_q32_.load(std::memory_order_relaxed);
    const uint64_t resync = resync_ticks_.load(std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_acquire);
    const uint64_t ticks = tsc - base_tsc;  // huge if tsc < base_tsc: resync
    if ((seq & 1) == 0 && seq == seq_.load(std::memory_order_relaxed) && rate != 0 &&
        ticks < resync) {
      // ticks * rate < kResyncNs << 32: no overflow.
      now_ns = base_ns + static_cast<int64_t>((ticks * rate) >> 32);
    } else {
      now_ns = ReadSlow();
    }
  }
  const int64_t now = now_ns / kNsPerMs;
  // Why a high-water mark: wall time can step back (NTP, an operator); a
  // decision must never see time run backwards, or it could refund usage.
  int64_t seen = high_water_ms_.load(std::memory_order_relaxed);
  while (now > seen) {
    if (high_water_ms_.compare_exchange_weak(seen, now, std::memory_order_relaxed)) return now;
  }
  return seen;
}

// Reads CLOCK_REALTIME and, if no other thread is doing so, re-bases the
// extrapolation on it and refines the rate.
int64_t SystemClock::ReadSlow() const {
  const int64_t now_ns = RealtimeNs();
  const uint64_t tsc = ReadTsc();
  uint64_t seq = seq_.load(std::memory_order_relaxed);
  if ((seq & 1) != 0 || !seq_.compare_exchange_strong(seq, seq + 1, std::memory_order_acquire)) {
    return now_ns;  // another thread is re-basing
  }
  // Readers that see any of the stores below must also see the odd sequence.
  std::atomic_thread_fence(std::memory_order_release);
  const int64_t base_ns = base_ns_.load(std::memory_order_relaxed);
  const uint64_t base_tsc = base_tsc_.load(std::memory_order_relaxed);
  const uint64_t old_rate = ns_per_tick_q32_.load(std::memory_order_relaxed);
  const int64_t interval = now_ns - base_ns;
  bool rebase = true;
  uint64_t rate = old_rate;
  if (base_ns == 0 || interval < 0 || tsc <= base_tsc) {
    // First reading, or the wall clock stepped back: a new base, same rate.
  } else if (interval < kMinCalibrationNs) {
    rebase = false;  // too short to estimate a rate from; keep collecting
  } else {
    rate = RateQ32(interval, tsc - base_tsc);
    // A rate far from the last one means the wall clock was stepped, not
    // that the TSC changed speed: estimate afresh from the next interval.
    if (old_rate != 0 && rate != 0) {
      const uint64_t diff = rate > old_rate ? rate - old_rate : old_rate - rate;
      if (diff > old_rate / 100) rate = 0;
    }
  }
  if (rebase) {
    base_ns_.store(now_ns, std::memory_order_relaxed);
    base_tsc_.store(tsc, std::memory_order_relaxed);
    ns_per_tick_q32_.store(rate, std::memory_order_relaxed);
    resync_ticks_.store(rate == 0 ? 0 : static_cast<uint64_t>((kResyncNs << 32) / rate),
                        std::memory_order_relaxed);
  }
  seq_.store(seq + 2, std::memory_order_release);
  return now_ns;
}

}  // namespace floodgate
