// Golden reservation vectors (tests/vectors/reservations.json): traces of
// holds and takes on a reservation ledger (store/reservations.h) with what
// each must answer. Every ledger must reproduce them: the embedded one, the
// Redis one (its script) and the fake store's.
//
// File format: {"cases": [{"name", "steps": [{"t", "op" (hold or take),
// "id", "rule"?, "key"?, "estimate"?, "ttl_ms"?, "tier"?, expected
// fields…}]}]}. A step's rule defaults to "r", its key (the subject) to
// "subject". On a hold, estimate (default 1), ttl_ms (default 1000) and
// tier (default "") are its arguments. Expected fields are any of status
// (the code's name: "OK", "ALREADY_EXISTS") and, on a take, outcome
// ("taken", "settled", "unknown"), estimate and tier; absent ones are not
// checked. Cases have no "rule" of their own: testing/vectors.h's
// LoadVectors passes them by.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include "common/enum_table.h"
#include "nlohmann/json.hpp"
#include "store/reservations.h"
#include "testing/vectors.h"

namespace floodgate::testing {

struct ReservationStep {
  int64_t t_ms = 0;
  bool hold = false;  // else a take
  std::string id;
  std::string rule = "r";
  std::string key = "subject";
  std::string tier;
  int64_t estimate = 1;
  int64_t ttl_ms = 1000;
  nlohmann::json expect;
};

struct ReservationCase {
  std::string name;
  std::vector<ReservationStep> steps;
};

inline std::string ReservationVectorsFile() { return VectorsDir() + "/reservations.json"; }

inline std::vector<ReservationCase> LoadReservationVectors() {
  std::vector<ReservationCase> cases;
  std::ifstream in(ReservationVectorsFile());
  EXPECT_TRUE(in.good()) << "cannot read " << ReservationVectorsFile();
  if (!in.good()) return cases;
  const auto doc = nlohmann::json::parse(in);
  for (const auto& c : doc.at("cases")) {
    ReservationCase rc;
    rc.name = c.at("name").get<std::string>();
    for (const auto& s : c.at("steps")) {
      ReservationStep step;
      step.t_ms = s.at("t").get<int64_t>();
      const std::string op = s.at("op").get<std::string>();
      EXPECT_TRUE(op == "hold" || op == "take") << rc.name << ": unknown op " << op;
      step.hold = op == "hold";
      step.id = s.at("id").get<std::string>();
      step.rule = s.value("rule", step.rule);
      step.key = s.value("key", step.key);
      step.tier = s.value("tier", step.tier);
      step.estimate = s.value("estimate", step.estimate);
      step.ttl_ms = s.value("ttl_ms", step.ttl_ms);
      step.expect = s;
      rc.steps.push_back(std::move(step));
    }
    cases.push_back(std::move(rc));
  }
  return cases;
}

// The operations of `step`, its rule and subject prefixed with `prefix`
// (so that cases run on one store stay apart): *rule and *subject hold
// what the op views, `at_ms` its instant (null: the store's clock).
inline store::HoldOp HoldOpOf(const ReservationStep& step, const std::string& rule,
                              const std::string& subject, const int64_t* at_ms) {
  store::HoldOp op;
  op.rule = rule;
  op.subject = subject;
  op.id = step.id;
  op.tier = step.tier;
  op.estimate = step.estimate;
  op.ttl_ms = step.ttl_ms;
  op.at_ms = at_ms;
  return op;
}
inline store::TakeOp TakeOpOf(const ReservationStep& step, const std::string& rule,
                              const std::string& subject, const int64_t* at_ms) {
  return store::TakeOp{rule, subject, step.id, at_ms};
}

inline constexpr EnumName<store::TakeOutcome> kTakeOutcomeNames[] = {
    {store::TakeOutcome::kTaken, "taken"},
    {store::TakeOutcome::kSettled, "settled"},
    {store::TakeOutcome::kUnknown, "unknown"}};

inline std::string_view TakeOutcomeName(store::TakeOutcome outcome) {
  return ValueIn(kTakeOutcomeNames, outcome, "?");
}

// Compares what a ledger answered with a step's expectations (those
// present); `result` only for a take.
inline void ExpectReservationMatches(const ReservationStep& step, const Status& status,
                                     const store::TakeResult* result) {
  const auto& e = step.expect;
  if (e.contains("status")) {
    EXPECT_EQ(StatusCodeName(status.code()), e.at("status").get<std::string>())
        << status.ToString();
  }
  if (result == nullptr) return;
  if (e.contains("outcome")) {
    EXPECT_EQ(TakeOutcomeName(result->outcome), e.at("outcome").get<std::string>()) << "outcome";
  }
  if (e.contains("estimate")) {
    EXPECT_EQ(result->estimate, e.at("estimate").get<int64_t>()) << "estimate";
  }
  if (e.contains("tier")) {
    EXPECT_EQ(result->tier, e.at("tier").get<std::string>()) << "tier";
  }
}

}  // namespace floodgate::testing
