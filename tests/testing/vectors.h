// Golden vectors (tests/vectors/*.json): request traces with expected
// decisions. Any store must reproduce them; a Checker adapts a store.
//
// File format: {"cases": [{"name", "rule": {algorithm, limits, burst?, tiers?,
// timezone?, shadow?, alerts?}, "steps": [{"t", "key"?, "cost"?, "tier"?,
// "refund"?, expected fields…}]}]}. A step with "refund": u gives u units
// back (LimiterCore::Refund) instead of deciding, and its expected fields
// are those of the peek the refund answers with ("cost" is then unused),
// plus "refunded": the most units any limit gave back, and each limit's
// "refunded" in "limits" (ExpectRefunded). Expected fields are any of
// allowed, shadow_denied, limit, remaining, retry_after_ms, reset_after_ms, "limits": [{allowed,
// remaining, retry_after_ms, reset_after_ms}] per limit, and "alerts": the
// thresholds the step fired, [{limit (index), threshold (percent), used,
// window_start, window_end}] ([] for none); absent ones are not checked.
// A rule's "alerts" is its list of thresholds (percent). Cases of
// algorithm "concurrency" are lease traces, not decisions: LoadVectors
// leaves them to testing/lease_vectors.h, and cases with no rule
// (reservations.json) to testing/reservation_vectors.h.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "core/alerts.h"
#include "core/rule_eval.h"
#include "floodgate/alerts.h"
#include "floodgate/decision.h"
#include "floodgate/rule.h"
#include "nlohmann/json.hpp"

namespace floodgate::testing {

struct VectorStep {
  int64_t t_ms = 0;
  std::string key = "subject";
  int64_t cost = 1;
  std::string tier;
  int64_t refund = 0;  // > 0: a refund of this many units, not a decision
  nlohmann::json expect;
};

struct VectorCase {
  std::string file;
  std::string name;
  Rule rule;
  std::vector<VectorStep> steps;
};

inline std::vector<Limit> ParseLimits(const nlohmann::json& j) {
  std::vector<Limit> out;
  for (const auto& text : j) {
    auto l = ParseLimit(text.get<std::string>());
    EXPECT_TRUE(l.ok()) << l.status().ToString();
    if (l.ok()) out.push_back(*l);
  }
  return out;
}

inline std::vector<VectorCase> LoadVectors(const std::string& dir) {
  std::vector<VectorCase> cases;
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() == ".json") files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  for (const auto& path : files) {
    std::ifstream in(path);
    const auto doc = nlohmann::json::parse(in);
    for (const auto& c : doc.at("cases")) {
      if (!c.contains("rule")) continue;  // reservation traces: reservation_vectors.h
      if (c.at("rule").at("algorithm") == "concurrency") continue;  // lease_vectors.h
      VectorCase vc;
      vc.file = path.filename().string();
      vc.name = c.at("name").get<std::string>();
      const auto& r = c.at("rule");
      vc.rule.name = "r";
      vc.rule.algorithm = *ParseAlgorithm(r.at("algorithm").get<std::string>());
      vc.rule.limits = ParseLimits(r.at("limits"));
      if (r.contains("burst")) vc.rule.burst = r.at("burst").get<std::vector<int64_t>>();
      if (r.contains("timezone")) vc.rule.timezone = r.at("timezone").get<std::string>();
      if (r.contains("shadow")) vc.rule.shadow = r.at("shadow").get<bool>();
      if (r.contains("alerts")) {
        vc.rule.alerts.thresholds = r.at("alerts").get<std::vector<int>>();
        vc.rule.alerts.webhook = "http://127.0.0.1:9/vectors";
        vc.rule.alerts.secret = "vectors-secret";
      }
      if (r.contains("tiers")) {
        for (const auto& [tier, limits] : r.at("tiers").items()) {
          vc.rule.tiers[tier] = ParseLimits(limits);
        }
      }
      for (const auto& s : c.at("steps")) {
        VectorStep step;
        step.t_ms = s.at("t").get<int64_t>();
        if (s.contains("key")) step.key = s.at("key").get<std::string>();
        if (s.contains("cost")) step.cost = s.at("cost").get<int64_t>();
        if (s.contains("tier")) step.tier = s.at("tier").get<std::string>();
        if (s.contains("refund")) step.refund = s.at("refund").get<int64_t>();
        step.expect = s;
        vc.steps.push_back(std::move(step));
      }
      cases.push_back(std::move(vc));
    }
  }
  return cases;
}

