// Rule evaluation: all-or-nothing across limits, the binding limit, shadow
// mode, and the bounds CompileRule enforces.
#include <gtest/gtest.h>

#include "testing/rules.h"

namespace floodgate {
namespace {

using testing::MakeRule;
using testing::Subject;

class AllAlgorithms : public ::testing::TestWithParam<Algorithm> {};

TEST_P(AllAlgorithms, MultiLimitIsAllOrNothing) {
  Subject s(MakeRule(GetParam(), {"2/s", "3/minute"}));
  EXPECT_TRUE(s.At(0).allowed);
  EXPECT_TRUE(s.At(0).allowed);
  for (int i = 0; i < 5; ++i) {
    Decision d = s.At(0);
    EXPECT_FALSE(d.allowed);
    EXPECT_FALSE(d.limits[0].allowed);
    EXPECT_TRUE(d.limits[1].allowed);
    EXPECT_EQ(d.limits[1].remaining, 1);  // the minute limit is not charged
  }
  EXPECT_EQ(s.At(0, 0).limits[1].remaining, 1);
}

TEST_P(AllAlgorithms, CostAboveAnyLimitIsNeverAllowed) {
  Subject s(MakeRule(GetParam(), {"5/s", "100/minute"}));
  Decision d = s.At(0, 6);
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.retry_after_ms, -1);
  EXPECT_EQ(d.binding, 0);
  EXPECT_EQ(s.expires_at_ms(), 0);
}

TEST_P(AllAlgorithms, ShadowAlwaysAdmitsButTellsTheTruth) {
  Rule rule = MakeRule(GetParam(), {"1/minute"});
  rule.shadow = true;
  Subject s(rule);
  Decision first = s.At(0);
  EXPECT_TRUE(first.allowed);
  EXPECT_FALSE(first.shadow_denied);
  Decision second = s.At(1);
  EXPECT_TRUE(second.allowed);
  EXPECT_TRUE(second.shadow_denied);
  EXPECT_EQ(second.retry_after_ms, 0);
}

TEST_P(AllAlgorithms, ExpiryCoversTheLongestLimit) {
  Subject s(MakeRule(GetParam(), {"5/s", "10/minute"}));
  s.At(0);
  EXPECT_GT(s.expires_at_ms(), 1'000);
  EXPECT_LE(s.expires_at_ms(), 120'000);
}

INSTANTIATE_TEST_SUITE_P(Rules, AllAlgorithms,
                         ::testing::Values(Algorithm::kFixedWindow, Algorithm::kSlidingWindow,
                                           Algorithm::kSlidingLog, Algorithm::kTokenBucket,
                                           Algorithm::kGcra),
                         [](const auto& info) { return std::string(AlgorithmName(info.param)); });

TEST(RuleEvalTest, BindingOnAdmissionIsTheFewestRemaining) {
  Subject s(MakeRule(Algorithm::kFixedWindow, {"100/minute", "5/s"}));
  Decision d = s.At(0);
  EXPECT_TRUE(d.allowed);
  EXPECT_EQ(d.binding, 1);
  EXPECT_EQ(d.limit, 5);
  EXPECT_EQ(d.remaining, 4);
}

TEST(RuleEvalTest, BindingOnDenialIsTheLongestWait) {
  Subject s(MakeRule(Algorithm::kFixedWindow, {"1/s", "1/minute"}));
  EXPECT_TRUE(s.At(0).allowed);
  Decision d = s.At(500);
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.binding, 1);
  EXPECT_EQ(d.retry_after_ms, 59'500);
  EXPECT_EQ(d.binding_limit.ToString(), "1/minute");
}

// A denial names the limit that bound it as the rule writes it, whatever
// the algorithm does with it (token_bucket's capacity is not its count).
TEST_P(AllAlgorithms, BindingLimitIsTheRulesText) {
  Subject s(MakeRule(GetParam(), {"3/hour", "2/5s"}));
  EXPECT_TRUE(s.At(0).allowed);
  EXPECT_TRUE(s.At(1).allowed);
  Decision by_seconds = s.At(2);
  EXPECT_FALSE(by_seconds.allowed);
  EXPECT_EQ(by_seconds.binding_limit.ToString(), "2/5s");
  EXPECT_TRUE(s.At(10'000).allowed);
  Decision by_hour = s.At(20'000);
  EXPECT_FALSE(by_hour.allowed);
  EXPECT_EQ(by_hour.binding_limit.ToString(), "3/hour");
}

TEST(RuleEvalTest, CompileRefusesLimitsOutsideTheAlgorithmsBounds) {
  auto refuse = [](Rule rule, const std::string& needle) {
    auto c = core::CompileRule(rule, "", rule.limits);
    ASSERT_FALSE(c.ok());
    EXPECT_NE(c.status().message().find(needle), std::string::npos) << c.status().message();
  };
  refuse(MakeRule(Algorithm::kGcra, {"10000000/ms"}), "too fine for gcra");
  refuse(MakeRule(Algorithm::kSlidingLog, {"100001/day"}), "too large for sliding_log");
  refuse(MakeRule(Algorithm::kSlidingWindow, {"1000000000000/day"}),
         "too large for sliding_window");
  refuse(MakeRule(Algorithm::kTokenBucket, {"10/s"}, {0}), "burst out of range");
  refuse(MakeRule(Algorithm::kFixedWindow, {"1/s"}, {}, "Mars/Olympus"), "Mars/Olympus");
}

// A concurrency rule is decided by leases (core/concurrency.h), never by a
// check: the service refuses to check one, and should one come here anyway
// it is denied for good and touches no state.
TEST(RuleEvalTest, AConcurrencyRuleIsNeverDecidedByACheck) {
  Rule rule;
  rule.name = "jobs";
  rule.algorithm = Algorithm::kConcurrency;
  rule.limits = {ConcurrencyLimit(3, 30'000)};
  rule.alerts.thresholds = {50};
  auto c = core::CompileRule(rule, "", rule.limits);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(core::StateWords(Algorithm::kConcurrency, 1), 0);
  std::vector<int64_t> state(static_cast<size_t>(c->state_words) + 1, 7);
  const std::vector<int64_t> before = state;
  Decision d;
  d.allowed = true;
  EXPECT_EQ(core::EvaluateRule(*c, state.data(), 1'000, 1, &d), 0);
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.retry_after_ms, -1);
  EXPECT_EQ(d.num_limits, 0);
  core::AlertOutcome alerts;
  EXPECT_EQ(core::EvaluateRuleWithAlerts(*c, state.data(), 1'000, 1, &d, &alerts), 0);
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(alerts.num_limits, 0);
  core::RefundedUnits refunded;
  refunded.fill(7);
  core::RefundRule(*c, state.data(), 1'000, 1, &refunded);
  EXPECT_EQ(state, before);
  for (int64_t units : refunded) EXPECT_EQ(units, 0);
}

}  // namespace
}  // namespace floodgate
