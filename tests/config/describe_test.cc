// DescribeConfig (config/describe.cc): the summary check-config prints,
// line by line, with and without each optional part.
#include <gtest/gtest.h>

#include "floodgate/config.h"
#include "testing/config_text.h"

namespace floodgate {
namespace {

using testing::kSpecExample;
using testing::Parse;

TEST(DescribeConfigTest, SpecExample) {
  EXPECT_EQ(DescribeConfig(Parse(kSpecExample)),
            "store: memory\n"
            "rules (2):\n"
            "  api: sliding_window 60/minute, 5000/day; tiers: pro=600/minute, 100000/day; "
            "on_backend_error=allow; on_store_full=deny; alerts at 80%, 100% to "
            "http://127.0.0.1:9000/quota (secret_env=FG_ALERT_SECRET)\n"
            "  otp_issue: sliding_log 3/5m; on_backend_error=allow; on_store_full=deny\n"
            "otp: digits=6, ttl=300000ms, issue_limit=3/5m, verify_limit=5/15m, "
            "max_live_codes=3, secret_env=FG_OTP_SECRET\n"
            "envoy_ratelimit: /etc/ratelimit/config.yaml (fixed_window)\n");
}

TEST(DescribeConfigTest, EveryOptionalPart) {
  const Config c = Parse(R"(
store: redis://cache:6379
rules:
  up:
    algorithm: token_bucket
    limits: [100/minute, 1000/hour]
    burst: [20, 200]
    tiers: { free: [10/minute, 100/hour], pro: [1000/minute, 10000/hour] }
    shadow: true
    on_backend_error: deny
  reports:
    limits: 2/3month
    timezone: Europe/Berlin
)");
  EXPECT_EQ(DescribeConfig(c),
            "store: redis://cache:6379\n"
            "rules (2):\n"
            "  up: token_bucket 100/minute, 1000/hour; burst=20, 200; tiers: free=10/minute, "
            "100/hour; pro=1000/minute, 10000/hour; shadow; on_backend_error=deny; "
            "on_store_full=deny\n"
            "  reports: fixed_window 2/3month; timezone=Europe/Berlin; on_backend_error=allow; "
            "on_store_full=deny\n");
}

TEST(DescribeConfigTest, OnStoreFullAndEngineBounds) {
  const Config c = Parse(R"(
engine: { max_entries: 5000, max_memory: 64mb }
rules:
  open: { limits: 10/s, on_store_full: allow }
)");
  EXPECT_EQ(DescribeConfig(c),
            "store: memory\n"
            "engine: max_entries=5000, max_memory=67108864 bytes\n"
            "rules (1):\n"
            "  open: fixed_window 10/second; on_backend_error=allow; on_store_full=allow\n");
}

TEST(DescribeConfigTest, EngineBoundsWhenNotTheDefaults) {
  EXPECT_EQ(DescribeConfig(Parse("engine: { max_entries: 5000, max_memory: 64mb }\n")),
            "store: memory\n"
            "engine: max_entries=5000, max_memory=67108864 bytes\n"
            "rules (0):\n");
}

TEST(DescribeConfigTest, NoRules) {
  EXPECT_EQ(DescribeConfig(Parse("")), "store: memory\nrules (0):\n");
}

TEST(DescribeConfigTest, PriorityClassesInTheConfigsOrder) {
  const Config c = Parse(R"(
rules:
  api: { limits: 100/minute, priorities: { critical: 0%, default: 20%, batch: 40% } }
)");
  EXPECT_EQ(DescribeConfig(c),
            "store: memory\n"
            "rules (1):\n"
            "  api: fixed_window 100/minute; priorities critical=0% default=20% batch=40%; "
            "on_backend_error=allow; on_store_full=deny\n");
}

}  // namespace
}  // namespace floodgate
