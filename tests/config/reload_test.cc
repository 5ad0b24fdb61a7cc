// What a reload may change (src/config/reload.cc): a config that serves
// nothing is refused, the restart-only sections a reload leaves alone are
// named, and so are the rules it removes; and the durations such sections
// hold are refused with their range, not a spelling hint.
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
using ::testing::HasSubstr;
using ::testing::IsEmpty;

constexpr char kOneRule[] = "rules: { api: { algorithm: fixed_window, limits: [10/s] } }\n";

TEST(CheckServesSomethingTest, AnEmptyFileOrOnlyACommentServesNothing) {
  for (const char* yaml : {"", "# nothing yet\n", "rules: {}\n", "store: memory\n"}) {
    const Status s = CheckServesSomething(Parse(yaml), 0);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << yaml;
    EXPECT_THAT(s.message(), HasSubstr("test.yaml: no rules")) << yaml;
  }
}

TEST(CheckServesSomethingTest, ARuleAnEnvoyDomainOrASetsOrOtpSectionServes) {
  EXPECT_TRUE(CheckServesSomething(Parse(kOneRule), 0).ok());
  EXPECT_TRUE(CheckServesSomething(Parse("rules: {}\n"), 1).ok());
  EXPECT_TRUE(CheckServesSomething(Parse("sets: { max_members: 3 }\n"), 0).ok());
  EXPECT_TRUE(CheckServesSomething(Parse("otp: { digits: 6 }\n"), 0).ok());
}

TEST(RestartOnlyChangesTest, NamesTheSectionsAReloadDoesNotApply) {
  const Config running = Parse(std::string(kOneRule) + "data_dir: /var/lib/a\n");
  EXPECT_THAT(RestartOnlyChanges(running, running), IsEmpty());
  const Config fresh = Parse(
      "rules: { api: { algorithm: fixed_window, limits: [20/s] } }\n"
      "data_dir: /var/lib/b\n"
      "admin: { token_env: FG_ADMIN }\n"
      "listen: { http: 127.0.0.1:9090 }\n"
      "engine: { max_entries: 1000 }\n");
  EXPECT_THAT(RestartOnlyChanges(running, fresh),
              ElementsAre("listen", "engine", "admin", "data_dir"));
}

TEST(RestartOnlyChangesTest, RulesAreNotRestartOnly) {
  const Config running = Parse(kOneRule);
  const Config fresh = Parse(
      "rules:\n"
      "  api: { algorithm: gcra, limits: [5/s], block_for: 1m }\n"
      "  other: { algorithm: fixed_window, limits: [1/s] }\n");
  EXPECT_THAT(RestartOnlyChanges(running, fresh), IsEmpty());
}

TEST(RemovedRulesTest, NamesEachRuleTheReloadDrops) {
  const Config running = Parse(
      "rules:\n"
      "  a: { algorithm: fixed_window, limits: [1/s] }\n"
      "  b: { algorithm: fixed_window, limits: [1/s] }\n"
      "  c: { algorithm: fixed_window, limits: [1/s] }\n");
  const Config fresh = Parse("rules: { b: { algorithm: fixed_window, limits: [2/s] } }\n");
  EXPECT_THAT(RemovedRules(running, fresh), ElementsAre("a", "c"));
  EXPECT_THAT(RemovedRules(fresh, running), IsEmpty());
}

// A duration that is spelled right but out of range says the range, with
// the field named once.
TEST(DurationRangeTest, BlockForOutOfRangeNamesTheRangeAndTheFieldOnce) {
  EXPECT_EQ(
      Error("rules:\n  api: { algorithm: fixed_window, limits: [1/s], block_for: 100000d }\n"),
      "test.yaml:2:61: 'rules.api.block_for' must be from 1ms to 366d (near '100000d')");
  EXPECT_EQ(Error("rules:\n  api: { algorithm: fixed_window, limits: [1/s], block_for: 0s }\n"),
            "test.yaml:2:61: 'rules.api.block_for' must be from 1ms to 366d (near '0s')");
  EXPECT_EQ(Error("rules:\n  api: { algorithm: fixed_window, limits: [1/s], block_for: 367d }\n"),
            "test.yaml:2:61: 'rules.api.block_for' must be from 1ms to 366d (near '367d')");
  EXPECT_EQ(Error("rules:\n  api: { algorithm: fixed_window, limits: [1/s], block_for: soon }\n"),
            "test.yaml:2:61: 'rules.api.block_for' must be a number and a unit, e.g. 500ms, 30s, "
            "5m, 1h or 7d (near 'soon')");
}

TEST(DescribeConfigTest, ShowsBlockFor) {
  const Config c =
      Parse("rules:\n  login: { algorithm: sliding_window, limits: [5/m], block_for: 15m }\n");
  EXPECT_THAT(DescribeConfig(c), HasSubstr("login: sliding_window 5/minute; block_for=15m;"));
}

}  // namespace
}  // namespace floodgate
