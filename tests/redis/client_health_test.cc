// Client::Health and Limiter::StoreHealth, what /readyz reports: OK while
// the nodes the store needs are reachable, UNAVAILABLE naming the node
// while its circuit is open, OK again once a probe finds it back; always
// OK on the embedded store. Nothing here makes a round trip.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>

#include "floodgate/limiter.h"
#include "redis/client.h"
#include "redis/client_helpers.h"
#include "testing/redis_cluster.h"
#include "testing/redis_server.h"

namespace floodgate::redis {
namespace {

using client_testing::Eventually;
using client_testing::MakeClient;
using client_testing::OptionsFor;
using client_testing::Text;
using floodgate::testing::RedisServer;

TEST(ClientHealthTest, FollowsTheCircuitOfTheOneNode) {
  RedisServer redis;
  ASSERT_TRUE(redis.Start()) << redis.error();
  auto client = MakeClient(OptionsFor(redis.url(), 50));
  ASSERT_TRUE(Eventually([&] { return Text(client->Call("", {"PING"})) == "PONG"; }));
  EXPECT_TRUE(client->Health().ok()) << client->Health().ToString();

  redis.Kill();
  // Requests fail (lost connection, refused connects) until the circuit opens.
  ASSERT_TRUE(Eventually(
      [&] {
        client->Call("", {"PING"});
        return !client->Health().ok();
      },
      std::chrono::seconds(3)));
  const Status down = client->Health();
  EXPECT_EQ(down.code(), StatusCode::kUnavailable);
  EXPECT_EQ(down.message(), "redis circuit open for 127.0.0.1:" + std::to_string(redis.port()));

  ASSERT_TRUE(redis.RestartSamePort()) << redis.error();
  EXPECT_TRUE(Eventually([&] { return client->Health().ok(); }, std::chrono::seconds(3)))
      << client->Health().ToString();
}

TEST(ClientHealthTest, AClusterNeedsItsSlotMapAndItsMasters) {
  floodgate::testing::RedisCluster cluster;
  ASSERT_TRUE(cluster.Start()) << cluster.error();
  auto client = MakeClient(OptionsFor(cluster.url(), 200));
  EXPECT_TRUE(Eventually([&] { return client->Health().ok(); })) << client->Health().ToString();
  EXPECT_EQ(client->Masters().size(), 3u);

  // A cluster none of whose seeds answers: no slot map, and it says so.
  const int port = floodgate::testing::FreePort();
  auto lost = MakeClient(OptionsFor("redis+cluster://127.0.0.1:" + std::to_string(port), 50));
  const Status health = lost->Health();
  EXPECT_EQ(health.code(), StatusCode::kUnavailable);
  EXPECT_NE(health.message().find("redis cluster: no slot map yet"), std::string::npos)
      << health.ToString();
}

TEST(ClientHealthTest, TheEmbeddedStoreIsAlwaysReady) {
  ManualClock clock;
  auto limiter = Limiter::Create(Config{}, clock);
  ASSERT_TRUE(limiter.ok()) << limiter.status().ToString();
  EXPECT_TRUE((*limiter)->StoreHealth().ok());
}

}  // namespace
}  // namespace floodgate::redis
