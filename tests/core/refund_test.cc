// Refunds (core/refund.h, core::RefundRule): each algorithm gives back what
// its state counts at the refund's instant and no more, and says how much;
// nothing is created, no expiry moves later, and alert bits stay set.
#include "core/refund.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "core/alerts.h"
#include "core/rule_eval.h"
#include "testing/rules.h"

namespace floodgate {
namespace {

using testing::MakeRule;
using testing::Subject;

class EveryAlgorithm : public ::testing::TestWithParam<Algorithm> {};

TEST_P(EveryAlgorithm, ARefundReadmitsExactlyTheUnitsGivenBack) {
  Subject s(MakeRule(GetParam(), {"5/minute"}));
  const int64_t t = 600'000;  // a bucket and window start: no earlier bucket weighs in
  EXPECT_TRUE(s.At(t, 5).allowed);
  EXPECT_FALSE(s.At(t).allowed);
  const Decision after = s.Refund(t, 2);
  EXPECT_TRUE(after.allowed);
  EXPECT_EQ(after.remaining, 2);
  EXPECT_TRUE(s.At(t).allowed);
  EXPECT_TRUE(s.At(t).allowed);
  EXPECT_FALSE(s.At(t).allowed);
}

TEST_P(EveryAlgorithm, ARefundSaysWhatItGaveBackNotWhatWasAsked) {
  Subject s(MakeRule(GetParam(), {"5/minute"}));
  const int64_t t = 600'000;
  EXPECT_TRUE(s.At(t).allowed);
  EXPECT_EQ(s.Refund(t, 100).remaining, 5);
  EXPECT_EQ(s.refunded()[0], 1);
  // Nothing used: nothing comes back.
  s.Refund(t, 100);
  EXPECT_EQ(s.refunded()[0], 0);
  EXPECT_TRUE(s.At(t, 3).allowed);
  s.Refund(t, 2);
  EXPECT_EQ(s.refunded()[0], 2);
}

TEST_P(EveryAlgorithm, ARefundAboveWhatIsUsedStopsAtNothingUsed) {
  Subject s(MakeRule(GetParam(), {"5/minute"}));
  const int64_t t = 600'000;
  EXPECT_TRUE(s.At(t, 2).allowed);
  const Decision after = s.Refund(t, 10);
  EXPECT_EQ(s.refunded()[0], 2);
  EXPECT_EQ(after.remaining, 5);
  EXPECT_EQ(after.reset_after_ms, 0);
  EXPECT_EQ(s.expires_at_ms(), 0);  // it holds nothing: the store may free it
  // No credit is kept: the limit is the limit.
  EXPECT_TRUE(s.At(t, 5).allowed);
  EXPECT_FALSE(s.At(t).allowed);
}

TEST_P(EveryAlgorithm, ARefundNeverCreatesState) {
  Subject s(MakeRule(GetParam(), {"3/s", "10/minute"}));
  const Decision after = s.Refund(5'000, 4);
  EXPECT_TRUE(after.allowed);
  EXPECT_EQ(after.remaining, after.limit);
  EXPECT_EQ(s.expires_at_ms(), 0);
  for (int64_t w : s.state()) EXPECT_EQ(w, 0);
}

TEST_P(EveryAlgorithm, ARefundNeverConsumesNorKeepsStateLonger) {
  // Random checks and refunds, two limits: right before each refund, a peek
  // gives the state's expiry and figures; the refund may only shorten the
  // one and raise the others.
  std::mt19937_64 rng(7);
  Subject s(MakeRule(GetParam(), {"3/s", "10/minute"}));
  int64_t t = 1'000'000;
  int refunds = 0;
  for (int i = 0; i < 2000; ++i) {
    t += static_cast<int64_t>(rng() % 700);
    if (rng() % 10 == 0) t -= static_cast<int64_t>(rng() % 900);  // a clock step back
    if (rng() % 3 != 0) {
      s.At(t, static_cast<int64_t>(rng() % 3));
      continue;
    }
    const Decision before = s.At(t, 0);
    const int64_t expires_before = s.expires_at_ms();
    const int64_t cost = 1 + static_cast<int64_t>(rng() % 4);
    const Decision after = s.Refund(t, cost);
    ++refunds;
    SCOPED_TRACE("step " + std::to_string(i) + " t=" + std::to_string(t));
    EXPECT_LE(s.expires_at_ms(), expires_before);
    for (int l = 0; l < 2; ++l) {
      EXPECT_GE(s.refunded()[l], 0) << "limit " << l;
      EXPECT_LE(s.refunded()[l], cost) << "limit " << l;
      // What came back, never less: the remaining grows by no more than
      // the units given back (sliding_window's previous bucket weighs less).
      EXPECT_LE(after.limits[l].remaining - before.limits[l].remaining, s.refunded()[l])
          << "limit " << l;
      if (s.refunded()[l] == 0) {
        EXPECT_EQ(after.limits[l].remaining, before.limits[l].remaining) << "limit " << l;
      }
      EXPECT_GE(after.limits[l].remaining, before.limits[l].remaining) << "limit " << l;
      EXPECT_LE(after.limits[l].remaining, after.limits[l].limit) << "limit " << l;
      EXPECT_LE(after.limits[l].reset_after_ms, before.limits[l].reset_after_ms) << "limit " << l;
    }
  }
  EXPECT_GE(refunds, 500);
}

INSTANTIATE_TEST_SUITE_P(Rules, EveryAlgorithm,
                         ::testing::Values(Algorithm::kFixedWindow, Algorithm::kSlidingWindow,
                                           Algorithm::kSlidingLog, Algorithm::kTokenBucket,
                                           Algorithm::kGcra),
                         [](const auto& info) { return std::string(AlgorithmName(info.param)); });

TEST(FixedWindowRefundTest, GivesBackInTheCurrentWindow) {
  Subject s(MakeRule(Algorithm::kFixedWindow, {"3/s"}));
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(s.At(1000 + i).allowed);
  EXPECT_FALSE(s.At(1500).allowed);
  const Decision after = s.Refund(1500, 2);
  EXPECT_EQ(after.remaining, 2);
  EXPECT_EQ(after.reset_after_ms, 500);
  EXPECT_EQ(s.expires_at_ms(), 2000);
  EXPECT_TRUE(s.At(1600).allowed);
  EXPECT_TRUE(s.At(1700).allowed);
  EXPECT_FALSE(s.At(1800).allowed);
}

TEST(FixedWindowRefundTest, LeavesACountFromAnEarlierWindowAlone) {
  const core::CompiledRule r = testing::Compile(MakeRule(Algorithm::kFixedWindow, {"3/s"}));
  core::FixedWindowState st{1000, 3};
  // The next window: nothing counted in it, nothing given back.
  EXPECT_EQ(core::RefundFixedWindow(r.limits[0], st, 2000, 3), 0);
  EXPECT_EQ(st.window_start_ms, 1000);
  EXPECT_EQ(st.used, 3);
  EXPECT_EQ(core::RefundFixedWindow(r.limits[0], st, 1999, 2), 2);
  EXPECT_EQ(st.used, 1);
  EXPECT_EQ(core::RefundFixedWindow(r.limits[0], st, 1999, 2), 1);
}

TEST(FixedWindowRefundTest, AStateThatHoldsNothingAfterwardsIsCleared) {
  Subject s(MakeRule(Algorithm::kFixedWindow, {"3/s"}));
  EXPECT_TRUE(s.At(1999, 3).allowed);
  const Decision after = s.Refund(2000, 3);
  EXPECT_EQ(after.remaining, 3);
  EXPECT_EQ(s.expires_at_ms(), 0);
  for (int64_t w : s.state()) EXPECT_EQ(w, 0);  // as the stores drop it
  EXPECT_TRUE(s.At(2000, 3).allowed);           // no credit from the refund
  EXPECT_FALSE(s.At(2000).allowed);
}

TEST(FixedWindowRefundTest, AClockStepBackRefundsTheWindowCounted) {
  Subject s(MakeRule(Algorithm::kFixedWindow, {"3/s"}));
  EXPECT_TRUE(s.At(1500, 3).allowed);
  const Decision after = s.Refund(900, 1);  // before the window: as at its start
  EXPECT_EQ(after.remaining, 1);
  EXPECT_EQ(s.state()[1], 2);
}

TEST(FixedWindowRefundTest, CalendarWindows) {
  // 2024-03-01 00:00 in Asia/Kolkata is 2024-02-29 18:30 UTC.
  const int64_t day_start = 1709231400000;
  Subject s(MakeRule(Algorithm::kFixedWindow, {"2/day"}, {}, "Asia/Kolkata"));
  EXPECT_TRUE(s.At(day_start + 1000, 2).allowed);
  EXPECT_EQ(s.Refund(day_start + 86'399'999, 1).remaining, 1);
  EXPECT_EQ(s.Refund(day_start + 86'400'000, 1).remaining, 2);  // the next day
  EXPECT_EQ(s.expires_at_ms(), 0);
}

TEST(FixedWindowRefundTest, EveryLimitGivesBackWhatItCounts) {
  Subject s(MakeRule(Algorithm::kFixedWindow, {"3/s", "10/minute"}));
  EXPECT_TRUE(s.At(0, 3).allowed);
  EXPECT_TRUE(s.At(1000, 2).allowed);  // the second's count: 2; the minute's: 5
  const Decision after = s.Refund(1500, 3);
  EXPECT_EQ(after.limits[0].remaining, 3);
  EXPECT_EQ(after.limits[1].remaining, 8);
  EXPECT_EQ(s.refunded()[0], 2);  // the second's count was 2
  EXPECT_EQ(s.refunded()[1], 3);
}

TEST(SlidingWindowRefundTest, TakesFromTheCurrentBucketThenThePrevious) {
  Subject s(MakeRule(Algorithm::kSlidingWindow, {"10/s"}));
  EXPECT_TRUE(s.At(500, 6).allowed);
  EXPECT_TRUE(s.At(1200, 4).allowed);  // 6 x 0.8 + 4 <= 10
  const Decision after = s.Refund(1500, 5);
  EXPECT_EQ(s.refunded()[0], 5);  // 4 off the current bucket, 1 off the previous
  EXPECT_EQ(s.state(), (std::vector<int64_t>{1000, 0, 5, 0}));
  EXPECT_EQ(after.remaining, 7);  // floor(10 - 5 x 0.5)
  EXPECT_EQ(after.reset_after_ms, 500);
  EXPECT_EQ(s.expires_at_ms(), 2000);
}

TEST(SlidingWindowRefundTest, ABucketLaterTheCountIsThePreviousBucket) {
  Subject s(MakeRule(Algorithm::kSlidingWindow, {"10/s"}));
  EXPECT_TRUE(s.At(500, 6).allowed);
  EXPECT_EQ(s.At(1500, 0).remaining, 7);  // floor(10 - 6 x 0.5)
  // Two units off the previous bucket weigh one at mid-bucket.
  const Decision after = s.Refund(1500, 2);
  EXPECT_EQ(s.refunded()[0], 2);
  EXPECT_EQ(s.state(), (std::vector<int64_t>{1000, 0, 4, 0}));
  EXPECT_EQ(after.remaining, 8);
  EXPECT_EQ(s.expires_at_ms(), 2000);
}

TEST(SlidingWindowRefundTest, NothingOnceBothBucketsSlidOut) {
  const core::CompiledRule r = testing::Compile(MakeRule(Algorithm::kSlidingWindow, {"10/s"}));
  core::SlidingWindowState st{0, 6, 0};
  EXPECT_EQ(core::RefundSlidingWindow(r.limits[0], st, 2000, 6), 0);
  EXPECT_EQ(st.window_start_ms, 0);
  EXPECT_EQ(st.current, 6);
  EXPECT_EQ(st.previous, 0);
  EXPECT_EQ(core::RefundSlidingWindow(r.limits[0], st, 1999, 1), 1);  // still the previous bucket
  EXPECT_EQ(st.window_start_ms, 1000);
  EXPECT_EQ(st.current, 0);
  EXPECT_EQ(st.previous, 5);
}

TEST(TokenBucketRefundTest, AddsTokensUpToTheCapacity) {
  Subject s(MakeRule(Algorithm::kTokenBucket, {"10/s"}));
  EXPECT_EQ(s.At(0, 8).remaining, 2);
  EXPECT_EQ(s.Refund(0, 3).remaining, 5);
  EXPECT_EQ(s.refunded()[0], 3);
  EXPECT_EQ(s.Refund(0, 100).remaining, 10);
  EXPECT_EQ(s.refunded()[0], 5);
  EXPECT_EQ(s.state()[0], 0);
  EXPECT_EQ(s.expires_at_ms(), 0);
}

TEST(TokenBucketRefundTest, TheBurstCapsARefund) {
  Subject s(MakeRule(Algorithm::kTokenBucket, {"10/s"}, {4}));
  EXPECT_TRUE(s.At(0, 4).allowed);
  const Decision after = s.Refund(0, 10);
  EXPECT_EQ(after.limit, 4);
  EXPECT_EQ(after.remaining, 4);
}

TEST(TokenBucketRefundTest, RefillsUpToNowFirst) {
  Subject s(MakeRule(Algorithm::kTokenBucket, {"10/s"}));
  EXPECT_TRUE(s.At(0, 10).allowed);
  EXPECT_EQ(s.At(500, 0).remaining, 5);
  const Decision after = s.Refund(500, 3);
  EXPECT_EQ(s.refunded()[0], 3);
  EXPECT_EQ(after.remaining, 8);
  EXPECT_EQ(after.reset_after_ms, 200);
  EXPECT_EQ(s.state(), (std::vector<int64_t>{2000, 500, 0}));
  EXPECT_EQ(s.expires_at_ms(), 700);
}

TEST(TokenBucketRefundTest, APartRefilledTokenCountsAsOneGivenBack) {
  Subject s(MakeRule(Algorithm::kTokenBucket, {"10/s"}));
  EXPECT_TRUE(s.At(0, 2).allowed);
  // 150 ms later 1.5 tokens came back: 0.5 is missing, and the remaining
  // (whole tokens) grows by one when it comes back.
  EXPECT_EQ(s.At(150, 0).remaining, 9);
  EXPECT_EQ(s.Refund(150, 100).remaining, 10);
  EXPECT_EQ(s.refunded()[0], 1);
  // Refilled by now: nothing to give back.
  EXPECT_TRUE(s.At(1'000, 2).allowed);
  s.Refund(1'300, 5);
  EXPECT_EQ(s.refunded()[0], 0);
}

TEST(GcraRefundTest, MovesTheTatBackByTheEmissionInterval) {
  Subject s(MakeRule(Algorithm::kGcra, {"10/s"}));  // T = 100 ms, limit 10
  const int64_t t = 1'000'000;
  EXPECT_TRUE(s.At(t, 10).allowed);
  const Decision after = s.Refund(t, 4);
  EXPECT_EQ(s.refunded()[0], 4);
  EXPECT_EQ(s.state()[0], (t + 600) * 1000);
  EXPECT_EQ(after.remaining, 4);
  EXPECT_EQ(after.reset_after_ms, 600);
  EXPECT_EQ(s.expires_at_ms(), t + 600);
}

TEST(GcraRefundTest, NeverBelowNow) {
  Subject s(MakeRule(Algorithm::kGcra, {"10/s"}));
  const int64_t t = 1'000'000;
  EXPECT_TRUE(s.At(t, 2).allowed);  // TAT t + 200 ms
  const Decision after = s.Refund(t + 50, 5);
  EXPECT_EQ(after.remaining, 10);  // a full burst, not more
  EXPECT_EQ(s.refunded()[0], 2);   // 150 ms ahead: two intervals, one part
  EXPECT_EQ(after.reset_after_ms, 0);
  EXPECT_EQ(s.expires_at_ms(), 0);
  EXPECT_EQ(s.At(t + 50, 11).retry_after_ms, -1);

  const core::CompiledRule r = testing::Compile(MakeRule(Algorithm::kGcra, {"10/s"}));
  core::GcraState st{(t + 200) * 1000};
  EXPECT_EQ(core::RefundGcra(r.limits[0], st, t + 50, 5), 2);
  EXPECT_EQ(st.tat_us, (t + 50) * 1000);
}

TEST(GcraRefundTest, LeavesAPastTatAlone) {
  const core::CompiledRule r = testing::Compile(MakeRule(Algorithm::kGcra, {"10/s"}));
  const int64_t t = 1'000'000;
  core::GcraState st{(t + 100) * 1000};
  EXPECT_EQ(core::RefundGcra(r.limits[0], st, t + 200, 1), 0);
  EXPECT_EQ(st.tat_us, (t + 100) * 1000);
}

TEST(SlidingLogRefundTest, RemovesTheNewestUnits) {
  Subject s(MakeRule(Algorithm::kSlidingLog, {"5/minute"}));
  EXPECT_TRUE(s.At(0, 1).allowed);
  EXPECT_TRUE(s.At(10, 2).allowed);
  EXPECT_TRUE(s.At(20, 1).allowed);
  // The unit at 20 and one of the two at 10 go; the one at 0 stays.
  const Decision after = s.Refund(30, 2);
  EXPECT_EQ(s.refunded()[0], 2);
  EXPECT_EQ(after.remaining, 3);
  EXPECT_EQ(after.reset_after_ms, 10 + 60'000 - 30);  // the newest left is at 10
  EXPECT_EQ(s.expires_at_ms(), 60'010);
  EXPECT_TRUE(s.At(40, 3).allowed);
  const Decision denied = s.At(50);
  EXPECT_FALSE(denied.allowed);
  EXPECT_EQ(denied.retry_after_ms, 60'000 - 50);  // the unit at 0 ages out first
}

TEST(SlidingLogRefundTest, EachLimitLosesOnlyWhatItsWindowHolds) {
  Subject s(MakeRule(Algorithm::kSlidingLog, {"2/s", "5/minute"}));
  EXPECT_TRUE(s.At(0).allowed);
  EXPECT_TRUE(s.At(1500).allowed);  // the second counts 1, the minute 2
  const Decision after = s.Refund(1600, 2);
  EXPECT_EQ(after.limits[0].remaining, 2);
  EXPECT_EQ(after.limits[1].remaining, 5);
  EXPECT_EQ(s.refunded()[0], 1);
  EXPECT_EQ(s.refunded()[1], 2);
  EXPECT_EQ(s.expires_at_ms(), 0);
  // The emptied log counts what comes next in every window.
  EXPECT_TRUE(s.At(1700, 2).allowed);
  EXPECT_FALSE(s.At(1800).allowed);
  const Decision later = s.At(2700, 0);
  EXPECT_EQ(later.limits[0].remaining, 2);
  EXPECT_EQ(later.limits[1].remaining, 3);
}

TEST(SlidingLogRefundTest, UnitsAgedOutOfTheShortWindowStillCountInTheLong) {
  Subject s(MakeRule(Algorithm::kSlidingLog, {"2/s", "5/minute"}));
  EXPECT_TRUE(s.At(0, 2).allowed);
  EXPECT_TRUE(s.At(1500, 1).allowed);
  // The unit at 1500 goes from both; one at 0 from the minute alone.
  const Decision after = s.Refund(1600, 2);
  EXPECT_EQ(after.limits[0].remaining, 2);
  EXPECT_EQ(after.limits[1].remaining, 4);
  EXPECT_EQ(s.refunded()[0], 1);
  EXPECT_EQ(s.refunded()[1], 2);
  EXPECT_EQ(after.limits[1].reset_after_ms, 60'000 - 1600);
}

TEST(RefundAlertsTest, BitsStaySetAndKeepTheState) {
  Rule rule = MakeRule(Algorithm::kFixedWindow, {"4/s"});
  rule.alerts.thresholds = {50};
  rule.alerts.webhook = "http://127.0.0.1:9/hook";
  const core::CompiledRule r = testing::Compile(rule);
  std::vector<int64_t> state(r.state_words, 0);
  Decision d;
  core::AlertOutcome fired;
  core::EvaluateRuleWithAlerts(r, state.data(), 0, 2, &d, &fired);
  EXPECT_EQ(fired.fired[0], 1u);
  // Nothing used any more, but the bits last to the window's end.
  core::RefundResult refund;
  EXPECT_EQ(core::RefundRuleAndPeek(r, state.data(), 100, 2, &refund), 1000);
  EXPECT_EQ(refund.after.remaining, 4);
  EXPECT_EQ(refund.refunded[0], 2);
  // Reaching 50% again in the same window is not reported again.
  core::EvaluateRuleWithAlerts(r, state.data(), 200, 2, &d, &fired);
  EXPECT_EQ(fired.fired[0], 0u);
  core::EvaluateRuleWithAlerts(r, state.data(), 1000, 2, &d, &fired);
  EXPECT_EQ(fired.fired[0], 1u);
}

}  // namespace
}  // namespace floodgate
