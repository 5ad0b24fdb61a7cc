// Golden lease vectors (tests/vectors/concurrency.json): traces of lease
// operations on concurrency rules with what each must answer. Every store
// must reproduce them, as core/concurrency.h does.
//
// File format: {"cases": [{"name", "rule": {"algorithm": "concurrency",
// "max_in_flight", "lease_ttl_ms"}, "steps": [{"t", "op" (acquire, release
// or renew), "lease", "key"?, "ttl_ms"?, "max_in_flight"?, expected
// fields…}]}]}. A step's ttl_ms and max_in_flight default to the rule's
// (a step's max_in_flight stands for a tier or an override); its key (the
// subject) to "subject". Expected fields are any of ok, in_flight, ms and
// expired (the leases the step found expired: only where a store reports
// it); absent ones are not checked.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "store/lease_ops.h"
#include "testing/vectors.h"

namespace floodgate::testing {

struct LeaseStep {
  int64_t t_ms = 0;
  store::LeaseOpKind kind = store::LeaseOpKind::kAcquire;
  std::string lease;
  std::string key = "subject";
  int64_t ttl_ms = 0;
  int64_t max_in_flight = 0;
  nlohmann::json expect;
};

struct LeaseCase {
  std::string name;
  int64_t max_in_flight = 0;
  int64_t lease_ttl_ms = 0;
  std::vector<LeaseStep> steps;
};

inline std::string LeaseVectorsFile() { return VectorsDir() + "/concurrency.json"; }

inline std::vector<LeaseCase> LoadLeaseVectors() {
  std::vector<LeaseCase> cases;
  std::ifstream in(LeaseVectorsFile());
  EXPECT_TRUE(in.good()) << "cannot read " << LeaseVectorsFile();
  if (!in.good()) return cases;
  const auto doc = nlohmann::json::parse(in);
  for (const auto& c : doc.at("cases")) {
    LeaseCase lc;
    lc.name = c.at("name").get<std::string>();
    const auto& r = c.at("rule");
    EXPECT_EQ(r.at("algorithm").get<std::string>(), "concurrency") << lc.name;
    lc.max_in_flight = r.at("max_in_flight").get<int64_t>();
    lc.lease_ttl_ms = r.at("lease_ttl_ms").get<int64_t>();
    for (const auto& s : c.at("steps")) {
      LeaseStep step;
      step.t_ms = s.at("t").get<int64_t>();
      const std::string op = s.at("op").get<std::string>();
      if (op == "acquire") {
        step.kind = store::LeaseOpKind::kAcquire;
      } else if (op == "release") {
        step.kind = store::LeaseOpKind::kRelease;
      } else if (op == "renew") {
        step.kind = store::LeaseOpKind::kRenew;
      } else {
        ADD_FAILURE() << lc.name << ": unknown op " << op;
      }
      step.lease = s.at("lease").get<std::string>();
      if (s.contains("key")) step.key = s.at("key").get<std::string>();
      step.ttl_ms = s.value("ttl_ms", lc.lease_ttl_ms);
      step.max_in_flight = s.value("max_in_flight", lc.max_in_flight);
      step.expect = s;
      lc.steps.push_back(std::move(step));
    }
    cases.push_back(std::move(lc));
  }
  return cases;
}

// The operation of `step` on rule `rule` (its subject prefixed with
// `prefix`): `*subject` and `*at_ms` hold what the op views.
inline store::LeaseOp LeaseOpOf(const LeaseStep& step, std::string_view rule,
                                const std::string& subject, const int64_t* at_ms) {
  store::LeaseOp op;
  op.kind = step.kind;
  op.rule = rule;
  op.subject = subject;
  op.lease = step.lease;
  op.ttl_ms = step.kind == store::LeaseOpKind::kRelease ? 0 : step.ttl_ms;
  op.max_in_flight = step.kind == store::LeaseOpKind::kAcquire ? step.max_in_flight : 0;
  op.at_ms = at_ms;
  return op;
}

// Compares what a store answered with a step's expectations (those
// present); `expired` only when the store reports it (not null).
inline void ExpectLeaseMatches(const LeaseStep& step, bool ok, int64_t in_flight, int64_t ms,
                               const int64_t* expired = nullptr) {
  const auto& e = step.expect;
  if (e.contains("ok")) {
    EXPECT_EQ(ok, e.at("ok").get<bool>()) << "ok";
  }
  if (e.contains("in_flight")) {
    EXPECT_EQ(in_flight, e.at("in_flight").get<int64_t>()) << "in_flight";
  }
  if (e.contains("ms")) {
    EXPECT_EQ(ms, e.at("ms").get<int64_t>()) << "ms";
  }
  if (expired != nullptr && e.contains("expired")) {
    EXPECT_EQ(*expired, e.at("expired").get<int64_t>()) << "expired";
  }
}

}  // namespace floodgate::testing
