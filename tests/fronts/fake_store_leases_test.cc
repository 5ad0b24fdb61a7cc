// The fake store's leases (tests/testing/fake_store.h) on the golden lease
// vectors, so that tests of the layers above on it see leases as the real
// stores keep them; and its "later:" subjects answered from its thread.
#include <gtest/gtest.h>

#include <future>
#include <string>

#include "floodgate/clock.h"
#include "testing/fake_store.h"
#include "testing/lease_vectors.h"

namespace floodgate {
namespace {

std::pair<Status, store::LeaseResult> LeaseAndWait(store::LeaseStore& store,
                                                   const store::LeaseOp& op,
                                                   store::Answer* answer) {
  std::promise<std::pair<Status, store::LeaseResult>> done;
  store::LeaseResult result;
  Status status;
  *answer = store.Lease(op, &result, &status, [&done]() -> store::Done<store::LeaseResult> {
    return [&done](const Status& s, const store::LeaseResult& r) { done.set_value({s, r}); };
  });
  if (*answer == store::Answer::kNow) return {status, result};
  return done.get_future().get();
}

TEST(FakeStoreLeasesTest, MatchesTheLeaseVectorsNowAndLater) {
  const auto cases = testing::LoadLeaseVectors();
  ASSERT_GE(cases.size(), 8u);
  ManualClock clock;
  testing::FakeStore store(clock);
  int steps = 0, index = 0;
  for (const char* prefix : {"", "later:"}) {
    for (const auto& lc : cases) {
      SCOPED_TRACE(std::string(prefix) + lc.name);
      const std::string rule = "r" + std::to_string(index++);
      for (size_t i = 0; i < lc.steps.size(); ++i) {
        SCOPED_TRACE("step " + std::to_string(i));
        const auto& step = lc.steps[i];
        const std::string subject = prefix + step.key;
        store::Answer answer;
        const auto [s, r] =
            LeaseAndWait(store, testing::LeaseOpOf(step, rule, subject, &step.t_ms), &answer);
        EXPECT_EQ(answer, *prefix == '\0' ? store::Answer::kNow : store::Answer::kLater);
        ASSERT_TRUE(s.ok()) << s.ToString();
        EXPECT_EQ(r.now_ms, step.t_ms);
        testing::ExpectLeaseMatches(step, r.ok, r.in_flight, r.ms);
        ++steps;
      }
    }
  }
  EXPECT_GE(steps, 120);
  EXPECT_EQ(store.leases_made(), steps);
}

}  // namespace
}  // namespace floodgate
