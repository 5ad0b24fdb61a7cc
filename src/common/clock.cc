// SystemClock: CLOCK_REALTIME, made monotonic by a high-water mark.
#include "floodgate/clock.h"

#include <time.h>

namespace floodgate {

int64_t SystemClock::NowMs() const {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  const int64_t now = static_cast<int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1'000'000;
  // Why a high-water mark: wall time can step back (NTP, an operator); a
  // decision must never see time run backwards, or it could refund usage.
  int64_t seen = high_water_ms_.load(std::memory_order_relaxed);
  while (now > seen) {
    if (high_water_ms_.compare_exchange_weak(seen, now, std::memory_order_relaxed)) return now;
  }
  return seen;
}

}  // namespace floodgate
