// SubjectRules::Build and Subjects (service/subjects/subjects.h) from
// configs written by hand: the lists' verdicts (deny before allow), the
// client behind trusted proxies only, a key given used as given, missing
// parts and their on_missing, tokens verified through Resolve and refused
// ones counted, every Build refusal naming its field or file:line, and
// publication.
#include "service/subjects/subjects.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <utility>

#include <nlohmann/json.hpp>

#include "testing/fake_request.h"
#include "testing/jose_keys.h"

namespace floodgate::service {
namespace {

using nlohmann::json;
using testing::FakeRequest;
using Kind = SubjectAnswer::Kind;

constexpr int64_t kNowS = 1700000000;
constexpr int64_t kNowMs = kNowS * 1000;
constexpr char kSecret[] = "floodgate-subjects-hs256-secret!";  // 32 bytes
constexpr char kSecretEnv[] = "FG_SUBJECTS_TEST_HS256_SECRET";

// A rule with a subject config, written as RuleOf("gate").Key("{ip}").Deny("bad").
class RuleOf {
 public:
  explicit RuleOf(std::string name) { rule_.name = std::move(name); }
  RuleOf& Key(std::string key) {
    rule_.subject.key = std::move(key);
    return *this;
  }
  RuleOf& Deny(std::string list) {
    rule_.subject.deny_list = std::move(list);
    return *this;
  }
  RuleOf& Allow(std::string list) {
    rule_.subject.allow_list = std::move(list);
    return *this;
  }
  RuleOf& Missing(OnMissing on_missing) {
    rule_.subject.on_missing = on_missing;
    return *this;
  }
  operator Rule() const { return rule_; }  // NOLINT: implicit, to read as a rule

 private:
  Rule rule_;
};

ListConfig Inline(std::string name, std::vector<std::string> cidrs) {
  ListConfig list;
  list.name = std::move(name);
  list.cidrs = std::move(cidrs);
  return list;
}

ListConfig FileList(std::string name, std::string file) {
  ListConfig list;
  list.name = std::move(name);
  list.file = std::move(file);
  return list;
}

// lists bad: 203.0.113.0/24; partners: 203.0.113.0/24 (so that a
// deny-listed partner shows the order), 198.51.100.0/24, 2001:db8::/32.
Config ListsConfig() {
  Config config;
  config.lists.push_back(Inline("bad", {"203.0.113.0/24"}));
  config.lists.push_back(
      Inline("partners", {"203.0.113.0/24", "198.51.100.0/24", "2001:db8::/32"}));
  return config;
}

std::shared_ptr<const SubjectRules> MustBuild(const Config& config) {
  Result<std::shared_ptr<const SubjectRules>> rules = SubjectRules::Build(config);
  EXPECT_TRUE(rules.ok()) << rules.status().ToString();
  return rules.ok() ? *rules : nullptr;
}

std::string BuildError(const Config& config) {
  Result<std::shared_ptr<const SubjectRules>> rules = SubjectRules::Build(config);
  if (rules.ok()) return "(built)";
  EXPECT_EQ(rules.status().code(), StatusCode::kInvalidArgument);
  return rules.status().message();
}

using Matches = std::map<std::tuple<std::string, std::string, std::string>, int64_t>;

class SubjectsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { ec_ = testing::NewP256Key().release(); }
  static void TearDownTestSuite() { EVP_PKEY_free(ec_); }

  void SetUp() override {
    char tmpl[] = "/tmp/floodgate-subjects-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    ::unsetenv(kSecretEnv);
    std::filesystem::remove_all(dir_);
  }

  std::string Write(const std::string& name, const std::string& text) {
    const std::string path = dir_ + "/" + name;
    std::ofstream(path, std::ios::binary) << text;
    return path;
  }

  // A config whose jwt section verifies HS256 under kSecret (from the
  // environment, as the config names it) and ES256 under ec_.
  Config JwtConfigWith(std::vector<Rule> rules) {
    Config config;
    json set = json::object();
    set["keys"] = {testing::PublicJwk(ec_, "e1")};
    config.jwt.in_file = true;
    config.jwt.jwks_file = Write("jwks.json", set.dump());
    config.jwt.issuer = "https://id.example.com";
    config.jwt.hs256_secret_env = kSecretEnv;
    ::setenv(kSecretEnv, kSecret, 1);
    config.rules = std::move(rules);
    return config;
  }

