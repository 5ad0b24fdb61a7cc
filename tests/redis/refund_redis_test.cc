// Refunds on a real redis-server, through LimiterCore: a refund forgets the
// local over-limit cache's denial, creates no key, leaves a state of
// another definition (fingerprint) and a key of another type alone, and
// writes back a state with no longer a life than it had. (The golden
// vectors run refunds on one server, a Cluster and Twemproxy.)
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <utility>

#include "api/open_services.h"
#include "redis/script_call.h"
#include "service/limiter/blocking.h"
#include "service/services.h"
#include "testing/redis_cluster.h"
#include "testing/redis_server.h"

namespace floodgate {
namespace {

Config RedisConfig(const std::string& url, const std::string& rules, bool local_cache) {
  auto parsed = ParseConfig(rules, "test.yaml");
  EXPECT_TRUE(parsed.ok()) << parsed.status().ToString();
  Config config = parsed.ok() ? *parsed : Config{};
  config.store = url;
  config.redis.timeout_ms = 5000;
  config.redis.local_cache = local_cache;
  config.engine.sweep_interval_ms = 0;
  return config;
}

std::unique_ptr<service::Services> Open(const Config& config, const Clock& clock) {
  auto services = api::OpenServices(config, clock);
  EXPECT_TRUE(services.ok()) << services.status().ToString();
  return services.ok() ? std::move(*services) : nullptr;
}

constexpr char kRules[] = "rules:\n  api: { algorithm: fixed_window, limits: [2/minute] }\n";

TEST(RefundRedisTest, ARefundForgetsTheLocalDenial) {
  testing::RedisServer redis;
  ASSERT_TRUE(redis.Start()) << redis.error();
  SystemClock clock;
  auto core = Open(RedisConfig(redis.url(), kRules, /*local_cache=*/true), clock);
  ASSERT_NE(core, nullptr);
  // An instant at the start of a minute: every step below is in its window.
  const int64_t t = clock.NowMs() / 60'000 * 60'000;
  Decision d;
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(core->core->CheckAndWait({"api", "k", 1, "", &t}, &d).ok());
    EXPECT_TRUE(d.allowed);
  }
  ASSERT_TRUE(core->core->CheckAndWait({"api", "k", 1, "", &t}, &d).ok());
  EXPECT_FALSE(d.allowed);  // Redis's denial, now remembered here
  ASSERT_TRUE(core->core->CheckAndWait({"api", "k", 1, "", &t}, &d).ok());
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(core->core->GetStats().local_cache_denials, 1);

  auto refund = service::RefundAndWait(*core->core, {"api", "k", 1, "", &t});
  ASSERT_TRUE(refund.ok()) << refund.status().ToString();
  EXPECT_EQ(refund->after.remaining, 1);
  ASSERT_TRUE(core->core->CheckAndWait({"api", "k", 1, "", &t}, &d).ok());
  EXPECT_TRUE(d.allowed);  // Redis decided, not the cache
  EXPECT_EQ(core->core->GetStats().local_cache_denials, 1);
}

TEST(RefundRedisTest, NoKeyIsCreatedAndAnotherDefinitionsStateIsLeftAlone) {
  testing::RedisServer redis;
  ASSERT_TRUE(redis.Start()) << redis.error();
  SystemClock clock;
  auto core = Open(RedisConfig(redis.url(), kRules, false), clock);
  ASSERT_NE(core, nullptr);
  const std::string key = redis::StateKey("api", "", "k");

  auto nobody = service::RefundAndWait(*core->core, "api", "k", 3);
  ASSERT_TRUE(nobody.ok()) << nobody.status().ToString();
  EXPECT_EQ(nobody->after.remaining, 2);
  EXPECT_EQ(nobody->refunded[0], 0);
  EXPECT_EQ(testing::QueryText(redis.port(), {"EXISTS", key}), "0");

  ASSERT_TRUE(core->core->CheckAndWait("api", "k", 2).ok());
  const std::string before = testing::QueryText(redis.port(), {"GET", key});
  ASSERT_FALSE(before.empty());
  // Another definition of the rule: another fingerprint, so the stored
  // state is none of its business.
  ASSERT_TRUE(core->Reload(RedisConfig(redis.url(),
                                       "rules:\n  api: { algorithm: fixed_window, "
                                       "limits: [3/minute] }\n",
                                       false))
                  .ok());
  auto other = service::RefundAndWait(*core->core, "api", "k", 1);
  ASSERT_TRUE(other.ok()) << other.status().ToString();
  EXPECT_EQ(other->after.remaining, 3);
  EXPECT_EQ(other->refunded[0], 0);  // nothing of its own to give back
  EXPECT_EQ(testing::QueryText(redis.port(), {"GET", key}), before);
}

TEST(RefundRedisTest, AWrittenBackStateLivesNoLongerThanItsWindow) {
  testing::RedisServer redis;
  ASSERT_TRUE(redis.Start()) << redis.error();
  SystemClock clock;
  auto core =
      Open(RedisConfig(redis.url(),
                       "rules:\n  api: { algorithm: fixed_window, limits: [5/hour] }\n", false),
           clock);
  ASSERT_NE(core, nullptr);
  const std::string key = redis::StateKey("api", "", "k");
  ASSERT_TRUE(core->core->CheckAndWait("api", "k", 3).ok());
  auto refund = service::RefundAndWait(*core->core, "api", "k", 1);
  ASSERT_TRUE(refund.ok()) << refund.status().ToString();
  EXPECT_EQ(refund->after.remaining, 3);
  EXPECT_EQ(refund->refunded[0], 1);
  const int64_t pttl = std::stoll(testing::QueryText(redis.port(), {"PTTL", key}));
  EXPECT_GT(pttl, 0);
  EXPECT_LE(pttl, refund->after.reset_after_ms);
  // Everything back: the state holds nothing, and the key goes.
  refund = service::RefundAndWait(*core->core, "api", "k", 5);
  ASSERT_TRUE(refund.ok());
  EXPECT_EQ(refund->after.remaining, 5);
  EXPECT_EQ(refund->refunded[0], 2);  // the two still used, not the five asked
  EXPECT_EQ(testing::QueryText(redis.port(), {"EXISTS", key}), "0");
}

TEST(RefundRedisTest, AKeyOfAnotherTypeFailsTheRefundAndIsLeftAlone) {
  testing::RedisServer redis;
  ASSERT_TRUE(redis.Start()) << redis.error();
  SystemClock clock;
  auto core = Open(RedisConfig(redis.url(), kRules, false), clock);
  ASSERT_NE(core, nullptr);
  const std::string key = redis::StateKey("api", "", "alice");
  testing::QueryText(redis.port(), {"LPUSH", key, "x"});
  auto refund = service::RefundAndWait(*core->core, "api", "alice", 1);
  ASSERT_FALSE(refund.ok());
  EXPECT_EQ(refund.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(refund.status().message().find("WRONGTYPE"), std::string::npos)
      << refund.status().message();
  EXPECT_EQ(testing::QueryText(redis.port(), {"TYPE", key}), "list");
  EXPECT_EQ(core->core->GetStats().wrong_type, 1);
}

}  // namespace
}  // namespace floodgate
