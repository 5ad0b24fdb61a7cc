// The subjects' sections (config/subjects_section.h): `lists:`, `jwt:`,
// `server.trusted_proxies` and a rule's key, on_missing, deny_list and
// allow_list, their values and defaults, each mistake's exact message, and
// what a reload applies of them.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "floodgate/config.h"
#include "testing/config_text.h"

namespace floodgate {
namespace {

using testing::Error;
using testing::Parse;

using ::testing::ElementsAre;
using ::testing::IsEmpty;

TEST(SubjectsSectionTest, Defaults) {
  const Config c = Parse("rules: { api: { limits: [10/s] } }\n");
  EXPECT_TRUE(c.lists.empty());
  EXPECT_FALSE(c.jwt.in_file);
  EXPECT_EQ(c.jwt.leeway_ms, 30'000);
  EXPECT_TRUE(c.server.trusted_proxies.empty());
  ASSERT_EQ(c.rules.size(), 1u);
  EXPECT_EQ(c.rules[0].subject, SubjectConfig{});
  EXPECT_FALSE(c.rules[0].subject.any());
  EXPECT_TRUE(Parse("lists:\n").lists.empty());
}

TEST(SubjectsSectionTest, ListsOfAFileOrNetworks) {
  const Config c = Parse(
      "lists:\n"
      "  bad_networks: { file: /etc/floodgate/deny.txt }\n"
      "  partners: { cidrs: [\"192.0.2.0/24\", \"2001:db8::/32\"] }\n"
      "  none.yet-2: { cidrs: [] }\n");
  ASSERT_EQ(c.lists.size(), 3u);  // in file order
  EXPECT_EQ(c.lists[0].name, "bad_networks");
  EXPECT_EQ(c.lists[0].file, "/etc/floodgate/deny.txt");
  EXPECT_TRUE(c.lists[0].cidrs.empty());
  EXPECT_EQ(c.lists[1].name, "partners");
  EXPECT_EQ(c.lists[1].file, "");
  EXPECT_THAT(c.lists[1].cidrs, ElementsAre("192.0.2.0/24", "2001:db8::/32"));
  EXPECT_EQ(c.lists[2].name, "none.yet-2");
  EXPECT_TRUE(c.lists[2].cidrs.empty());
  // A network is checked here, with its position: what the file says must
  // build (the config fuzzer's invariant), and check-config points at it.
  EXPECT_EQ(Error("lists: { a: { cidrs: [not-a-network] } }\n"),
            "test.yaml:1:23: 'lists.a.cidrs': 'not-a-network': not an IPv4 address (near "
            "'not-a-network')");
  EXPECT_EQ(Error("lists:\n  a: { cidrs: [10.0.0.0/8, 10.0.0.0/33] }\n"),
            "test.yaml:2:28: 'lists.a.cidrs': '10.0.0.0/33': prefix length 33 is past 32 for "
            "IPv4 (near '10.0.0.0/33')");
}

TEST(SubjectsSectionTest, ListMistakes) {
  EXPECT_EQ(Error("lists:\n  a: { file: /x, cidrs: [10.0.0.0/8] }\n"),
            "test.yaml:2:3: list 'a' needs one of 'file' or 'cidrs', not both (near 'a')");
  EXPECT_EQ(Error("lists:\n  a: {}\n"),
            "test.yaml:2:3: list 'a' needs one of 'file' or 'cidrs', not neither (near 'a')");
  EXPECT_EQ(Error("lists:\n  a: { file: /x, url: http://x }\n"),
            "test.yaml:2:18: unknown key 'url' in list 'a'; expected file (one network a line) "
            "or cidrs (a list) (near 'url')");
  EXPECT_EQ(Error("lists:\n  a b: { file: /x }\n"),
            "test.yaml:2:3: list names are 1 to 64 characters of A-Z, a-z, 0-9, '_', '-' or '.' "
            "(near 'a b')");
  EXPECT_EQ(Error("lists:\n  a/b: { file: /x }\n"),
            "test.yaml:2:3: list names are 1 to 64 characters of A-Z, a-z, 0-9, '_', '-' or '.' "
            "(near 'a/b')");
  const std::string long_name(65, 'n');
  EXPECT_EQ(Error("lists:\n  " + long_name + ": { file: /x }\n"),
            "test.yaml:2:3: list names are 1 to 64 characters of A-Z, a-z, 0-9, '_', '-' or '.' "
            "(near '" +
                std::string(64, 'n') + "...')");
  EXPECT_EQ(Parse("lists:\n  " + std::string(64, 'n') + ": { file: /x }\n").lists[0].name,
            std::string(64, 'n'));
  EXPECT_EQ(Error("lists:\n  a: { file: /x }\n  a: { file: /y }\n"),
            "test.yaml:3:3: duplicate list 'a' (first defined on line 2) (near 'a')");
  EXPECT_EQ(Error("lists:\n  a: { file: \"\" }\n"),
            "test.yaml:2:14: 'lists.a.file' is empty (near 'file')");
  EXPECT_EQ(Error("lists:\n  a: { cidrs: 10.0.0.0/8 }\n"),
            "test.yaml:2:15: 'lists.a.cidrs' must be a list of networks, not a string (near "
            "'cidrs')");
  EXPECT_EQ(Error("lists:\n  a: { cidrs: [10.0.0.0/8, \"\"] }\n"),
            "test.yaml:2:28: 'lists.a.cidrs': an empty entry (near '')");
  EXPECT_EQ(Error("lists:\n  a:\n"),
            "test.yaml:2:3: 'lists.a' must be a map with 'file' or 'cidrs', not empty (near 'a')");
  EXPECT_EQ(Error("lists: [a]\n"),
            "test.yaml:1:8: 'lists' must be a map of list name to list, not a list (near "
            "'lists')");
}

TEST(SubjectsSectionTest, JwtFields) {
  const Config c = Parse(
      "jwt:\n"
      "  jwks_file: /etc/floodgate/jwks.json\n"
      "  issuer: \"https://id.example.com\"\n"
      "  audience: api\n"
      "  leeway: 10s\n"
      "  hs256_secret_env: FG_JWT_SECRET\n");
  EXPECT_TRUE(c.jwt.in_file);
  EXPECT_EQ(c.jwt.jwks_file, "/etc/floodgate/jwks.json");
  EXPECT_EQ(c.jwt.issuer, "https://id.example.com");
  EXPECT_EQ(c.jwt.audience, "api");
  EXPECT_EQ(c.jwt.leeway_ms, 10'000);
  EXPECT_EQ(c.jwt.hs256_secret_env, "FG_JWT_SECRET");
  EXPECT_EQ(c.jwt.hs256_secret, "");  // never from the file
  // Either way of verifying is enough; leeway and the rest keep defaults.
  const Config keys_only = Parse("jwt: { jwks_file: /k.json }\n");
  EXPECT_EQ(keys_only.jwt.leeway_ms, 30'000);
  EXPECT_EQ(keys_only.jwt.issuer, "");
  EXPECT_EQ(keys_only.jwt.hs256_secret_env, "");
  EXPECT_EQ(Parse("jwt: { hs256_secret_env: S }\n").jwt.jwks_file, "");
}

TEST(SubjectsSectionTest, JwtLeewayBounds) {
  EXPECT_EQ(Parse("jwt: { jwks_file: /k, leeway: 5m }\n").jwt.leeway_ms, 300'000);
  EXPECT_EQ(Parse("jwt: { jwks_file: /k, leeway: 300s }\n").jwt.leeway_ms, 300'000);
  EXPECT_EQ(Parse("jwt: { jwks_file: /k, leeway: 0 }\n").jwt.leeway_ms, 0);
  EXPECT_EQ(Parse("jwt: { jwks_file: /k, leeway: off }\n").jwt.leeway_ms, 0);
  EXPECT_EQ(Parse("jwt: { jwks_file: /k, leeway: 0s }\n").jwt.leeway_ms, 0);
  EXPECT_EQ(Parse("jwt: { jwks_file: /k, leeway: 1s }\n").jwt.leeway_ms, 1000);
  // Token times are whole seconds: a part of one would be cut silently.
  EXPECT_EQ(Error("jwt: { jwks_file: /k, leeway: 1500ms }\n"),
            "test.yaml:1:31: 'jwt.leeway' is whole seconds (token times are) (near '1500ms')");
  EXPECT_EQ(Error("jwt: { jwks_file: /k, leeway: 301s }\n"),
            "test.yaml:1:31: 'jwt.leeway' must be from 1ms to 5m (near '301s')");
  EXPECT_EQ(Error("jwt: { jwks_file: /k, leeway: 1h }\n"),
            "test.yaml:1:31: 'jwt.leeway' must be from 1ms to 5m (near '1h')");
  EXPECT_EQ(Error("jwt: { jwks_file: /k, leeway: soon }\n"),
            "test.yaml:1:31: 'jwt.leeway' must be a number and a unit, e.g. 500ms, 30s, 5m, 1h "
            "or 7d (near 'soon')");
}

TEST(SubjectsSectionTest, JwtMistakes) {
  const std::string neither =
      "'jwt' needs 'jwks_file' (RS256, ES256) or 'hs256_secret_env' (HS256): tokens are always "
      "verified (near 'jwt')";
  EXPECT_EQ(Error("jwt: { issuer: x }\n"), "test.yaml:1:1: " + neither);
  EXPECT_EQ(Error("jwt:\n"), "test.yaml:1:1: " + neither);
  EXPECT_EQ(Error("jwt: { jwks_file: \"\" }\n"), "test.yaml:1:1: " + neither);
  EXPECT_EQ(Error("jwt: { jwks_file: /k, secret: abc }\n"),
            "test.yaml:1:23: unknown key 'secret' in jwt; expected jwks_file, issuer, audience, "
            "leeway, header or hs256_secret_env (near 'secret')");
  EXPECT_EQ(Parse("jwt: { jwks_file: /k, header: X-Client-Authorization }\n").jwt.header,
            "x-client-authorization");
  EXPECT_EQ(Parse("jwt: { jwks_file: /k }\n").jwt.header, "authorization");
  EXPECT_EQ(Error("jwt: { jwks_file: /k, header: \"a b\" }\n"),
            "test.yaml:1:31: 'jwt.header' must be a header field name (near 'a b')");
  EXPECT_EQ(Error("jwt: { hs256_secret_env: 1BAD }\n"),
            "test.yaml:1:26: 'jwt.hs256_secret_env' must name an environment variable "
            "([A-Za-z_][A-Za-z0-9_]*) (near '1BAD')");
  EXPECT_EQ(Error("jwt: { jwks_file: [a] }\n"),
            "test.yaml:1:19: 'jwt.jwks_file' must be a string, not a list (near 'jwks_file')");
  EXPECT_EQ(Error("jwt: [a]\n"), "test.yaml:1:6: 'jwt' must be a map, not a list (near 'jwt')");
}

TEST(SubjectsSectionTest, TrustedProxies) {
  const Config c =
      Parse("server:\n  trusted_proxies: [\"10.0.0.0/8\", \"127.0.0.1/32\", \"::1/128\"]\n");
  EXPECT_THAT(c.server.trusted_proxies, ElementsAre("10.0.0.0/8", "127.0.0.1/32", "::1/128"));
  EXPECT_THAT(Parse("server: { trusted_proxies: [] }\n").server.trusted_proxies, IsEmpty());
  EXPECT_EQ(Error("server: { trusted_proxies: 10.0.0.0/8 }\n"),
            "test.yaml:1:28: 'server.trusted_proxies' must be a list of networks, not a string "
            "(near 'trusted_proxies')");
  EXPECT_EQ(Error("server: { trusted_proxies: [\"\"] }\n"),
            "test.yaml:1:29: 'server.trusted_proxies': an empty entry (near '')");
  EXPECT_EQ(Error("server: { trusted_proxies: [\"::1/129\"] }\n"),
            "test.yaml:1:29: 'server.trusted_proxies': '::1/129': prefix length 129 is past 128 "
            "for IPv6 (near '::1/129')");
}

constexpr char kLists[] = "lists: { bad: { cidrs: [203.0.113.0/24] }, ok: { file: /ok.txt } }\n";

TEST(SubjectsSectionTest, RuleSubjectFields) {
  const Config c = Parse(std::string(kLists) +
                         "rules:\n"
                         "  gate:\n"
                         "    limits: [100/s]\n"
                         "    key: \"net:{ip/24}\"\n"
                         "    on_missing: deny\n"
                         "    deny_list: bad\n"
                         "    allow_list: ok\n");
  ASSERT_EQ(c.rules.size(), 1u);
  const SubjectConfig& s = c.rules[0].subject;
  EXPECT_EQ(s.key, "net:{ip/24}");  // as written
  EXPECT_EQ(s.on_missing, OnMissing::kDeny);
  EXPECT_EQ(s.deny_list, "bad");
  EXPECT_EQ(s.allow_list, "ok");
  EXPECT_TRUE(s.any());
  // Lists alone, without a template.
  const Config lists_only =
      Parse(std::string(kLists) + "rules: { r: { limits: [1/s], deny_list: bad } }\n");
  EXPECT_EQ(lists_only.rules[0].subject.key, "");
  EXPECT_TRUE(lists_only.rules[0].subject.any());
}

TEST(SubjectsSectionTest, OnMissingValues) {
  const auto on_missing = [](const char* value) {
    return Parse(std::string("rules: { r: { limits: [1/s], key: \"{header:x}\", on_missing: ") +
                 value + " } }\n")
        .rules[0]
        .subject.on_missing;
  };
  EXPECT_EQ(on_missing("deny"), OnMissing::kDeny);
  EXPECT_EQ(on_missing("allow"), OnMissing::kAllow);
  EXPECT_EQ(on_missing("skip"), OnMissing::kSkip);
  EXPECT_EQ(
      Parse("rules: { r: { limits: [1/s], key: \"{header:x}\" } }\n").rules[0].subject.on_missing,
      OnMissing::kError);
  EXPECT_EQ(Error("rules: { r: { limits: [1/s], key: \"{header:x}\", on_missing: ignore } }\n"),
            "test.yaml:1:61: 'rules.r.on_missing' must be deny, allow or skip (unset: a 400 "
            "answer) (near 'ignore')");
  EXPECT_EQ(Error("rules: { r: { limits: [1/s], key: \"{header:x}\", on_missing: Deny } }\n"),
            "test.yaml:1:61: 'rules.r.on_missing' must be deny, allow or skip (unset: a 400 "
            "answer) (near 'Deny')");
  EXPECT_EQ(Error("rules: { r: { limits: [1/s], on_missing: deny } }\n"),
            "test.yaml: rule 'r': 'on_missing' needs a 'key' template");
}

TEST(SubjectsSectionTest, ABadTemplateIsRefusedWhereItIsWritten) {
  EXPECT_EQ(Error("rules:\n  r: { limits: [1/s], key: \"{ip/33}\" }\n"),
            "test.yaml:2:28: '{ip/33}': 33 is past 32 for IPv4, and an IPv6 prefix here is a "
            "multiple of 4 (48, 56, 64); write {ip/V4,V6} to name both (near '{ip/33}')");
  EXPECT_EQ(Error("rules:\n  r:\n    limits: [1/s]\n    key: \"user:{nope}\"\n"),
            "test.yaml:4:10: '{nope}': unknown part; expected {ip}, {ip/N}, {header:NAME}, "
            "{cookie:NAME}, {query:NAME}, {path:N}, {method}, {host} or {jwt:CLAIM} (near "
            "'user:{nope}')");
  EXPECT_EQ(Error("rules:\n  r: { limits: [1/s], key: \"\" }\n"),
            "test.yaml:2:28: a key template is not empty (near '')");
  // Unquoted, YAML reads braces as a map.
  EXPECT_EQ(Error("rules:\n  r: { limits: [1/s], key: {ip} }\n"),
            "test.yaml:2:28: 'rules.r.key' must be a string, not a map (near 'key')");
}

TEST(SubjectsSectionTest, ListNamesMustBeLists) {
  EXPECT_EQ(Error(std::string(kLists) + "rules: { r: { limits: [1/s], deny_list: nope } }\n"),
            "test.yaml: rule 'r': deny_list 'nope' is not a list of 'lists:'");
  EXPECT_EQ(Error(std::string(kLists) + "rules: { r: { limits: [1/s], allow_list: partners } }\n"),
            "test.yaml: rule 'r': allow_list 'partners' is not a list of 'lists:'");
  EXPECT_EQ(Error("rules: { r: { limits: [1/s], deny_list: bad } }\n"),
            "test.yaml: rule 'r': deny_list 'bad' is not a list of 'lists:'");
  EXPECT_EQ(Error(std::string(kLists) + "rules: { r: { limits: [1/s], deny_list: \"\" } }\n"),
            "test.yaml:2:41: 'rules.r.deny_list' names no list (near 'deny_list')");
}

TEST(SubjectsSectionTest, AJwtPartNeedsAJwtSection) {
  EXPECT_EQ(Error("rules: { u: { limits: [1/s], key: \"{jwt:sub}\" } }\n"),
            "test.yaml: rule 'u': key '{jwt:sub}' reads a token ({jwt:...}) but the config has "
            "no 'jwt:' section to verify it with");
  const Config c = Parse(
      "jwt: { hs256_secret_env: FG_JWT_SECRET }\n"
      "rules: { u: { limits: [1/s], key: \"{jwt:sub}\", on_missing: skip } }\n");
  EXPECT_EQ(c.rules[0].subject.key, "{jwt:sub}");
}

TEST(SubjectsSectionTest, AConcurrencyRuleTakesNoTemplate) {
  EXPECT_EQ(Error("rules: { c: { algorithm: concurrency, max_in_flight: 3, key: \"{ip}\" } }\n"),
            "test.yaml: rule 'c': a 'key' template is for checks (HTTP /v1/check), not "
            "concurrency leases");
  EXPECT_EQ(
      Error("rules:\n  c:\n    key: \"{ip}\"\n    algorithm: concurrency\n    max_in_flight: 3\n"),
      "test.yaml: rule 'c': a 'key' template is for checks (HTTP /v1/check), not concurrency "
      "leases");
}

TEST(SubjectsSectionTest, AReloadAppliesTrustedProxiesListsAndJwt) {
  const Config running = Parse(
      "server: { threads: 2, trusted_proxies: [10.0.0.0/8] }\n"
      "lists: { bad: { cidrs: [203.0.113.0/24] } }\n"
      "jwt: { jwks_file: /a.json }\n"
      "rules: { api: { limits: [1/s], key: \"{ip}\", deny_list: bad } }\n");
  const Config fresh = Parse(
      "server: { threads: 2, trusted_proxies: [10.0.0.0/8, \"::1/128\"] }\n"
      "lists: { bad: { file: /deny.txt }, more: { cidrs: [192.0.2.0/24] } }\n"
      "jwt: { jwks_file: /b.json, leeway: 1m }\n"
      "rules: { api: { limits: [1/s], key: \"{ip/24}\", allow_list: more } }\n");
  EXPECT_THAT(RestartOnlyChanges(running, fresh), IsEmpty());
  const Config threads = Parse(
      "server: { threads: 4, trusted_proxies: [10.0.0.0/8, \"::1/128\"] }\n"
      "lists: { bad: { file: /deny.txt }, more: { cidrs: [192.0.2.0/24] } }\n"
      "jwt: { jwks_file: /b.json, leeway: 1m }\n"
      "rules: { api: { limits: [1/s], key: \"{ip/24}\", allow_list: more } }\n");
  EXPECT_THAT(RestartOnlyChanges(running, threads), ElementsAre("server"));
  EXPECT_THAT(RestartOnlyChanges(fresh, threads), ElementsAre("server"));
}

}  // namespace
}  // namespace floodgate
