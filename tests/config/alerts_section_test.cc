// Quota alerts in the config (config/alerts_section.h): a rule's `alerts`
// and the `alert_delivery` section, their values and defaults, and each
// mistake's exact message.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "floodgate/config.h"
#include "testing/config_text.h"

namespace floodgate {
namespace {

using testing::Error;
using testing::Parse;

using ::testing::ElementsAre;

TEST(ParseConfigTest, Alerts) {
  const Config c = Parse(R"(
rules:
  api:
    limits: [60/minute, 5000/day]
    alerts:
      thresholds: 90
      webhook: http://hooks.internal:9000/quota?src=fg
      secret_env: QUOTA_HOOK_SECRET
alert_delivery:
  queue_size: 50
  workers: 4
  timeout_ms: 1500
  retry_for: 2h
  backoff_initial: 200ms
  backoff_max: 30s
  spool: /tmp/fg/alerts.spool
  recent: 20
  stream_max_len: 5000
  claim_after: 2m
)");
  ASSERT_EQ(c.rules.size(), 1u);
  const AlertConfig& a = c.rules[0].alerts;
  EXPECT_THAT(a.thresholds, ElementsAre(90));
  EXPECT_EQ(a.webhook, "http://hooks.internal:9000/quota?src=fg");
  EXPECT_EQ(a.secret_env, "QUOTA_HOOK_SECRET");
  const AlertDeliveryConfig& d = c.alert_delivery;
  EXPECT_EQ(d.queue_size, 50);
  EXPECT_EQ(d.workers, 4);
  EXPECT_EQ(d.timeout_ms, 1500);
  EXPECT_EQ(d.retry_for_ms, 7'200'000);
  EXPECT_EQ(d.backoff_initial_ms, 200);
  EXPECT_EQ(d.backoff_max_ms, 30'000);
  EXPECT_EQ(d.spool, "/tmp/fg/alerts.spool");
  EXPECT_EQ(d.recent, 20);
  EXPECT_EQ(d.stream_max_len, 5000);
  EXPECT_EQ(d.claim_after_ms, 120'000);

  const AlertDeliveryConfig defaults = Parse("").alert_delivery;
  EXPECT_EQ(defaults.retry_for_ms, 86'400'000);  // a day
  EXPECT_EQ(defaults.queue_size, 10'000);
  EXPECT_TRUE(defaults.spool.empty());
}

TEST(ParseConfigTest, BadAlertsAreRefusedWithTheirPlace) {
  const std::string head = "rules:\n  api:\n    limits: 10/s\n";
  EXPECT_EQ(Error(head + "    alerts: { webhook: http://h/ }\n"),
            "test.yaml:4:5: 'rules.api.alerts' needs thresholds, e.g. [80, 100] (near 'alerts')");
  EXPECT_EQ(Error(head + "    alerts: { thresholds: [80] }\n"),
            "test.yaml:4:5: 'rules.api.alerts' needs a webhook (http://host:port/path) (near "
            "'alerts')");
  EXPECT_EQ(Error(head + "    alerts: { thresholds: [80, 0], webhook: http://h/ }\n"),
            "test.yaml:4:32: 'rules.api.alerts.thresholds' must be an integer between 1 and 100 "
            "(near '0')");
  EXPECT_EQ(Error(head + "    alerts: { thresholds: [80, 101], webhook: http://h/ }\n"),
            "test.yaml:4:32: 'rules.api.alerts.thresholds' must be an integer between 1 and 100 "
            "(near '101')");
  EXPECT_EQ(Error(head + "    alerts: { thresholds: [90, 80], webhook: http://h/ }\n"),
            "test.yaml:4:32: 'rules.api.alerts.thresholds' must be in increasing order, each "
            "once (near '80')");
  EXPECT_EQ(Error(head + "    alerts: { thresholds: [80, 80], webhook: http://h/ }\n"),
            "test.yaml:4:32: 'rules.api.alerts.thresholds' must be in increasing order, each "
            "once (near '80')");
  EXPECT_EQ(Error(head + "    alerts: { thresholds: [], webhook: http://h/ }\n"),
            "test.yaml:4:27: 'rules.api.alerts.thresholds' is an empty list (near "
            "'thresholds')");
  EXPECT_EQ(
      Error(head + "    alerts: { thresholds: [1, 2, 3, 4, 5, 6, 7, 8, 9], webhook: http://h/ }\n"),
      "test.yaml:4:52: 'rules.api.alerts.thresholds' has too many thresholds (at most 8) "
      "(near '9')");
  EXPECT_EQ(Error(head + "    alerts: { thresholds: 80%, webhook: http://h/ }\n"),
            "test.yaml:4:27: 'rules.api.alerts.thresholds' must be an integer between 1 and 100 "
            "(near '80%')");
  EXPECT_EQ(Error(head + "    alerts: { thresholds: 80, webhook: https://h/ }\n"),
            "test.yaml:4:40: 'rules.api.alerts.webhook': URL \"https://h/\": https is not "
            "supported; deliver through a local relay on http:// (near 'https://h/')");
  EXPECT_EQ(Error(head + "    alerts: { thresholds: 80, webhook: http://h/, secret: x }\n"),
            "test.yaml:4:51: the webhook secret does not go in the file: put it in an "
            "environment variable and name that with 'rules.api.alerts.secret_env' (near "
            "'secret')");
  EXPECT_EQ(Error(head + "    alerts: { thresholds: 80, webhook: http://h/, secret_env: 1X }\n"),
            "test.yaml:4:63: 'rules.api.alerts.secret_env' must name an environment variable "
            "([A-Za-z_][A-Za-z0-9_]*) (near '1X')");
  EXPECT_EQ(Error(head + "    alerts: { thresholds: 80, webhook: http://h/, email: a@b }\n"),
            "test.yaml:4:51: unknown key 'email' in rules.api.alerts; expected thresholds, "
            "webhook or secret_env (near 'email')");
  EXPECT_EQ(Error("alert_delivery: { retry_for: 24 }\n"),
            "test.yaml:1:30: 'alert_delivery.retry_for' must be a number and a unit, e.g. 500ms, "
            "30s, 5m, 1h or 7d (near '24')");
  EXPECT_EQ(Error("alert_delivery: { workers: 0 }\n"),
            "test.yaml:1:28: 'alert_delivery.workers' must be an integer between 1 and 64 (near "
            "'0')");
  EXPECT_EQ(Error("alert_delivery: { backoff_initial: 2m, backoff_max: 1m }\n"),
            "test.yaml:1:1: 'alert_delivery.backoff_initial' must not exceed "
            "'alert_delivery.backoff_max' (near 'alert_delivery')");
  EXPECT_EQ(Error("alert_delivery: { spool: '' }\n"),
            "test.yaml:1:26: 'alert_delivery.spool' must be a file path (near '')");
  EXPECT_EQ(Error("alert_delivery: { retries: 3 }\n"),
            "test.yaml:1:19: unknown key 'retries' in alert_delivery; expected queue_size, "
            "workers, timeout_ms, retry_for, backoff_initial, backoff_max, spool, recent, "
            "stream_max_len or claim_after (near 'retries')");
}

}  // namespace
}  // namespace floodgate
