// Redis Sentinel's parts that need no failover: the `+switch-master`
// message, and what asking sentinels that cannot answer says. The failover
// itself, with real sentinels and a real replica promoted, is
// tests/integration/test_sentinel.py.
#include "redis/sentinel.h"

#include <gtest/gtest.h>

#include <string>

#include "redis/client.h"
#include "testing/redis_server.h"

namespace floodgate::redis {
namespace {

using internal::AskSentinels;
using internal::ParseSwitchMaster;

TEST(SentinelTest, SwitchMasterNamesTheNewMasterOfItsOwnName) {
  const auto m = ParseSwitchMaster("mymaster 127.0.0.1 6379 127.0.0.1 6380", "mymaster");
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->ToString(), "127.0.0.1:6380");
  EXPECT_EQ(ParseSwitchMaster("mymaster ::1 6379 ::1 6380", "mymaster")->ToString(), "[::1]:6380");
  // Another master's failover, and anything malformed, is nothing.
  EXPECT_FALSE(ParseSwitchMaster("other 127.0.0.1 6379 127.0.0.1 6380", "mymaster"));
  EXPECT_FALSE(ParseSwitchMaster("mymaster 127.0.0.1 6379 127.0.0.1", "mymaster"));
  EXPECT_FALSE(ParseSwitchMaster("mymaster 127.0.0.1 6379 127.0.0.1 6380 x", "mymaster"));
  EXPECT_FALSE(ParseSwitchMaster("mymaster 127.0.0.1 6379 127.0.0.1 0", "mymaster"));
  EXPECT_FALSE(ParseSwitchMaster("mymaster 127.0.0.1 6379 127.0.0.1 65536", "mymaster"));
  EXPECT_FALSE(ParseSwitchMaster("mymaster 127.0.0.1 6379 127.0.0.1 63x0", "mymaster"));
  EXPECT_FALSE(ParseSwitchMaster("", "mymaster"));
}

StoreUrl SentinelUrl(const std::string& sentinels, const std::string& master = "mymaster") {
  return *ParseStoreUrl("redis-sentinel://" + sentinels + "/" + master);
}

TEST(SentinelTest, NoSentinelAnsweringIsUnavailableAndSaysWhoWasAsked) {
  const int port = floodgate::testing::FreePort();
  const Result<HostPort> r =
      AskSentinels(SentinelUrl("127.0.0.1:" + std::to_string(port)), /*timeout_ms=*/200);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(r.status().message().find("no sentinel answered for master 'mymaster'"),
            std::string::npos)
      << r.status().message();
  EXPECT_NE(r.status().message().find("127.0.0.1:" + std::to_string(port) + ": "),
            std::string::npos)
      << r.status().message();
}

TEST(SentinelTest, ARedisServerThatIsNoSentinelIsSaidSo) {
  floodgate::testing::RedisServer redis;
  ASSERT_TRUE(redis.Start()) << redis.error();
  const Result<HostPort> r =
      AskSentinels(SentinelUrl("127.0.0.1:" + std::to_string(redis.port())), 500);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);
  // The server's own refusal of SENTINEL, quoted.
  EXPECT_NE(r.status().message().find("ERR"), std::string::npos) << r.status().message();
}

TEST(SentinelTest, AClientStartsOnlyWithAMaster) {
  const int port = floodgate::testing::FreePort();
  ClientOptions options;
  options.url = SentinelUrl("127.0.0.1:" + std::to_string(port));
  options.connect_timeout_ms = 200;
  const auto client = Client::Create(options);
  ASSERT_FALSE(client.ok());
  EXPECT_EQ(client.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(client.status().message().find("no sentinel answered"), std::string::npos);

  options.url = *ParseStoreUrl("rediss-sentinel://127.0.0.1:" + std::to_string(port) + "/m");
  const auto tls = Client::Create(options);
  ASSERT_FALSE(tls.ok());
  EXPECT_EQ(tls.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(tls.status().message().find("TLS with redis-sentinel:// is not supported yet"),
            std::string::npos)
      << tls.status().message();
}

}  // namespace
}  // namespace floodgate::redis
