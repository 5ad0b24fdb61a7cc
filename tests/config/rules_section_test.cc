// The rules section (config/rules_section.h): a rule's fields and defaults,
// tiers, burst against the algorithm and the limits, each algorithm's
// bounds on a limit, and each mistake's exact message. Concurrency rules:
// concurrency_config_test.cc; a rule's alerts: alerts_section_test.cc.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "floodgate/config.h"
#include "testing/config_text.h"

namespace floodgate {
namespace {

using testing::Error;
using testing::L;
using testing::Parse;

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::StartsWith;

TEST(ParseConfigTest, RuleDefaults) {
  const Config c = Parse("rules:\n  r:\n    limits: 10/s\n");
  ASSERT_EQ(c.rules.size(), 1u);
  const Rule& r = c.rules[0];
  EXPECT_EQ(r.algorithm, Algorithm::kFixedWindow);
  EXPECT_THAT(r.limits, ElementsAre(L(10, 1, TimeUnit::kSecond)));
  EXPECT_TRUE(r.burst.empty());
  EXPECT_TRUE(r.tiers.empty());
  EXPECT_EQ(r.timezone, "UTC");
  EXPECT_FALSE(r.shadow);
  EXPECT_EQ(r.on_backend_error, OnBackendError::kAllow);
  EXPECT_EQ(r.on_store_full, OnStoreFull::kDeny);
}

TEST(ParseConfigTest, LimitsMayBeOneString) {
  const Config c = Parse("rules:\n  r:\n    limits: 3/5m\n    tiers: { gold: 30/5m }\n");
  EXPECT_THAT(c.rules[0].limits, ElementsAre(L(3, 5, TimeUnit::kMinute)));
  EXPECT_THAT(c.rules[0].tiers.at("gold"), ElementsAre(L(30, 5, TimeUnit::kMinute)));
}

TEST(ParseConfigTest, BooleanSpellings) {
  for (const char* t : {"true", "True", "TRUE", "yes", "on"}) {
    EXPECT_TRUE(
        Parse(std::string("rules: { r: { limits: 1/s, shadow: ") + t + " } }").rules[0].shadow)
        << t;
  }
  for (const char* f : {"false", "no", "Off"}) {
    EXPECT_FALSE(
        Parse(std::string("rules: { r: { limits: 1/s, shadow: ") + f + " } }").rules[0].shadow)
        << f;
  }
  EXPECT_EQ(Error("rules:\n  r:\n    limits: 1/s\n    shadow: maybe\n"),
            "test.yaml:4:13: 'rules.r.shadow' must be true or false (near 'maybe')");
}

TEST(ParseConfigTest, RulesKeepFileOrder) {
  const Config c =
      Parse("rules:\n  zeta: {limits: 1/s}\n  alpha: {limits: 1/s}\n  mid: {limits: 1/s}\n");
  ASSERT_EQ(c.rules.size(), 3u);
  EXPECT_EQ(c.rules[0].name, "zeta");
  EXPECT_EQ(c.rules[1].name, "alpha");
  EXPECT_EQ(c.rules[2].name, "mid");
}

TEST(ParseConfigErrorTest, ZeroCount) {
  EXPECT_EQ(Error("rules:\n"
                  "  api:\n"
                  "    limits: [0/minute]\n"),
            "test.yaml:3:14: limit \"0/minute\": count must be a positive integer "
            "(near '0/minute')");
}

TEST(ParseConfigErrorTest, SecondLimitInListIsPointedAt) {
  EXPECT_EQ(Error("rules:\n"
                  "  api:\n"
                  "    limits:\n"
                  "      - 60/minute\n"
                  "      - 5/0s\n"),
            "test.yaml:5:9: limit \"5/0s\": multiplier must be a positive integer (near '5/0s')");
}

TEST(ParseConfigErrorTest, UnknownUnit) {
  EXPECT_EQ(
      Error("rules:\n"
            "  api:\n"
            "    limits: 10/fortnight\n"),
      "test.yaml:3:13: limit \"10/fortnight\": unknown unit \"fortnight\" (expected ms, s (sec, "
      "second), m (min, minute), h (hr, hour), d (day), w (wk, week), mo (month) or y (yr, "
      "year); plurals accepted) (near '10/fortnight')");
}

TEST(ParseConfigErrorTest, BadLimitInTier) {
  EXPECT_EQ(Error("rules:\n"
                  "  api:\n"
                  "    limits: 10/s\n"
                  "    tiers:\n"
                  "      pro: [100/s, 10/parsec]\n"),
            "test.yaml:5:20: limit \"10/parsec\": unknown unit \"parsec\" (expected ms, s (sec, "
            "second), m (min, minute), h (hr, hour), d (day), w (wk, week), mo (month) or y (yr, "
            "year); plurals accepted) (near '10/parsec')");
}

TEST(ParseConfigErrorTest, UnknownAlgorithm) {
  EXPECT_EQ(Error("rules:\n"
                  "  api:\n"
                  "    algorithm: leaky_bucket\n"
                  "    limits: 10/s\n"),
            "test.yaml:3:16: unknown algorithm 'leaky_bucket'; expected fixed_window, "
            "sliding_window, sliding_log, token_bucket or gcra (near 'leaky_bucket')");
}

TEST(ParseConfigErrorTest, DuplicateRule) {
  EXPECT_EQ(Error("rules:\n"
                  "  api:\n"
                  "    limits: 10/s\n"
                  "  login:\n"
                  "    limits: 5/minute\n"
                  "  api:\n"
                  "    limits: 20/s\n"),
            "test.yaml:6:3: duplicate rule 'api' (first defined on line 2) (near 'api')");
}

TEST(ParseConfigErrorTest, BadTimezone) {
  EXPECT_EQ(Error("rules:\n"
                  "  reports:\n"
                  "    limits: 1000/month\n"
                  "    timezone: Mars/Olympus\n"),
            "test.yaml:4:15: unknown time zone \"Mars/Olympus\" (near 'Mars/Olympus')");
  EXPECT_EQ(Error("rules:\n  r:\n    limits: 1/d\n    timezone: \"+19:00\"\n"),
            "test.yaml:4:15: time zone \"+19:00\": UTC offset must be between -18:00 and +18:00 "
            "(near '+19:00')");
  EXPECT_EQ(Error("rules:\n  r:\n    limits: 1/d\n    timezone: ../../etc/passwd\n"),
            "test.yaml:4:15: unknown time zone \"../../etc/passwd\" (near '../../etc/passwd')");
}

TEST(ParseConfigErrorTest, BurstOnlyForTokenBucketAndGcra) {
  EXPECT_EQ(Error("rules:\n"
                  "  api:\n"
                  "    algorithm: fixed_window\n"
                  "    limits: 10/s\n"
                  "    burst: 5\n"),
            "test.yaml:5:5: 'burst' is only allowed with token_bucket and gcra, not fixed_window "
            "(near 'burst')");
  // The algorithm may come after burst; the default algorithm counts too.
  EXPECT_EQ(Error("rules:\n  api:\n    burst: 5\n    limits: 10/s\n    algorithm: sliding_log\n"),
            "test.yaml:3:5: 'burst' is only allowed with token_bucket and gcra, not sliding_log "
            "(near 'burst')");
  EXPECT_THAT(Error("rules:\n  api:\n    burst: 5\n    limits: 10/s\n"),
              HasSubstr("not fixed_window"));
}

TEST(ParseConfigErrorTest, BurstBounds) {
  const std::string tb = "rules:\n  r:\n    algorithm: token_bucket\n    limits: 10/s\n";
  EXPECT_EQ(Error(tb + "    burst: 0\n"),
            "test.yaml:5:12: token_bucket 'burst' must be between 1 and 1000000000000000 "
            "(near '0')");
  EXPECT_EQ(Parse(tb + "    burst: 1\n").rules[0].burst, std::vector<int64_t>{1});
  EXPECT_EQ(Error(tb + "    burst: -1\n"),
            "test.yaml:5:12: 'rules.r.burst' must be an integer between 0 and 1000000000000000 "
            "(near '-1')");
  EXPECT_EQ(Error(tb + "    burst: 1000000000000001\n"),
            "test.yaml:5:12: 'rules.r.burst' must be an integer between 0 and 1000000000000000 "
            "(near '1000000000000001')");
  EXPECT_EQ(Error(tb + "    burst: 1.5\n"),
            "test.yaml:5:12: 'rules.r.burst' must be an integer between 0 and 1000000000000000 "
            "(near '1.5')");
  const std::string gcra = "rules:\n  r:\n    algorithm: gcra\n    limits: 10/s\n";
  EXPECT_EQ(Parse(gcra + "    burst: 0\n").rules[0].burst, std::vector<int64_t>{0});
  EXPECT_EQ(Error(gcra + "    burst: [1, 1000000000000000]\n"),
            "test.yaml:5:16: gcra 'burst' must be between 0 and 999999999999999 "
            "(near '1000000000000000')");
}

TEST(ParseConfigErrorTest, BurstCountMustMatchLimits) {
  const std::string head =
      "rules:\n  r:\n    algorithm: token_bucket\n    limits: [10/s, 100/minute]\n";
  EXPECT_THAT(Parse(head + "    burst: 5\n").rules[0].burst, ElementsAre(5));
  EXPECT_THAT(Parse(head + "    burst: [5, 50]\n").rules[0].burst, ElementsAre(5, 50));
  EXPECT_EQ(Error(head + "    burst: [5, 50, 500]\n"),
            "test.yaml:5:5: 'burst' has 3 values but the rule has 2 limits; give one value, or one "
            "per limit (near 'burst')");
  EXPECT_EQ(Error(head + "    burst: [5, 50]\n    tiers:\n      pro: 100/s\n"),
            "test.yaml:7:7: tier 'pro' has 1 limits but 'burst' has 2 values (near 'pro')");
  EXPECT_EQ(Error(head + "    burst: []\n"),
            "test.yaml:5:12: 'rules.r.burst' is an empty list (near 'burst')");
}

TEST(ParseConfigErrorTest, TooManyLimits) {
  EXPECT_EQ(Error("rules:\n"
                  "  api:\n"
                  "    limits: [1/s, 2/s, 3/s, 4/s, 5/s, 6/s, 7/s, 8/s, 9/s]\n"),
            "test.yaml:3:54: 'rules.api.limits' has too many limits (at most 8) (near '9/s')");
  EXPECT_EQ(Parse("rules:\n  api:\n    limits: [1/s, 2/s, 3/s, 4/s, 5/s, 6/s, 7/s, 8/s]\n")
                .rules[0]
                .limits.size(),
            8u);
}

TEST(ParseConfigErrorTest, NoLimits) {
  EXPECT_EQ(Error("rules:\n  api:\n    algorithm: gcra\n"),
            "test.yaml:2:3: rule 'api' has no 'limits' (near 'api')");
  EXPECT_EQ(Error("rules:\n  api:\n    limits: []\n"),
            "test.yaml:3:13: 'rules.api.limits' needs at least one limit (near 'limits')");
}

TEST(ParseConfigErrorTest, RuleAndTierNames) {
  EXPECT_EQ(Error("rules:\n  \"my rule\": {limits: 1/s}\n"),
            "test.yaml:2:3: rule names are 1 to 64 characters of A-Z, a-z, 0-9, '_', '.', ':' or "
            "'-' (near 'my rule')");
  const std::string name64(64, 'n');
  EXPECT_EQ(Parse("rules:\n  " + name64 + ": {limits: 1/s}\n").rules[0].name, name64);
  EXPECT_THAT(Error("rules:\n  " + name64 + "n: {limits: 1/s}\n"),
              StartsWith("test.yaml:2:3: rule names are 1 to 64 characters"));
  EXPECT_EQ(Error("rules:\n  r:\n    limits: 1/s\n    tiers: {\"pro/x\": 2/s}\n"),
            "test.yaml:4:13: tier names are 1 to 64 characters of A-Z, a-z, 0-9, '_', '.', ':' or "
            "'-' (near 'pro/x')");
}

TEST(ParseConfigErrorTest, OnBackendError) {
  EXPECT_EQ(Error("rules:\n  r:\n    limits: 1/s\n    on_backend_error: retry\n"),
            "test.yaml:4:23: 'rules.r.on_backend_error' must be allow or deny (near 'retry')");
}

TEST(ParseConfigErrorTest, OnStoreFull) {
  EXPECT_EQ(Error("rules:\n  r:\n    limits: 1/s\n    on_store_full: evict\n"),
            "test.yaml:4:20: 'rules.r.on_store_full' must be allow or deny (near 'evict')");
  EXPECT_EQ(Error("rules:\n  r:\n    limits: 1/s\n    on_store_full: [deny]\n"),
            "test.yaml:4:20: 'rules.r.on_store_full' must be a string, not a list (near "
            "'on_store_full')");
  EXPECT_EQ(Error("rules:\n  r:\n    limits: 1/s\n    on_store_full: Deny\n"),
            "test.yaml:4:20: 'rules.r.on_store_full' must be allow or deny (near 'Deny')");
}

TEST(ParseConfigErrorTest, SlidingWindowProductBound) {
  // 2^43 x 1024 ms = 2^53 exactly: the last value that is exact in a double.
  const std::string head = "rules:\n  r:\n    algorithm: sliding_window\n    limits: ";
  EXPECT_EQ(Parse(head + "8796093022208/1024ms\n").rules.size(), 1u);
  EXPECT_EQ(Error(head + "8796093022209/1024ms\n"),
            "test.yaml:4:13: limit \"8796093022209/1024ms\" is too large: count x period must be "
            "at most 2^53 ms for sliding_window (near '8796093022209/1024ms')");
  // The same limit is fine for fixed_window, which never multiplies.
  EXPECT_EQ(Parse("rules:\n  r:\n    limits: 8796093022209/1024ms\n").rules.size(), 1u);
}

TEST(ParseConfigErrorTest, TokenBucketProductBound) {
  const std::string head = "rules:\n  r:\n    algorithm: token_bucket\n    limits: 1/1024ms\n";
  EXPECT_EQ(Parse(head + "    burst: 8796093022208\n").rules.size(), 1u);
  EXPECT_EQ(Error(head + "    burst: 8796093022209\n"),
            "test.yaml:4:13: limit \"1/1024ms\" is too large: max(count, burst) x period must be "
            "at most 2^53 ms for token_bucket (near '1/1024ms')");
}

TEST(ParseConfigErrorTest, GcraBounds) {
  // 1/1024ms: emission interval 1024000 us; 2^52 / 1024000 = 4398046511.1.
  const std::string head = "rules:\n  r:\n    algorithm: gcra\n    limits: 1/1024ms\n";
  EXPECT_EQ(Parse(head + "    burst: 4398046510\n").rules.size(), 1u);
  EXPECT_EQ(Error(head + "    burst: 4398046511\n"),
            "test.yaml:4:13: limit \"1/1024ms\" is too large: period / count x (burst + 1) must be "
            "at most 2^52 us for gcra (near '1/1024ms')");
  // Finer than a microsecond per unit: gcra's integer emission interval would be 0.
  EXPECT_EQ(Parse("rules: {r: {algorithm: gcra, limits: 1000/ms}}").rules.size(), 1u);
  EXPECT_EQ(Error("rules: {r: {algorithm: gcra, limits: 1001/ms}}"),
            "test.yaml:1:38: limit \"1001/ms\" is too large: gcra needs at least 1 us per unit "
            "(period / count) (near '1001/ms')");
}

TEST(ParseConfigErrorTest, SlidingLogCountBound) {
  const std::string head = "rules:\n  r:\n    algorithm: sliding_log\n    limits: [1/s, ";
  EXPECT_EQ(Parse(head + "100000/day]\n").rules.size(), 1u);
  EXPECT_EQ(
      Error(head + "100001/day]\n"),
      "test.yaml:4:19: limit \"100001/day\" is too large: sliding_log keeps one timestamp per "
      "request, so count must be at most 100000 (near '100001/day')");
  // Tier limits obey the same bounds.
  EXPECT_EQ(
      Error("rules:\n  r:\n    algorithm: sliding_log\n    limits: 1/s\n"
            "    tiers: {big: 200000/day}\n"),
      "test.yaml:5:18: limit \"200000/day\" is too large: sliding_log keeps one timestamp per "
      "request, so count must be at most 100000 (near '200000/day')");
}

}  // namespace
}  // namespace floodgate
