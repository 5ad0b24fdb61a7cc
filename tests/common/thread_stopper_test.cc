// ThreadStopper: a stop ends a long sleep at once and for good, a wake ends
// one sleep early, and stopping is safe before a start and twice.
#include "common/thread_stopper.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

namespace floodgate {
namespace {

using std::chrono::steady_clock;

constexpr int64_t kHourNs = int64_t{3600} * 1'000'000'000;

int64_t MsSince(steady_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(steady_clock::now() - t).count();
}

TEST(ThreadStopperTest, StopEndsAnHourLongSleepAtOnce) {
  ThreadStopper stopper;
  std::atomic<int> rounds{0};
  std::atomic<bool> returned{false};
  stopper.Start([&] {
    while (stopper.SleepFor(kHourNs)) rounds.fetch_add(1);
    returned.store(true);
  });
  EXPECT_TRUE(stopper.started());
  std::this_thread::sleep_for(std::chrono::milliseconds(20));  // asleep by now
  const auto t = steady_clock::now();
  stopper.Stop();
  EXPECT_LT(MsSince(t), 1000);
  EXPECT_TRUE(returned.load());  // joined: the thread has returned
  EXPECT_EQ(rounds.load(), 0);
  EXPECT_TRUE(stopper.stopping());
  EXPECT_FALSE(stopper.SleepFor(kHourNs));  // stays stopped
  stopper.Stop();                           // twice is fine
}

TEST(ThreadStopperTest, AWakeEndsOneSleepEarly) {
  ThreadStopper stopper;
  std::atomic<int> rounds{0};
  stopper.Start([&] {
    while (stopper.SleepFor(kHourNs)) rounds.fetch_add(1);
  });
  stopper.Wake();
  for (int i = 0; i < 2000 && rounds.load() == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_EQ(rounds.load(), 1);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(rounds.load(), 1) << "one wake, one round: the next sleep is a full one";
  stopper.Stop();
}

TEST(ThreadStopperTest, AWakeBeforeTheSleepIsKept) {
  ThreadStopper stopper;
  stopper.Wake();  // no thread yet, nobody asleep
  const auto t = steady_clock::now();
  EXPECT_TRUE(stopper.SleepFor(kHourNs));
  EXPECT_LT(MsSince(t), 1000);
}

TEST(ThreadStopperTest, StopWithoutAStartIsFine) {
  ThreadStopper stopper;
  EXPECT_FALSE(stopper.started());
  stopper.Stop();
  EXPECT_TRUE(stopper.stopping());
}

}  // namespace
}  // namespace floodgate
