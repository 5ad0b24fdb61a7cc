// token_bucket: bursts, exact refill, retry times, clock steps back.
#include <gtest/gtest.h>

#include "testing/rules.h"

namespace floodgate {
namespace {

using testing::MakeRule;
using testing::Subject;

TEST(TokenBucketTest, BurstThenOneTokenPerInterval) {
  Subject s(MakeRule(Algorithm::kTokenBucket, {"10/s"}));
  for (int i = 0; i < 10; ++i) EXPECT_TRUE(s.At(1'000).allowed) << i;
  Decision d = s.At(1'000);
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.retry_after_ms, 100);
  EXPECT_EQ(d.reset_after_ms, 1'000);
  EXPECT_FALSE(s.At(1'099).allowed);
  Decision ok = s.At(1'100);
  EXPECT_TRUE(ok.allowed);
  EXPECT_EQ(ok.remaining, 0);
}

TEST(TokenBucketTest, BurstSetsCapacity) {
  Subject s(MakeRule(Algorithm::kTokenBucket, {"100/minute"}, {20}));
  Decision first = s.At(0);
  EXPECT_EQ(first.limit, 20);
  EXPECT_EQ(first.remaining, 19);
  for (int i = 0; i < 19; ++i) EXPECT_TRUE(s.At(0).allowed);
  Decision d = s.At(0);
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.retry_after_ms, 600);  // 60000 ms / 100
  EXPECT_EQ(d.reset_after_ms, 12'000);
  EXPECT_TRUE(s.At(600).allowed);
}

TEST(TokenBucketTest, FractionalRefillIsExact) {
  Subject s(MakeRule(Algorithm::kTokenBucket, {"3/s"}));
  EXPECT_TRUE(s.At(0, 3).allowed);
  // One token takes 333.33 ms: not there at 333, there at 334.
  Decision d = s.At(0);
  EXPECT_EQ(d.retry_after_ms, 334);
  EXPECT_FALSE(s.At(333).allowed);
  EXPECT_TRUE(s.At(334).allowed);
}

TEST(TokenBucketTest, CostAboveCapacityAndPeek) {
  Subject s(MakeRule(Algorithm::kTokenBucket, {"5/s"}));
  Decision d = s.At(0, 6);
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.retry_after_ms, -1);
  EXPECT_EQ(s.expires_at_ms(), 0);
  EXPECT_TRUE(s.At(0, 2).allowed);
  Decision peek = s.At(0, 0);
  EXPECT_EQ(peek.remaining, 3);
  EXPECT_EQ(s.expires_at_ms(), 400);
}

TEST(TokenBucketTest, ClockSteppingBackRefillsNothing) {
  Subject s(MakeRule(Algorithm::kTokenBucket, {"2/s"}));
  EXPECT_TRUE(s.At(10'000, 2).allowed);
  EXPECT_FALSE(s.At(5'000).allowed);
  EXPECT_FALSE(s.At(10'499).allowed);
  EXPECT_TRUE(s.At(10'500).allowed);
}

TEST(TokenBucketTest, AncientStateRefillsWithoutOverflow) {
  Subject s(MakeRule(Algorithm::kTokenBucket, {"1000000000000/s"}));
  EXPECT_TRUE(s.At(1, 1'000'000'000'000).allowed);
  Decision d = s.At(4'000'000'000'000, 0);
  EXPECT_EQ(d.remaining, 1'000'000'000'000);
}

}  // namespace
}  // namespace floodgate
