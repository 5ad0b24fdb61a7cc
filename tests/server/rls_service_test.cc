// Envoy's rate limit service on the Limiter: envoyproxy/ratelimit's README
// examples as tests of matching and limits, then hits_addend, windows,
// replaces, shadow mode, response headers and floodgate rules named from a
// descriptor. The embedded store and a manual clock: every answer is exact.
#include "server/grpc/rls_service.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "api/open_services.h"

namespace floodgate::server {
namespace {

using envoy::DomainConfig;
using envoy::ParseDomain;
using envoy::Rules;
using envoy::WithEnvoyRules;
using rls::Code;
using rls::DescriptorStatus;
using rls::Unit;

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::StartsWith;

// 2023-11-14T22:13:00Z: a whole minute, so windows start here.
constexpr int64_t kStartMs = 1'700'000'000'000 - 1'700'000'000'000 % 60'000;

using Entries = std::vector<std::pair<std::string, std::string>>;

struct Desc {
  Entries entries;
  std::optional<uint64_t> hits = std::nullopt;
};

// An answer and the fallbacks behind it (which the wire shows only as a
// header).
struct Response : rls::Response {
  std::vector<Fallback> fallbacks;  // per descriptor
};

class EnvoyRlsTest : public ::testing::Test {
 protected:
  // `floodgate_yaml` is floodgate's config (rules, envoy_ratelimit options);
  // `files` the envoyproxy/ratelimit files.
  void Load(const std::vector<std::string>& files, const std::string& floodgate_yaml = "") {
    Result<Config> config = ParseConfig(floodgate_yaml, "floodgate.yaml");
    ASSERT_TRUE(config.ok()) << config.status().message();
    config_ = *config;
    std::vector<DomainConfig> domains;
    for (size_t i = 0; i < files.size(); ++i) {
      Result<DomainConfig> d = ParseDomain(files[i], "rl" + std::to_string(i) + ".yaml");
      ASSERT_TRUE(d.ok()) << d.status().message();
      domains.push_back(*d);
    }
    Result<std::shared_ptr<const Rules>> rules = Rules::Compile(config_, domains);
    ASSERT_TRUE(rules.ok()) << rules.status().message();
    rules_ = *rules;
    if (services_ == nullptr) {
      auto limiter_services = api::OpenServices(WithEnvoyRules(config_, *rules_, nullptr), clock_);
      ASSERT_TRUE(limiter_services.ok()) << limiter_services.status().message();
      services_ = std::move(*limiter_services);
      rls_ = std::make_unique<RlsService>(services_->core.get(), clock_);
    } else {
      ASSERT_TRUE(services_->Reload(WithEnvoyRules(config_, *rules_, rls_->rules().get())).ok());
    }
    rls_->SetRules(rules_);
  }

  // One ShouldRateLimit call, answered inline by the embedded store. The
  // same RlsCall serves every call of a test, as a server thread reuses one.
  Result<Response> Call(const std::string& domain, const std::vector<Desc>& descriptors,
                        uint32_t hits_addend = 0) {
    rls::Request request;
    request.domain = domain;
    request.hits_addend = hits_addend;
    for (const Desc& d : descriptors) {
      rls::RequestDescriptor& rd = request.descriptors.emplace_back();
      for (const auto& [k, v] : d.entries) rd.entries.push_back({k, v});
      rd.hits_addend = d.hits;
    }
    const bool decided = call_.Start(*rls_, request, nullptr);
    EXPECT_TRUE(decided) << "the embedded store answers inline";
    if (!decided) return InternalError("no answer");
    if (!call_.status().ok()) return call_.status();
    for (const RlsCall::Outcome& o : call_.outcomes()) {
      outcomes_.push_back(call_.domain() + "." + std::string(o.metric) +
                          (o.code == Code::kOverLimit ? ":over"
                           : o.shadow_over            ? ":shadow"
                                                      : ":ok"));
    }
    Response r;
    static_cast<rls::Response&>(r) = call_.response();
    for (size_t i = 0; i < descriptors.size(); ++i) r.fallbacks.push_back(call_.fallback(i));
    return r;
  }

