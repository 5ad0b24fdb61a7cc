// The floodgate binary's check-config and simulate subcommands, run as a
// user would run them.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>

namespace {

struct CliRun {
  int exit_code;
  std::string out;
  std::string err;
};

std::string TempPath(const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          ("floodgate_cli_test_" + std::to_string(::getpid()) + "_" + name))
      .string();
}

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void WriteFile(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

CliRun Floodgate(const std::string& args, const std::string& stdin_text = "") {
  const std::string in = TempPath("stdin"), out = TempPath("stdout"), err = TempPath("stderr");
  WriteFile(in, stdin_text);
  const std::string cmd =
      std::string(FLOODGATE_CLI) + " " + args + " <" + in + " >" + out + " 2>" + err;
  const int status = std::system(cmd.c_str());
  CliRun r{WIFEXITED(status) ? WEXITSTATUS(status) : -1, Slurp(out), Slurp(err)};
  std::filesystem::remove(in);
  std::filesystem::remove(out);
  std::filesystem::remove(err);
  return r;
}

const char* kConfig = R"(rules:
  otp_issue: { algorithm: sliding_log, limits: [3/5m] }
  api:
    algorithm: fixed_window
    limits: [2/s]
    tiers: { pro: [5/s] }
)";

class CliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    config_ = TempPath("config.yaml");
    WriteFile(config_, kConfig);
  }
  void TearDown() override { std::filesystem::remove(config_); }
  std::string config_;
};

TEST_F(CliTest, CheckConfigPrintsRulesAndSucceeds) {
  CliRun r = Floodgate("check-config " + config_);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("otp_issue: sliding_log 3/5m"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("OK"), std::string::npos);
}

TEST_F(CliTest, CheckConfigNamesLineColumnAndText) {
  const std::string bad = TempPath("bad.yaml");
  WriteFile(bad, "rules:\n  api:\n    limits: [10/s, 0/minute]\n");
  CliRun r = Floodgate("check-config " + bad);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find(bad + ":3:20:"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("0/minute"), std::string::npos) << r.err;
  std::filesystem::remove(bad);
}

TEST_F(CliTest, CheckConfigRefusesANonsenseMaxMemory) {
  const std::string bad = TempPath("bad-memory.yaml");
  WriteFile(bad, "engine:\n  max_memory: 0\n");
  CliRun r = Floodgate("check-config " + bad);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find(bad + ":2:15: 'engine.max_memory' must be a positive size in bytes"),
            std::string::npos)
      << r.err;
  WriteFile(bad, "engine:\n  max_memory: 64mb\nrules: { api: { limits: 1/s } }\n");
  r = Floodgate("check-config " + bad);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("max_memory=67108864 bytes"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("on_store_full=deny"), std::string::npos) << r.out;
  std::filesystem::remove(bad);
}

TEST_F(CliTest, CheckConfigShippedExampleIsValid) {
  CliRun r =
      Floodgate(std::string("check-config ") + FLOODGATE_SOURCE_DIR + "/examples/floodgate.yaml");
  EXPECT_EQ(r.exit_code, 0) << r.err;
}

TEST_F(CliTest, CheckConfigMissingFile) {
  CliRun r = Floodgate("check-config /nonexistent/floodgate.yaml");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("/nonexistent/floodgate.yaml"), std::string::npos) << r.err;
}

TEST_F(CliTest, SimulateCsvReplaysOnAVirtualClock) {
  // Seed 001: 3 OTPs per 5 minutes, replayed from a log.
  const std::string log =
      "timestamp_ms,key,cost\n"
      "1000,+62811,1\n"
      "2000,+62811\n"
      "3000,+62811\n"
      "4000,+62811\n"
      "# a comment\n"
      "\n"
      "5000,\"+62,quoted\",1\n"
      "301000,+62811\n";
  CliRun r = Floodgate("simulate --config " + config_ + " --rule otp_issue", log);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out,
            "timestamp_ms,key,cost,allowed,remaining,retry_after_ms\n"
            "1000,+62811,1,1,2,0\n"
            "2000,+62811,1,1,1,0\n"
            "3000,+62811,1,1,0,0\n"
            "4000,+62811,1,0,0,297000\n"
            "5000,\"+62,quoted\",1,1,2,0\n"
            "301000,+62811,1,1,0,0\n");
  EXPECT_NE(r.err.find("events=6 allowed=5 denied=1"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("top denied key +62811: 1"), std::string::npos) << r.err;
}