  static json Claims() {
    return {{"sub", "ana"}, {"iss", "https://id.example.com"}, {"exp", kNowS + 600}};
  }
  static std::string Hs(const json& claims, std::string_view secret = kSecret) {
    const std::string input =
        testing::SigningInput(R"({"alg":"HS256","typ":"JWT"})", claims.dump());
    return testing::Token(input, testing::SignHs256(secret, input));
  }
  static std::string Es(const json& claims) {
    const std::string input = testing::SigningInput(R"({"alg":"ES256","kid":"e1"})", claims.dump());
    return testing::Token(input, testing::SignEs256(ec_, input));
  }

  SubjectAnswer Resolve(const SubjectRules& rules, std::string_view rule,
                        const FakeRequest& request, std::string_view given = "") {
    key_ = "left over";
    return subjects_.Resolve(rules, rule, given, request, kNowMs, &key_);
  }

  static EVP_PKEY* ec_;
  std::string dir_;
  Subjects subjects_;
  std::string key_;
};

EVP_PKEY* SubjectsTest::ec_ = nullptr;

TEST_F(SubjectsTest, TheDenyListIsTestedBeforeTheAllowList) {
  Config config = ListsConfig();
  config.rules.push_back(RuleOf("gate").Key("{ip}").Deny("bad").Allow("partners"));
  const auto rules = MustBuild(config);
  ASSERT_NE(rules, nullptr);

  // In both lists: denied.
  SubjectAnswer a = Resolve(*rules, "gate", FakeRequest().Peer("203.0.113.7"));
  EXPECT_EQ(a.kind, Kind::kDenyListed);
  ASSERT_NE(a.list, nullptr);
  EXPECT_EQ(a.list->name, "bad");
  EXPECT_EQ(a.address, IpAddress::Parse("203.0.113.7"));
  EXPECT_EQ(a.missing, nullptr);
  EXPECT_EQ(key_, "");

  // In the allow list only: admitted unchecked.
  a = Resolve(*rules, "gate", FakeRequest().Peer("198.51.100.9"));
  EXPECT_EQ(a.kind, Kind::kAllowListed);
  ASSERT_NE(a.list, nullptr);
  EXPECT_EQ(a.list->name, "partners");
  a = Resolve(*rules, "gate", FakeRequest().Peer("2001:db8::5"));
  EXPECT_EQ(a.kind, Kind::kAllowListed);

  // In neither: checked, the key built.
  a = Resolve(*rules, "gate", FakeRequest().Peer("192.0.2.1"));
  EXPECT_EQ(a.kind, Kind::kCheck);
  EXPECT_EQ(a.list, nullptr);
  EXPECT_EQ(a.address, IpAddress::Parse("192.0.2.1"));
  EXPECT_EQ(key_, "192.0.2.1");

  // A mapped client is the IPv4 address the lists name.
  a = Resolve(*rules, "gate", FakeRequest().Peer("::ffff:203.0.113.200"));
  EXPECT_EQ(a.kind, Kind::kDenyListed);

  EXPECT_EQ(subjects_.GetCounts().list_matches,
            (Matches{{{"bad", "gate", "deny"}, 2}, {{"partners", "gate", "allow"}, 2}}));
}

TEST_F(SubjectsTest, AnAllowListAlone) {
  Config config = ListsConfig();
  config.rules.push_back(RuleOf("api").Key("{ip/24}").Allow("partners"));
  const auto rules = MustBuild(config);
  ASSERT_NE(rules, nullptr);
  EXPECT_TRUE(rules->any_lists());
  // 203.0.113.0/24 is in "bad" too, but this rule has no deny list.
  SubjectAnswer a = Resolve(*rules, "api", FakeRequest().Peer("203.0.113.7"));
  EXPECT_EQ(a.kind, Kind::kAllowListed);
  EXPECT_EQ(a.list->name, "partners");
  a = Resolve(*rules, "api", FakeRequest().Peer("192.0.2.77"));
  EXPECT_EQ(a.kind, Kind::kCheck);
  EXPECT_EQ(key_, "192.0.2.0/24");
  EXPECT_EQ(subjects_.GetCounts().list_matches, (Matches{{{"partners", "api", "allow"}, 1}}));
}

TEST_F(SubjectsTest, ForwardedAddressesAreReadFromTrustedPeersOnly) {
  Config config = ListsConfig();
  config.server.trusted_proxies = {"10.0.0.0/8", "::1/128"};
  config.rules.push_back(RuleOf("gate").Key("{ip}").Deny("bad"));
  const auto rules = MustBuild(config);
  ASSERT_NE(rules, nullptr);

  // From a trusted proxy: the right-most hop that is not a trusted proxy.
  SubjectAnswer a = Resolve(
      *rules, "gate",
      FakeRequest().Peer("10.0.0.1").Add("X-Forwarded-For", "1.1.1.1, 192.0.2.8, 10.2.3.4"));
  EXPECT_EQ(a.kind, Kind::kCheck);
  EXPECT_EQ(a.address, IpAddress::Parse("192.0.2.8"));
  EXPECT_EQ(key_, "192.0.2.8");
  // Several fields read as one list, in order.
  Resolve(*rules, "gate",
          FakeRequest()
              .Peer("::1")
              .Add("X-Forwarded-For", "1.1.1.1")
              .Add("x-forwarded-for", "192.0.2.9"));
  EXPECT_EQ(key_, "192.0.2.9");
  // Forwarded when there is no X-Forwarded-For; ignored when there is.
  Resolve(*rules, "gate", FakeRequest().Peer("10.0.0.1").Add("Forwarded", "for=192.0.2.10"));
  EXPECT_EQ(key_, "192.0.2.10");
  Resolve(*rules, "gate",
          FakeRequest()
              .Peer("10.0.0.1")
              .Add("Forwarded", "for=192.0.2.10")
              .Add("X-Forwarded-For", "192.0.2.11"));
  EXPECT_EQ(key_, "192.0.2.11");
  // Nothing forwarded: the proxy itself.
  Resolve(*rules, "gate", FakeRequest().Peer("10.0.0.1"));
  EXPECT_EQ(key_, "10.0.0.1");
  // The lists test the client, not the proxy.
  a = Resolve(*rules, "gate",
              FakeRequest().Peer("10.0.0.1").Add("X-Forwarded-For", "203.0.113.50"));
  EXPECT_EQ(a.kind, Kind::kDenyListed);
  EXPECT_EQ(a.address, IpAddress::Parse("203.0.113.50"));

  // From anyone else, the header is not read: the peer is the client.
  a = Resolve(*rules, "gate",
              FakeRequest().Peer("192.0.2.1").Add("X-Forwarded-For", "198.51.100.1"));
  EXPECT_EQ(a.kind, Kind::kCheck);
  EXPECT_EQ(key_, "192.0.2.1");
  // A deny-listed client cannot hide behind a header of its own.
  a = Resolve(*rules, "gate",
              FakeRequest().Peer("203.0.113.7").Add("X-Forwarded-For", "198.51.100.1"));
  EXPECT_EQ(a.kind, Kind::kDenyListed);
  // Nor put someone else on the deny list.
  a = Resolve(*rules, "gate",
              FakeRequest().Peer("192.0.2.1").Add("X-Forwarded-For", "203.0.113.7"));
  EXPECT_EQ(a.kind, Kind::kCheck);
}

TEST_F(SubjectsTest, TheOriginalRequestIsTheTrustedProxysToTell) {
  Config config;
  config.server.trusted_proxies = {"10.0.0.0/8"};
  config.rules.push_back(RuleOf("r").Key("{method}:{host}:{path:1}"));
  const auto rules = MustBuild(config);
  ASSERT_NE(rules, nullptr);
  auto request = [](const char* peer) {
    return FakeRequest()
        .Peer(peer)
        .Method("POST")
        .Target("/v1/check?rule=r")
        .Add("Host", "floodgate:8080")
        .Add("X-Original-Method", "GET")
        .Add("X-Original-URI", "/users/ana")
        .Add("X-Original-Host", "api.example.com");
  };
  Resolve(*rules, "r", request("10.1.1.1"));
  EXPECT_EQ(key_, "GET:api.example.com:users");
  Resolve(*rules, "r", request("192.0.2.1"));
  EXPECT_EQ(key_, "POST:floodgate:v1");
}

TEST_F(SubjectsTest, AKeyGivenIsUsedAsGivenAndListedOnlyWhenItIsAnAddress) {
  Config config = ListsConfig();
  config.rules.push_back(RuleOf("gate").Key("{header:x-api-key}").Deny("bad").Allow("partners"));
  config.rules.push_back(RuleOf("keyed").Key("{ip/24}"));
  const auto rules = MustBuild(config);
  ASSERT_NE(rules, nullptr);
  // The peer is deny-listed, but the check is about the key given.
  SubjectAnswer a = Resolve(*rules, "gate", FakeRequest().Peer("203.0.113.7"), "user-1");
  EXPECT_EQ(a.kind, Kind::kCheck);
  EXPECT_EQ(a.address, std::nullopt);
  EXPECT_EQ(key_, "user-1");  // not built: no header, and nothing missing
  a = Resolve(*rules, "gate", FakeRequest().Peer("192.0.2.1"), "203.0.113.9");
  EXPECT_EQ(a.kind, Kind::kDenyListed);
  EXPECT_EQ(a.address, IpAddress::Parse("203.0.113.9"));
  EXPECT_EQ(key_, "203.0.113.9");
  a = Resolve(*rules, "gate", FakeRequest(), "2001:db8::1");
  EXPECT_EQ(a.kind, Kind::kAllowListed);
  // Networks and addresses of another spelling are not addresses.
  for (const char* given : {"203.0.113.0/24", "203.0.113.7:80", "[2001:db8::1]", " 203.0.113.7"}) {
    a = Resolve(*rules, "gate", FakeRequest(), given);
    EXPECT_EQ(a.kind, Kind::kCheck) << given;
    EXPECT_EQ(key_, given);
  }
  // A rule without lists: the key as given, whatever it is.
  a = Resolve(*rules, "keyed", FakeRequest().Peer("203.0.113.7"), "203.0.113.7");
  EXPECT_EQ(a.kind, Kind::kCheck);
  EXPECT_EQ(key_, "203.0.113.7");
  // A rule without a subject config at all.
  a = Resolve(*rules, "plain", FakeRequest(), "anything");
  EXPECT_EQ(a.kind, Kind::kCheck);
  EXPECT_EQ(key_, "anything");
}

TEST_F(SubjectsTest, ResolveKeyTestsTheListsOnly) {
  Config config = ListsConfig();
  config.rules.push_back(RuleOf("gate").Deny("bad").Allow("partners"));
  config.rules.push_back(RuleOf("keyed").Key("{ip}"));
  const auto rules = MustBuild(config);
  ASSERT_NE(rules, nullptr);
  SubjectAnswer a = subjects_.ResolveKey(*rules, "gate", "203.0.113.7");
  EXPECT_EQ(a.kind, Kind::kDenyListed);
  EXPECT_EQ(a.list->name, "bad");
  EXPECT_EQ(subjects_.ResolveKey(*rules, "gate", "::ffff:203.0.113.7").kind, Kind::kDenyListed);
  EXPECT_EQ(subjects_.ResolveKey(*rules, "gate", "198.51.100.1").kind, Kind::kAllowListed);
  a = subjects_.ResolveKey(*rules, "gate", "192.0.2.1");
  EXPECT_EQ(a.kind, Kind::kCheck);
  EXPECT_EQ(a.address, IpAddress::Parse("192.0.2.1"));
  a = subjects_.ResolveKey(*rules, "gate", "user:203.0.113.7");
  EXPECT_EQ(a.kind, Kind::kCheck);
  EXPECT_EQ(a.address, std::nullopt);
  EXPECT_EQ(subjects_.ResolveKey(*rules, "keyed", "203.0.113.7").kind, Kind::kCheck);
  EXPECT_EQ(subjects_.ResolveKey(*rules, "nope", "203.0.113.7").kind, Kind::kCheck);
  EXPECT_EQ(subjects_.GetCounts().list_matches,
            (Matches{{{"bad", "gate", "deny"}, 2}, {{"partners", "gate", "allow"}, 1}}));
}

TEST_F(SubjectsTest, NoKeyAndNoTemplate) {
  Config config = ListsConfig();
  config.rules.push_back(RuleOf("gate").Deny("bad"));
  const auto rules = MustBuild(config);
  ASSERT_NE(rules, nullptr);
  // A rule with lists and no template still needs a key; so does a rule
  // with no subject config.
  EXPECT_EQ(Resolve(*rules, "gate", FakeRequest().Peer("203.0.113.7")).kind, Kind::kNoKey);
  EXPECT_EQ(key_, "");
  EXPECT_EQ(Resolve(*rules, "plain", FakeRequest()).kind, Kind::kNoKey);
  EXPECT_EQ(key_, "");
  EXPECT_TRUE(subjects_.GetCounts().list_matches.empty());
}

TEST_F(SubjectsTest, AMissingPartNamesItselfAndTheRulesOnMissing) {
  Config config = ListsConfig();
  config.rules.push_back(RuleOf("api").Key("key:{header:X-Api-Key}").Missing(OnMissing::kDeny));
  config.rules.push_back(RuleOf("plain").Key("{cookie:sid}"));
  config.rules.push_back(RuleOf("gate").Key("{header:x}").Deny("bad").Missing(OnMissing::kSkip));
  const auto rules = MustBuild(config);
  ASSERT_NE(rules, nullptr);
  SubjectAnswer a = Resolve(*rules, "api", FakeRequest());
  EXPECT_EQ(a.kind, Kind::kMissing);
  ASSERT_NE(a.missing, nullptr);
  EXPECT_EQ(a.missing->written, "{header:X-Api-Key}");
  EXPECT_EQ(a.on_missing, OnMissing::kDeny);
  EXPECT_EQ(key_, "");  // not "key:"
  a = Resolve(*rules, "api", FakeRequest().Add("x-api-key", "k1"));
  EXPECT_EQ(a.kind, Kind::kCheck);
  EXPECT_EQ(key_, "key:k1");
  a = Resolve(*rules, "plain", FakeRequest());
  EXPECT_EQ(a.kind, Kind::kMissing);
  EXPECT_EQ(a.on_missing, OnMissing::kError);
  EXPECT_EQ(a.missing->written, "{cookie:sid}");
  // The lists come first: a deny-listed client missing the part is denied.
  EXPECT_EQ(Resolve(*rules, "gate", FakeRequest().Peer("203.0.113.7")).kind, Kind::kDenyListed);
  a = Resolve(*rules, "gate", FakeRequest().Peer("192.0.2.1"));
  EXPECT_EQ(a.kind, Kind::kMissing);
  EXPECT_EQ(a.on_missing, OnMissing::kSkip);
  EXPECT_EQ(a.address, IpAddress::Parse("192.0.2.1"));
  // Resolve counts nothing missing: the fronts do as they answer.
  EXPECT_TRUE(subjects_.GetCounts().missing.empty());
}

TEST_F(SubjectsTest, CountMissingCountsByRuleAndPartAsAnswersNameIt) {
  const KeyTemplate t = ParseKeyTemplate("{header:X-Api-Key}{jwt:sub}").value();
  subjects_.CountMissing("api", t.parts[0]);
  subjects_.CountMissing("api", t.parts[0]);
  subjects_.CountMissing("user", t.parts[1]);
  const std::map<std::pair<std::string, std::string>, int64_t> want = {
      {{"api", "header:X-Api-Key"}, 2}, {{"user", "jwt:sub"}, 1}};
  EXPECT_EQ(subjects_.GetCounts().missing, want);
}

TEST_F(SubjectsTest, AVerifiedTokenNamesTheSubject) {
  const auto rules =
      MustBuild(JwtConfigWith({RuleOf("user").Key("u:{jwt:sub}"), RuleOf("ip").Key("{ip}")}));
  ASSERT_NE(rules, nullptr);
  ASSERT_NE(rules->jwt(), nullptr);
  SubjectAnswer a =
      Resolve(*rules, "user", FakeRequest().Add("Authorization", "Bearer " + Hs(Claims())));
  EXPECT_EQ(a.kind, Kind::kCheck);
  EXPECT_EQ(key_, "u:ana");
  json other = Claims();
  other["sub"] = "bo";
  Resolve(*rules, "user", FakeRequest().Add("authorization", "bearer  " + Es(other) + " "));
  EXPECT_EQ(key_, "u:bo");
  // An integer claim is its decimal text.
  other["sub"] = 42;
  Resolve(*rules, "user", FakeRequest().Add("Authorization", "Bearer " + Es(other)));
  EXPECT_EQ(key_, "u:42");
  EXPECT_EQ(subjects_.GetCounts().jwt_rejected, (std::array<int64_t, 8>{}));
}

TEST_F(SubjectsTest, ARefusedTokenIsNoTokenAndIsCountedByItsReason) {
  const auto rules = MustBuild(JwtConfigWith(
      {RuleOf("user").Key("{jwt:sub}").Missing(OnMissing::kDeny), RuleOf("ip").Key("{ip}")}));
  ASSERT_NE(rules, nullptr);
  auto bearer = [](const std::string& token) {
    return FakeRequest().Add("Authorization", "Bearer " + token);
  };
  json expired = Claims();
  expired["exp"] = kNowS - 30;  // expired once now >= exp + 30 s of leeway (the default)
  SubjectAnswer a = Resolve(*rules, "user", bearer(Hs(expired)));
  EXPECT_EQ(a.kind, Kind::kMissing);
  EXPECT_EQ(a.missing->written, "{jwt:sub}");
  EXPECT_EQ(a.on_missing, OnMissing::kDeny);
  EXPECT_EQ(key_, "");
  std::array<int64_t, 8> want{};
  want[static_cast<size_t>(JwtReason::kExpired)] = 1;
  EXPECT_EQ(subjects_.GetCounts().jwt_rejected, want);

  // Within the leeway: still valid.
  json fresh = expired;
  fresh["exp"] = kNowS - 29;
  EXPECT_EQ(Resolve(*rules, "user", bearer(Hs(fresh))).kind, Kind::kCheck);
  EXPECT_EQ(key_, "ana");

  // Another secret, another issuer.
  EXPECT_EQ(Resolve(*rules, "user", bearer(Hs(Claims(), "another-secret-of-32-bytes-long!"))).kind,
            Kind::kMissing);
  json issuer = Claims();
  issuer["iss"] = "https://evil.example.com";
  EXPECT_EQ(Resolve(*rules, "user", bearer(Es(issuer))).kind, Kind::kMissing);
  EXPECT_EQ(Resolve(*rules, "user", bearer("not.a.token")).kind, Kind::kMissing);
  want[static_cast<size_t>(JwtReason::kBadSignature)] = 1;
  want[static_cast<size_t>(JwtReason::kWrongIssuer)] = 1;
  want[static_cast<size_t>(JwtReason::kMalformed)] = 1;
  EXPECT_EQ(subjects_.GetCounts().jwt_rejected, want);

  // No token: missing, and nothing refused.
  EXPECT_EQ(Resolve(*rules, "user", FakeRequest()).kind, Kind::kMissing);
  EXPECT_EQ(Resolve(*rules, "user", FakeRequest().Add("Authorization", "Basic YTpi")).kind,
            Kind::kMissing);
  // A rule that reads no claim does not verify the token.
  EXPECT_EQ(Resolve(*rules, "ip", bearer(Hs(expired))).kind, Kind::kCheck);
  EXPECT_EQ(Resolve(*rules, "ip", bearer("garbage")).kind, Kind::kCheck);
  EXPECT_EQ(subjects_.GetCounts().jwt_rejected, want);
}

TEST_F(SubjectsTest, TheLeewayIsTheConfigs) {
  Config config = JwtConfigWith({RuleOf("user").Key("{jwt:sub}")});
  config.jwt.leeway_ms = 5'000;
  const auto rules = MustBuild(config);
  ASSERT_NE(rules, nullptr);
  json claims = Claims();
  claims["exp"] = kNowS - 5;
  EXPECT_EQ(
      Resolve(*rules, "user", FakeRequest().Add("Authorization", "Bearer " + Hs(claims))).kind,
      Kind::kMissing);
  claims["exp"] = kNowS - 4;
  EXPECT_EQ(
      Resolve(*rules, "user", FakeRequest().Add("Authorization", "Bearer " + Hs(claims))).kind,
      Kind::kCheck);
}

TEST_F(SubjectsTest, TheSecretMayBeSetDirectly) {
  Config config;
  config.jwt.in_file = true;
  config.jwt.hs256_secret = kSecret;  // as an embedding program does; no environment read
  config.jwt.hs256_secret_env = "FG_SUBJECTS_TEST_UNSET_VARIABLE";
  config.rules.push_back(RuleOf("user").Key("{jwt:sub}"));
  const auto rules = MustBuild(config);
  ASSERT_NE(rules, nullptr);
  Resolve(*rules, "user", FakeRequest().Add("Authorization", "Bearer " + Hs(Claims())));
  EXPECT_EQ(key_, "ana");
}

TEST_F(SubjectsTest, BuildKeepsWhatTheConfigSays) {
  Config config = ListsConfig();
  config.lists.push_back(FileList("file_list", Write("deny.txt", "# scanners\n192.0.2.0/24\n\n")));
  config.server.trusted_proxies = {"10.0.0.0/8"};
  config.rules.push_back(
      RuleOf("gate").Key("{ip/24}").Deny("file_list").Missing(OnMissing::kAllow));
  Rule plain;
  plain.name = "plain";
  config.rules.push_back(plain);
  const auto rules = MustBuild(config);
  ASSERT_NE(rules, nullptr);
  EXPECT_FALSE(rules->empty());
  EXPECT_TRUE(rules->any_lists());
  ASSERT_EQ(rules->lists().size(), 3u);
  EXPECT_EQ(rules->lists()[0]->name, "bad");
  EXPECT_EQ(rules->lists()[0]->source, "inline");
  EXPECT_EQ(rules->lists()[2]->name, "file_list");
  EXPECT_EQ(rules->lists()[2]->source, dir_ + "/deny.txt");
  EXPECT_EQ(rules->lists()[2]->networks.size(), 1u);
  EXPECT_TRUE(rules->trusted_proxies().Contains(*IpAddress::Parse("10.9.8.7")));
  EXPECT_FALSE(rules->trusted_proxies().Contains(*IpAddress::Parse("11.0.0.1")));
  EXPECT_EQ(rules->jwt(), nullptr);
  const RuleSubject* gate = rules->Of("gate");
  ASSERT_NE(gate, nullptr);
  EXPECT_EQ(gate->rule, "gate");
  ASSERT_TRUE(gate->key.has_value());
  EXPECT_EQ(gate->key->text, "{ip/24}");
  EXPECT_EQ(gate->on_missing, OnMissing::kAllow);
  EXPECT_EQ(gate->deny, rules->lists()[2].get());
  EXPECT_EQ(gate->allow, nullptr);
  EXPECT_EQ(rules->Of("plain"), nullptr);  // no subject config
  EXPECT_EQ(rules->Of("nope"), nullptr);

  // Lists without a rule that names them are read (and checked) all the same.
  Config unused = ListsConfig();
  const auto lists_only = MustBuild(unused);
  ASSERT_NE(lists_only, nullptr);
  EXPECT_TRUE(lists_only->empty());
  EXPECT_FALSE(lists_only->any_lists());
  EXPECT_EQ(lists_only->lists().size(), 2u);
}

TEST_F(SubjectsTest, BuildRefusals) {
  {
    Config config = ListsConfig();
    config.rules.push_back(RuleOf("gate").Key("{ip}").Deny("nope"));
    EXPECT_EQ(BuildError(config), "rule 'gate': 'nope' is not a list of 'lists:'");
    config.rules[0].subject.deny_list = "bad";
    config.rules[0].subject.allow_list = "partner";
    EXPECT_EQ(BuildError(config), "rule 'gate': 'partner' is not a list of 'lists:'");
  }
  {
    Config config;
    config.lists.push_back(Inline("partners", {"192.0.2.0/24", "10.0.0.0/33"}));
    EXPECT_EQ(BuildError(config),
              "lists.partners.cidrs[1]: '10.0.0.0/33': prefix length 33 is past 32 for IPv4");
  }
  {
    Config config;
    const std::string path = Write("deny.txt", "# comment\n192.0.2.0/24\n\n300.1.2.3\n");
    config.lists.push_back(FileList("deny", path));
    const std::string error = BuildError(config);
    EXPECT_EQ(error.rfind(path + ":4: '300.1.2.3': ", 0), 0u) << error;
    config.lists[0].file = dir_ + "/absent.txt";
    EXPECT_NE(BuildError(config).find(dir_ + "/absent.txt"), std::string::npos);
  }
  {
    Config config;
    config.server.trusted_proxies = {"10.0.0.0/8", "nonsense"};
    const std::string error = BuildError(config);
    EXPECT_EQ(error.rfind("server.trusted_proxies[1]: 'nonsense': ", 0), 0u) << error;
  }
  {
    Config config;
    config.rules.push_back(RuleOf("user").Key("u:{jwt:sub}"));
    EXPECT_EQ(BuildError(config),
              "rule 'user': key 'u:{jwt:sub}' reads a token ({jwt:...}) and the config has no "
              "'jwt:'");
  }
  {
    Config config;
    config.rules.push_back(RuleOf("bad").Key("{ip/33}"));
    EXPECT_EQ(BuildError(config).rfind("rule 'bad': key: '{ip/33}': 33 is past 32", 0), 0u);
  }
}

TEST_F(SubjectsTest, Hs256SecretRefusals) {
  Config config;
  config.jwt.in_file = true;
  config.jwt.hs256_secret_env = kSecretEnv;
  config.rules.push_back(RuleOf("user").Key("{jwt:sub}"));
  ::unsetenv(kSecretEnv);
  EXPECT_EQ(BuildError(config),
            std::string("jwt: hs256_secret_env names ") + kSecretEnv + ", which is not set");
  ::setenv(kSecretEnv, "", 1);
  EXPECT_EQ(BuildError(config),
            std::string("jwt: hs256_secret_env names ") + kSecretEnv + ", which is not set");
  ::setenv(kSecretEnv, std::string(31, 's').c_str(), 1);
  EXPECT_EQ(BuildError(config), "jwt: the HS256 secret is 31 bytes; at least 32 are required");
  ::setenv(kSecretEnv, std::string(32, 's').c_str(), 1);
  EXPECT_EQ(BuildError(config), "(built)");
  // A JWKS file that is not there.
  config.jwt.jwks_file = dir_ + "/absent.json";
  EXPECT_NE(BuildError(config).find(dir_ + "/absent.json"), std::string::npos);
}

TEST_F(SubjectsTest, PublishAndActive) {
  EXPECT_FALSE(subjects_.active());
  // Nothing published is no rule at all, never a null to trip on.
  ASSERT_NE(subjects_.Current(), nullptr);
  EXPECT_TRUE(subjects_.Current()->empty());
  EXPECT_TRUE(subjects_.ForThisThread().empty());
  Config config = ListsConfig();
  config.rules.push_back(RuleOf("gate").Deny("bad"));
  const auto rules = MustBuild(config);
  subjects_.Publish(rules);
  EXPECT_TRUE(subjects_.active());
  EXPECT_EQ(subjects_.Current(), rules);
  // Rules none of which has a subject config: nothing to do per check.
  const auto none = MustBuild(ListsConfig());
  subjects_.Publish(none);
  EXPECT_FALSE(subjects_.active());
  EXPECT_EQ(subjects_.Current(), none);
  subjects_.Publish(rules);
  EXPECT_TRUE(subjects_.active());
  subjects_.Publish(nullptr);
  EXPECT_FALSE(subjects_.active());
  // Nothing published is no rule at all, never a null to trip on.
  ASSERT_NE(subjects_.Current(), nullptr);
  EXPECT_TRUE(subjects_.Current()->empty());
  EXPECT_TRUE(subjects_.ForThisThread().empty());
}

TEST(BearerTokenOfTest, TheTokenOfABearerAuthorization) {
  auto token = [](std::string value) {
    return std::string(
        BearerTokenOf(FakeRequest().Add("Authorization", std::move(value)), "authorization"));
  };
  EXPECT_EQ(token("Bearer abc.def.ghi"), "abc.def.ghi");
  EXPECT_EQ(token("bearer abc"), "abc");
  EXPECT_EQ(token("BEARER   abc  "), "abc");
  EXPECT_EQ(token("Bearer "), "");
  EXPECT_EQ(token("Bearer"), "");
  EXPECT_EQ(token("Bearerabc"), "");
  EXPECT_EQ(token("Basic YTpi"), "");
  EXPECT_EQ(std::string(BearerTokenOf(FakeRequest(), "authorization")), "");
  // jwt.header: another field, the same scheme.
  EXPECT_EQ(std::string(BearerTokenOf(FakeRequest().Add("X-Client-Authorization", "Bearer t1"),
                                      "x-client-authorization")),
            "t1");
  EXPECT_EQ(std::string(BearerTokenOf(FakeRequest().Add("Authorization", "Bearer t1"),
                                      "x-client-authorization")),
            "");
}

}  // namespace
}  // namespace floodgate::service
