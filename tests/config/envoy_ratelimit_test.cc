// envoyproxy/ratelimit's YAML files: its README's examples load, and every
// way its loader refuses a file is refused here too, with file:line:column.
#include "config/envoy_ratelimit.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <string>

namespace floodgate::envoy {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

std::string Error(const std::string& yaml) {
  Result<DomainConfig> d = ParseDomain(yaml, "rl.yaml");
  return d.ok() ? "OK" : d.status().message();
}

TEST(ParseDomainTest, ReadmeExampleTwo) {
  Result<DomainConfig> d = ParseDomain(R"(domain: messaging
descriptors:
  # Only allow 5 marketing messages a day
  - key: message_type
    value: marketing
    descriptors:
      - key: to_number
        rate_limit:
          unit: day
          requests_per_unit: 5

  # Only allow 100 messages a day to any unique phone number
  - key: to_number
    rate_limit:
      unit: day
      requests_per_unit: 100
)",
                                       "rl.yaml");
  ASSERT_TRUE(d.ok()) << d.status().message();
  EXPECT_EQ(d->domain, "messaging");
  ASSERT_EQ(d->descriptors.size(), 2u);
  const DescriptorConfig& marketing = d->descriptors[0];
  EXPECT_EQ(marketing.key, "message_type");
  EXPECT_EQ(marketing.value, "marketing");
  EXPECT_FALSE(marketing.has_rate_limit);
  ASSERT_EQ(marketing.descriptors.size(), 1u);
  EXPECT_EQ(marketing.descriptors[0].rate_limit.unit, Unit::kDay);
  EXPECT_EQ(marketing.descriptors[0].rate_limit.requests_per_unit, 5u);
  EXPECT_EQ(marketing.descriptors[0].position, "rl.yaml:7:9");
  EXPECT_EQ(d->descriptors[1].rate_limit.requests_per_unit, 100u);
}

TEST(ParseDomainTest, EveryField) {
  Result<DomainConfig> d = ParseDomain(R"(domain: d
descriptors:
  - key: k
    value: v*
    shadow_mode: true
    detailed_metric: yes
    rate_limit:
      unit: SECOND
      requests_per_unit: 4294967295
      name: n
      replaces:
        - name: a
        - name: b
  - key: u
    rate_limit: { unlimited: true }
  - key: f
    rate_limit: { floodgate_rule: api }
  - key: none
    rate_limit:
)",
                                       "rl.yaml");
  ASSERT_TRUE(d.ok()) << d.status().message();
  const DescriptorConfig& k = d->descriptors[0];
  EXPECT_TRUE(k.shadow_mode);
  EXPECT_TRUE(k.detailed_metric);
  EXPECT_EQ(k.rate_limit.unit, Unit::kSecond);
  EXPECT_EQ(k.rate_limit.requests_per_unit, 4294967295u);
  EXPECT_EQ(k.rate_limit.name, "n");
  EXPECT_EQ(k.rate_limit.replaces, (std::vector<std::string>{"a", "b"}));
  EXPECT_TRUE(d->descriptors[1].rate_limit.unlimited);
  EXPECT_EQ(d->descriptors[2].rate_limit.floodgate_rule, "api");
  EXPECT_FALSE(d->descriptors[3].has_rate_limit);
}

TEST(ParseDomainTest, RefusedLikeEnvoyproxyRatelimit) {
  EXPECT_EQ(Error("descriptors: []\n"),
            "rl.yaml:1:1: the config has no (or an empty) 'domain' (near '')");
  EXPECT_EQ(Error("domain: d\ndescriptors:\n  - value: v\n"),
            "rl.yaml:3:5: descriptor has no (or an empty) 'key' (near '')");
  EXPECT_EQ(Error("domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: fortnight}\n"),
            "rl.yaml:4:24: invalid rate limit unit 'fortnight'; expected second, minute, hour, "
            "day, month or year (near 'fortnight')");
  EXPECT_EQ(Error("domain: d\ndescriptors:\n  - key: k\n    rate_limit: {requests_per_unit: 5}\n"),
            "rl.yaml:4:17: invalid rate limit unit ''; expected second, minute, hour, day, month "
            "or year (near '')");
  EXPECT_EQ(
      Error("domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unlimited: true, unit: day}\n"),
      "rl.yaml:4:41: should not specify rate limit unit when unlimited (near 'day')");
  EXPECT_EQ(Error("domain: d\ndescriptors:\n  - key: k\n  - key: k\n"),
            "rl.yaml:4:5: duplicate descriptor 'k' (first at rl.yaml:3:5) (near 'k')");
  EXPECT_EQ(Error("domain: d\ndescriptors:\n  - key: k\n    value: v\n  - {key: k, value: v}\n"),
            "rl.yaml:5:5: duplicate descriptor 'k=v' (first at rl.yaml:3:5) (near 'k')");
  EXPECT_EQ(Error("domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: day\n"
                  "      replaces: [{name: ''}]\n"),
            "rl.yaml:6:18: should not have an empty replaces entry (near '')");
  EXPECT_EQ(Error("domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: day\n"
                  "      name: a\n      replaces: [{name: a}]\n"),
            "rl.yaml:5:7: replaces should not contain name of same descriptor (near 'a')");
  EXPECT_EQ(Error("domain: d\ndescriptors:\n  - key: k\n    limit: 5\n"),
            "rl.yaml:4:5: unknown key 'limit' in a descriptor; expected key, value, rate_limit, "
            "shadow_mode, detailed_metric or descriptors (near 'limit')");
  EXPECT_EQ(Error("domain: d\nrules: []\n"),
            "rl.yaml:2:1: unknown key 'rules'; expected domain or descriptors (near 'rules')");
  EXPECT_EQ(Error("domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: day, "
                  "requests_per_unit: -1}\n"),
            "rl.yaml:4:48: 'requests_per_unit' must be an integer between 0 and 4294967295 "
            "(near '-1')");
  EXPECT_EQ(Error("domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: day, "
                  "requests_per_unit: 4294967296}\n"),
            "rl.yaml:4:48: 'requests_per_unit' must be an integer between 0 and 4294967295 "
            "(near '4294967296')");
  EXPECT_EQ(Error("domain: d\ndescriptors:\n  - key: k\n    shadow_mode: maybe\n"),
            "rl.yaml:4:18: 'shadow_mode' must be true or false (near 'maybe')");
  EXPECT_EQ(Error("domain: d\ndescriptors:\n  - key: k\n    rate_limit: {floodgate_rule: a, "
                  "unit: day}\n"),
            "rl.yaml:4:18: a rate_limit with 'floodgate_rule' takes its limits from that rule: "
            "give no unit, requests_per_unit or unlimited (near 'a')");
  EXPECT_EQ(Error("domain: d\ndescriptors: {key: k}\n"),
            "rl.yaml:2:14: 'descriptors' must be a list, not a map (near 'descriptors')");
  EXPECT_EQ(Error("- a\n"),
            "rl.yaml:1:1: an envoyproxy/ratelimit config must be a map with 'domain' and "
            "'descriptors', not a list (near '')");
  EXPECT_THAT(Error("domain: d\ndescriptors: [\n"), StartsWith("rl.yaml:"));
  EXPECT_THAT(Error("domain: d\ndescriptors: [\n"), HasSubstr("YAML syntax error"));
  EXPECT_EQ(Error("domain: d\ndomain: e\n"), "rl.yaml:2:1: duplicate key 'domain' (near 'domain')");
}