  // The overall code of one single-descriptor call.
  Code One(const std::string& domain, const Entries& entries) {
    Result<Response> r = Call(domain, {{entries, std::nullopt}});
    EXPECT_TRUE(r.ok()) << r.status().message();
    return r.ok() ? r->overall_code : Code::kUnknown;
  }

  // How many of `n` single-descriptor calls were OK.
  int Admitted(const std::string& domain, const Entries& entries, int n) {
    int ok = 0;
    for (int i = 0; i < n; ++i) ok += One(domain, entries) == Code::kOk;
    return ok;
  }

  ManualClock clock_{kStartMs};
  Config config_;
  std::shared_ptr<const Rules> rules_;
  std::unique_ptr<service::Services> services_;
  std::unique_ptr<RlsService> rls_;
  RlsCall call_{nullptr};
  std::vector<std::string> outcomes_;
};

// --- The README's examples ---

TEST_F(EnvoyRlsTest, Example1TwoValuesOfOneKey) {
  Load({R"(domain: mongo_cps
descriptors:
  - key: database
    value: users
    rate_limit:
      unit: second
      requests_per_unit: 500

  - key: database
    value: default
    rate_limit:
      unit: second
      requests_per_unit: 500
)"});
  EXPECT_EQ(Admitted("mongo_cps", {{"database", "users"}}, 501), 500);
  EXPECT_EQ(Admitted("mongo_cps", {{"database", "default"}}, 501), 500);
  // A value the config does not name matches nothing: never limited.
  EXPECT_EQ(Admitted("mongo_cps", {{"database", "other"}}, 600), 600);
  clock_.AdvanceMs(1000);  // the next one-second window
  EXPECT_EQ(One("mongo_cps", {{"database", "users"}}), Code::kOk);

  Result<Response> r = Call("mongo_cps", {{{{"database", "users"}}}});
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->statuses.size(), 1u);
  const DescriptorStatus& st = r->statuses[0];
  EXPECT_TRUE(st.has_limit);
  EXPECT_EQ(st.current_limit.requests_per_unit, 500u);
  EXPECT_EQ(st.current_limit.unit, Unit::kSecond);
  EXPECT_EQ(st.limit_remaining, 498u);
  EXPECT_EQ(st.duration_until_reset_ms, 1000);
}

constexpr char kMessaging[] = R"(domain: messaging
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
)";

TEST_F(EnvoyRlsTest, Example2NestedDescriptorsPerNumber) {
  Load({kMessaging});
  const Entries marketing_a = {{"message_type", "marketing"}, {"to_number", "2061111111"}};
  const Entries marketing_b = {{"message_type", "marketing"}, {"to_number", "2062222222"}};
  // Each number has its own 5 a day.
  EXPECT_EQ(Admitted("messaging", marketing_a, 6), 5);
  EXPECT_EQ(Admitted("messaging", marketing_b, 6), 5);
  // And its own 100 a day, whatever the type.
  EXPECT_EQ(Admitted("messaging", {{"to_number", "2061111111"}}, 101), 100);
  EXPECT_EQ(Admitted("messaging", {{"to_number", "2063333333"}}, 101), 100);
  // Another message type matches no nested entry: no limit.
  EXPECT_EQ(One("messaging", {{"message_type", "receipt"}, {"to_number", "2061111111"}}),
            Code::kOk);
}

TEST_F(EnvoyRlsTest, Example2BothDescriptorsInOneRequestAndOverLimitNotCounted) {
  Load({kMessaging});
  const Desc marketing{{{"message_type", "marketing"}, {"to_number", "2061111111"}}, {}};
  const Desc number{{{"to_number", "2061111111"}}, {}};
  for (int i = 0; i < 5; ++i) {
    Result<Response> r = Call("messaging", {marketing, number});
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->overall_code, Code::kOk);
    EXPECT_EQ(r->statuses[0].limit_remaining, static_cast<uint32_t>(4 - i));
    EXPECT_EQ(r->statuses[1].limit_remaining, static_cast<uint32_t>(99 - i));
  }
  // The 6th is over the marketing limit: the aggregate is OVER_LIMIT, and
  // the per-number counter is not charged for it.
  for (int i = 0; i < 3; ++i) {
    Result<Response> r = Call("messaging", {marketing, number});
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->overall_code, Code::kOverLimit);
    EXPECT_EQ(r->statuses[0].code, Code::kOverLimit);
    EXPECT_EQ(r->statuses[0].limit_remaining, 0u);
    EXPECT_EQ(r->statuses[1].code, Code::kOk);
    EXPECT_EQ(r->statuses[1].limit_remaining, 95u);
    // What bound it, as the HTTP front's Floodgate-Limit field says it:
    // the deciding rule and its limit (docs/visibility.md).
    ASSERT_EQ(r->response_headers.size(), 1u);
    EXPECT_EQ(r->response_headers[0].key, "floodgate-limit");
    EXPECT_TRUE(r->response_headers[0].value.ends_with(";5/day")) << r->response_headers[0].value;
    EXPECT_EQ(r->response_headers[0].value.find(','), std::string::npos);
  }
  Result<Response> r = Call("messaging", {number});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->statuses[0].limit_remaining, 94u);
  // A day later both are fresh.
  clock_.AdvanceMs(86'400'000);
  r = Call("messaging", {marketing, number});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->overall_code, Code::kOk);
  EXPECT_EQ(r->statuses[0].limit_remaining, 4u);
  EXPECT_EQ(r->statuses[1].limit_remaining, 99u);
}

