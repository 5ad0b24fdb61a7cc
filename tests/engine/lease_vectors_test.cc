// The golden lease vectors (tests/vectors/concurrency.json) on core's
// lease functions over an ExpiringSet (every field, `expired` included),
// and on the embedded store through its LeaseStore at each step's instant.
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>
#include <utility>

#include "core/concurrency.h"
#include "core/rule_eval.h"
#include "engine/embedded_store.h"
#include "engine/expiring_set.h"
#include "floodgate/clock.h"
#include "floodgate/config.h"
#include "testing/lease_vectors.h"

namespace floodgate {
namespace {

core::LeaseOutcome RunCore(engine::ExpiringSet& table, const testing::LeaseStep& step) {
  switch (step.kind) {
    case store::LeaseOpKind::kAcquire:
      return core::AcquireLease(table, step.lease, step.t_ms, step.ttl_ms, step.max_in_flight);
    case store::LeaseOpKind::kRelease:
      return core::ReleaseLease(table, step.lease, step.t_ms);
    case store::LeaseOpKind::kRenew:
      return core::RenewLease(table, step.lease, step.t_ms, step.ttl_ms);
  }
  return {};
}

TEST(LeaseVectorsTest, CoreOverAnExpiringSetMatchesEveryStep) {
  const auto cases = testing::LoadLeaseVectors();
  ASSERT_GE(cases.size(), 8u);
  int steps = 0, refused = 0, expired = 0;
  for (const auto& lc : cases) {
    SCOPED_TRACE(lc.name);
    std::map<std::string, engine::ExpiringSet> tables;  // by subject
    for (size_t i = 0; i < lc.steps.size(); ++i) {
      SCOPED_TRACE("step " + std::to_string(i));
      const auto& step = lc.steps[i];
      const core::LeaseOutcome out = RunCore(tables[step.key], step);
      testing::ExpectLeaseMatches(step, out.ok, out.in_flight, out.ms, &out.expired);
      ++steps;
      if (step.kind == store::LeaseOpKind::kAcquire && !out.ok) ++refused;
      if (step.expect.contains("expired")) ++expired;
    }
  }
  EXPECT_GE(steps, 60);
  EXPECT_GE(refused, 15);
  EXPECT_GE(expired, 20);
}

TEST(LeaseVectorsTest, EmbeddedStoreMatchesEveryStep) {
  const auto cases = testing::LoadLeaseVectors();
  ASSERT_GE(cases.size(), 8u);
  EngineConfig config;
  config.sweep_interval_ms = 0;
  config.shards = 4;
  ManualClock clock;  // never read: every step has its instant
  store::Rooms rooms =
      engine::EmbeddedStore::RoomsOf(std::make_unique<engine::EmbeddedStore>(config, clock));
  int steps = 0, index = 0;
  for (const auto& lc : cases) {
    SCOPED_TRACE(lc.name);
    // A rule of its own per case: no case sees another's leases.
    const std::string rule = "r" + std::to_string(index++);
    for (size_t i = 0; i < lc.steps.size(); ++i) {
      SCOPED_TRACE("step " + std::to_string(i));
      const auto& step = lc.steps[i];
      const store::LeaseOp op = testing::LeaseOpOf(step, rule, step.key, &step.t_ms);
      store::LeaseResult result;
      Status status;
      const store::Answer answer = rooms.leases->Lease(op, &result, &status, [&]() {
        ADD_FAILURE() << "the embedded store answers now";
        return store::Done<store::LeaseResult>();
      });
      ASSERT_EQ(answer, store::Answer::kNow);
      ASSERT_TRUE(status.ok()) << status.ToString();
      EXPECT_EQ(result.now_ms, step.t_ms);
      testing::ExpectLeaseMatches(step, result.ok, result.in_flight, result.ms);
      ++steps;
    }
  }
  EXPECT_GE(steps, 60);
  // Every case ends with its tables gone or expiring; none leaks into the
  // next (checked above by the rule names), and a sweep far ahead frees all.
  rooms.store->SweepExpired(int64_t{1} << 50);
  EXPECT_EQ(rooms.store->GetUsage().entries, 0);
}

// The service describes every rule, a concurrency one too: it must be
// accepted, and the ids of the rules after it stay in step.
TEST(LeaseVectorsTest, TheEmbeddedStoreDescribesAConcurrencyRule) {
  EngineConfig config;
  config.sweep_interval_ms = 0;
  ManualClock clock(1'700'000'000'000);
  engine::EmbeddedStore store(config, clock);
  Rule jobs;
  jobs.name = "jobs";
  jobs.algorithm = Algorithm::kConcurrency;
  jobs.limits = {ConcurrencyLimit(2, 1000)};
  auto compiled_jobs = core::CompileRule(jobs, "", jobs.limits);
  ASSERT_TRUE(compiled_jobs.ok()) << compiled_jobs.status().ToString();
  ASSERT_TRUE(store.Describe(*compiled_jobs, store::kFirstRuleId).ok());
  Rule api;
  api.name = "api";
  api.limits = {*ParseLimit("1/minute")};
  auto compiled_api = core::CompileRule(api, "", api.limits);
  ASSERT_TRUE(compiled_api.ok());
  ASSERT_TRUE(store.Describe(*compiled_api, store::kFirstRuleId + 1).ok());
  store::CheckOp check;
  check.variant = {&*compiled_api, store::kFirstRuleId + 1, ""};
  check.subject = "alice";
  Decision d;
  Status s;
  auto never = [&]() {
    ADD_FAILURE() << "the embedded store answers now";
    return store::CheckDone();
  };
  ASSERT_EQ(store.Check(check, &d, &s, never, nullptr), store::Answer::kNow);
  EXPECT_TRUE(s.ok() && d.allowed);
  ASSERT_EQ(store.Check(check, &d, &s, never, nullptr), store::Answer::kNow);
  EXPECT_TRUE(s.ok() && !d.allowed);
  // A check of the concurrency rule, which the service never sends, is
  // a denial that keeps nothing.
  check.variant = {&*compiled_jobs, store::kFirstRuleId, ""};
  ASSERT_EQ(store.Check(check, &d, &s, never, nullptr), store::Answer::kNow);
  EXPECT_TRUE(s.ok());
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.retry_after_ms, -1);
  EXPECT_EQ(store.GetUsage().entries, 1);  // alice's state of api alone
}

}  // namespace
}  // namespace floodgate