// Compares a decision with a step's expectations (only the fields present).
inline void ExpectMatches(const VectorStep& step, const Decision& d) {
  const auto& e = step.expect;
  auto check = [&](const char* field, int64_t actual) {
    if (e.contains(field)) {
      EXPECT_EQ(actual, e.at(field).get<int64_t>()) << field;
    }
  };
  if (e.contains("allowed")) {
    EXPECT_EQ(d.allowed, e.at("allowed").get<bool>()) << "allowed";
  }
  if (e.contains("shadow_denied")) {
    EXPECT_EQ(d.shadow_denied, e.at("shadow_denied").get<bool>()) << "shadow_denied";
  }
  check("limit", d.limit);
  check("remaining", d.remaining);
  check("retry_after_ms", d.retry_after_ms);
  check("reset_after_ms", d.reset_after_ms);
  if (e.contains("limits")) {
    const auto& limits = e.at("limits");
    ASSERT_EQ(static_cast<int>(limits.size()), d.num_limits);
    for (int i = 0; i < d.num_limits; ++i) {
      SCOPED_TRACE("limit " + std::to_string(i));
      const auto& le = limits[i];
      const LimitStatus& ls = d.limits[i];
      if (le.contains("allowed")) {
        EXPECT_EQ(ls.allowed, le.at("allowed").get<bool>());
      }
      if (le.contains("remaining")) {
        EXPECT_EQ(ls.remaining, le.at("remaining").get<int64_t>());
      }
      if (le.contains("retry_after_ms")) {
        EXPECT_EQ(ls.retry_after_ms, le.at("retry_after_ms").get<int64_t>());
      }
      if (le.contains("reset_after_ms")) {
        EXPECT_EQ(ls.reset_after_ms, le.at("reset_after_ms").get<int64_t>());
      }
    }
  }
}

// Compares what a refund step gave back with its "refunded" expectations:
// the whole refund's (the most any limit gave back) and each limit's.
inline void ExpectRefunded(const VectorStep& step, const core::RefundResult& r) {
  const auto& e = step.expect;
  if (e.contains("refunded")) {
    EXPECT_EQ(r.most_refunded(), e.at("refunded").get<int64_t>()) << "refunded";
  }
  if (!e.contains("limits")) return;
  const auto& limits = e.at("limits");
  ASSERT_EQ(static_cast<int>(limits.size()), r.after.num_limits);
  for (int i = 0; i < r.after.num_limits; ++i) {
    if (limits[i].contains("refunded")) {
      EXPECT_EQ(r.refunded[i], limits[i].at("refunded").get<int64_t>()) << "limit " << i;
    }
  }
}

// One threshold a decision fired, as the vectors write it.
struct FiredAlert {
  int limit = 0;
  int threshold = 0;  // percent
  int64_t used = 0;
  int64_t window_start_ms = 0;
  int64_t window_end_ms = 0;
  friend bool operator==(const FiredAlert&, const FiredAlert&) = default;
};

inline std::ostream& operator<<(std::ostream& out, const FiredAlert& f) {
  return out << "{limit " << f.limit << ", " << f.threshold << "%, used " << f.used << ", ["
             << f.window_start_ms << ", " << f.window_end_ms << ")}";
}

// What the events `records` say was fired (any order).
inline std::vector<FiredAlert> Fired(const std::vector<AlertRecord>& records) {
  std::vector<FiredAlert> out;
  for (const AlertRecord& r : records) {
    out.push_back(FiredAlert{r.event.limit_index, r.event.threshold, r.event.used,
                             r.event.window_start_ms, r.event.window_end_ms});
  }
  return out;
}

// The events `alerts` emitted since it had emitted *last_emitted (which is
// updated), newest first. Records of events emitted by another server (on
// Redis) and delivered here are not among them.
inline std::vector<AlertRecord> EmittedSince(Alerts& alerts, int64_t* last_emitted) {
  const int64_t emitted = alerts.GetStats().emitted;
  std::vector<AlertRecord> out;
  for (AlertRecord& r : alerts.Recent(static_cast<size_t>(-1))) {
    if (static_cast<int64_t>(out.size()) >= emitted - *last_emitted) break;
    if (!r.event.rule.empty()) out.push_back(std::move(r));
  }
  *last_emitted = emitted;
  return out;
}

// What `outcome` fired for `rule`, in (limit, threshold) order.
inline std::vector<FiredAlert> Fired(const core::CompiledRule& rule,
                                     const core::AlertOutcome& outcome) {
  std::vector<FiredAlert> out;
  for (int i = 0; i < outcome.num_limits; ++i) {
    for (int j = 0; j < rule.alerts.num_thresholds; ++j) {
      if ((outcome.fired[i] & (1u << j)) == 0) continue;
      out.push_back(FiredAlert{i, rule.alerts.percents[j], outcome.used[i],
                               outcome.window[i].start_ms, outcome.window[i].end_ms});
    }
  }
  return out;
}

// Compares what a step fired with its "alerts" expectation, when it has one.
inline void ExpectAlerts(const VectorStep& step, std::vector<FiredAlert> fired) {
  if (!step.expect.contains("alerts")) return;
  std::vector<FiredAlert> want;
  for (const auto& a : step.expect.at("alerts")) {
    want.push_back(FiredAlert{a.at("limit").get<int>(), a.at("threshold").get<int>(),
                              a.at("used").get<int64_t>(), a.at("window_start").get<int64_t>(),
                              a.at("window_end").get<int64_t>()});
  }
  auto order = [](const FiredAlert& a, const FiredAlert& b) {
    return std::pair(a.limit, a.threshold) < std::pair(b.limit, b.threshold);
  };
  std::sort(want.begin(), want.end(), order);
  std::sort(fired.begin(), fired.end(), order);
  EXPECT_EQ(fired, want) << "alerts fired";
}

inline std::string VectorsDir() { return std::string(FLOODGATE_SOURCE_DIR) + "/tests/vectors"; }

}  // namespace floodgate::testing