TEST_F(EnvoyRlsTest, Example3MostSpecificFirstAndZeroLimit) {
  Load({R"(domain: edge_proxy_per_ip
descriptors:
  - key: remote_address
    rate_limit:
      unit: second
      requests_per_unit: 10

  # Black list IP
  - key: remote_address
    value: 50.0.0.5
    rate_limit:
      unit: second
      requests_per_unit: 0
)"});
  EXPECT_EQ(Admitted("edge_proxy_per_ip", {{"remote_address", "50.0.0.1"}}, 11), 10);
  EXPECT_EQ(Admitted("edge_proxy_per_ip", {{"remote_address", "50.0.0.2"}}, 11), 10);
  EXPECT_EQ(Admitted("edge_proxy_per_ip", {{"remote_address", "50.0.0.5"}}, 3), 0);
  clock_.AdvanceMs(1000);
  EXPECT_EQ(Admitted("edge_proxy_per_ip", {{"remote_address", "50.0.0.5"}}, 1), 0);
  Result<Response> r = Call("edge_proxy_per_ip", {{{{"remote_address", "50.0.0.5"}}}});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->statuses[0].current_limit.requests_per_unit, 0u);
  EXPECT_EQ(r->statuses[0].duration_until_reset_ms, 1000);
}

TEST_F(EnvoyRlsTest, Example4DepthMustMatch) {
  Load({R"(domain: example4
descriptors:
  - key: key
    value: value
    rate_limit:
      requests_per_unit: 300
      unit: second
)"});
  const Entries two = {{"key", "value"}, {"subkey", "subvalue"}};
  // Two entries against a one-level config: no match, never limited.
  EXPECT_EQ(Admitted("example4", two, 301), 301);
  EXPECT_EQ(Admitted("example4", {{"key", "value"}}, 301), 300);
}

TEST_F(EnvoyRlsTest, Example4NestedConfigMatchesTwoEntries) {
  Load({R"(domain: example4
descriptors:
  - key: key
    value: value
    descriptors:
      - key: subkey
        rate_limit:
          requests_per_unit: 300
          unit: second
)"});
  EXPECT_EQ(Admitted("example4", {{"key", "value"}, {"subkey", "subvalue"}}, 301), 300);
  // One entry stops at a level without a limit.
  EXPECT_EQ(Admitted("example4", {{"key", "value"}}, 301), 301);
}

TEST_F(EnvoyRlsTest, Example5Unlimited) {
  Load({R"(domain: internal
descriptors:
  - key: ldap
    rate_limit:
      unlimited: true

  - key: azure
    rate_limit:
      unit: minute
      requests_per_unit: 100
)"});
  Result<Response> r = Call("internal", {{{{"ldap", "x"}}}});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->overall_code, Code::kOk);
  EXPECT_FALSE(r->statuses[0].has_limit);
  EXPECT_EQ(r->statuses[0].limit_remaining, UINT32_MAX);
  EXPECT_EQ(Admitted("internal", {{"ldap", "x"}}, 1000), 1000);
  EXPECT_EQ(Admitted("internal", {{"azure", "x"}}, 101), 100);
}

TEST_F(EnvoyRlsTest, Example6ShadowModeCountsButAnswersOk) {
  Load({R"(domain: example6
descriptors:
  - key: service
    descriptors:
      - key: user
        value: user-a
        rate_limit:
          requests_per_unit: 10
          unit: second
        shadow_mode: true
      - key: user
        value: user-b
        rate_limit:
          requests_per_unit: 20
          unit: second
)"});
  const Entries a = {{"service", "auth-service"}, {"user", "user-a"}};
  const Entries b = {{"service", "auth-service"}, {"user", "user-b"}};
  EXPECT_EQ(Admitted("example6", a, 15), 15);
  EXPECT_EQ(Admitted("example6", b, 21), 20);
  // The breach shows in the outcomes: 10 ok, then 5 shadow.
  EXPECT_EQ(std::count(outcomes_.begin(), outcomes_.end(), "example6.service.user_user-a:shadow"),
            5);
  EXPECT_EQ(std::count(outcomes_.begin(), outcomes_.end(), "example6.service.user_user-a:ok"), 10);
  Result<Response> r = Call("example6", {{a, {}}});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->statuses[0].code, Code::kOk);
  EXPECT_EQ(r->statuses[0].limit_remaining, 0u);
}

constexpr char kExample7[] = R"(domain: example7
descriptors:
  - key: key_1
    value: value_1
    descriptors:
      - key: user
        value: bkthomps
        rate_limit:
          name: specific_limit
          requests_per_unit: 5
          unit: second
  - key: key_2
    value: value_2
    descriptors:
      - key: user
        value: bkthomps
        rate_limit:
          replaces:
            - name: specific_limit
          requests_per_unit: 10
          unit: second
)";

TEST_F(EnvoyRlsTest, Example7Replaces) {
  Load({kExample7});
  const Desc one{{{"key_1", "value_1"}, {"user", "bkthomps"}}, {}};
  const Desc two{{{"key_2", "value_2"}, {"user", "bkthomps"}}, {}};
  // Together, the 10/s limit replaces the 5/s one.
  int ok = 0;
  for (int i = 0; i < 11; ++i) {
    Result<Response> r = Call("example7", {one, two});
    ASSERT_TRUE(r.ok());
    EXPECT_FALSE(r->statuses[0].has_limit);
    EXPECT_EQ(r->statuses[0].code, Code::kOk);
    EXPECT_EQ(r->statuses[1].current_limit.requests_per_unit, 10u);
    ok += r->overall_code == Code::kOk;
  }
  EXPECT_EQ(ok, 10);
  // The replaced limit was not touched: alone, it still has its 5.
  EXPECT_EQ(Admitted("example7", one.entries, 6), 5);
}

TEST_F(EnvoyRlsTest, Example8DetailedMetric) {
  Load({R"(domain: example8
descriptors:
  - key: key1
    detailed_metric: true
    rate_limit:
      unit: minute
      requests_per_unit: 10
  - key: key1
    value: value1
    rate_limit:
      unit: minute
      requests_per_unit: 20
)"});
  EXPECT_EQ(Admitted("example8", {{"key1", "unspecified_value"}}, 11), 10);
  EXPECT_EQ(Admitted("example8", {{"key1", "unspecified_value2"}}, 11), 10);
  EXPECT_EQ(Admitted("example8", {{"key1", "value1"}}, 21), 20);
  std::set<std::string> names;
  for (const std::string& o : outcomes_) names.insert(o.substr(0, o.rfind(':')));
  EXPECT_THAT(names, ElementsAre("example8.key1_unspecified_value",
                                 "example8.key1_unspecified_value2", "example8.key1_value1"));
}

TEST_F(EnvoyRlsTest, Example9WildcardValues) {
  Load({R"(domain: example9
descriptors:
  - key: key1
    value: value*
    rate_limit:
      unit: minute
      requests_per_unit: 20
)"});
  // Each matching value has its own counter, as the value is part of the key.
  EXPECT_EQ(Admitted("example9", {{"key1", "value_1"}}, 21), 20);
  EXPECT_EQ(Admitted("example9", {{"key1", "value_2"}}, 21), 20);
  EXPECT_EQ(Admitted("example9", {{"key1", "other"}}, 30), 30);
  EXPECT_EQ(Admitted("example9", {{"key2", "value_1"}}, 30), 30);
}

TEST_F(EnvoyRlsTest, ExactValueBeforeWildcardBeforeAnyValue) {
  Load({R"(domain: d
descriptors:
  - key: k
    rate_limit: { unit: minute, requests_per_unit: 3 }
  - key: k
    value: ab*
    rate_limit: { unit: minute, requests_per_unit: 2 }
  - key: k
    value: a*
    rate_limit: { unit: minute, requests_per_unit: 4 }
  - key: k
    value: abc
    rate_limit: { unit: minute, requests_per_unit: 1 }
)"});
  EXPECT_EQ(Admitted("d", {{"k", "abc"}}, 10), 1);
  EXPECT_EQ(Admitted("d", {{"k", "abd"}}, 10), 2);  // the first wildcard in file order
  EXPECT_EQ(Admitted("d", {{"k", "ax"}}, 10), 4);
  EXPECT_EQ(Admitted("d", {{"k", "z"}}, 10), 3);
}

// --- Requests ---

TEST_F(EnvoyRlsTest, UnknownDomainIsOkWithoutLimits) {
  Load({kMessaging});
  Result<Response> r = Call("nope", {{{{"to_number", "1"}}}, {{{"a", "b"}, {"c", "d"}}}});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->overall_code, Code::kOk);
  ASSERT_EQ(r->statuses.size(), 2u);
  for (const DescriptorStatus& st : r->statuses) {
    EXPECT_EQ(st.code, Code::kOk);
    EXPECT_FALSE(st.has_limit);
    EXPECT_EQ(st.limit_remaining, 0u);
    EXPECT_EQ(st.duration_until_reset_ms, -1);
  }
  // A descriptor without entries matches nothing either.
  r = Call("messaging", {{{}, {}}});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->overall_code, Code::kOk);
}

TEST_F(EnvoyRlsTest, EmptyDomainOrNoDescriptorsIsAnError) {
  Load({kMessaging});
  Result<Response> r = Call("", {{{{"to_number", "1"}}}});
  EXPECT_EQ(r.status().message(), "rate limit domain must not be empty");
  r = Call("messaging", {});
  EXPECT_EQ(r.status().message(), "rate limit descriptor list must not be empty");
}

TEST_F(EnvoyRlsTest, HitsAddend) {
  Load({R"(domain: d
descriptors:
  - key: k
    rate_limit: { unit: minute, requests_per_unit: 10 }
)"});
  const Entries e = {{"k", "v"}};
  // Request level: 0 means 1.
  Result<Response> r = Call("d", {{e, {}}}, 0);
  EXPECT_EQ(r->statuses[0].limit_remaining, 9u);
  r = Call("d", {{e, {}}}, 4);
  EXPECT_EQ(r->statuses[0].limit_remaining, 5u);
  // A descriptor's own value wins; 0 checks without counting.
  r = Call("d", {{e, 0}}, 7);
  EXPECT_EQ(r->overall_code, Code::kOk);
  EXPECT_EQ(r->statuses[0].limit_remaining, 5u);
  r = Call("d", {{e, 5}}, 7);
  EXPECT_EQ(r->statuses[0].limit_remaining, 0u);
  EXPECT_EQ(r->overall_code, Code::kOk);
  // Over: nothing is consumed, and a check still says OK with 0 left.
  r = Call("d", {{e, 1}});
  EXPECT_EQ(r->overall_code, Code::kOverLimit);
  r = Call("d", {{e, 0}});
  EXPECT_EQ(r->overall_code, Code::kOk);
  // More than any limit can hold.
  r = Call("d", {{{{"k", "w"}}, uint64_t{1} << 62}});
  EXPECT_EQ(r->overall_code, Code::kOverLimit);
  EXPECT_EQ(Admitted("d", {{"k", "w"}}, 11), 10);
}

TEST_F(EnvoyRlsTest, FixedWindowEdges) {
  Load({R"(domain: d
descriptors:
  - key: k
    rate_limit: { unit: second, requests_per_unit: 2 }
)"});
  clock_.SetMs(kStartMs + 999);
  EXPECT_EQ(Admitted("d", {{"k", "v"}}, 3), 2);
  Result<Response> r = Call("d", {{{{"k", "v"}}, 0}});
  EXPECT_EQ(r->statuses[0].duration_until_reset_ms, 1);
  clock_.SetMs(kStartMs + 1000);
  EXPECT_EQ(Admitted("d", {{"k", "v"}}, 3), 2);
}

TEST_F(EnvoyRlsTest, ResponseHeadersFromTheClosestDescriptor) {
  Load({kMessaging}, "envoy_ratelimit: { response_headers: true }\n");
  const Desc marketing{{{"message_type", "marketing"}, {"to_number", "1"}}, {}};
  const Desc number{{{"to_number", "1"}}, {}};
  clock_.AdvanceMs(3'600'000);
  Result<Response> r = Call("messaging", {number, marketing});
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->response_headers.size(), 3u);
  EXPECT_EQ(r->response_headers[0].key, "RateLimit-Limit");
  EXPECT_EQ(r->response_headers[0].value, "5");
  EXPECT_EQ(r->response_headers[1].key, "RateLimit-Remaining");
  EXPECT_EQ(r->response_headers[1].value, "4");
  EXPECT_EQ(r->response_headers[2].key, "RateLimit-Reset");
  const int64_t now = kStartMs + 3'600'000;
  EXPECT_EQ(r->response_headers[2].value, std::to_string((86'400'000 - now % 86'400'000) / 1000));
  // Off by default.
  Load({kMessaging});
  r = Call("messaging", {number});
  EXPECT_TRUE(r->response_headers.empty());
}

// A full embedded store: a new descriptor is decided by
// envoy_ratelimit.on_store_full (deny by default), named in a
// floodgate-fallback header, with no made-up figures or RateLimit-* headers.
constexpr const char* kPerUser = R"(domain: api
descriptors:
  - key: user
    rate_limit: { unit: minute, requests_per_unit: 10 }
  - key: path
    rate_limit: { unit: hour, requests_per_unit: 100 }
)";

TEST_F(EnvoyRlsTest, AFullStoreDeniesANewDescriptorMarkedWithoutFigures) {
  Load({kPerUser},
       "engine: { max_entries: 1 }\n"
       "envoy_ratelimit: { response_headers: true }\n");
  const Entries alice = {{"user", "alice"}};
  EXPECT_EQ(One("api", alice), Code::kOk);  // takes the store's only entry

  Result<Response> r = Call("api", {{{{"user", "bob"}}, {}}});
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->overall_code, Code::kOverLimit);
  ASSERT_EQ(r->statuses.size(), 1u);
  const DescriptorStatus& st = r->statuses[0];
  EXPECT_EQ(st.code, Code::kOverLimit);
  EXPECT_EQ(r->fallbacks[0], Fallback::kStoreFull);
  EXPECT_EQ(st.current_limit.requests_per_unit, 10u);  // configuration: known
  EXPECT_EQ(st.limit_remaining, 0u);                   // proto3's "unset"
  EXPECT_EQ(st.duration_until_reset_ms, -1);           // not given
  ASSERT_EQ(r->response_headers.size(), 1u);
  EXPECT_EQ(r->response_headers[0].key, "floodgate-fallback");
  EXPECT_EQ(r->response_headers[0].value, "store_full");
  EXPECT_EQ(services_->core->GetStats().fallback_store_full, 1);

  // A request with a real descriptor and a fallback one: still no figures.
  r = Call("api", {{alice, {}}, {{{"path", "/x"}}, {}}});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->overall_code, Code::kOverLimit);
  EXPECT_EQ(r->statuses[0].code, Code::kOk);
  EXPECT_EQ(r->fallbacks[0], Fallback::kNone);
  EXPECT_EQ(r->fallbacks[1], Fallback::kStoreFull);
  ASSERT_EQ(r->response_headers.size(), 1u);
  EXPECT_EQ(r->response_headers[0].key, "floodgate-fallback");
  // The check round's peeks keep nothing, so they found room; the count
  // round met the full store after alice was counted (the two rounds are
  // not atomic together; see rls_service.h): 8 left.
  r = Call("api", {{alice, 0}});
  EXPECT_EQ(r->statuses[0].limit_remaining, 8u);
  EXPECT_EQ(r->fallbacks[0], Fallback::kNone);
}