TEST_F(CliTest, SimulateRunsInMemoryWhateverTheConfigsStore) {
  // A config for production on Redis: the replay must not touch it (port 1
  // has no Redis) and must decide on the log's own clock.
  const std::string redis_config = TempPath("redis.yaml");
  WriteFile(redis_config, std::string("store: redis://127.0.0.1:1\n") + kConfig);
  CliRun r = Floodgate("simulate --config " + redis_config + " --rule api",
                       "1000,k\n1001,k\n1002,k\n2000,k\n");
  std::filesystem::remove(redis_config);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out,
            "timestamp_ms,key,cost,allowed,remaining,retry_after_ms\n"
            "1000,k,1,1,1,0\n"
            "1001,k,1,1,0,0\n"
            "1002,k,1,0,0,998\n"
            "2000,k,1,1,1,0\n");
}

TEST_F(CliTest, SimulateJsonLinesAndTier) {
  const std::string log =
      "{\"timestamp_ms\": 0, \"key\": \"u\"}\n"
      "{\"timestamp_ms\": 1, \"key\": \"u\", \"cost\": 4}\n"
      "{\"timestamp_ms\": 2, \"key\": \"u\", \"cost\": 1}\n";
  CliRun r = Floodgate("simulate --config " + config_ + " --rule api --tier pro --input -", log);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out,
            "timestamp_ms,key,cost,allowed,remaining,retry_after_ms\n"
            "0,u,1,1,4,0\n"
            "1,u,4,1,0,0\n"
            "2,u,1,0,0,998\n");
}

TEST_F(CliTest, SimulateReportsTheBadLine) {
  CliRun r = Floodgate("simulate --config " + config_ + " --rule api", "0,a\nnot-a-time,b\n");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("<stdin>:2: timestamp_ms 'not-a-time' is not an integer"), std::string::npos)
      << r.err;
  CliRun json = Floodgate("simulate --config " + config_ + " --rule api", "{\"key\": \"a\"}\n");
  EXPECT_EQ(json.exit_code, 1);
  EXPECT_NE(json.err.find("<stdin>:1: \"timestamp_ms\" must be an integer"), std::string::npos)
      << json.err;
  CliRun cost = Floodgate("simulate --config " + config_ + " --rule api", "0,a,-3\n");
  EXPECT_EQ(cost.exit_code, 1);
  EXPECT_NE(cost.err.find("<stdin>:1: cost -3 is out of range"), std::string::npos) << cost.err;
}

TEST_F(CliTest, SimulateUnknownRuleFailsBeforeAnyOutput) {
  CliRun r = Floodgate("simulate --config " + config_ + " --rule nope", "0,a\n");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.out, "");
  EXPECT_NE(r.err.find("unknown rule 'nope'"), std::string::npos) << r.err;
}

TEST_F(CliTest, SimulateLargeLogFromFile) {
  const std::string input = TempPath("big.csv");
  {
    std::ofstream out(input);
    std::mt19937 rng(7);
    int64_t t = 1'700'000'000'000;
    for (int i = 0; i < 200'000; ++i) {
      t += rng() % 3;
      out << t << ",user" << (rng() % 1000) << "\n";
    }
  }
  CliRun r = Floodgate("simulate --config " + config_ + " --rule api --input " + input);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 200'001);
  EXPECT_NE(r.err.find("events=200000"), std::string::npos) << r.err;
  std::filesystem::remove(input);
}

}  // namespace
