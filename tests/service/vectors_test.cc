// The golden vectors on the embedded store, through the public Limiter.
#include <gtest/gtest.h>

#include "floodgate/limiter.h"
#include "testing/vectors.h"

namespace floodgate {
namespace {

TEST(GoldenVectorsTest, EmbeddedStoreMatchesEveryStep) {
  const auto cases = testing::LoadVectors(testing::VectorsDir());
  ASSERT_GE(cases.size(), 10u);
  int steps = 0;
  for (const auto& vc : cases) {
    SCOPED_TRACE(vc.file + ": " + vc.name);
    Config config;
    config.rules.push_back(vc.rule);
    config.engine.sweep_interval_ms = 0;
    ManualClock clock;
    auto limiter = Limiter::Create(config, clock);
    ASSERT_TRUE(limiter.ok()) << limiter.status().ToString();
    for (size_t i = 0; i < vc.steps.size(); ++i) {
      SCOPED_TRACE("step " + std::to_string(i));
      const auto& step = vc.steps[i];
      clock.SetMs(step.t_ms);
      auto d = (*limiter)->Check("r", step.key, step.cost, step.tier);
      ASSERT_TRUE(d.ok()) << d.status().ToString();
      testing::ExpectMatches(step, *d);
      ++steps;
    }
  }
  EXPECT_GE(steps, 60);
}

}  // namespace
}  // namespace floodgate