TEST_F(EnvoyRlsTest, OnStoreFullAllowAdmitsANewDescriptorMarked) {
  Load({kPerUser}, "engine: { max_entries: 1 }\nenvoy_ratelimit: { on_store_full: allow }\n");
  EXPECT_EQ(One("api", {{"user", "alice"}}), Code::kOk);
  Result<Response> r = Call("api", {{{{"user", "bob"}}, {}}});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->overall_code, Code::kOk);
  EXPECT_EQ(r->fallbacks[0], Fallback::kStoreFull);
  EXPECT_EQ(r->statuses[0].limit_remaining, 0u);
  ASSERT_EQ(r->response_headers.size(), 1u);
  EXPECT_EQ(r->response_headers[0].value, "store_full");
  // Two descriptors, both fallbacks that admit: counted (nothing kept), OK.
  r = Call("api", {{{{"user", "carol"}}, {}}, {{{"path", "/y"}}, {}}});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->overall_code, Code::kOk);
  EXPECT_EQ(outcomes_.back(), "api.path:ok");
}

TEST_F(EnvoyRlsTest, FloodgateRuleGivesASlidingWindow) {
  Load({R"(domain: api
descriptors:
  - key: user
    rate_limit:
      floodgate_rule: per_user
      name: users
)"},
       "rules:\n  per_user: { algorithm: sliding_window, limits: [10/minute] }\n");
  const Entries u = {{"user", "alice"}};
  EXPECT_EQ(Admitted("api", u, 11), 10);
  // Half a minute into the next window half of the previous one still counts.
  clock_.AdvanceMs(90'000);
  EXPECT_EQ(Admitted("api", u, 11), 5);
  Result<Response> r = Call("api", {{u, 0}});
  EXPECT_EQ(r->statuses[0].current_limit.requests_per_unit, 10u);
  EXPECT_EQ(r->statuses[0].current_limit.unit, Unit::kMinute);
  EXPECT_EQ(r->statuses[0].current_limit.name, "users");
}

TEST_F(EnvoyRlsTest, TheDenialThatStartsABlockForAnswersAsTheBlock) {
  Load({R"(domain: api
descriptors:
  - key: user
    rate_limit:
      floodgate_rule: login
)"},
       "rules:\n  login: { algorithm: fixed_window, limits: [2/minute], block_for: 5m }\n");
  const Entries u = {{"user", "alice"}};
  EXPECT_EQ(Admitted("api", u, 2), 2);
  // The limit's own wait would be the minute's end; the block's is 5 minutes.
  Result<Response> first = Call("api", {{u, std::nullopt}});
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(first->overall_code, Code::kOverLimit);
  EXPECT_EQ(first->statuses[0].limit_remaining, 0u);
  EXPECT_EQ(first->statuses[0].duration_until_reset_ms, 300'000);
  clock_.AdvanceMs(1'000);
  Result<Response> then = Call("api", {{u, std::nullopt}});
  ASSERT_TRUE(then.ok());
  EXPECT_EQ(then->overall_code, Code::kOverLimit);
  EXPECT_EQ(then->statuses[0].duration_until_reset_ms, 299'000);
  // Neither names a limit that bound it: a block did.
  for (const Response* r : {&*first, &*then}) {
    for (const rls::Header& h : r->response_headers) EXPECT_NE(h.key, "floodgate-limit");
  }
}

TEST_F(EnvoyRlsTest, DefaultAlgorithmFromFloodgateConfig) {
  Load({R"(domain: d
descriptors:
  - key: k
    rate_limit: { unit: second, requests_per_unit: 10 }
)"},
       "envoy_ratelimit: { algorithm: gcra }\n");
  EXPECT_THAT(rules_->floodgate_rules().front().name, "envoy:gcra:10/second");
  EXPECT_EQ(Admitted("d", {{"k", "v"}}, 11), 10);
  clock_.AdvanceMs(100);  // gcra refills one every 100 ms
  EXPECT_EQ(Admitted("d", {{"k", "v"}}, 2), 1);
}

TEST_F(EnvoyRlsTest, ReloadKeepsUnchangedCountersAndDropsRemovedDomains) {
  Load({kMessaging});
  const Entries number = {{"to_number", "1"}};
  EXPECT_EQ(Admitted("messaging", number, 40), 40);
  Load({kMessaging,
        "domain: other\ndescriptors: [{key: a, rate_limit: {unit: hour, "
        "requests_per_unit: 1}}]\n"});
  EXPECT_EQ(Admitted("messaging", number, 100), 60);
  EXPECT_EQ(Admitted("other", {{"a", "x"}}, 2), 1);
  Load({kMessaging});
  EXPECT_EQ(Admitted("other", {{"a", "x"}}, 3), 3);
}

TEST(EnvoyRulesTest, CompileErrorsNameTheFile) {
  Result<Config> config = ParseConfig("", "fg.yaml");
  ASSERT_TRUE(config.ok());
  Result<DomainConfig> d = ParseDomain(
      "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {floodgate_rule: nope}\n", "rl.yaml");
  ASSERT_TRUE(d.ok()) << d.status().message();
  EXPECT_EQ(Rules::Compile(*config, {*d}).status().message(),
            "rl.yaml:4:17: floodgate_rule 'nope' is not a rule of fg.yaml");

  config = ParseConfig("envoy_ratelimit: {algorithm: sliding_log}\n", "fg.yaml");
  d = ParseDomain(
      "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: "
      "200000}\n",
      "rl.yaml");
  ASSERT_TRUE(d.ok());
  EXPECT_THAT(Rules::Compile(*config, {*d}).status().message(), StartsWith("rl.yaml:4:17: "));

  Result<DomainConfig> d2 = ParseDomain("domain: d\n", "other.yaml");
  d = ParseDomain("domain: d\n", "rl.yaml");
  EXPECT_EQ(Rules::Compile(*config, {*d, *d2}).status().message(),
            "other.yaml: duplicate domain 'd'");
}

// Random descriptors against a config: no crash, every answer well formed,
// and no limit ever exceeded.
TEST_F(EnvoyRlsTest, RandomRequestsNeverExceedALimit) {
  Load({R"(domain: d
descriptors:
  - key: a
    rate_limit: { unit: minute, requests_per_unit: 7 }
    descriptors:
      - key: b
        value: x*
        rate_limit: { unit: minute, requests_per_unit: 3, name: bx }
      - key: b
        rate_limit: { unit: minute, requests_per_unit: 0 }
  - key: c
    value: "1"
    shadow_mode: true
    rate_limit: { unit: minute, requests_per_unit: 2 }
  - key: c
    rate_limit: { unit: minute, requests_per_unit: 5, replaces: [{name: bx}] }
)"});
  std::mt19937 rng(7);
  const std::vector<std::string> keys = {"a", "b", "c", "", "a|b"};
  const std::vector<std::string> values = {"x", "x1", "1", "2", "", "="};
  std::map<std::string, int64_t> admitted;  // subject -> hits admitted (no shadow)
  for (int i = 0; i < 3000; ++i) {
    std::vector<Desc> descs(1 + rng() % 4);
    for (Desc& d : descs) {
      const int depth = rng() % 3;
      for (int j = 0; j < depth; ++j) {
        d.entries.emplace_back(keys[rng() % keys.size()], values[rng() % values.size()]);
      }
      if (rng() % 3 == 0) d.hits = rng() % 3;
    }
    Result<Response> r = Call("d", descs, rng() % 3);
    ASSERT_TRUE(r.ok()) << r.status().message();
    ASSERT_EQ(r->statuses.size(), descs.size());
    bool over = false;
    for (const DescriptorStatus& st : r->statuses) over |= st.code == Code::kOverLimit;
    EXPECT_EQ(r->overall_code, over ? Code::kOverLimit : Code::kOk);
    for (const DescriptorStatus& st : r->statuses) {
      if (st.has_limit) {
        EXPECT_LE(st.limit_remaining, st.current_limit.requests_per_unit);
      }
    }
  }
  // Every counter of the config is at most its limit: check with peeks.
  for (const auto& [entries, limit] : std::vector<std::pair<Entries, uint32_t>>{
           {{{"a", "x"}}, 7}, {{{"a", "2"}, {"b", "x1"}}, 3}, {{{"c", "2"}}, 5}}) {
    Result<Response> r = Call("d", {{entries, 0}});
    ASSERT_TRUE(r.ok());
    EXPECT_LE(r->statuses[0].limit_remaining, limit);
  }
}

}  // namespace
}  // namespace floodgate::server