TEST(ParseDomainTest, BoundedDepthAndSize) {
  std::string deep = "domain: d\ndescriptors:\n";
  std::string indent = "  ";
  for (int i = 0; i < 40; ++i) {
    deep += indent + "- key: k\n" + indent + "  descriptors:\n";
    indent += "    ";
  }
  EXPECT_THAT(Error(deep), HasSubstr("nested more than 32 levels deep"));
  // Aliases multiply one list: refused past the bound, not expanded.
  std::string bomb =
      "domain: d\ndescriptors:\n  - key: k0\n    descriptors: &l0 [{key: a}, {key: b}]\n";
  for (int i = 1; i < 20; ++i) {
    const std::string prev = "l" + std::to_string(i - 1);
    bomb += "  - key: k" + std::to_string(i) + "\n    descriptors: &l" + std::to_string(i) +
            " [{key: a, descriptors: *" + prev + "}, {key: b, descriptors: *" + prev + "}]\n";
  }
  EXPECT_THAT(Error(bomb), HasSubstr("more than 100000 descriptors in one file"));
}

TEST(ParseDomainTest, RandomBytesNeverCrash) {
  std::mt19937 rng(42);
  const std::string seed =
      "domain: d\ndescriptors:\n  - key: k\n    value: v*\n    rate_limit:\n      unit: day\n"
      "      requests_per_unit: 5\n      replaces: [{name: x}]\n    descriptors: [{key: j}]\n";
  constexpr std::string_view kSpecial = "{}[]:,-&*#'\"\n \t|>!%@`kv0";
  for (int i = 0; i < 3000; ++i) {
    std::string s = seed;
    const int edits = 1 + rng() % 6;
    for (int e = 0; e < edits; ++e) {
      const size_t pos = rng() % (s.size() + 1);
      switch (rng() % 3) {
        case 0:
          s.insert(pos, 1, kSpecial[rng() % kSpecial.size()]);
          break;
        case 1:
          if (pos < s.size()) s.erase(pos, 1 + rng() % 4);
          break;
        default:
          if (pos < s.size()) s[pos] = static_cast<char>(rng() % 256);
      }
    }
    Result<DomainConfig> d = ParseDomain(s, "fuzz.yaml");
    if (!d.ok()) {
      EXPECT_THAT(d.status().message(), StartsWith("fuzz.yaml:"));
    }
  }
}

TEST(LoadDomainsTest, FilesAndDirectories) {
  const auto dir =
      std::filesystem::temp_directory_path() / ("floodgate_envoy_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir / "conf.d");
  std::ofstream(dir / "a.yaml") << "domain: a\n";
  std::ofstream(dir / "conf.d" / "b.yaml") << "domain: b\n";
  std::ofstream(dir / "conf.d" / "c.yml") << "domain: c\n";
  std::ofstream(dir / "conf.d" / "notes.txt") << "not yaml\n";
  EnvoyRateLimitConfig config;
  config.files = {(dir / "a.yaml").string(), (dir / "conf.d").string()};
  Result<std::vector<DomainConfig>> domains = LoadDomains(config);
  ASSERT_TRUE(domains.ok()) << domains.status().message();
  ASSERT_EQ(domains->size(), 3u);
  EXPECT_EQ((*domains)[0].domain, "a");
  EXPECT_EQ((*domains)[1].domain, "b");
  EXPECT_EQ((*domains)[2].domain, "c");

  std::ofstream(dir / "conf.d" / "d.yaml") << "domain: a\n";
  EXPECT_THAT(LoadDomains(config).status().message(), HasSubstr("duplicate domain 'a'"));
  config.files = {(dir / "missing.yaml").string()};
  EXPECT_THAT(LoadDomains(config).status().message(),
              HasSubstr("missing.yaml: cannot open envoy_ratelimit file"));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace floodgate::envoy
