// Concurrency rules and max_waiters in the config: the valid shapes, the
// defaults, and a clear error for each field that does not belong.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "floodgate/config.h"
#include "testing/config_text.h"

namespace floodgate {
namespace {

using testing::Error;
using testing::Parse;

using ::testing::HasSubstr;

TEST(ConcurrencyConfigTest, FieldsTiersAndDefaults) {
  const Config c = Parse(R"(
rules:
  exports: { algorithm: concurrency, max_in_flight: 10, lease_ttl: 45s, tiers: { pro: 25, off: 0 } }
  sms: { algorithm: concurrency, max_in_flight: 3 }
  api: { algorithm: gcra, limits: [10/s], max_waiters: 5 }
)");
  ASSERT_EQ(c.rules.size(), 3u);
  const Rule& exports = c.rules[0];
  EXPECT_TRUE(exports.is_concurrency());
  EXPECT_EQ(exports.max_in_flight(), 10);
  EXPECT_EQ(exports.lease_ttl_ms(), 45'000);
  EXPECT_EQ(exports.tiers.at("pro").at(0).count, 25);
  EXPECT_EQ(exports.tiers.at("off").at(0).count, 0);
  EXPECT_EQ(exports.max_waiters, kDefaultMaxWaiters);
  EXPECT_EQ(c.rules[1].lease_ttl_ms(), 30'000);  // the default
  EXPECT_EQ(c.rules[2].max_waiters, 5);
  EXPECT_THAT(DescribeConfig(c),
              HasSubstr("exports: concurrency max_in_flight=10, lease_ttl=45000ms"));
  EXPECT_THAT(DescribeConfig(c), HasSubstr("tiers: off=0; pro=25"));
}

TEST(ConcurrencyConfigTest, ClearErrors) {
  EXPECT_THAT(Error("rules:\n  e: { algorithm: concurrency }\n"), HasSubstr("no 'max_in_flight'"));
  EXPECT_THAT(Error("rules:\n  e: { algorithm: concurrency, max_in_flight: 3, limits: [1/s] }\n"),
              HasSubstr("'limits' is not for algorithm: concurrency"));
  EXPECT_THAT(
      Error("rules:\n  e: { algorithm: concurrency, max_in_flight: 3, alerts: { thresholds: [50], "
            "webhook: \"http://127.0.0.1:1/\" } }\n"),
      HasSubstr("'alerts' is not for algorithm: concurrency"));
  EXPECT_THAT(Error("rules:\n  e: { algorithm: concurrency, max_in_flight: 100001 }\n"),
              HasSubstr("max_in_flight"));
  EXPECT_THAT(Error("rules:\n  e: { algorithm: concurrency, max_in_flight: -1 }\n"),
              HasSubstr("max_in_flight"));
  EXPECT_THAT(Error("rules:\n  e: { algorithm: concurrency, max_in_flight: 3, lease_ttl: 2d }\n"),
              HasSubstr("lease_ttl"));
  EXPECT_THAT(
      Error("rules:\n  e: { algorithm: concurrency, max_in_flight: 3, tiers: { pro: [1/s] } }\n"),
      HasSubstr("a tier of a concurrency rule is its max_in_flight"));
  EXPECT_THAT(Error("rules:\n  a: { algorithm: gcra, limits: [1/s], max_in_flight: 3 }\n"),
              HasSubstr("'max_in_flight' and 'lease_ttl' are for algorithm: concurrency"));
  EXPECT_THAT(Error("rules:\n  a: { algorithm: gcra, limits: [1/s], tiers: { pro: 5 } }\n"),
              HasSubstr("tier 'pro' must be limits"));
  EXPECT_THAT(Error("rules:\n  a: { algorithm: gcra, limits: [1/s], max_waiters: -2 }\n"),
              HasSubstr("max_waiters"));
}

TEST(ConcurrencyConfigTest, AnOverridesLimitIsItsMaxInFlight) {
  const Config c = Parse("rules:\n  e: { algorithm: concurrency, max_in_flight: 3 }\n");
  Result<Limit> l = ParseLimitOf(c.rules[0], "20");
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  EXPECT_EQ(l->count, 20);
  EXPECT_EQ(LimitTextOf(c.rules[0], *l), "20");
  EXPECT_FALSE(ParseLimitOf(c.rules[0], "20/s").ok());
  EXPECT_FALSE(ParseLimitOf(c.rules[0], "-1").ok());
  EXPECT_FALSE(ParseLimitOf(c.rules[0], "").ok());
}

}  // namespace
}  // namespace floodgate
