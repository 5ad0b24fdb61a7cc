// SystemClock: agrees with CLOCK_REALTIME to the millisecond, never runs
// backwards, and stays so when many threads read it (and re-base it) at once;
// its monotonic reading is CLOCK_MONOTONIC's. ManualClock: its two readings
// move as the header says, the monotonic one never backwards. SleepNs.
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

int64_t OsMonotonicNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
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

TEST(SystemClockTest, MonotonicIsClockMonotonic) {
  const SystemClock& clock = SystemClock::Default();
  EXPECT_EQ(&clock, &SystemClock::Default());
  int64_t last = 0;
  for (int i = 0; i < 1000; ++i) {
    const int64_t before = OsMonotonicNs();
    const int64_t now = clock.MonotonicNs();
    const int64_t after = OsMonotonicNs();
    ASSERT_GE(now, before);
    ASSERT_LE(now, after);
    ASSERT_GE(now, last);
    last = now;
  }
  // It follows real time: a sleeper may sleep until its deadline.
  EXPECT_EQ(clock.MaxSleepNs(), -1);
  EXPECT_EQ(clock.SleepNs(100, 5'000'000'100), 5'000'000'000);
  EXPECT_EQ(clock.SleepNs(100, 50), 0);
}

TEST(ManualClockTest, StartsWhereToldAndNeverAtZero) {
  ManualClock a;
  EXPECT_EQ(a.NowMs(), 0);
  EXPECT_EQ(a.MonotonicNs(), ManualClock::kStartMonotonicNs);
  EXPECT_GT(a.MonotonicNs(), 0);
  ManualClock b(1'700'000'000'000, 42);
  EXPECT_EQ(b.NowMs(), 1'700'000'000'000);
  EXPECT_EQ(b.MonotonicNs(), 42);
}

TEST(ManualClockTest, AdvanceMsMovesBothReadingsForwardOnly) {
  ManualClock clock(1'000, 5'000'000'000);
  clock.AdvanceMs(250);
  EXPECT_EQ(clock.NowMs(), 1'250);
  EXPECT_EQ(clock.MonotonicNs(), 5'250'000'000);
  // The wall clock goes back; the monotonic reading stays.
  clock.AdvanceMs(-1'000);
  EXPECT_EQ(clock.NowMs(), 250);
  EXPECT_EQ(clock.MonotonicNs(), 5'250'000'000);
  clock.AdvanceMs(10);
  EXPECT_EQ(clock.NowMs(), 260);
  EXPECT_EQ(clock.MonotonicNs(), 5'260'000'000);
}

TEST(ManualClockTest, SetMsMovesTheMonotonicReadingByWhatItMovesForward) {
  ManualClock clock(10'000, 1'000'000'000);
  clock.SetMs(10'500);
  EXPECT_EQ(clock.NowMs(), 10'500);
  EXPECT_EQ(clock.MonotonicNs(), 1'500'000'000);
  clock.SetMs(3'000);  // a step back: the monotonic reading does not follow
  EXPECT_EQ(clock.NowMs(), 3'000);
  EXPECT_EQ(clock.MonotonicNs(), 1'500'000'000);
  clock.SetMs(3'001);  // forward again from the new wall time
  EXPECT_EQ(clock.MonotonicNs(), 1'501'000'000);
}

TEST(ManualClockTest, TheMonotonicReadingMovesAloneAndNeverBack) {
  ManualClock clock(7'000, 1'000);
  clock.AdvanceNs(999);
  EXPECT_EQ(clock.MonotonicNs(), 1'999);
  EXPECT_EQ(clock.NowMs(), 7'000);  // decisions see the same time
  clock.AdvanceNs(-500);
  EXPECT_EQ(clock.MonotonicNs(), 1'999);
  clock.SetMonotonicNs(10'000);
  EXPECT_EQ(clock.MonotonicNs(), 10'000);
  clock.SetMonotonicNs(9'999);
  EXPECT_EQ(clock.MonotonicNs(), 10'000);
  EXPECT_EQ(clock.NowMs(), 7'000);
}

TEST(ManualClockTest, SleepersAreBoundedToAMillisecond) {
  ManualClock clock;
  const int64_t now = clock.MonotonicNs();
  EXPECT_EQ(clock.MaxSleepNs(), 1'000'000);
  EXPECT_EQ(clock.SleepNs(now, now + 3'600'000'000'000), 1'000'000);
  EXPECT_EQ(clock.SleepNs(now, now + 300'000), 300'000);
  EXPECT_EQ(clock.SleepNs(now, now - 1), 0);
}

TEST(ManualClockTest, ConcurrentAdvancesAllCount) {
  ManualClock clock(0, 0);
  std::vector<std::thread> threads;
  std::atomic<bool> backwards{false};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      int64_t last = 0;
      for (int i = 0; i < 10'000; ++i) {
        clock.AdvanceMs(1);
        const int64_t now = clock.MonotonicNs();
        if (now < last) backwards = true;
        last = now;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_FALSE(backwards.load());
  EXPECT_EQ(clock.NowMs(), 40'000);
  EXPECT_EQ(clock.MonotonicNs(), int64_t{40'000} * 1'000'000);
}

}  // namespace
}  // namespace floodgate
