// A rule's `slices` option (config/slices_option.h): its defaults, its
// percentages, and each mistake's exact message, the algorithm's included.
#include <gtest/gtest.h>

#include <string>

#include "floodgate/config.h"
#include "testing/config_text.h"

namespace floodgate {
namespace {

using testing::Error;
using testing::Parse;

std::string Rule(const std::string& body) { return "rules:\n  api: " + body + "\n"; }

TEST(SlicesOptionTest, OffByDefaultAndBothKeysOptional) {
  EXPECT_FALSE(Parse(Rule("{ limits: 10/s }")).rules[0].slices.enabled());
  const SliceConfig defaults = Parse(Rule("{ limits: 10/s, slices: {} }")).rules[0].slices;
  EXPECT_EQ(defaults.max_share_ppm, 50'000);
  EXPECT_EQ(defaults.idle_return_ms, 2'000);
  const SliceConfig set =
      Parse(Rule("{ limits: [100000/minute], slices: { max_share: 12.5%, idle_return: 500ms } }"))
          .rules[0]
          .slices;
  EXPECT_EQ(set.max_share_ppm, 125'000);
  EXPECT_EQ(set.idle_return_ms, 500);
  EXPECT_EQ(
      Parse(Rule("{ limits: 10/s, slices: { max_share: 100% } }")).rules[0].slices.max_share_ppm,
      1'000'000);
  EXPECT_EQ(
      Parse(Rule("{ limits: 10/s, slices: { max_share: 0.0001% } }")).rules[0].slices.max_share_ppm,
      1);
}

TEST(SlicesOptionTest, MaxShareMustBeAPercentageAboveZeroAndAtMostAHundred) {
  EXPECT_EQ(Error(Rule("{ limits: 10/s, slices: { max_share: 0% } }")),
            "test.yaml:2:45: 'rules.api.slices.max_share' must be more than 0% and at most 100% "
            "of the limit (near '0%')");
  EXPECT_EQ(Error(Rule("{ limits: 10/s, slices: { max_share: 150% } }")),
            "test.yaml:2:45: 'rules.api.slices.max_share' must be more than 0% and at most 100% "
            "of the limit (near '150%')");
  for (const std::string bad : {"5", "1.23456%", "-5%"}) {
    EXPECT_EQ(Error(Rule("{ limits: 10/s, slices: { max_share: " + bad + " } }")),
              "test.yaml:2:45: 'rules.api.slices.max_share' must be a percentage of the limit "
              "like 5% (at most four decimals) (near '" +
                  bad + "')");
  }
}

TEST(SlicesOptionTest, IdleReturnAndUnknownKeys) {
  EXPECT_EQ(Error(Rule("{ limits: 10/s, slices: { idle_return: 0s } }")),
            "test.yaml:2:47: 'rules.api.slices.idle_return' must be from 1ms to 1d (near '0s')");
  EXPECT_EQ(Error(Rule("{ limits: 10/s, slices: { share: 5% } }")),
            "test.yaml:2:34: unknown key 'share' in rules.api.slices; expected max_share or "
            "idle_return (near 'share')");
  EXPECT_EQ(Error(Rule("{ limits: 10/s, slices: 5% }")),
            "test.yaml:2:32: 'rules.api.slices' must be a map, not a string (near 'slices')");
}

TEST(SlicesOptionTest, OnlyFixedWindowCanBeSliced) {
  for (const char* algorithm : {"token_bucket", "gcra", "sliding_window", "sliding_log"}) {
    SCOPED_TRACE(algorithm);
    EXPECT_EQ(Error(Rule(std::string("{ algorithm: ") + algorithm +
                         ", limits: 10/s, slices: { max_share: 5% } }")),
              std::string("test.yaml:2:") + std::to_string(37 + std::string(algorithm).size()) +
                  ": 'slices' needs algorithm: fixed_window, not " + algorithm +
                  " (a slice is units of one window: token_bucket and gcra refill continuously "
                  "and the sliding algorithms' windows overlap, so no slice of theirs can bound "
                  "what a fleet admits) (near 'slices')");
  }
  // The algorithm may come after the option.
  EXPECT_NE(Error(Rule("{ slices: {}, limits: 10/s, algorithm: gcra }")), "");
  EXPECT_EQ(Error(Rule("{ algorithm: concurrency, max_in_flight: 3, slices: {} }")),
            "test.yaml:2:52: 'slices' is not for algorithm: concurrency (it takes max_in_flight, "
            "lease_ttl, tiers of a max_in_flight each, on_backend_error, on_store_full and "
            "max_waiters) (near 'slices')");
}

}  // namespace
}  // namespace floodgate
