// How long a Redis client I/O loop sleeps (redis::internal::SleepMs), on
// instants given by the test: until the earliest deadline, rounded up to
// epoll's whole milliseconds so that the loop never wakes before it (and
// spins), never longer than a bound, and not at all for a deadline that has
// passed.
#include <gtest/gtest.h>

#include "redis/io_thread.h"

namespace floodgate::redis::internal {
namespace {

constexpr int64_t kMs = 1'000'000;
constexpr int64_t kNow = 1'000'000 * kMs;  // any instant

TEST(SleepMsTest, NothingToWaitForSleepsUntilAnEvent) { EXPECT_EQ(SleepMs(kNow, -1, -1), -1); }

TEST(SleepMsTest, ADeadlineIsWaitedForRoundedUpToTheNextMillisecond) {
  EXPECT_EQ(SleepMs(kNow, kNow + 20 * kMs, -1), 20);
  EXPECT_EQ(SleepMs(kNow, kNow + 20 * kMs - 1, -1), 20);
  EXPECT_EQ(SleepMs(kNow, kNow + 19 * kMs + 1, -1), 20);
  EXPECT_EQ(SleepMs(kNow, kNow + 1, -1), 1);  // not 0: that would spin until it
}

TEST(SleepMsTest, ADeadlineDueOrPastDoesNotSleep) {
  EXPECT_EQ(SleepMs(kNow, kNow, -1), 0);
  EXPECT_EQ(SleepMs(kNow, kNow - 5 * kMs, -1), 0);
  EXPECT_EQ(SleepMs(kNow, kNow - 5 * kMs, 5 * kMs), 0);
}

TEST(SleepMsTest, TheBoundCutsALongerWait) {
  EXPECT_EQ(SleepMs(kNow, -1, 5 * kMs), 5);
  EXPECT_EQ(SleepMs(kNow, kNow + 20 * kMs, 5 * kMs), 5);
  EXPECT_EQ(SleepMs(kNow, kNow + 3 * kMs, 5 * kMs), 3);
  EXPECT_EQ(SleepMs(kNow, kNow + 5 * kMs + 1, 5 * kMs), 5);
}

TEST(SleepMsTest, AFarDeadlineFitsEpollsInt) {
  EXPECT_EQ(SleepMs(kNow, kNow + int64_t{1} << 62, -1), 3'600'000);
}

}  // namespace
}  // namespace floodgate::redis::internal
