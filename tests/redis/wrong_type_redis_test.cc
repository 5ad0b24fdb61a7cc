// Keys of the wrong type on a real redis-server, through the Limiter: a
// decision on such a key follows on_backend_error while the decisions sent
// with it in the same script call are made; CL.THROTTLE, expiring sets, OTP
// and the alert stream refuse such a key without touching it (OTP: not
// even its other two keys); each failure is counted (Stats::wrong_type).
#include <gtest/gtest.h>
#include <hiredis/hiredis.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "api/open_services.h"
#include "floodgate/limiter.h"
#include "redis/alert_stream.h"
#include "redis/client.h"
#include "redis/otp_store.h"
#include "redis/script_call.h"
#include "redis/set_store.h"
#include "service/limiter/limiter_core.h"
#include "testing/redis_cluster.h"
#include "testing/redis_server.h"

namespace floodgate {
namespace {

constexpr char kSecret[] = "redis-test-secret-0123";

std::unique_ptr<Limiter> RedisLimiter(const std::string& url, const Clock& clock) {
  auto parsed = ParseConfig(
      "rules:\n"
      "  api: { algorithm: sliding_window, limits: [5/minute], on_backend_error: allow }\n"
      "  strict: { algorithm: gcra, limits: [5/minute], on_backend_error: deny }\n"
      "otp: { issue_limit: 3/5m }\n",
      "test.yaml");
  EXPECT_TRUE(parsed.ok()) << parsed.status().ToString();
  Config config = *parsed;
  config.store = url;
  config.redis.timeout_ms = 5000;
  config.redis.local_cache = false;
  config.engine.sweep_interval_ms = 0;
  config.otp.secret = kSecret;
  auto limiter = Limiter::Create(config, clock);
  EXPECT_TRUE(limiter.ok()) << limiter.status().ToString();
  return limiter.ok() ? std::move(*limiter) : nullptr;
}

// The text of a plain command's reply ("list", "1", "(nil)").
std::string Query(int port, const std::vector<std::string>& argv) {
  return testing::QueryText(port, argv);
}

TEST(WrongTypeRedisTest, ADecisionOnSuchAKeyFollowsOnBackendErrorAndItsBatchIsDecided) {
  testing::RedisServer redis;
  ASSERT_TRUE(redis.Start()) << redis.error();
  SystemClock clock;
  auto limiter = RedisLimiter(redis.url(), clock);
  ASSERT_NE(limiter, nullptr);
  Query(redis.port(), {"LPUSH", redis::StateKey("api", "", "alice"), "x"});
  Query(redis.port(), {"HSET", redis::StateKey("strict", "", "alice"), "f", "v"});

  // Three decisions of one rule in one call: alice's alone fails.
  std::atomic<int> answered{0};
  std::vector<Decision> got(3);
  // The server's path: one batch, sent as it goes.
  auto core_services = api::OpenServices(limiter->config(), clock);
  ASSERT_TRUE(core_services.ok()) << core_services.status().ToString();
  service::LimiterCore* const core = (*core_services)->core.get();
  {
    auto batch = core->NewBatch();
    int i = 0;
    for (const char* subject : {"bob", "alice", "carol"}) {
      core->CheckAsync(
          {"api", subject, 1, ""},
          [&, i](const Status& s, const Decision& d) {
            EXPECT_TRUE(s.ok()) << s.ToString();
            got[i] = d;
            answered.fetch_add(1);
          },
          batch.get());
      ++i;
    }
  }  // sent
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (answered.load() < 3 && std::chrono::steady_clock::now() < give_up) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ASSERT_EQ(answered.load(), 3);
  EXPECT_EQ(got[0].fallback, Fallback::kNone);
  EXPECT_EQ(got[0].remaining, 4);
  EXPECT_EQ(got[1].fallback, Fallback::kBackendError);
  EXPECT_TRUE(got[1].allowed);  // on_backend_error: allow
  EXPECT_EQ(got[2].fallback, Fallback::kNone);
  EXPECT_EQ(got[2].remaining, 4);
  EXPECT_EQ(core->GetStats().wrong_type, 1);

  auto strict = limiter->Check("strict", "alice");
  ASSERT_TRUE(strict.ok()) << strict.status().ToString();
  EXPECT_EQ(strict->fallback, Fallback::kBackendError);
  EXPECT_FALSE(strict->allowed);  // on_backend_error: deny
  EXPECT_EQ(limiter->GetStats().wrong_type, 1);
  // Left as they were.
  EXPECT_EQ(Query(redis.port(), {"TYPE", redis::StateKey("api", "", "alice")}), "list");
  EXPECT_EQ(Query(redis.port(), {"TYPE", redis::StateKey("strict", "", "alice")}), "hash");
}

TEST(WrongTypeRedisTest, ThrottleSetsAndOtpRefuseSuchAKeyAndLeaveItAlone) {
  testing::RedisServer redis;
  ASSERT_TRUE(redis.Start()) << redis.error();
  SystemClock clock;
  auto limiter = RedisLimiter(redis.url(), clock);
  ASSERT_NE(limiter, nullptr);

  Query(redis.port(), {"SET", redis::ThrottleKey("t"), "not a state"});  // a string: fine
  EXPECT_TRUE(limiter->Throttle("t", 1, 10, 60, 1).ok());
  Query(redis.port(), {"DEL", redis::ThrottleKey("t")});
  Query(redis.port(), {"RPUSH", redis::ThrottleKey("t"), "x"});
  auto throttled = limiter->Throttle("t", 1, 10, 60, 1);
  EXPECT_EQ(throttled.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(throttled.status().message().find("holds a list, not a string"), std::string::npos)
      << throttled.status().ToString();

  Query(redis.port(), {"SET", redis::SetKey("phones"), "x"});
  auto added = limiter->sets().Add("phones", "+15550100", 60'000);
  EXPECT_FALSE(added.ok());
  EXPECT_NE(added.status().message().find("holds a string, not a zset"), std::string::npos)
      << added.status().ToString();
  EXPECT_EQ(Query(redis.port(), {"GET", redis::SetKey("phones")}), "x");

  // The issues key of three: nothing is written to the other two either.
  const auto keys = redis::OtpKeys("+15550100");
  Query(redis.port(), {"HSET", keys[1], "f", "v"});
  auto issued = limiter->otp().Issue("+15550100");
  EXPECT_FALSE(issued.ok());
  EXPECT_NE(issued.status().message().find("KEYS[2] holds a hash, not a zset"), std::string::npos)
      << issued.status().ToString();
  EXPECT_EQ(Query(redis.port(), {"EXISTS", keys[0]}), "0");
  EXPECT_EQ(Query(redis.port(), {"EXISTS", keys[2]}), "0");
  EXPECT_EQ(Query(redis.port(), {"TYPE", keys[1]}), "hash");

  EXPECT_EQ(limiter->GetStats().wrong_type, 3);
}

TEST(WrongTypeRedisTest, TheAlertStreamRefusesSuchAKeyAndLeavesItAlone) {
  testing::RedisServer redis;
  ASSERT_TRUE(redis.Start()) << redis.error();
  auto parsed = ParseStoreUrl(redis.url());
  ASSERT_TRUE(parsed.ok());
  redis::ClientOptions options;
  options.url = *parsed;
  options.timeout_ms = 5000;
  auto client = redis::Client::Create(options);
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  const std::string key(redis::AlertStream::kKey);
  Query(redis.port(), {"SET", key, "not a stream"});
  redis::AlertStream stream(**client, redis::AlertStream::Options{.consumer = "test"});
  PendingAlert alert;
  alert.event_id = "e1";
  alert.url = "http://127.0.0.1:1/hook";
  alert.body = "{}";
  alert.created_ms = 1;
  auto added = stream.Add(std::span<const PendingAlert>(&alert, 1));
  EXPECT_FALSE(added.ok());
  EXPECT_NE(added.status().message().find("holds a string, not a stream"), std::string::npos)
      << added.status().ToString();
  EXPECT_EQ(Query(redis.port(), {"GET", key}), "not a stream");
  EXPECT_EQ((*client)->GetStats().wrong_type, 1u);
}

}  // namespace
}  // namespace floodgate
