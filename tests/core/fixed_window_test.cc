// fixed_window: window edges, calendar alignment, cost edges, clock steps back.
#include <gtest/gtest.h>

#include "absl/time/civil_time.h"
#include "absl/time/time.h"
#include "testing/rules.h"

namespace floodgate {
namespace {

using testing::MakeRule;
using testing::Subject;

int64_t Ms(absl::CivilSecond cs, const char* zone = "UTC") {
  absl::TimeZone tz;
  EXPECT_TRUE(absl::LoadTimeZone(zone, &tz));
  return absl::ToUnixMillis(absl::FromCivil(cs, tz));
}

TEST(FixedWindowTest, AdmitsExactlyTheLimitPerWindow) {
  Subject s(MakeRule(Algorithm::kFixedWindow, {"3/s"}));
  for (int i = 0; i < 3; ++i) {
    Decision d = s.At(10'000 + i);
    EXPECT_TRUE(d.allowed);
    EXPECT_EQ(d.limit, 3);
    EXPECT_EQ(d.remaining, 2 - i);
    EXPECT_EQ(d.retry_after_ms, 0);
    EXPECT_EQ(d.reset_after_ms, 1000 - i);
  }
  Decision d = s.At(10'500);
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.remaining, 0);
  EXPECT_EQ(d.retry_after_ms, 500);
  EXPECT_EQ(d.reset_after_ms, 500);
}

TEST(FixedWindowTest, WindowEdgeAt999And1000Ms) {
  Subject s(MakeRule(Algorithm::kFixedWindow, {"1/s"}));
  EXPECT_TRUE(s.At(0).allowed);
  Decision at999 = s.At(999);
  EXPECT_FALSE(at999.allowed);
  EXPECT_EQ(at999.retry_after_ms, 1);
  EXPECT_TRUE(s.At(1000).allowed);
  EXPECT_EQ(s.expires_at_ms(), 2000);
}

TEST(FixedWindowTest, WindowsAreEpochAligned) {
  Subject s(MakeRule(Algorithm::kFixedWindow, {"2/5m"}));
  const int64_t five_min = 300'000;
  Decision d = s.At(7 * five_min + 123);
  EXPECT_EQ(d.limits[0].window_start_ms, 7 * five_min);
  EXPECT_EQ(d.limits[0].window_end_ms, 8 * five_min);
  EXPECT_EQ(d.reset_after_ms, five_min - 123);
}

TEST(FixedWindowTest, CostZeroPeeksWithoutConsuming) {
  Subject s(MakeRule(Algorithm::kFixedWindow, {"5/minute"}));
  EXPECT_TRUE(s.At(0, 2).allowed);
  for (int i = 0; i < 3; ++i) {
    Decision peek = s.At(10, 0);
    EXPECT_TRUE(peek.allowed);
    EXPECT_EQ(peek.remaining, 3);
  }
  EXPECT_EQ(s.At(20, 3).remaining, 0);
  Decision peek = s.At(30, 0);
  EXPECT_TRUE(peek.allowed);  // a peek always has room for nothing
  EXPECT_EQ(peek.remaining, 0);
}

TEST(FixedWindowTest, PeekOnNewSubjectKeepsNothing) {
  Subject s(MakeRule(Algorithm::kFixedWindow, {"5/minute"}));
  Decision d = s.At(1000, 0);
  EXPECT_TRUE(d.allowed);
  EXPECT_EQ(d.remaining, 5);
  EXPECT_EQ(d.reset_after_ms, 0);
  EXPECT_EQ(s.expires_at_ms(), 0);
}

TEST(FixedWindowTest, CostAboveCapacityIsNeverAllowedAndConsumesNothing) {
  Subject s(MakeRule(Algorithm::kFixedWindow, {"5/minute"}));
  Decision d = s.At(0, 6);
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.retry_after_ms, -1);
  EXPECT_EQ(d.remaining, 5);
  EXPECT_EQ(s.expires_at_ms(), 0);
  Decision exact = s.At(0, 5);
  EXPECT_TRUE(exact.allowed);
  EXPECT_EQ(exact.remaining, 0);
}

TEST(FixedWindowTest, DeniedRequestsConsumeNothing) {
  Subject s(MakeRule(Algorithm::kFixedWindow, {"3/s"}));
  EXPECT_TRUE(s.At(0, 2).allowed);
  for (int i = 0; i < 10; ++i) EXPECT_FALSE(s.At(1, 2).allowed);
  EXPECT_TRUE(s.At(2, 1).allowed);  // the denials did not eat the last unit
}

TEST(FixedWindowTest, ClockSteppingBackNeverRefunds) {
  Subject s(MakeRule(Algorithm::kFixedWindow, {"2/s"}));
  EXPECT_TRUE(s.At(1500).allowed);
  EXPECT_TRUE(s.At(1600).allowed);
  // Back into the previous window: still the counted window, still full.
  Decision back = s.At(900);
  EXPECT_FALSE(back.allowed);
  EXPECT_EQ(back.remaining, 0);
  EXPECT_GT(back.retry_after_ms, 0);
  EXPECT_TRUE(s.At(2000).allowed);
}

TEST(FixedWindowTest, DayWindowsFollowUtcMidnightAcrossLeapDay) {
  Subject s(MakeRule(Algorithm::kFixedWindow, {"1/day"}));
  const int64_t before = Ms(absl::CivilSecond(2024, 2, 28, 23, 59, 59)) + 999;
  EXPECT_TRUE(s.At(before).allowed);
  Decision d = s.At(before);
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.retry_after_ms, 1);
  Decision leap = s.At(before + 1);  // 2024-02-29 00:00:00.000
  EXPECT_TRUE(leap.allowed);
  EXPECT_EQ(leap.reset_after_ms, 86'400'000);
}

TEST(FixedWindowTest, MonthWindowsFollowCalendarMonths) {
  Subject s(MakeRule(Algorithm::kFixedWindow, {"2/month"}));
  const int64_t feb1 = Ms(absl::CivilSecond(2024, 2, 1, 0, 0, 0));
  const int64_t mar1 = Ms(absl::CivilSecond(2024, 3, 1, 0, 0, 0));
  Decision jan31 = s.At(feb1 - 1);
  EXPECT_TRUE(jan31.allowed);
  EXPECT_EQ(jan31.reset_after_ms, 1);
  Decision feb = s.At(feb1);
  EXPECT_TRUE(feb.allowed);
  EXPECT_EQ(feb.remaining, 1);  // January's use does not carry over
  EXPECT_EQ(feb.reset_after_ms, mar1 - feb1);
  EXPECT_EQ(mar1 - feb1, 29LL * 86'400'000);  // leap February
  EXPECT_TRUE(s.At(feb1 + 5).allowed);
  Decision full = s.At(mar1 - 1);
  EXPECT_FALSE(full.allowed);
  EXPECT_EQ(full.retry_after_ms, 1);
  EXPECT_TRUE(s.At(mar1).allowed);
}

TEST(FixedWindowTest, YearWindowEndsOnDecember31) {
  Subject s(MakeRule(Algorithm::kFixedWindow, {"1/year"}));
  const int64_t y2025 = Ms(absl::CivilSecond(2025, 1, 1, 0, 0, 0));
  EXPECT_TRUE(s.At(y2025 - 1).allowed);
  EXPECT_FALSE(s.At(y2025 - 1).allowed);
  Decision next = s.At(y2025);
  EXPECT_TRUE(next.allowed);
  EXPECT_EQ(next.reset_after_ms, 365LL * 86'400'000);
}

TEST(FixedWindowTest, DayWindowsFollowTheRulesTimeZone) {
  Subject s(MakeRule(Algorithm::kFixedWindow, {"1/day"}, {}, "Asia/Kolkata"));
  // Local midnight in Kolkata (+05:30) is 18:30 UTC the day before.
  const int64_t midnight = Ms(absl::CivilSecond(2024, 6, 10, 0, 0, 0), "Asia/Kolkata");
  EXPECT_EQ(midnight, Ms(absl::CivilSecond(2024, 6, 9, 18, 30, 0)));
  EXPECT_TRUE(s.At(midnight - 1).allowed);
  EXPECT_FALSE(s.At(midnight - 1).allowed);
  Decision d = s.At(midnight);
  EXPECT_TRUE(d.allowed);
  EXPECT_EQ(d.limits[0].window_start_ms, midnight);
}

TEST(FixedWindowTest, DstDayIs23HoursLong) {
  Subject s(MakeRule(Algorithm::kFixedWindow, {"1/day"}, {}, "America/New_York"));
  const int64_t start = Ms(absl::CivilSecond(2024, 3, 10, 0, 0, 0), "America/New_York");
  const int64_t end = Ms(absl::CivilSecond(2024, 3, 11, 0, 0, 0), "America/New_York");
  EXPECT_EQ(end - start, 23LL * 3'600'000);
  Decision d = s.At(start + 1000);
  EXPECT_TRUE(d.allowed);
  EXPECT_EQ(d.reset_after_ms, end - start - 1000);
}

}  // namespace
}  // namespace floodgate
