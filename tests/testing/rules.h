// Test helpers: build rules and compiled rules from limit strings.
#pragma once

#include <gtest/gtest.h>

#include <initializer_list>
#include <string>
#include <vector>

#include "core/rule_eval.h"
#include "floodgate/rule.h"

namespace floodgate::testing {

inline Rule MakeRule(Algorithm algorithm, std::initializer_list<const char*> limits,
                     std::vector<int64_t> burst = {}, std::string timezone = "UTC") {
  Rule rule;
  rule.name = "r";
  rule.algorithm = algorithm;
  for (const char* text : limits) {
    auto limit = ParseLimit(text);
    EXPECT_TRUE(limit.ok()) << text << ": " << limit.status().ToString();
    if (limit.ok()) rule.limits.push_back(*limit);
  }
  rule.burst = std::move(burst);
  rule.timezone = std::move(timezone);
  return rule;
}

inline core::CompiledRule Compile(const Rule& rule) {
  auto compiled = core::CompileRule(rule, "", rule.limits);
  EXPECT_TRUE(compiled.ok()) << compiled.status().ToString();
  return compiled.ok() ? *compiled : core::CompiledRule{};
}

// A rule's state plus its evaluation, for driving one subject through time.
class Subject {
 public:
  explicit Subject(const Rule& rule) : rule_(Compile(rule)), state_(rule_.state_words + 1, 0) {}
  ~Subject() { core::ReleaseRuleState(rule_.algorithm, state_.data()); }

  Decision At(int64_t now_ms, int64_t cost = 1) {
    Decision d;
    expires_at_ms_ = core::EvaluateRule(rule_, state_.data(), now_ms, cost, &d);
    return d;
  }
  // Gives back `cost` units at now_ms; the subject's figures right after
  // (refunded(): what each limit gave back).
  Decision Refund(int64_t now_ms, int64_t cost) {
    core::RefundResult r;
    expires_at_ms_ = core::RefundRuleAndPeek(rule_, state_.data(), now_ms, cost, &r);
    refunded_ = r.refunded;
    return r.after;
  }
  // What each limit gave back in the last Refund.
  const core::RefundedUnits& refunded() const { return refunded_; }
  int64_t expires_at_ms() const { return expires_at_ms_; }
  const std::vector<int64_t>& state() const { return state_; }
  const core::CompiledRule& rule() const { return rule_; }

 private:
  core::CompiledRule rule_;
  std::vector<int64_t> state_;
  int64_t expires_at_ms_ = 0;
  core::RefundedUnits refunded_{};
};

}  // namespace floodgate::testing
