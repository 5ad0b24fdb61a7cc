// Quota alert bits: which admitted request fires each threshold, once per
// window, on every algorithm; denials, peeks, shadow denials and clock
// steps back fire nothing; the state outlives its bits' window.
#include "core/alerts.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/rule_eval.h"
#include "testing/rules.h"

namespace floodgate::core {
namespace {

Rule WithAlerts(Rule rule, std::vector<int> thresholds) {
  rule.alerts.thresholds = std::move(thresholds);
  rule.alerts.webhook = "http://127.0.0.1:9/hook";
  return rule;
}

// One subject of an alerting rule driven through time.
class Alerting {
 public:
  explicit Alerting(const Rule& rule)
      : rule_(testing::Compile(rule)), state_(rule_.state_words, 0) {}
  ~Alerting() { ReleaseRuleState(rule_.algorithm, state_.data()); }

  // The fired bits of limit `limit` for one decision.
  uint32_t At(int64_t now_ms, int64_t cost = 1, int limit = 0) {
    expires_ = EvaluateRuleWithAlerts(rule_, state_.data(), now_ms, cost, &decision_, &outcome_);
    return limit < outcome_.num_limits ? outcome_.fired[limit] : 0;
  }
  const Decision& decision() const { return decision_; }
  const AlertOutcome& outcome() const { return outcome_; }
  int64_t expires() const { return expires_; }
  const CompiledRule& rule() const { return rule_; }

