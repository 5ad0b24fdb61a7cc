// gcra: redis-cell's published test table (cell/mod.rs `it_rate_limits`)
// reproduced case by case, plus edges.
#include <gtest/gtest.h>

#include "testing/rules.h"

namespace floodgate {
namespace {

using testing::MakeRule;
using testing::Subject;

struct CellCase {
  int num;
  int64_t offset_ms;
  int64_t volume;
  int64_t remaining;
  int64_t reset_after_ms;
  int64_t retry_after_ms;
  bool limited;
};

TEST(GcraTest, RedisCellItRateLimitsTable) {
  // max_burst = limit - 1 = 4, rate 1 per second.
  Subject s(MakeRule(Algorithm::kGcra, {"1/s"}, {4}));
  const int64_t start = 1'700'000'000'123;
  const CellCase cases[] = {
      // You can never make a request larger than the maximum.
      {0, 0, 6, 5, 0, -1, true},
      // Rate limit normal requests appropriately.
      {1, 0, 1, 4, 1000, -1, false},
      {2, 0, 1, 3, 2000, -1, false},
      {3, 0, 1, 2, 3000, -1, false},
      {4, 0, 1, 1, 4000, -1, false},
      {5, 0, 1, 0, 5000, -1, false},
      {6, 0, 1, 0, 5000, 1000, true},
      {7, 3000, 1, 2, 3000, -1, false},
      {8, 3100, 1, 1, 3900, -1, false},
      {9, 4000, 1, 1, 4000, -1, false},
      {10, 8000, 1, 4, 1000, -1, false},
      {11, 9500, 1, 4, 1000, -1, false},
      // Zero-volume request just peeks at the state.
      {12, 9500, 0, 4, 1000, -1, false},
      // High-volume request uses up more of the limit.
      {13, 9500, 2, 2, 3000, -1, false},
      // Large requests cannot exceed limits.
      {14, 9500, 5, 2, 3000, 3000, true},
  };
  for (const CellCase& c : cases) {
    SCOPED_TRACE(c.num);
    Decision d = s.At(start + c.offset_ms, c.volume);
    EXPECT_EQ(!d.allowed, c.limited);
    EXPECT_EQ(d.limit, 5);
    EXPECT_EQ(d.remaining, c.remaining);
    EXPECT_EQ(d.reset_after_ms, c.reset_after_ms);
    // redis-cell reports -1 for "no retry needed" as well as "never"; our
    // decisions say 0 when allowed.
    const int64_t retry = d.allowed ? -1 : d.retry_after_ms;
    EXPECT_EQ(retry, c.retry_after_ms);
  }
}

TEST(GcraTest, DefaultBurstAdmitsTheWholeLimitAtOnce) {
  Subject s(MakeRule(Algorithm::kGcra, {"5/minute"}));
  for (int i = 0; i < 5; ++i) EXPECT_TRUE(s.At(0).allowed) << i;
  Decision d = s.At(0);
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.limit, 5);
  EXPECT_EQ(d.retry_after_ms, 12'000);
  EXPECT_FALSE(s.At(11'999).allowed);
  EXPECT_TRUE(s.At(12'000).allowed);
}

TEST(GcraTest, ExpiresWhenTheTatIsReached) {
  Subject s(MakeRule(Algorithm::kGcra, {"10/s"}));
  s.At(1'000, 3);
  EXPECT_EQ(s.expires_at_ms(), 1'300);
  Decision later = s.At(1'300, 0);
  EXPECT_EQ(later.remaining, 10);
  EXPECT_EQ(s.expires_at_ms(), 0);
}

TEST(GcraTest, AFreshSubjectsFiguresAndExpiryRoundUpToTheMillisecond) {
  // 3/s: an emission interval of 333,333 us, not a whole number of ms.
  Subject s(MakeRule(Algorithm::kGcra, {"3/s"}));
  Decision d = s.At(1'000, 1);
  EXPECT_TRUE(d.allowed);
  EXPECT_EQ(d.remaining, 2);
  EXPECT_EQ(d.reset_after_ms, 334);     // 333.333 ms, rounded up
  EXPECT_EQ(s.expires_at_ms(), 1'334);  // now + that
  // The whole burst at once on a fresh subject leaves nothing.
  Subject whole(MakeRule(Algorithm::kGcra, {"3/s"}));
  d = whole.At(1'000, 3);
  EXPECT_TRUE(d.allowed);
  EXPECT_EQ(d.remaining, 0);
  EXPECT_EQ(d.reset_after_ms, 1'000);
  // Each emission interval gives one back; past the TAT (1,999.999 ms) the
  // subject is fresh again and a peek shows the whole limit.
  EXPECT_EQ(whole.At(1'001, 0).remaining, 0);
  EXPECT_EQ(whole.At(1'334, 0).remaining, 1);
  EXPECT_EQ(whole.At(1'999, 0).remaining, 2);
  EXPECT_EQ(whole.At(2'000, 0).remaining, 3);
}

TEST(GcraTest, ClockSteppingBackNeverRefunds) {
  Subject s(MakeRule(Algorithm::kGcra, {"2/s"}, {0}));
  EXPECT_TRUE(s.At(10'000).allowed);
  EXPECT_FALSE(s.At(9'000).allowed);
  EXPECT_FALSE(s.At(10'499).allowed);
  EXPECT_TRUE(s.At(10'500).allowed);
}

}  // namespace
}  // namespace floodgate
