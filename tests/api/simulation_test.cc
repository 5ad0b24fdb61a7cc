// Simulation and SimulateToJson (POST /v1/admin/simulate): a replay on a
// virtual clock decides as the rule would have, counts what it saw, names
// the line of a bad event, and buckets its series to a bounded length.
#include "api/simulation.h"

#include <gtest/gtest.h>

#include "nlohmann/json.hpp"
#include "testing/test_config.h"

namespace floodgate::api {
namespace {

const char* kRules = R"(
rules:
  api: { algorithm: fixed_window, limits: [2/second], tiers: { pro: [4/second] } }
  otp_issue: { algorithm: sliding_log, limits: [1/minute] }
otp: { digits: 6 }
)";

TEST(SimulationTest, ReplaysOnTheLogsClock) {
  auto sim = Simulation::Create(testing::MakeConfig(kRules), "api", "");
  ASSERT_TRUE(sim.ok()) << sim.status().ToString();
  SimulatedEvent e;
  bool decided = false;
  const char* lines[] = {"timestamp_ms,key,cost",
                         "# a comment",
                         "",
                         "1000,a",
                         "1500,a",
                         "1999,a",
                         "2000,a",
                         "{\"timestamp_ms\":2001,\"key\":\"b\",\"cost\":2}"};
  std::vector<bool> outcomes;
  for (const char* line : lines) {
    ASSERT_TRUE((*sim)->Feed(line, &decided, &e).ok()) << line;
    if (decided) outcomes.push_back(e.allowed);
  }
  EXPECT_EQ(outcomes, (std::vector<bool>{true, true, false, true, true}));
  const SimulationSummary& s = (*sim)->summary();
  EXPECT_EQ(s.events, 5);
  EXPECT_EQ(s.allowed, 4);
  EXPECT_EQ(s.denied, 1);
  EXPECT_EQ(s.units_allowed, 5);
  EXPECT_EQ(s.keys.size(), 2u);
  EXPECT_EQ(s.first_ms, 1000);
  EXPECT_EQ(s.last_ms, 2001);
}

// Neither the OTP secret nor the alert secrets are needed: a replay issues
// no codes and sends no alerts.
TEST(SimulationTest, NeedsNoSecrets) {
  auto sim = Simulation::Create(testing::MakeConfig(kRules), "otp_issue", "");
  EXPECT_TRUE(sim.ok()) << sim.status().ToString();
}

TEST(SimulationTest, UnknownRuleOrTierFailsBeforeAnyEvent) {
  EXPECT_EQ(Simulation::Create(testing::MakeConfig(kRules), "nope", "").status().code(),
            StatusCode::kNotFound);
  EXPECT_EQ(Simulation::Create(testing::MakeConfig(kRules), "api", "gold").status().code(),
            StatusCode::kNotFound);
  EXPECT_TRUE(Simulation::Create(testing::MakeConfig(kRules), "api", "pro").ok());
}

TEST(SimulateToJsonTest, SummaryAndSeries) {
  std::string log;
  for (int i = 0; i < 10; ++i) log += std::to_string(1'700'000'000'000 + i * 250) + ",k\n";
  std::string json;
  ASSERT_TRUE(SimulateToJson(testing::MakeConfig(kRules), "api", "", log, &json).ok());
  const auto j = nlohmann::json::parse(json);
  EXPECT_EQ(j["events"], 10);
  EXPECT_EQ(j["admitted"], 6);  // 2 in each of 3 seconds (4 events in 2 of them)
  EXPECT_EQ(j["denied"], 4);
  EXPECT_EQ(j["subjects"], 1);
  EXPECT_EQ(j["bucket_ms"], 1000);
  ASSERT_EQ(j["series"].size(), 3u);
  EXPECT_EQ(j["series"][0]["t_ms"], 1'700'000'000'000);
  EXPECT_EQ(j["series"][0]["admitted"], 2);
  EXPECT_EQ(j["series"][0]["denied"], 2);
  EXPECT_EQ(j["top_denied"][0]["key"], "k");
}

TEST(SimulateToJsonTest, ALongSpanIsBucketedToABoundedSeries) {
  // A week of one event per hour.
  std::string log;
  for (int i = 0; i < 24 * 7; ++i) log += std::to_string(int64_t{i} * 3'600'000) + ",k\n";
  std::string json;
  ASSERT_TRUE(SimulateToJson(testing::MakeConfig(kRules), "api", "", log, &json).ok());
  const auto j = nlohmann::json::parse(json);
  EXPECT_LE(j["series"].size(), kMaxSeriesPoints);
  EXPECT_EQ(j["bucket_ms"], 1'800'000);
  int64_t admitted = 0;
  for (const auto& p : j["series"]) admitted += p["admitted"].get<int64_t>();
  EXPECT_EQ(admitted, 24 * 7);
}

TEST(SimulateToJsonTest, BadLinesAreNamed) {
  std::string json;
  const Config config = testing::MakeConfig(kRules);
  struct Case {
    const char* log;
    const char* message;
  } cases[] = {
      {"1000,a\n2000\n", "line 2: expected timestamp_ms,key[,cost] (1 fields)"},
      {"1000,a\n\n# c\nx,a\n", "line 4: timestamp_ms 'x' is not an integer"},
      {"1000,a,b\n", "line 1: cost 'b' is not an integer"},
      {"{\"key\":\"a\"}\n", "line 1: \"timestamp_ms\" must be an integer"},
      {"1000,\"a\n", "line 1: unterminated quote"},
      {"-5,a\n", "line 1: timestamp_ms must be unix milliseconds (0 to 32503680000000)"},
  };
  for (const Case& c : cases) {
    const Status s = SimulateToJson(config, "api", "", c.log, &json);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << c.log;
    EXPECT_EQ(s.message(), c.message) << c.log;
  }
}

}  // namespace
}  // namespace floodgate::api