 private:
  CompiledRule rule_;
  std::vector<int64_t> state_;
  Decision decision_;
  AlertOutcome outcome_;
  int64_t expires_ = 0;
};

TEST(AlertPolicyTest, UnitsRoundUpAndWordsComeAfterTheAlgorithms) {
  const CompiledRule plain = testing::Compile(testing::MakeRule(Algorithm::kFixedWindow, {"3/s"}));
  EXPECT_EQ(plain.state_words, 2);  // a rule without alerts keeps its layout
  EXPECT_FALSE(plain.alerts.enabled());

  const CompiledRule r = testing::Compile(
      WithAlerts(testing::MakeRule(Algorithm::kFixedWindow, {"3/s", "1000/day"}), {1, 50, 100}));
  EXPECT_EQ(r.state_words, 4 + 4);
  EXPECT_EQ(r.alerts.offset, 4);
  EXPECT_EQ(r.alerts.num_thresholds, 3);
  EXPECT_EQ(r.alerts.units, (std::vector<int64_t>{1, 2, 3, 10, 500, 1000}));

  const CompiledRule log = testing::Compile(
      WithAlerts(testing::MakeRule(Algorithm::kSlidingLog, {"3/s", "7/minute"}), {80}));
  EXPECT_EQ(log.alerts.offset, 1);  // the log's pointer
  EXPECT_EQ(log.state_words, 1 + 4);

  // token_bucket and gcra: a share of the burst.
  const CompiledRule bucket = testing::Compile(
      WithAlerts(testing::MakeRule(Algorithm::kTokenBucket, {"10/s"}, {40}), {80}));
  EXPECT_EQ(bucket.alerts.units, (std::vector<int64_t>{32}));
  const CompiledRule gcra =
      testing::Compile(WithAlerts(testing::MakeRule(Algorithm::kGcra, {"10/s"}, {4}), {80}));
  EXPECT_EQ(gcra.alerts.units, (std::vector<int64_t>{4}));  // capacity 5 (burst + 1)
}

TEST(AlertPolicyTest, CompileRuleRefusesBadThresholds) {
  for (std::vector<int> bad :
       {std::vector<int>{0}, {101}, {80, 80}, {90, 80}, {1, 2, 3, 4, 5, 6, 7, 8, 9}}) {
    auto r = CompileRule(WithAlerts(testing::MakeRule(Algorithm::kFixedWindow, {"3/s"}), bad), "",
                         {*ParseLimit("3/s")});
    EXPECT_FALSE(r.ok());
  }
}

TEST(AlertsTest, FixedWindowFiresEachThresholdOncePerWindow) {
  Alerting s(WithAlerts(testing::MakeRule(Algorithm::kFixedWindow, {"10/minute"}), {50, 80, 100}));
  std::vector<uint32_t> fired;
  for (int i = 0; i < 12; ++i) fired.push_back(s.At(1000 + i));
  EXPECT_EQ(fired, (std::vector<uint32_t>{0, 0, 0, 0, 1, 0, 0, 2, 0, 4, 0, 0}));
  // The 10th request: used 10 of 10, window [0, 60000).
  EXPECT_FALSE(s.decision().allowed);
  // The next window starts afresh.
  EXPECT_EQ(s.At(60'000, 5), 1u);
  EXPECT_EQ(s.outcome().used[0], 5);
  EXPECT_EQ(s.outcome().window[0].start_ms, 60'000);
  EXPECT_EQ(s.outcome().window[0].end_ms, 120'000);
  // One request across two thresholds fires both.
  EXPECT_EQ(s.At(60'001, 5), 6u);
}

TEST(AlertsTest, DenialsPeeksAndShadowDenialsFireNothing) {
  Alerting s(WithAlerts(testing::MakeRule(Algorithm::kFixedWindow, {"10/minute"}), {50}));
  EXPECT_EQ(s.At(0, 4), 0u);
  EXPECT_EQ(s.At(0, 7), 0u);  // denied: would be 11
  EXPECT_FALSE(s.decision().allowed);
  EXPECT_EQ(s.At(0, 0), 0u);  // a peek at 4
  EXPECT_EQ(s.At(0, 1), 1u);  // 5 of 10

  Rule shadow = WithAlerts(testing::MakeRule(Algorithm::kFixedWindow, {"2/minute"}), {100});
  shadow.shadow = true;
  Alerting t(shadow);
  EXPECT_EQ(t.At(0, 1), 0u);
  EXPECT_EQ(t.At(0, 1), 1u);  // 2 of 2, really admitted
  EXPECT_EQ(t.At(0, 1), 0u);  // shadow-denied: allowed, but nothing consumed
  EXPECT_TRUE(t.decision().shadow_denied);
}

TEST(AlertsTest, AllOrNothingAcrossLimits) {
  Alerting s(
      WithAlerts(testing::MakeRule(Algorithm::kFixedWindow, {"2/s", "4/minute"}), {50, 100}));
  EXPECT_EQ(s.At(0), 1u);  // 1 of 2: 50 % of the second
  EXPECT_EQ(s.outcome().fired[1], 0u);
  EXPECT_EQ(s.At(0), 2u);               // 2 of 2
  EXPECT_EQ(s.outcome().fired[1], 1u);  // 2 of 4
  EXPECT_EQ(s.At(0), 0u);               // denied by the first: the second counts nothing either
  EXPECT_EQ(s.outcome().fired[1], 0u);
  EXPECT_EQ(s.At(1000), 1u);            // a new second: 1 of 2 again
  EXPECT_EQ(s.outcome().fired[1], 0u);  // 3 of 4
  EXPECT_EQ(s.At(1001), 2u);
  EXPECT_EQ(s.outcome().fired[1], 2u);  // 4 of 4
}

TEST(AlertsTest, TokenBucketCountsBurstConsumedOncePerPeriod) {
  // 10 per second, burst 10: 80 % is 8 tokens consumed.
  Alerting s(WithAlerts(testing::MakeRule(Algorithm::kTokenBucket, {"10/s"}), {80}));
  EXPECT_EQ(s.At(5000, 7), 0u);
  EXPECT_EQ(s.At(5000, 1), 1u);
  EXPECT_EQ(s.outcome().used[0], 8);
  EXPECT_EQ(s.outcome().window[0].start_ms, 5000);
  EXPECT_EQ(s.outcome().window[0].end_ms, 6000);
  // Refilled 400 ms later and drained again: the same period, no second alert.
  EXPECT_EQ(s.At(5400, 4), 0u);
  EXPECT_EQ(s.decision().remaining, 2);
  // The bucket is full again long before 6000, but the state is kept for
  // its bits until the period ends.
  EXPECT_EQ(s.At(5999, 0), 0u);
  EXPECT_GE(s.expires(), 6000);
  EXPECT_EQ(s.At(6000, 8), 1u);  // a new period
}

TEST(AlertsTest, GcraCountsBurstConsumed) {
  Alerting s(WithAlerts(testing::MakeRule(Algorithm::kGcra, {"10/s"}), {50, 100}));
  std::vector<uint32_t> fired;
  for (int i = 0; i < 11; ++i) fired.push_back(s.At(3000));
  EXPECT_EQ(fired, (std::vector<uint32_t>{0, 0, 0, 0, 1, 0, 0, 0, 0, 2, 0}));
}

TEST(AlertsTest, SlidingAlgorithmsUseTheirBucketOrThePeriod) {
  for (Algorithm a : {Algorithm::kSlidingWindow, Algorithm::kSlidingLog}) {
    SCOPED_TRACE(std::string(AlgorithmName(a)));
    Alerting s(WithAlerts(testing::MakeRule(a, {"4/minute"}), {100}));
    EXPECT_EQ(s.At(10'000, 3), 0u);
    EXPECT_EQ(s.At(50'000, 1), 1u);
    EXPECT_EQ(s.outcome().window[0].start_ms, 0);
    EXPECT_EQ(s.outcome().window[0].end_ms, 60'000);
    // 75 s: the window still holds some of the 4 (sliding_window's
    // estimate, or the log's event at 50 s); full again, but in a new
    // window: fires again.
    const uint32_t again = s.At(75'000, a == Algorithm::kSlidingLog ? 3 : 1);
    EXPECT_TRUE(s.decision().allowed);
    EXPECT_EQ(s.decision().remaining, 0);
    EXPECT_EQ(again, 1u);
    EXPECT_EQ(s.outcome().window[0].start_ms, 60'000);
  }
}

TEST(AlertsTest, AClockStepBackFiresNothingAgain) {
  Alerting s(WithAlerts(testing::MakeRule(Algorithm::kTokenBucket, {"2/s"}), {50, 100}));
  EXPECT_EQ(s.At(10'500, 1), 1u);  // window [10000, 11000)
  // Back into the previous second: the bucket decides at its own time and
  // admits, but the bits belong to a later window: nothing fires, and the
  // state keeps them to the end of their window.
  EXPECT_EQ(s.At(9'900, 1), 0u);
  EXPECT_TRUE(s.decision().allowed);
  EXPECT_EQ(s.decision().remaining, 0);
  EXPECT_GE(s.expires(), 11'000);
  EXPECT_EQ(s.At(12'000, 2), 3u);  // a new window
}

TEST(AlertsTest, WithoutAlertsNothingIsReported) {
  Alerting s(testing::MakeRule(Algorithm::kFixedWindow, {"1/minute"}));
  EXPECT_EQ(s.At(0), 0u);
  EXPECT_EQ(s.outcome().num_limits, 0);
  EXPECT_FALSE(s.outcome().any());
}

}  // namespace
}  // namespace floodgate::core
