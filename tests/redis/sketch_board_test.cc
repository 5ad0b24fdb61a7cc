// The Redis SketchBoard on real servers (one redis-server, a Cluster,
// Twemproxy): two servers see each other's blobs, a blob replaces the same
// server's last, every key has a TTL, an expired server drops out of the
// list, and any bytes round-trip.
#include "redis/redis_sketch_board.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "floodgate/clock.h"
#include "floodgate/config.h"
#include "redis/remote_store.h"
#include "testing/eventually.h"
#include "testing/nutcracker.h"
#include "testing/redis_cluster.h"
#include "testing/redis_server.h"
#include "testing/remote_store.h"

namespace floodgate {
namespace {

using testing::QueryText;

// A server's Redis store, opened as the service opens it; rooms.store is
// null on failure.
store::Rooms Open(const std::string& url, const Clock& clock) {
  auto remote = testing::OpenRemoteStore(url, clock, /*timeout_ms=*/2000);
  if (remote == nullptr) return {};
  return redis::RemoteStore::RoomsOf(std::move(remote));
}

using Blobs = std::vector<std::pair<std::string, std::string>>;

Blobs Sorted(Blobs b) {
  std::sort(b.begin(), b.end());
  return b;
}

// Two servers' boards on one store share what they publish.
void ExpectShared(store::SketchBoard& a, store::SketchBoard& b) {
  const std::string binary("\0\x01\xff{}\r\n", 7);
  ASSERT_TRUE(a.Publish("server-a", "first", 10'000).ok());
  ASSERT_TRUE(a.Publish("server-a", binary, 10'000).ok());  // replaces the first
  ASSERT_TRUE(b.Publish("server-b", "b's", 10'000).ok());
  auto read = b.Read();
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  EXPECT_EQ(Sorted(*read), (Blobs{{"server-a", binary}, {"server-b", "b's"}}));
}

TEST(RedisSketchBoardTest, SharedTimedAndExpired) {
  testing::RedisServer server;
  ASSERT_TRUE(server.Start()) << server.error();
  SystemClock clock;
  auto a = Open(server.url(), clock);
  auto b = Open(server.url(), clock);
  ASSERT_NE(a.store, nullptr);
  ASSERT_NE(b.store, nullptr);
  auto board_a = a.sketch_board();
  auto board_b = b.sketch_board();
  ASSERT_NE(board_a, nullptr);
  ExpectShared(*board_a, *board_b);
  // Both keys have a TTL, at most the longest lifetime.
  for (const std::string_view key :
       {redis::RedisSketchBoard::kServersKey, redis::RedisSketchBoard::kBlobsKey}) {
    const int64_t ttl = std::stoll(QueryText(server.port(), {"PTTL", std::string(key)}));
    EXPECT_GT(ttl, 0) << key;
    EXPECT_LE(ttl, 10'000) << key;
  }
  // A server that stops publishing drops out once its lifetime is over; a
  // short lifetime does not shorten the keys' TTL.
  // (A lifetime long enough that a slow machine still reads it in time.)
  const auto published = std::chrono::steady_clock::now();
  ASSERT_TRUE(board_a->Publish("short", "x", 1500).ok());
  EXPECT_EQ(board_b->Read()->size(), 3u);
  EXPECT_GT(std::stoll(QueryText(server.port(),
                                 {"PTTL", std::string(redis::RedisSketchBoard::kServersKey)})),
            5000);
  size_t seen = 3;
  testing::Eventually([&] {
    seen = board_b->Read()->size();
    return seen == 2;
  });
  EXPECT_EQ(seen, 2u);
  EXPECT_GE(std::chrono::steady_clock::now() - published, std::chrono::milliseconds(1400));
  // Its entries go with the next publication.
  ASSERT_TRUE(board_b->Publish("server-b", "again", 10'000).ok());
  EXPECT_EQ(QueryText(server.port(),
                      {"ZSCORE", std::string(redis::RedisSketchBoard::kServersKey), "short"}),
            "");
  EXPECT_EQ(QueryText(server.port(),
                      {"HEXISTS", std::string(redis::RedisSketchBoard::kBlobsKey), "short"}),
            "0");
  // A key of another type is an error, not a crash or a silent loss.
  ASSERT_EQ(QueryText(server.port(), {"DEL", std::string(redis::RedisSketchBoard::kBlobsKey)}),
            "1");
  ASSERT_EQ(QueryText(server.port(), {"SET", std::string(redis::RedisSketchBoard::kBlobsKey), "x"}),
            "OK");
  const Status wrong = board_a->Publish("server-a", "y", 10'000);
  EXPECT_FALSE(wrong.ok());
  EXPECT_NE(wrong.message().find("WRONGTYPE"), std::string::npos) << wrong.message();
}

TEST(RedisSketchBoardTest, AnUnreachableRedisFailsTheCall) {
  SystemClock clock;
  testing::RedisServer server;
  ASSERT_TRUE(server.Start()) << server.error();
  const std::string url = server.url();
  server.Kill();
  auto a = Open(url, clock);
  ASSERT_NE(a.store, nullptr);
  auto board = a.sketch_board();
  EXPECT_FALSE(board->Publish("a", "x", 1000).ok());
  auto read = board->Read();
  ASSERT_FALSE(read.ok());
  EXPECT_NE(read.status().message().find("top-subjects board"), std::string::npos)
      << read.status().message();
}

TEST(RedisSketchBoardTest, TwoServersOnACluster) {
  testing::RedisCluster cluster;
  ASSERT_TRUE(cluster.Start()) << cluster.error();
  SystemClock clock;
  auto a = Open(cluster.url(), clock);
  auto b = Open(cluster.url(), clock);
  ASSERT_NE(a.store, nullptr);
  ASSERT_NE(b.store, nullptr);
  ExpectShared(*a.sketch_board(), *b.sketch_board());
}

TEST(RedisSketchBoardTest, TwoServersBehindTwemproxy) {
  testing::Nutcracker proxy;
  ASSERT_TRUE(proxy.Start()) << proxy.error();
  SystemClock clock;
  auto a = Open(proxy.url(), clock);
  auto b = Open(proxy.url(), clock);
  ASSERT_NE(a.store, nullptr);
  ASSERT_NE(b.store, nullptr);
  ExpectShared(*a.sketch_board(), *b.sketch_board());
}

TEST(RedisSketchBoardTest, NodesAreProbed) {
  testing::RedisServer server;
  ASSERT_TRUE(server.Start()) << server.error();
  SystemClock clock;
  auto a = Open(server.url(), clock);
  ASSERT_NE(a.store, nullptr);
  auto nodes = a.backend->ProbeNodes();
  ASSERT_EQ(nodes.size(), 1u);
  EXPECT_EQ(nodes[0].address, "127.0.0.1:" + std::to_string(server.port()));
  EXPECT_TRUE(nodes[0].up) << nodes[0].error;
  EXPECT_GT(nodes[0].latency_ms, 0);
  server.Kill();
  nodes = a.backend->ProbeNodes();
  ASSERT_EQ(nodes.size(), 1u);
  EXPECT_FALSE(nodes[0].up);
  EXPECT_FALSE(nodes[0].error.empty());
}

}  // namespace
}  // namespace floodgate
