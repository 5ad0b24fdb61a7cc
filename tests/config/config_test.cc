// ParseConfig and LoadConfigFile as a whole: whole documents and their
// defaults, the top-level keys, YAML's own mistakes, hostile input and
// files, each refusal with its exact "source:line:column: what (near
// 'text')" message. Each section's fields: its *_section_test.cc;
// DescribeConfig: describe_test.cc.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "floodgate/config.h"
#include "testing/config_text.h"

namespace floodgate {
namespace {

using testing::Error;
using testing::kSpecExample;
using testing::L;
using testing::Parse;

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::StartsWith;

const std::string kExamples = std::string(FLOODGATE_SOURCE_DIR) + "/examples";

TEST(ParseConfigTest, SpecExample) {
  const Config c = Parse(kSpecExample);
  EXPECT_EQ(c.source, "test.yaml");
  EXPECT_EQ(c.store, "memory");
  EXPECT_EQ(c.listen.http, "127.0.0.1:8080");
  EXPECT_EQ(c.listen.resp, "127.0.0.1:6479");
  EXPECT_EQ(c.listen.grpc, "127.0.0.1:8081");
  ASSERT_EQ(c.rules.size(), 2u);

  const Rule& api = c.rules[0];
  EXPECT_EQ(api.name, "api");
  EXPECT_EQ(api.algorithm, Algorithm::kSlidingWindow);
  EXPECT_THAT(api.limits, ElementsAre(L(60, 1, TimeUnit::kMinute), L(5000, 1, TimeUnit::kDay)));
  ASSERT_EQ(api.tiers.size(), 1u);
  EXPECT_THAT(api.tiers.at("pro"),
              ElementsAre(L(600, 1, TimeUnit::kMinute), L(100000, 1, TimeUnit::kDay)));
  EXPECT_EQ(api.on_backend_error, OnBackendError::kAllow);
  EXPECT_TRUE(api.burst.empty());
  EXPECT_EQ(api.timezone, "UTC");
  EXPECT_FALSE(api.shadow);

  const Rule& otp = c.rules[1];
  EXPECT_EQ(otp.name, "otp_issue");
  EXPECT_EQ(otp.algorithm, Algorithm::kSlidingLog);
  EXPECT_THAT(otp.limits, ElementsAre(L(3, 5, TimeUnit::kMinute)));

  EXPECT_TRUE(c.otp.enabled);
  EXPECT_EQ(c.otp.digits, 6);
  EXPECT_EQ(c.otp.ttl_ms, 300'000);
  EXPECT_EQ(c.otp.issue_limit, L(3, 5, TimeUnit::kMinute));
  EXPECT_EQ(c.otp.verify_limit, L(5, 15, TimeUnit::kMinute));
  EXPECT_EQ(c.otp.secret_env, "FG_OTP_SECRET");
  EXPECT_TRUE(c.otp.secret.empty());
  EXPECT_THAT(api.alerts.thresholds, ElementsAre(80, 100));
  EXPECT_EQ(api.alerts.webhook, "http://127.0.0.1:9000/quota");
  EXPECT_EQ(api.alerts.secret_env, "FG_ALERT_SECRET");
  EXPECT_FALSE(otp.alerts.enabled());
  EXPECT_THAT(c.envoy_ratelimit.files, ElementsAre("/etc/ratelimit/config.yaml"));
  EXPECT_EQ(c.envoy_ratelimit.algorithm, Algorithm::kFixedWindow);
}

TEST(ParseConfigTest, EmptyConfigHasDefaultsAndNoRules) {
  for (std::string_view yaml :
       {"", "\n", "# only a comment\n", "---\n", "rules:\n", "rules: {}\n"}) {
    const Config c = Parse(yaml);
    EXPECT_EQ(c.source, "test.yaml");
    EXPECT_EQ(c.store, "memory") << yaml;
    EXPECT_EQ(c.listen.http, "127.0.0.1:8080");
    EXPECT_EQ(c.listen.resp, "127.0.0.1:6479");
    EXPECT_EQ(c.listen.grpc, "127.0.0.1:8081");
    EXPECT_EQ(c.engine.max_entries, 10'000'000);
    EXPECT_EQ(c.engine.max_memory, int64_t{1} << 30);
    EXPECT_EQ(c.engine.shards, 256);
    EXPECT_EQ(c.engine.sweep_interval_ms, 1000);
    EXPECT_TRUE(c.rules.empty());
  }
}

TEST(ParseConfigTest, EveryField) {
  const Config c = Parse(R"(
store: redis+cluster://10.0.0.1:7000,10.0.0.2:7000
listen:
  http: 0.0.0.0:80
  resp: "[::1]:6479"
  grpc: localhost:0
engine: { max_entries: 1000, max_memory: 64mb, shards: 4096, sweep_interval_ms: 0 }
rules:
  uploads:
    algorithm: token_bucket
    limits: [100/minute, 1000/hour]
    burst: [20, 200]
    tiers:
      free: [10/minute, 100/hour]
      pro: [1000/minute, 10000/hour]
    shadow: true
    on_backend_error: deny
    on_store_full: allow
  login:
    algorithm: gcra
    limits: 5/minute
    burst: 0
  reports:
    limits: 1000/month
    timezone: Asia/Kolkata
  app.v2:api-1:
    limits: 1/s
    timezone: UTC+5:30
)");
  EXPECT_EQ(c.store, "redis+cluster://10.0.0.1:7000,10.0.0.2:7000");
  EXPECT_EQ(c.listen.http, "0.0.0.0:80");
  EXPECT_EQ(c.listen.resp, "[::1]:6479");
  EXPECT_EQ(c.listen.grpc, "localhost:0");
  EXPECT_EQ(c.engine.max_entries, 1000);
  EXPECT_EQ(c.engine.max_memory, 64 << 20);
  EXPECT_EQ(c.engine.shards, 4096);
  EXPECT_EQ(c.engine.sweep_interval_ms, 0);
  ASSERT_EQ(c.rules.size(), 4u);

  const Rule& uploads = c.rules[0];
  EXPECT_EQ(uploads.algorithm, Algorithm::kTokenBucket);
  EXPECT_THAT(uploads.burst, ElementsAre(20, 200));
  EXPECT_THAT(uploads.tiers.at("free"),
              ElementsAre(L(10, 1, TimeUnit::kMinute), L(100, 1, TimeUnit::kHour)));
  EXPECT_TRUE(uploads.shadow);
  EXPECT_EQ(uploads.on_backend_error, OnBackendError::kDeny);
  EXPECT_EQ(uploads.on_store_full, OnStoreFull::kAllow);
  EXPECT_EQ(c.rules[1].on_store_full, OnStoreFull::kDeny);

  EXPECT_EQ(c.rules[1].algorithm, Algorithm::kGcra);
  EXPECT_THAT(c.rules[1].burst, ElementsAre(0));
  EXPECT_EQ(c.rules[2].timezone, "Asia/Kolkata");
  EXPECT_EQ(c.rules[3].name, "app.v2:api-1");
  // Fixed offsets are stored in their canonical spelling.
  EXPECT_EQ(c.rules[3].timezone, "+05:30");
}

// --- Refusals: the exact message, position and offending text. ---

TEST(ParseConfigErrorTest, DuplicateKeysAnywhere) {
  EXPECT_EQ(Error("store: memory\nstore: redis://x:1\n"),
            "test.yaml:2:1: duplicate key 'store' (first defined on line 1) (near 'store')");
  EXPECT_EQ(Error("rules:\n  api:\n    limits: 10/s\n    limits: 20/s\n"),
            "test.yaml:4:5: duplicate key 'limits' (first defined on line 3) (near 'limits')");
  EXPECT_EQ(Error("rules:\n  api:\n    limits: 10/s\n    tiers: {pro: 1/s, pro: 2/s}\n"),
            "test.yaml:4:23: duplicate tier 'pro' (first defined on line 4) (near 'pro')");
}

TEST(ParseConfigErrorTest, WrongYamlTypes) {
  EXPECT_EQ(Error("store: {kind: memory}\n"),
            "test.yaml:1:8: 'store' must be a string, not a map (near 'store')");
  EXPECT_EQ(Error("store:\n"), "test.yaml:1:1: 'store' must be a string, not empty (near 'store')");
  EXPECT_EQ(Error("rules: [api, login]\n"),
            "test.yaml:1:8: 'rules' must be a map of rule name to rule, not a list (near 'rules')");
  EXPECT_EQ(Error("rules:\n  api: 10/s\n"),
            "test.yaml:2:8: 'rules.api' must be a map, not a string (near 'api')");
  EXPECT_EQ(Error("rules:\n  api:\n"),
            "test.yaml:2:3: 'rules.api' must be a map, not empty (near 'api')");
  EXPECT_EQ(Error("rules:\n  api:\n    limits: {per_minute: 10}\n"),
            "test.yaml:3:13: 'rules.api.limits' must be a limit or a list of limits, not a map "
            "(near 'limits')");
  EXPECT_EQ(Error("rules:\n  api:\n    limits: [10/s, [20/s]]\n"),
            "test.yaml:3:20: each limit in 'rules.api.limits' must be a string like 60/minute, not "
            "a list (near 'limits')");
  EXPECT_EQ(Error("rules:\n  api:\n    limits: 10/s\n    algorithm: [gcra]\n"),
            "test.yaml:4:16: 'rules.api.algorithm' must be a string, not a list (near "
            "'algorithm')");
  EXPECT_EQ(Error("rules:\n  api:\n    limits: 10/s\n    alerts: [80, 100]\n"),
            "test.yaml:4:13: 'rules.api.alerts' must be a map with thresholds and a webhook, not "
            "a list (near 'alerts')");
  EXPECT_EQ(Error("- a\n- b\n"),
            "test.yaml:1:1: the config must be a map of sections (store, listen, engine, rules), "
            "not a list (near '')");
  EXPECT_EQ(Error("just a string\n"),
            "test.yaml:1:1: the config must be a map of sections (store, listen, engine, rules), "
            "not a string (near 'just a string')");
  EXPECT_EQ(Error("engine:\n  shards: [1]\n"),
            "test.yaml:2:11: 'engine.shards' must be an integer, not a list (near 'shards')");
  EXPECT_EQ(Error("listen: 127.0.0.1:8080\n"),
            "test.yaml:1:9: 'listen' must be a map, not a string (near 'listen')");
}

TEST(ParseConfigErrorTest, KeysMustBeStrings) {
  EXPECT_EQ(Error("? [a, b]\n: 1\n"),
            "test.yaml:1:3: keys must be plain strings, not a list (near '')");
  EXPECT_EQ(Error("rules:\n  ~: {limits: 1/s}\n"), "test.yaml:2:3: empty key (near '')");
}

TEST(ParseConfigTest, SnapshotInterval) {
  auto c = ParseConfig("data_dir: /var/lib/floodgate\n", "test.yaml");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->snapshot_interval_ms, 30'000);  // the default
  c = ParseConfig("snapshot_interval: 5s\n", "test.yaml");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->snapshot_interval_ms, 5'000);
  c = ParseConfig("snapshot_interval: off\n", "test.yaml");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->snapshot_interval_ms, 0);
  EXPECT_NE(Error("snapshot_interval: 30\n").find("snapshot_interval"), std::string::npos);
}

// The top-level values config.cc reads itself: data_dir, snapshot_interval
// (to a day at most) and redact_keys.
TEST(ParseConfigErrorTest, TopLevelValues) {
  EXPECT_EQ(Parse("data_dir: /var/lib/fg\n").data_dir, "/var/lib/fg");
  EXPECT_EQ(Error("data_dir: ''\n"), "test.yaml:1:11: 'data_dir' must name a directory (near '')");
  EXPECT_EQ(Error("data_dir: [a]\n"),
            "test.yaml:1:11: 'data_dir' must be a string, not a list (near 'data_dir')");
  EXPECT_EQ(Parse("snapshot_interval: 1d\n").snapshot_interval_ms, 86'400'000);
  EXPECT_EQ(Error("snapshot_interval: 86400001ms\n"),
            "test.yaml:1:20: 'snapshot_interval' must be from 1ms to 1d (near '86400001ms')");
  EXPECT_EQ(Error("snapshot_interval: 30\n"),
            "test.yaml:1:20: 'snapshot_interval' must be a number and a unit, e.g. 500ms, 30s, "
            "5m, 1h or 7d (near '30')");
  EXPECT_TRUE(Parse("redact_keys: yes\n").redact_keys);
  EXPECT_EQ(Error("redact_keys:\n"),
            "test.yaml:1:1: 'redact_keys' must be true or false (near 'redact_keys')");
}

TEST(ParseConfigErrorTest, UnknownKeys) {
  EXPECT_EQ(Error("store: memory\nstorage: memory\n"),
            "test.yaml:2:1: unknown key 'storage' at top level; expected store, listen, "
            "listen_tls, tls, engine, redis, server, rules, sets, otp, alert_delivery, "
            "envoy_ratelimit, admin, visibility, lists, jwt, redact_keys, data_dir or "
            "snapshot_interval (near 'storage')");
  EXPECT_EQ(Error("rules:\n  api:\n    limits: 10/s\n    limit: 10/s\n"),
            "test.yaml:4:5: unknown key 'limit' in rule 'api'; expected algorithm, limits, burst, "
            "tiers, timezone, shadow, on_backend_error, on_store_full, alerts, block_for, "
            "max_waiters, slices, priorities, max_in_flight, lease_ttl, key, on_missing, "
            "deny_list or allow_list (near 'limit')");
  EXPECT_EQ(Error("listen:\n  https: 0.0.0.0:443\n"),
            "test.yaml:2:3: unknown key 'https' in listen; expected http, resp or grpc "
            "(near 'https')");
  EXPECT_EQ(Error("engine:\n  threads: 4\n"),
            "test.yaml:2:3: unknown key 'threads' in engine; expected max_entries, max_memory, "
            "shards or sweep_interval_ms (near 'threads')");
}

TEST(ParseConfigErrorTest, YamlSyntaxError) {
  EXPECT_EQ(
      Error("rules:\n"
            "  api:\n"
            "    limits: [10/s, 100/minute\n"),
      "test.yaml:4:1: YAML syntax error: end of sequence flow not found (near 'limits: [10/s, "
      "100/minute')");
  EXPECT_EQ(Error("rules:\n  api:\n    limits: 10/s\n   algorithm: gcra\n"),
            "test.yaml:4:4: YAML syntax error: end of map not found (near 'algorithm: gcra')");
  EXPECT_EQ(Error("store: memory: x\n"),
            "test.yaml:1:14: YAML syntax error: illegal map value (near 'store: memory: x')");
  EXPECT_EQ(Error("rules:\n  a:\n    limits: [1/s, 2/s]]\n"),
            "test.yaml:3:23: YAML syntax error: illegal flow end (near 'limits: [1/s, 2/s]]')");
}

TEST(ParseConfigErrorTest, OneDocumentOnly) {
  EXPECT_EQ(Error("store: memory\n---\nstore: redis://x:1\n"),
            "test.yaml:2:1: only one YAML document is allowed (near '---')");
  EXPECT_EQ(Error("---\nstore: memory\n---\n"),
            "test.yaml:3:1: only one YAML document is allowed (near '---')");
  // An explicit start and end of the one document are fine.
  EXPECT_EQ(Parse("---\nstore: memory\n...\n").store, "memory");
}

TEST(ParseConfigRobustnessTest, StrayCommaAtTopLevelEnds) {
  // yaml-cpp 0.7's LoadAll loops forever (and allocates without bound) on
  // these; the parser must return an error.
  EXPECT_EQ(Error(","), "test.yaml:1:1: only one YAML document is allowed (near ',')");
  EXPECT_EQ(Error("[a]\n,"), "test.yaml:2:1: only one YAML document is allowed (near ',')");
  EXPECT_EQ(Error("- a\n, b"), "test.yaml:2:1: only one YAML document is allowed (near ', b')");
}

TEST(ParseConfigErrorTest, SourceNameIsUsed) {
  Result<Config> r = ParseConfig("bogus: 1\n", "/etc/floodgate/prod.yaml");
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), StartsWith("/etc/floodgate/prod.yaml:1:1: unknown key"));
}

