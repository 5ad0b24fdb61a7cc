// sliding_window: the weighted estimate, exact retry times, bucket roll-over.
#include <gtest/gtest.h>

#include "testing/rules.h"

namespace floodgate {
namespace {

using testing::MakeRule;
using testing::Subject;

TEST(SlidingWindowTest, FillsThenWaitsForThePreviousBucketToSlideOut) {
  Subject s(MakeRule(Algorithm::kSlidingWindow, {"10/minute"}));
  for (int i = 0; i < 10; ++i) EXPECT_TRUE(s.At(0).allowed) << i;
  EXPECT_FALSE(s.At(59'999).allowed);
  // At 60000 the previous bucket (10) still weighs fully: 10*60000/60000.
  Decision d = s.At(60'000);
  EXPECT_FALSE(d.allowed);
  // Room for 1 once previous * weight <= 9 * 60000: weight 54000, t = 66000.
  EXPECT_EQ(d.retry_after_ms, 6'000);
  EXPECT_FALSE(s.At(65'999).allowed);
  Decision ok = s.At(66'000);
  EXPECT_TRUE(ok.allowed);
  EXPECT_EQ(ok.remaining, 0);
}

TEST(SlidingWindowTest, RemainingIsTheFloorOfTheEstimate) {
  Subject s(MakeRule(Algorithm::kSlidingWindow, {"10/minute"}));
  for (int i = 0; i < 10; ++i) s.At(1'000);
  // Halfway into the next bucket the previous 10 weigh 5.
  Decision half = s.At(90'000, 0);
  EXPECT_EQ(half.remaining, 5);
  // One ms earlier they weigh 5.0002: only 4 whole units fit.
  Decision before = s.At(89'999, 0);
  EXPECT_EQ(before.remaining, 4);
}

TEST(SlidingWindowTest, FullCurrentBucketWaitsIntoTheNextOne) {
  Subject s(MakeRule(Algorithm::kSlidingWindow, {"4/s"}));
  EXPECT_TRUE(s.At(500, 4).allowed);
  Decision d = s.At(600, 2);
  EXPECT_FALSE(d.allowed);
  // In the next bucket the 4 weigh 4 * weight / 1000; 2 more fit once that
  // is <= 2: weight <= 500, i.e. at 1000 + 500 = 1500.
  EXPECT_EQ(d.retry_after_ms, 900);
  EXPECT_FALSE(s.At(1'499, 2).allowed);
  EXPECT_TRUE(s.At(1'500, 2).allowed);
}

TEST(SlidingWindowTest, CostEqualToLimitWaitsForBothBucketsToClear) {
  Subject s(MakeRule(Algorithm::kSlidingWindow, {"4/s"}));
  EXPECT_TRUE(s.At(100, 1).allowed);
  Decision d = s.At(200, 4);
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.retry_after_ms, 1'800);  // 2000: the bucket [0,1000) no longer counts
  EXPECT_FALSE(s.At(1'999, 4).allowed);
  EXPECT_TRUE(s.At(2'000, 4).allowed);
}

TEST(SlidingWindowTest, ResetAndExpiry) {
  Subject s(MakeRule(Algorithm::kSlidingWindow, {"5/s"}));
  Decision d = s.At(250);
  EXPECT_EQ(d.reset_after_ms, 1'750);
  EXPECT_EQ(s.expires_at_ms(), 2'000);
  Decision later = s.At(1'250, 0);
  EXPECT_EQ(later.reset_after_ms, 750);
  EXPECT_EQ(s.expires_at_ms(), 2'000);
  Decision gone = s.At(2'000, 0);
  EXPECT_EQ(gone.remaining, 5);
  EXPECT_EQ(s.expires_at_ms(), 0);
}

TEST(SlidingWindowTest, CostAboveLimitAndPeek) {
  Subject s(MakeRule(Algorithm::kSlidingWindow, {"5/s"}));
  Decision d = s.At(0, 6);
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.retry_after_ms, -1);
  EXPECT_EQ(s.expires_at_ms(), 0);
  EXPECT_TRUE(s.At(0, 0).allowed);
  EXPECT_EQ(s.At(0, 0).remaining, 5);
}

TEST(SlidingWindowTest, ClockSteppingBackNeverRefunds) {
  Subject s(MakeRule(Algorithm::kSlidingWindow, {"2/s"}));
  EXPECT_TRUE(s.At(5'100).allowed);
  EXPECT_TRUE(s.At(5'200).allowed);
  EXPECT_FALSE(s.At(3'000).allowed);
  EXPECT_FALSE(s.At(5'300).allowed);
}

}  // namespace
}  // namespace floodgate
