// Expiring sets on a real redis-server: the script against the embedded
// store on the same random operations at explicit instants (every reply
// equal), the one-millisecond edge between two TTLs, the cap, every key with
// a TTL equal to its last member's expiry, bad script arguments refused
// before any write, real short TTLs on Redis's own clock through the
// Limiter, and a Redis Cluster.
#include <gtest/gtest.h>
#include <hiredis/hiredis.h>

#include <chrono>
#include <future>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "engine/memory_store.h"
#include "engine/set_store.h"
#include "floodgate/limiter.h"
#include "redis/client.h"
#include "redis/scripts.h"
#include "redis/set_store.h"
#include "testing/redis_cluster.h"
#include "testing/redis_peek.h"
#include "testing/redis_server.h"

namespace floodgate::redis {
namespace {

constexpr int64_t kT0 = 1'700'000'000'000;

std::unique_ptr<Client> MakeClient(const std::string& url) {
  auto parsed = ParseStoreUrl(url);
  EXPECT_TRUE(parsed.ok()) << parsed.status().ToString();
  ClientOptions options;
  options.url = *parsed;
  options.timeout_ms = 5000;  // correctness here, not latency (sanitizer builds)
  options.connect_timeout_ms = 5000;
  auto client = Client::Create(options);
  EXPECT_TRUE(client.ok()) << client.status().ToString();
  return client.ok() ? std::move(*client) : nullptr;
}

// Runs one operation on Redis and waits for the answer.
std::pair<Status, SetReply> RunRemote(SetStore& store, const SetRequest& r, int64_t max_members,
                                      std::optional<int64_t> now_ms) {
  std::promise<std::pair<Status, SetReply>> done;
  store.Run(r, max_members, now_ms, [&done](const Status& s, const SetReply& reply) {
    done.set_value({s, reply});
  });
  return done.get_future().get();
}

using Peek = testing::RedisPeek;

class RedisSetStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(redis_.Start()) << redis_.error();
    client_ = MakeClient(redis_.url());
    ASSERT_NE(client_, nullptr);
    store_.emplace(*client_);
  }
  SetReply Run(SetOp op, std::string_view key, int64_t at, std::string_view member = {},
               int64_t ttl = 0, int64_t max_members = 100) {
    auto [s, reply] = RunRemote(*store_, SetRequest{op, key, member, ttl}, max_members, at);
    EXPECT_TRUE(s.ok()) << s.ToString();
    return reply;
  }

  testing::RedisServer redis_;
  std::unique_ptr<Client> client_;
  std::optional<SetStore> store_;
};

