// The golden vectors on the embedded store, through the LimiterCore the
// public Limiter wraps (it has the refunds some steps make).
#include <gtest/gtest.h>

#include "api/open_services.h"
#include "service/limiter/blocking.h"
#include "service/limiter/limiter_core.h"
#include "testing/http_receiver.h"
#include "testing/vectors.h"

namespace floodgate {
namespace {

TEST(GoldenVectorsTest, EmbeddedStoreMatchesEveryStep) {
  const auto cases = testing::LoadVectors(testing::VectorsDir());
  ASSERT_GE(cases.size(), 10u);
  testing::HttpReceiver webhook;
  int steps = 0, alert_steps = 0, refund_steps = 0;
  for (const auto& vc : cases) {
    SCOPED_TRACE(vc.file + ": " + vc.name);
    Config config;
    config.rules.push_back(vc.rule);
    config.rules.back().alerts.webhook = webhook.url();
    config.alert_delivery.spool = "off";
    config.engine.sweep_interval_ms = 0;
    ManualClock clock;
    auto limiter_services = api::OpenServices(config, clock);
    ASSERT_TRUE(limiter_services.ok()) << limiter_services.status().ToString();
    service::LimiterCore* const limiter = (*limiter_services)->core.get();
    int64_t emitted = 0;
    for (size_t i = 0; i < vc.steps.size(); ++i) {
      SCOPED_TRACE("step " + std::to_string(i));
      const auto& step = vc.steps[i];
      clock.SetMs(step.t_ms);
      if (step.refund > 0) {
        auto r = service::RefundAndWait(*limiter, "r", step.key, step.refund, step.tier);
        ASSERT_TRUE(r.ok()) << r.status().ToString();
        ++refund_steps;
        testing::ExpectMatches(step, r->after);
        testing::ExpectRefunded(step, *r);
      } else {
        auto d = limiter->CheckAndWait("r", step.key, step.cost, step.tier);
        ASSERT_TRUE(d.ok()) << d.status().ToString();
        testing::ExpectMatches(step, *d);
      }
      // The events this step emitted, as the alerts' recent list has them.
      testing::ExpectAlerts(
          step, testing::Fired(testing::EmittedSince(*(*limiter_services)->alerts, &emitted)));
      ++steps;
      if (step.expect.contains("alerts")) ++alert_steps;
    }
  }
  EXPECT_GE(steps, 60);
  EXPECT_GE(alert_steps, 30);
  EXPECT_GE(refund_steps, 20);
}

}  // namespace
}  // namespace floodgate