TEST(ParseConfigRobustnessTest, HugeInputIsRefused) {
  std::string yaml = "# " + std::string(4 << 20, 'x') + "\n";
  EXPECT_THAT(Error(yaml), StartsWith("test.yaml:1:1: config is larger than 4 MiB (near '# xxx"));
}

TEST(ParseConfigRobustnessTest, DeepNestingIsAnErrorNotACrash) {
  EXPECT_THAT(Error(std::string(100'000, '[')), HasSubstr("YAML syntax error"));
  EXPECT_THAT(Error(std::string(100'000, '{')), HasSubstr("YAML syntax error"));
  std::string dashes;
  for (int i = 0; i < 50'000; ++i) dashes += "- ";
  EXPECT_THAT(Error(dashes + "x\n"), HasSubstr("test.yaml:"));
}

TEST(ParseConfigRobustnessTest, AliasesAreFollowedNotExpanded) {
  // A "billion laughs" shape: aliases share nodes, and nothing here walks
  // an unexpected shape, so this stays instant.
  std::string yaml = "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n";
  for (int i = 1; i < 30; ++i) {
    yaml += "a" + std::to_string(i) + ": &a" + std::to_string(i) + " [";
    for (int j = 0; j < 10; ++j) yaml += (j ? ", *a" : "*a") + std::to_string(i - 1);
    yaml += "]\n";
  }
  EXPECT_THAT(Error(yaml), StartsWith("test.yaml:1:1: unknown key 'a0'"));
  // Aliases inside the expected shape work.
  const Config c = Parse("rules:\n  a: {limits: &l [1/s, 10/minute]}\n  b: {limits: *l}\n");
  EXPECT_EQ(c.rules[1].limits, c.rules[0].limits);
  // A sequence that contains itself is just a wrong type.
  EXPECT_THAT(Error("rules:\n  a: {limits: &l [*l]}\n"), HasSubstr("must be a string like"));
}

TEST(ParseConfigRobustnessTest, GarbageNeverThrows) {
  using namespace std::string_view_literals;
  for (std::string_view yaml :
       {"\0\0\0"sv, "\xff\xfe\x00r"sv, "&a *a"sv, "!!binary x"sv, "? ? ? ?"sv, "{: }"sv, "[,]"sv,
        "key: |\n  x\n y"sv, "%YAML 9.9\n---\n"sv, "'"sv, "\t- x"sv,
        "rules: {a: {limits: [\"\\u0000/s\"]}}"sv, "*unknown_alias"sv}) {
    Result<Config> r = ParseConfig(yaml, "g.yaml");
    if (!r.ok()) {
      EXPECT_THAT(r.status().message(), StartsWith("g.yaml:"));
    }
  }
}

// --- Files ---

TEST(LoadConfigFileTest, ExampleConfigLoads) {
  Result<Config> r = LoadConfigFile(kExamples + "/floodgate.yaml");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const Config& c = *r;
  EXPECT_EQ(c.source, kExamples + "/floodgate.yaml");
  EXPECT_EQ(c.store, "memory");
  ASSERT_EQ(c.rules.size(), 7u);
  EXPECT_EQ(c.rules[0].name, "api");
  EXPECT_EQ(c.rules[0].algorithm, Algorithm::kSlidingWindow);
  EXPECT_THAT(c.rules[0].limits,
              ElementsAre(L(60, 1, TimeUnit::kMinute), L(5000, 1, TimeUnit::kDay)));
  EXPECT_THAT(c.rules[0].tiers.at("pro"),
              ElementsAre(L(600, 1, TimeUnit::kMinute), L(100000, 1, TimeUnit::kDay)));
  EXPECT_EQ(c.rules[1].name, "otp_issue");
  EXPECT_EQ(c.rules[1].algorithm, Algorithm::kSlidingLog);
  EXPECT_THAT(c.rules[1].limits, ElementsAre(L(3, 5, TimeUnit::kMinute)));
  EXPECT_EQ(c.rules[2].name, "login");
  EXPECT_EQ(c.rules[2].algorithm, Algorithm::kGcra);
  EXPECT_THAT(c.rules[2].limits, ElementsAre(L(5, 1, TimeUnit::kMinute)));
  EXPECT_EQ(c.rules[3].name, "spam");
  EXPECT_EQ(c.rules[3].algorithm, Algorithm::kFixedWindow);
  EXPECT_THAT(c.rules[3].limits,
              ElementsAre(L(10, 1, TimeUnit::kMinute), L(100, 1, TimeUnit::kHour),
                          L(500, 1, TimeUnit::kDay)));
  EXPECT_EQ(c.rules[4].name, "uploads");
  EXPECT_EQ(c.rules[4].algorithm, Algorithm::kTokenBucket);
  EXPECT_THAT(c.rules[4].limits, ElementsAre(L(100, 1, TimeUnit::kMinute)));
  EXPECT_THAT(c.rules[4].burst, ElementsAre(20));
  EXPECT_EQ(c.rules[5].name, "exports");
  EXPECT_TRUE(c.rules[5].is_concurrency());
  EXPECT_EQ(c.rules[5].max_in_flight(), 10);
  EXPECT_EQ(c.rules[5].lease_ttl_ms(), 30'000);
  EXPECT_EQ(c.rules[5].tiers.at("pro").at(0).count, 25);
  EXPECT_EQ(c.rules[6].name, "reports");
  EXPECT_EQ(c.rules[6].algorithm, Algorithm::kFixedWindow);
  EXPECT_THAT(c.rules[6].limits, ElementsAre(L(1000, 1, TimeUnit::kMonth)));
  EXPECT_EQ(c.rules[6].timezone, "Europe/Berlin");
  EXPECT_EQ(c.sets.max_members, 1000);
  EXPECT_TRUE(c.otp.enabled);
  EXPECT_EQ(c.otp.issue_limit, L(3, 5, TimeUnit::kMinute));
  EXPECT_EQ(c.otp.verify_limit, L(5, 15, TimeUnit::kMinute));
  EXPECT_TRUE(c.otp.delivery.url.empty());
}

TEST(LoadConfigFileTest, BadExamplesAreRefusedWithTheirPosition) {
  struct Case {
    const char* file;
    const char* where_and_what;
  };
  const Case cases[] = {
      {"zero_count.yaml", ":4:14: limit \"0/minute\": count must be a positive integer"},
      {"unknown_unit.yaml", ":4:13: limit \"10/fortnight\": unknown unit \"fortnight\""},
      {"unknown_algorithm.yaml", ":4:16: unknown algorithm 'leaky_bucket'"},
      {"duplicate_rule.yaml", ":7:3: duplicate rule 'api' (first defined on line 3)"},
      {"burst_on_fixed_window.yaml", ":6:5: 'burst' is only allowed with token_bucket and gcra"},
      {"bad_timezone.yaml", ":5:15: unknown time zone \"Mars/Olympus\""},
      {"syntax_error.yaml", ":5:1: YAML syntax error: end of sequence flow not found"},
      {"unknown_key.yaml", ":4:5: unknown key 'limit' in rule 'api'"},
      {"wrong_type.yaml",
       ":5:9: each limit in 'rules.api.limits' must be a string like 60/minute, not a map"},
      {"too_many_limits.yaml",
       ":4:95: 'rules.spam.limits' has too many limits (at most 8) (near '3/200ms')"},
  };
  for (const Case& c : cases) {
    const std::string path = kExamples + "/bad/" + c.file;
    Result<Config> r = LoadConfigFile(path);
    ASSERT_FALSE(r.ok()) << path;
    EXPECT_THAT(r.status().message(), StartsWith(path + c.where_and_what)) << path;
  }
}

TEST(LoadConfigFileTest, UnreadableFileNamesPathAndReason) {
  Result<Config> r = LoadConfigFile("/nonexistent/floodgate.yaml");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().message(),
            "/nonexistent/floodgate.yaml: cannot open config file: No such file or directory");
  Result<Config> dir = LoadConfigFile(kExamples);
  ASSERT_FALSE(dir.ok());
  EXPECT_EQ(dir.status().message(), kExamples + ": cannot read config file: Is a directory");
}

TEST(LoadConfigFileTest, HugeFileIsRefusedWithoutReadingItAll) {
  const std::string path = ::testing::TempDir() + "/floodgate_huge_config.yaml";
  {
    std::ofstream out(path, std::ios::binary);
    const std::string chunk(1 << 20, '#');
    for (int i = 0; i < 6; ++i) out << chunk;
  }
  Result<Config> r = LoadConfigFile(path);
  std::remove(path.c_str());
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), StartsWith(path + ":1:1: config is larger than 4 MiB"));
}

}  // namespace
}  // namespace floodgate