// The script is given explicit instants, but Redis expires the key on its own
// clock, its last member's expiry minus the instant after each write. So every
// test below at explicit instants keeps that real TTL far longer than it can
// take to run on a loaded machine (a minute, not a second); the edge itself is
// the same one millisecond whatever the TTLs.
TEST_F(RedisSetStoreTest, MemberTtlsOneMillisecondApartAtTheEdge) {
  EXPECT_EQ(Run(SetOp::kAdd, "s", kT0, "short", 59'999).value, 1);
  EXPECT_EQ(Run(SetOp::kAdd, "s", kT0, "long", 60'000).value, 1);
  EXPECT_EQ(Run(SetOp::kCount, "s", kT0 + 59'998).value, 2);
  const SetReply at999 = Run(SetOp::kMembers, "s", kT0 + 59'999);
  EXPECT_EQ(at999.now_ms, kT0 + 59'999);
  EXPECT_EQ(at999.members, (std::vector<SetMember>{{"long", kT0 + 60'000}}));
  EXPECT_EQ(Run(SetOp::kContains, "s", kT0 + 59'999, "short").value, 0);
  // After the prune at 59'999 the key's real TTL is "long"'s expiry minus
  // that instant: 1 ms, so whether the key is still in Redis after it is a
  // race with Redis's clock, not a property: the edge is what the one
  // script call above answered (pruned and read at once). From 60'000 the
  // set is empty and its key gone, whichever way the race went.
  Peek peek(redis_.port());
  EXPECT_EQ(Run(SetOp::kCount, "s", kT0 + 60'000).value, 0);
  EXPECT_EQ(peek.Integer({"EXISTS", SetKey("s")}), 0);  // pruned to nothing: gone
}

TEST_F(RedisSetStoreTest, TheKeyExpiresWithItsLastMember) {
  Peek peek(redis_.port());
  Run(SetOp::kAdd, "s", kT0, "a", 60'000);
  Run(SetOp::kAdd, "s", kT0, "b", 120'000);
  EXPECT_EQ(peek.Text({"TYPE", SetKey("s")}), "zset");
  int64_t ttl = peek.Pttl(SetKey("s"));
  EXPECT_GT(ttl, 119'000);
  EXPECT_LE(ttl, 120'000);
  Run(SetOp::kRemove, "s", kT0, "b");  // the last one goes: the key follows a
  ttl = peek.Pttl(SetKey("s"));
  EXPECT_GT(ttl, 59'000);
  EXPECT_LE(ttl, 60'000);
  Run(SetOp::kAdd, "s", kT0, "a", 5000);  // a refresh to a shorter TTL shortens the key's
  EXPECT_LE(peek.Pttl(SetKey("s")), 5000);
  Run(SetOp::kRemove, "s", kT0, "a");
  EXPECT_EQ(peek.Integer({"EXISTS", SetKey("s")}), 0);
  EXPECT_EQ(peek.KeysWithoutTtl(), 0);
}

TEST_F(RedisSetStoreTest, TheCapRefusesNewMembersAndWritesNothing) {
  Run(SetOp::kAdd, "s", kT0, "a", 60'000, 2);
  Run(SetOp::kAdd, "s", kT0, "b", 120'000, 2);
  auto [s, reply] = RunRemote(*store_, SetRequest{SetOp::kAdd, "s", "c", 60'000}, 2, kT0);
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(s.message(), "set is full: 2 live members (sets.max_members)");
  EXPECT_EQ(Run(SetOp::kCount, "s", kT0).value, 2);
  EXPECT_EQ(Run(SetOp::kAdd, "s", kT0, "a", 180'000, 2).value, 0);           // refresh
  EXPECT_EQ(Run(SetOp::kAdd, "s", kT0 + 120'000, "c", 60'000, 2).value, 1);  // b expired
}

TEST_F(RedisSetStoreTest, BadScriptArgumentsAreRefusedBeforeAnyWrite) {
  Peek peek(redis_.port());
  const Script& script = ScriptFor(Feature::kExpiringSet);
  const std::vector<std::vector<std::string>> bad = {
      {"EVAL", std::string(script.source), "1", "fg:set:{x}", "add", "", "m", "0", "10"},
      {"EVAL", std::string(script.source), "1", "fg:set:{x}", "add", "", "m", "ten", "10"},
      {"EVAL", std::string(script.source), "1", "fg:set:{x}", "add", "", "m", "5"},
      {"EVAL", std::string(script.source), "1", "fg:set:{x}", "drop", ""},
      {"EVAL", std::string(script.source), "1", "fg:set:{x}", "card", "yesterday"},
      {"EVAL", std::string(script.source), "2", "fg:set:{x}", "fg:set:{y}", "card", ""},
  };
  for (const auto& argv : bad) {
    redisReply* r = peek.Command(argv);
    ASSERT_NE(r, nullptr);
    EXPECT_EQ(r->type, REDIS_REPLY_ERROR);
    EXPECT_NE(std::string(r->str, r->len).find("bad expiring_set arguments"), std::string::npos)
        << std::string(r->str, r->len);
    freeReplyObject(r);
  }
  EXPECT_EQ(peek.Integer({"DBSIZE"}), 0);
}

TEST_F(RedisSetStoreTest, BinaryMembersAndKeysRoundTrip) {
  const std::string key("k\0{}\r\n", 6);
  const std::string member("\0\xff m\r\n", 6);
  EXPECT_EQ(Run(SetOp::kAdd, key, kT0, member, 60'000).value, 1);
  EXPECT_EQ(Run(SetOp::kMembers, key, kT0).members,
            (std::vector<SetMember>{{member, kT0 + 60'000}}));
  EXPECT_EQ(Run(SetOp::kContains, key, kT0, member).value, 1);
}

// The same random operations at the same explicit instants on both stores
// give the same replies. Instants advance by at least a second per step, far
// more than a step takes in real time even on a loaded machine, so a key's
// real TTL (its last member's expiry minus the explicit instant) cannot run
// out between two steps that still see a live member.
TEST_F(RedisSetStoreTest, AgreesWithTheEmbeddedStore) {
  ManualClock clock(kT0);
  EngineConfig engine_config;
  engine_config.sweep_interval_ms = 0;
  engine::MemoryStore memory(engine_config, {engine::SetStore::Layout()}, clock);
  engine::SetStore local(memory, 0, clock);
  std::mt19937_64 rng(20240501);
  const std::vector<std::string> keys = {"a", "b"};
  const std::vector<std::string> members = {"m1", "m2", "m3", "m4", "m5", "m6"};
  int64_t now = kT0;
  constexpr int64_t kMaxMembers = 4;
  int full = 0, listed = 0;
  for (int step = 0; step < 400; ++step) {
    now += 1000 + static_cast<int64_t>(rng() % 2000);
    SetRequest r;
    const uint64_t pick = rng() % 8;  // half adds, the rest spread over the others
    r.op = pick < 4 ? SetOp::kAdd : static_cast<SetOp>(pick - 3);
    r.key = keys[rng() % keys.size()];
    r.member = members[rng() % members.size()];
    r.ttl_ms = 1 + static_cast<int64_t>(rng() % 50'000);
    SetReply want;
    const Status want_status = local.Run(r, kMaxMembers, now, &want);
    auto [got_status, got] = RunRemote(*store_, r, kMaxMembers, now);
    SCOPED_TRACE("step " + std::to_string(step) + ": " + std::string(SetOpName(r.op)) + " " +
                 std::string(r.key) + " " + std::string(r.member));
    ASSERT_EQ(got_status.code(), want_status.code()) << got_status.ToString();
    if (!want_status.ok()) {
      ++full;
      continue;
    }
    if (want.members.size() > 1) ++listed;
    EXPECT_EQ(got.now_ms, now);
    EXPECT_EQ(got.value, want.value);
    EXPECT_EQ(got.members, want.members);
  }
  // The sequence exercised the cap and lists of several members.
  EXPECT_GT(full, 0);
  EXPECT_GT(listed, 10);
  Peek peek(redis_.port());
  EXPECT_EQ(peek.KeysWithoutTtl(), 0);
}

// Real time on Redis's clock, through the Limiter: TTLs of a few seconds, so
// that both members are still live when first looked at however loaded the
// machine, and the test still ends in seconds.
TEST(RedisSetsLimiterTest, RealShortTtlsOnRedisTime) {
  testing::RedisServer redis;
  ASSERT_TRUE(redis.Start()) << redis.error();
  Config config;
  config.store = redis.url();
  config.redis.timeout_ms = 5000;
  config.engine.sweep_interval_ms = 0;
  SystemClock clock;
  auto limiter = Limiter::Create(config, clock);
  ASSERT_TRUE(limiter.ok()) << limiter.status().ToString();
  ExpiringSets& sets = (*limiter)->sets();
  const auto start = std::chrono::steady_clock::now();
  ASSERT_TRUE(*sets.Add("phone", "short", 2000));
  ASSERT_TRUE(*sets.Add("phone", "long", 4000));
  EXPECT_EQ(*sets.Count("phone"), 2);
  Peek peek(redis.port());
  const int64_t ttl = peek.Pttl(SetKey("phone"));
  EXPECT_GT(ttl, 0);
  EXPECT_LE(ttl, 4000);
  auto members = sets.Members("phone");
  ASSERT_TRUE(members.ok());
  ASSERT_EQ(members->size(), 2u);
  EXPECT_EQ((*members)[0].member, "short");
  // 2000 ms apart, plus the time between the two adds on Redis's clock.
  const int64_t apart = (*members)[1].expires_at_ms - (*members)[0].expires_at_ms;
  EXPECT_GE(apart, 2000);
  EXPECT_LT(apart, 2000 + 1500);
  // Wait on Redis's clock, not ours: the short member must be gone by the
  // time Redis passes its expiry, and the long one still there before its own.
  const int64_t short_expiry = (*members)[0].expires_at_ms;
  const int64_t long_expiry = (*members)[1].expires_at_ms;
  while (true) {
    auto r = sets.Run(SetRequest{SetOp::kMembers, "phone", {}, 0});
    ASSERT_TRUE(r.ok());
    if (r->now_ms >= short_expiry) {
      if (r->now_ms < long_expiry) {
        EXPECT_EQ(r->members, (std::vector<SetMember>{{"long", long_expiry}}));
      }
      break;
    }
    EXPECT_EQ(r->members.size(), 2u);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  // Redis drops the key itself at the last expiry, without floodgate's help.
  while (peek.Integer({"EXISTS", SetKey("phone")}) == 1) {
    ASSERT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20));
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(*sets.Count("phone"), 0);
  EXPECT_EQ(sets.GetStats().adds, 2);
}

TEST(RedisSetsLimiterTest, Cluster) {
  testing::RedisCluster cluster;
  ASSERT_TRUE(cluster.Start(3)) << cluster.error();
  Config config;
  config.store = cluster.url();
  config.redis.timeout_ms = 5000;
  config.engine.sweep_interval_ms = 0;
  SystemClock clock;
  auto limiter = Limiter::Create(config, clock);
  ASSERT_TRUE(limiter.ok()) << limiter.status().ToString();
  ExpiringSets& sets = (*limiter)->sets();
  for (int i = 0; i < 30; ++i) {
    ASSERT_TRUE(*sets.Add("k" + std::to_string(i), "m", 60'000)) << i;
    ASSERT_TRUE(*sets.Add("k" + std::to_string(i), "n", 60'000)) << i;
  }
  for (int i = 0; i < 30; ++i) EXPECT_EQ(*sets.Count("k" + std::to_string(i)), 2) << i;
  int with_keys = 0;
  for (size_t n = 0; n < cluster.size(); ++n) {
    Peek peek(cluster.server(n).port());
    EXPECT_EQ(peek.KeysWithoutTtl(), 0);
    with_keys += peek.Integer({"DBSIZE"}) > 0 ? 1 : 0;
  }
  EXPECT_GE(with_keys, 2);  // the sets really are spread over the masters
}

}  // namespace
}  // namespace floodgate::redis
