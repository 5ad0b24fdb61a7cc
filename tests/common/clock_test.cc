// SystemClock: agrees with CLOCK_REALTIME to the millisecond, never runs
// backwards, and stays so when many threads read it (and re-base it) at once.
#include "floodgate/clock.h"

#include <gtest/gtest.h>
#include <time.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

namespace floodgate {
namespace {

int64_t RealtimeMs() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1'000'000;
}

TEST(SystemClockTest, AgreesWithRealtimeWithinAMillisecond) {
  SystemClock clock;
  // Long enough to pass calibration and many re-bases (every 4 ms).
  const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(300);
  int64_t reads = 0;
  while (std::chrono::steady_clock::now() < end) {
    const int64_t before = RealtimeMs();
    const int64_t now = clock.NowMs();
    const int64_t after = RealtimeMs();
    // Extrapolation error is microseconds; one ms of slack for the floor.
    ASSERT_GE(now, before - 1);
    ASSERT_LE(now, after + 1);
    ++reads;
  }
  EXPECT_GT(reads, 1000);
}

TEST(SystemClockTest, NeverRunsBackwardsAcrossThreads) {
  SystemClock clock;
  std::atomic<bool> failed{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      int64_t last = 0;
      const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(200);
      while (std::chrono::steady_clock::now() < end) {
        const int64_t now = clock.NowMs();
        if (now < last) failed = true;
        last = now;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_FALSE(failed.load());
}

TEST(SystemClockTest, FreshInstancesAgree) {
  // A clock read once (before any calibration) still tells the time.
  const int64_t before = RealtimeMs();
  const int64_t now = SystemClock().NowMs();
  EXPECT_GE(now, before);
  EXPECT_LE(now, RealtimeMs());
}

}  // namespace
}  // namespace floodgate
