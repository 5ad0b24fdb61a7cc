// The Redis store's ControlStore on real servers: one redis-server, a Redis
// Cluster and Twemproxy. Entries round-trip any bytes; every write bumps
// the version; expired entries are neither loaded nor kept past the next
// write of their table; the log is newest first and keeps 1000; two stores
// on one Redis (two floodgate servers) see each other's writes; a Redis
// that is down or hung fails each call within the timeout; `floodgate
// audit` leaves the control keys, which have no TTL, alone.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <limits>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "floodgate/clock.h"
#include "floodgate/config.h"
#include "redis/control_store.h"
#include "redis/remote_store.h"
#include "redis/wrong_type.h"
#include "store/control.h"
#include "testing/audit_cli.h"
#include "testing/eventually.h"
#include "testing/nutcracker.h"
#include "testing/redis_cluster.h"
#include "testing/redis_server.h"
#include "testing/remote_store.h"

namespace floodgate {
namespace {

using redis::RedisControlStore;
using store::ControlEntry;
using store::ControlWrite;
using testing::QueryText;

constexpr int64_t kNow = 1'700'000'000'000;  // a wall-clock instant, ms

// One floodgate server's view of the store: its RemoteStore (its own
// client, its own connections) and the ControlStore on its client.
struct Server {
  std::unique_ptr<redis::RemoteStore> remote;
  std::unique_ptr<store::ControlStore> control;
};

Server Open(const std::string& url, const Clock& clock, int64_t timeout_ms = 2000) {
  Server s;
  s.remote = testing::OpenRemoteStore(url, clock, timeout_ms);
  if (s.remote == nullptr) return s;
  s.control = std::make_unique<RedisControlStore>(s.remote->client());
  return s;
}

ControlWrite Put(std::string table, std::string key, std::string value, int64_t expires_at_ms = 0,
                 std::string log = "") {
  ControlWrite w;
  w.entry = {std::move(table), std::move(key), std::move(value), expires_at_ms};
  w.log = std::move(log);
  return w;
}

ControlWrite Erase(std::string table, std::string key, std::string log = "") {
  ControlWrite w;
  w.entry.table = std::move(table);
  w.entry.key = std::move(key);
  w.erase = true;
  w.log = std::move(log);
  return w;
}

// The version, as the servers' poll reads it. Version waits 100 ms at most
// whatever the timeout (a poll that misses one simply polls again), so on a
// slow machine a call can miss it, the first on a new connection above all:
// asked again then, for up to 10 s, as the next poll would.
Result<uint64_t> VersionOf(store::ControlStore& c) {
  std::optional<Result<uint64_t>> v;
  testing::Eventually([&] {
    v = c.Version();
    return v->ok() || v->status().code() != StatusCode::kDeadlineExceeded;
  });
  return *v;
}

// "table/key=value@expiry" per entry, in Load's order.
std::vector<std::string> Describe(const store::ControlSnapshot& s) {
  std::vector<std::string> out;
  for (const ControlEntry& e : s.entries) {
    out.push_back(e.table + "/" + e.key + "=" + e.value + "@" + std::to_string(e.expires_at_ms));
  }
  return out;
}

const std::string kControlKeys[] = {
    std::string(RedisControlStore::kOverridesKey), std::string(RedisControlStore::kBlocksKey),
    std::string(RedisControlStore::kRulesKey), std::string(RedisControlStore::kVersionKey),
    std::string(RedisControlStore::kLogKey)};

// One redis-server for the suite, emptied before each test.
class RedisControlStoreTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    server_ = new testing::RedisServer();
    if (!server_->Start()) error_ = server_->error();
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  void SetUp() override {
    ASSERT_TRUE(error_.empty()) << error_;
    ASSERT_EQ(Query({"FLUSHALL"}), "OK");
    a_ = Open(server_->url(), clock_);
    ASSERT_NE(a_.control, nullptr);
  }

  static std::string Query(const std::vector<std::string>& argv) {
    return QueryText(server_->port(), argv);
  }

  static testing::RedisServer* server_;
  static std::string error_;
  SystemClock clock_;
  Server a_;
};
testing::RedisServer* RedisControlStoreTest::server_ = nullptr;
std::string RedisControlStoreTest::error_;

TEST_F(RedisControlStoreTest, EntriesRoundTripAnyBytesInKeyAndValue) {
  store::ControlStore& c = *a_.control;
  // NULs, the encoding's ':', braces, CR LF, high bytes, a value that looks
  // like an encoded entry, an empty key and an empty value.
  const std::string odd_key("a\0b:c{d}\r\n\xff", 12);
  const std::string odd_value("17:x\0:y\xfe\r\n", 11);
  const int64_t far = std::numeric_limits<int64_t>::max();
  ASSERT_TRUE(c.Apply(Put(store::kOverridesTable, odd_key, odd_value, kNow + 60'000), kNow).ok());
  ASSERT_TRUE(c.Apply(Put(store::kBlocksTable, "", "", 0), kNow).ok());
  ASSERT_TRUE(c.Apply(Put(store::kRulesTable, "r1", "123:456:", far), kNow).ok());
  ASSERT_TRUE(c.Apply(Put(store::kOverridesTable, "k", "v1", 0), kNow).ok());
  ASSERT_TRUE(c.Apply(Put(store::kOverridesTable, "k", "v2", 5), kNow).ok());  // replaced...
  ASSERT_TRUE(c.Apply(Put(store::kOverridesTable, "k", "v3", 0), kNow).ok());  // ...twice

  auto loaded = c.Load(kNow);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  EXPECT_EQ(loaded->version, 6u);
  ASSERT_EQ(loaded->entries.size(), 4u);
  // Ordered by (table, key), as the embedded store gives them.
  const ControlEntry& block = loaded->entries[0];
  EXPECT_EQ(block.table, "blocks");
  EXPECT_EQ(block.key, "");
  EXPECT_EQ(block.value, "");
  EXPECT_EQ(block.expires_at_ms, 0);
  const ControlEntry& odd = loaded->entries[1];
  EXPECT_EQ(odd.table, "overrides");
  EXPECT_EQ(odd.key, odd_key);
  EXPECT_EQ(odd.value, odd_value);
  EXPECT_EQ(odd.expires_at_ms, kNow + 60'000);
  EXPECT_EQ(loaded->entries[2].key, "k");
  EXPECT_EQ(loaded->entries[2].value, "v3");
  EXPECT_EQ(loaded->entries[2].expires_at_ms, 0);
  EXPECT_EQ(loaded->entries[3].table, "rules");
  EXPECT_EQ(loaded->entries[3].value, "123:456:");
  EXPECT_EQ(loaded->entries[3].expires_at_ms, far);

  // The layout on Redis: one hash per table, "<expires_at_ms>:<value>" per
  // entry; none of the keys has an expiry.
  EXPECT_EQ(Query({"HGET", "fg:{control}:overrides", odd_key}),
            std::to_string(kNow + 60'000) + ":" + odd_value);
  EXPECT_EQ(Query({"HGET", "fg:{control}:blocks", ""}), "0:");
  EXPECT_EQ(Query({"HGET", "fg:{control}:rules", "r1"}), std::to_string(far) + ":123:456:");
  EXPECT_EQ(Query({"GET", "fg:{control}:version"}), "6");
  for (const char* key : {"fg:{control}:overrides", "fg:{control}:blocks", "fg:{control}:rules",
                          "fg:{control}:version"}) {
    EXPECT_EQ(Query({"PTTL", key}), "-1") << key;
  }
  EXPECT_EQ(Query({"EXISTS", "fg:{control}:log"}), "0");  // no write carried a log entry
}

TEST_F(RedisControlStoreTest, EveryWriteBumpsTheVersionAndLoadAgreesWithIt) {
  store::ControlStore& c = *a_.control;
  auto v = VersionOf(c);
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_EQ(*v, 0u);  // nothing written yet: no key
  auto empty = c.Load(kNow);
  ASSERT_TRUE(empty.ok()) << empty.status().ToString();
  EXPECT_EQ(empty->version, 0u);
  EXPECT_TRUE(empty->entries.empty());
  EXPECT_EQ(Query({"DBSIZE"}), "0");  // Version and Load create nothing

  for (uint64_t want = 1; want <= 3; ++want) {
    auto applied = c.Apply(Put(store::kBlocksTable, "ip:" + std::to_string(want), "x"), kNow);
    ASSERT_TRUE(applied.ok()) << applied.status().ToString();
    EXPECT_EQ(*applied, want);
    EXPECT_EQ(*VersionOf(c), want);
  }
  // An erase bumps it too, whether or not the entry was there.
  EXPECT_EQ(*c.Apply(Erase(store::kBlocksTable, "ip:1"), kNow), 4u);
  EXPECT_EQ(*c.Apply(Erase(store::kBlocksTable, "never-there"), kNow), 5u);
  auto loaded = c.Load(kNow);
  ASSERT_TRUE(loaded.ok());
  EXPECT_EQ(loaded->version, 5u);
  EXPECT_EQ(Describe(*loaded), (std::vector<std::string>{"blocks/ip:2=x@0", "blocks/ip:3=x@0"}));
}

TEST_F(RedisControlStoreTest, AnUnknownTableIsRefusedWithoutTouchingRedis) {
  Query({"CONFIG", "RESETSTAT"});
  for (const bool erase : {false, true}) {
    ControlWrite w = erase ? Erase("tiers", "k", "log") : Put("tiers", "k", "v", 0, "log");
    auto applied = a_.control->Apply(w, kNow);
    ASSERT_FALSE(applied.ok());
    EXPECT_EQ(applied.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(applied.status().message().find("'tiers'"), std::string::npos)
        << applied.status().message();
  }
  EXPECT_EQ(Query({"DBSIZE"}), "0");
  EXPECT_EQ(testing::ScriptCalls(server_->port()), 0);
}

TEST_F(RedisControlStoreTest, AnEntryExpiredAtNowIsNotLoadedAndGoesWithTheNextWriteOfItsTable) {
  store::ControlStore& c = *a_.control;
  ASSERT_TRUE(c.Apply(Put(store::kOverridesTable, "short", "1", kNow + 1000), kNow).ok());
  ASSERT_TRUE(c.Apply(Put(store::kOverridesTable, "long", "2", kNow + 2000), kNow).ok());
  ASSERT_TRUE(c.Apply(Put(store::kBlocksTable, "short", "3", kNow + 1000), kNow).ok());
  ASSERT_TRUE(c.Apply(Put(store::kRulesTable, "forever", "4", 0), kNow).ok());

  // 999 ms on: all live; 1000 ms on: the two "short" ones are expired.
  EXPECT_EQ(c.Load(kNow + 999)->entries.size(), 4u);
  auto at = c.Load(kNow + 1000);
  ASSERT_TRUE(at.ok()) << at.status().ToString();
  EXPECT_EQ(Describe(*at),
            (std::vector<std::string>{"overrides/long=2@" + std::to_string(kNow + 2000),
                                      "rules/forever=4@0"}));
  EXPECT_EQ(c.Load(kNow + 2000)->entries.size(), 1u);
  // Loading drops nothing on Redis.
  EXPECT_EQ(Query({"HLEN", "fg:{control}:overrides"}), "2");
  EXPECT_EQ(Query({"HLEN", "fg:{control}:blocks"}), "1");

  // A write to blocks drops blocks' expired entry, and no other table's.
  ASSERT_TRUE(c.Apply(Put(store::kBlocksTable, "new", "5"), kNow + 1000).ok());
  EXPECT_EQ(Query({"HEXISTS", "fg:{control}:blocks", "short"}), "0");
  EXPECT_EQ(Query({"HEXISTS", "fg:{control}:blocks", "new"}), "1");
  EXPECT_EQ(Query({"HLEN", "fg:{control}:overrides"}), "2");
  // An erase of another entry of overrides drops "short" there, not "long"
  // (live until 2000 ms on).
  ASSERT_TRUE(c.Apply(Erase(store::kOverridesTable, "absent"), kNow + 1000).ok());
  EXPECT_EQ(Query({"HEXISTS", "fg:{control}:overrides", "short"}), "0");
  EXPECT_EQ(Query({"HEXISTS", "fg:{control}:overrides", "long"}), "1");
  // A write putting an entry already expired stores it, but never loads it.
  ASSERT_TRUE(c.Apply(Put(store::kRulesTable, "stale", "6", kNow), kNow + 1000).ok());
  EXPECT_EQ(
      Describe(*c.Load(kNow + 1000)),
      (std::vector<std::string>{"blocks/new=5@0", "overrides/long=2@" + std::to_string(kNow + 2000),
                                "rules/forever=4@0"}));
}

TEST_F(RedisControlStoreTest, EraseRemovesTheEntryAndAnAbsentOneIsNoError) {
  store::ControlStore& c = *a_.control;
  ASSERT_TRUE(c.Apply(Put(store::kOverridesTable, "api:alice", "100/minute"), kNow).ok());
  ASSERT_TRUE(c.Apply(Put(store::kOverridesTable, "api:bob", "5/minute"), kNow).ok());
  auto erased = c.Apply(Erase(store::kOverridesTable, "api:alice", R"({"op":"delete"})"), kNow);
  ASSERT_TRUE(erased.ok()) << erased.status().ToString();
  EXPECT_EQ(Describe(*c.Load(kNow)), (std::vector<std::string>{"overrides/api:bob=5/minute@0"}));
  // Again: nothing to delete, still a write with its log entry.
  auto again = c.Apply(Erase(store::kOverridesTable, "api:alice", R"({"op":"again"})"), kNow);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(*again, *erased + 1);
  EXPECT_EQ(*c.RecentLog(10),
            (std::vector<std::string>{R"({"op":"again"})", R"({"op":"delete"})"}));
  // The same key in another table is another entry.
  ASSERT_TRUE(c.Apply(Put(store::kBlocksTable, "api:bob", "b"), kNow).ok());
  ASSERT_TRUE(c.Apply(Erase(store::kBlocksTable, "api:bob"), kNow).ok());
  EXPECT_EQ(Describe(*c.Load(kNow)), (std::vector<std::string>{"overrides/api:bob=5/minute@0"}));
  // The last entry of a table gone, so is its hash.
  ASSERT_TRUE(c.Apply(Erase(store::kOverridesTable, "api:bob"), kNow).ok());
  EXPECT_EQ(Query({"EXISTS", "fg:{control}:overrides"}), "0");
  EXPECT_TRUE(c.Load(kNow)->entries.empty());
}

TEST_F(RedisControlStoreTest, TheLogIsNewestFirstAndKeepsTheLast1000) {
  store::ControlStore& c = *a_.control;
  EXPECT_TRUE(c.RecentLog(10)->empty());
  // 1020 writes; every hundredth carries no log entry, so adds none: 1010
  // entries, of which the newest 1000 stay.
  auto has_log = [](int i) { return i % 100 != 99; };
  for (int i = 0; i < 1020; ++i) {
    const std::string log = has_log(i) ? "entry " + std::to_string(i) : "";
    ASSERT_TRUE(c.Apply(Put(store::kRulesTable, "r", std::to_string(i), 0, log), kNow).ok()) << i;
  }
  EXPECT_EQ(*VersionOf(c), 1020u);
  std::vector<std::string> want;
  for (int i = 1019; i >= 0 && want.size() < 1000; --i) {
    if (has_log(i)) want.push_back("entry " + std::to_string(i));
  }
  ASSERT_EQ(want.back(), "entry 10");  // entries 0..9 were trimmed
  EXPECT_EQ(*c.RecentLog(3), (std::vector<std::string>{"entry 1019", "entry 1018", "entry 1017"}));
  EXPECT_TRUE(c.RecentLog(0)->empty());
  auto all = c.RecentLog(5000);
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  EXPECT_EQ(*all, want);
  EXPECT_EQ(*c.RecentLog(1000), want);
  auto most = c.RecentLog(999);
  ASSERT_TRUE(most.ok());
  EXPECT_EQ(most->size(), 999u);
  EXPECT_EQ(Query({"LLEN", "fg:{control}:log"}), "1000");
  EXPECT_EQ(Query({"PTTL", "fg:{control}:log"}), "-1");
}

// Two floodgate servers on one Redis: each polls the version and loads
// what the other wrote.
void ExpectTwoServersShare(store::ControlStore& a, store::ControlStore& b) {
  auto start = VersionOf(b);
  ASSERT_TRUE(start.ok()) << start.status().ToString();
  auto wrote = a.Apply(Put(store::kOverridesTable, "api:alice", "1000/hour", 0, "a put"), kNow);
  ASSERT_TRUE(wrote.ok()) << wrote.status().ToString();
  EXPECT_EQ(*wrote, *start + 1);
  auto seen = VersionOf(b);
  ASSERT_TRUE(seen.ok()) << seen.status().ToString();
  EXPECT_EQ(*seen, *wrote);
  auto loaded = b.Load(kNow);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  EXPECT_EQ(loaded->version, *wrote);
  EXPECT_EQ(Describe(*loaded), (std::vector<std::string>{"overrides/api:alice=1000/hour@0"}));

  auto erased = b.Apply(Erase(store::kOverridesTable, "api:alice", "b erase"), kNow);
  ASSERT_TRUE(erased.ok()) << erased.status().ToString();
  EXPECT_EQ(*VersionOf(a), *erased);
  auto after = a.Load(kNow);
  ASSERT_TRUE(after.ok()) << after.status().ToString();
  EXPECT_EQ(after->version, *erased);
  EXPECT_TRUE(after->entries.empty());
  EXPECT_EQ(*a.RecentLog(2), (std::vector<std::string>{"b erase", "a put"}));
}

TEST_F(RedisControlStoreTest, TwoServersOnOneRedisSeeEachOthersWrites) {
  Server b = Open(server_->url(), clock_);
  ASSERT_NE(b.control, nullptr);
  ExpectTwoServersShare(*a_.control, *b.control);
}

TEST_F(RedisControlStoreTest, RedisWithoutTheScriptGetsItByEval) {
  ASSERT_EQ(Query({"SCRIPT", "FLUSH"}), "OK");  // as after a restart
  auto applied = a_.control->Apply(Put(store::kBlocksTable, "k", "v"), kNow);
  ASSERT_TRUE(applied.ok()) << applied.status().ToString();
  EXPECT_EQ(*applied, 1u);
  ASSERT_EQ(Query({"SCRIPT", "FLUSH"}), "OK");
  auto loaded = a_.control->Load(kNow);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  EXPECT_EQ(Describe(*loaded), (std::vector<std::string>{"blocks/k=v@0"}));
}

TEST_F(RedisControlStoreTest, AKeyOfAnotherTypeFailsTheCallAndNothingIsWritten) {
  store::ControlStore& c = *a_.control;
  ASSERT_TRUE(c.Apply(Put(store::kOverridesTable, "k", "v"), kNow).ok());
  ASSERT_EQ(Query({"SET", "fg:{control}:blocks", "not a hash"}), "OK");
  const uint64_t wrong_before = a_.remote->client().GetStats().wrong_type;
  auto applied = c.Apply(Put(store::kBlocksTable, "k", "v", 0, "log"), kNow);
  ASSERT_FALSE(applied.ok());
  EXPECT_EQ(applied.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(applied.status().message().find("control store apply"), std::string::npos)
      << applied.status().message();
  EXPECT_NE(applied.status().message().find("WRONGTYPE floodgate: KEYS[2] holds a string, not a "
                                            "hash"),
            std::string::npos)
      << applied.status().message();
  // Checked before anything was written: no version bump, no log entry.
  EXPECT_EQ(Query({"GET", "fg:{control}:version"}), "1");
  EXPECT_EQ(Query({"EXISTS", "fg:{control}:log"}), "0");
  // A write to another table works; Load reads every table, so it fails.
  EXPECT_TRUE(c.Apply(Put(store::kRulesTable, "r", "v"), kNow).ok());
  auto loaded = c.Load(kNow);
  ASSERT_FALSE(loaded.ok());
  EXPECT_EQ(loaded.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(a_.remote->client().GetStats().wrong_type, wrong_before + 2);
  // The names say what floodgate keeps there (for logs and audit).
  EXPECT_EQ(redis::ExpectedType("fg:{control}:blocks"), "hash");
  EXPECT_EQ(redis::ExpectedType("fg:{control}:version"), "string");
  EXPECT_EQ(redis::ExpectedType("fg:{control}:log"), "list");
}

TEST_F(RedisControlStoreTest, AnEntryFloodgateDidNotWriteIsReportedNotDropped) {
  store::ControlStore& c = *a_.control;
  ASSERT_TRUE(c.Apply(Put(store::kRulesTable, "good", "v"), kNow).ok());
  ASSERT_EQ(Query({"HSET", "fg:{control}:rules", "stray", "no expiry here"}), "1");
  auto loaded = c.Load(kNow);
  ASSERT_FALSE(loaded.ok());
  EXPECT_EQ(loaded.status().code(), StatusCode::kInternal);
  EXPECT_NE(loaded.status().message().find("'stray' of rules in fg:{control}:rules"),
            std::string::npos)
      << loaded.status().message();
  // A write to its table keeps it: nothing vanishes unseen.
  ASSERT_TRUE(c.Apply(Put(store::kRulesTable, "other", "v"), kNow).ok());
  EXPECT_EQ(Query({"HGET", "fg:{control}:rules", "stray"}), "no expiry here");
  ASSERT_EQ(Query({"HDEL", "fg:{control}:rules", "stray"}), "1");
  EXPECT_EQ(Describe(*c.Load(kNow)),
            (std::vector<std::string>{"rules/good=v@0", "rules/other=v@0"}));
}

// A Redis that is hung (SIGSTOP: connections open, no answers) fails each
// call with DEADLINE_EXCEEDED after the timeout, not later. Each call from
// a server of its own: after a few failures a client's circuit opens and
// it answers UNAVAILABLE at once, which would hide the timeout.
TEST(RedisControlStoreFailureTest, AHungRedisFailsEachCallWithinTheTimeout) {
  testing::RedisServer redis;
  ASSERT_TRUE(redis.Start()) << redis.error();
  SystemClock clock;
  std::vector<Server> servers;
  for (int i = 0; i < 4; ++i) {
    servers.push_back(Open(redis.url(), clock, /*timeout_ms=*/1000));
    ASSERT_NE(servers.back().control, nullptr);
    ASSERT_TRUE(VersionOf(*servers.back().control).ok());  // connected
  }
  ASSERT_TRUE(servers[0].control->Apply(Put(store::kBlocksTable, "k", "v"), kNow).ok());
  ASSERT_EQ(::kill(redis.pid(), SIGSTOP), 0);
  using Ms = std::chrono::milliseconds;
  const std::pair<const char*, std::function<Status(store::ControlStore&)>> calls[] = {
      {"Version", [](store::ControlStore& c) { return c.Version().status(); }},
      {"Load", [](store::ControlStore& c) { return c.Load(kNow).status(); }},
      {"Apply",
       [](store::ControlStore& c) {
         return c.Apply(Put(store::kBlocksTable, "k", "w"), kNow).status();
       }},
      {"RecentLog", [](store::ControlStore& c) { return c.RecentLog(10).status(); }},
  };
  for (size_t i = 0; i < std::size(calls); ++i) {
    const auto& [what, call] = calls[i];
    const auto start = std::chrono::steady_clock::now();
    const Status status = call(*servers[i].control);
    const auto took = std::chrono::duration_cast<Ms>(std::chrono::steady_clock::now() - start);
    EXPECT_EQ(status.code(), StatusCode::kDeadlineExceeded) << what << ": " << status.ToString();
    EXPECT_NE(status.message().find("control store"), std::string::npos) << status.message();
    // Version, polled, waits 100 ms at most whatever the timeout; the rest
    // the store's 1000 ms. The upper bounds leave room for a slow machine
    // and still tell the two apart.
    EXPECT_GE(took, Ms(i == 0 ? 80 : 900)) << what;
    EXPECT_LT(took, Ms(i == 0 ? 700 : 5000)) << what;
  }
  ASSERT_EQ(::kill(redis.pid(), SIGCONT), 0);
}

// Nothing listens at the address: UNAVAILABLE, within the timeout.
TEST(RedisControlStoreFailureTest, AnUnreachableRedisIsUnavailableWithinTheTimeout) {
  SystemClock clock;
  const std::string url = "redis://127.0.0.1:" + std::to_string(testing::FreePort());
  Server s = Open(url, clock, /*timeout_ms=*/2000);
  ASSERT_NE(s.control, nullptr);
  const auto start = std::chrono::steady_clock::now();
  // Version last: its own 100 ms cap could expire before a slow machine
  // sees the connection refused.
  const Status statuses[] = {
      s.control->Load(kNow).status(),
      s.control->Apply(Put(store::kBlocksTable, "k", "v"), kNow).status(),
      s.control->RecentLog(10).status(),
      s.control->Version().status(),
  };
  const auto took = std::chrono::steady_clock::now() - start;
  for (const Status& status : statuses) {
    EXPECT_EQ(status.code(), StatusCode::kUnavailable) << status.ToString();
    EXPECT_NE(status.message().find("control store"), std::string::npos) << status.message();
    EXPECT_NE(status.message().find("127.0.0.1"), std::string::npos) << status.message();
  }
  // Refused at once: all four together take less than one timeout.
  EXPECT_LT(took, std::chrono::milliseconds(2000));
}

TEST(RedisControlStoreClusterTest, TwoServersOnAClusterShareOneSlot) {
  testing::RedisCluster cluster;
  ASSERT_TRUE(cluster.Start()) << cluster.error();
  SystemClock clock;
  Server a = Open(cluster.url(), clock);
  Server b = Open(cluster.url(), clock);
  ASSERT_NE(a.control, nullptr);
  ASSERT_NE(b.control, nullptr);
  ExpectTwoServersShare(*a.control, *b.control);
  // A write per table, so that every key exists; then all five sit on one
  // master, the one serving the slot of {control}.
  for (const char* table : {store::kOverridesTable, store::kBlocksTable, store::kRulesTable}) {
    ASSERT_TRUE(a.control->Apply(Put(table, "k", "v"), kNow).ok()) << table;
  }
  EXPECT_EQ(b.control->Load(kNow)->entries.size(), 3u);
  const std::string slot = QueryText(cluster.server(0).port(), {"CLUSTER", "KEYSLOT", "control"});
  int holders = 0;
  for (size_t i = 0; i < cluster.size(); ++i) {
    const std::string keys = QueryText(cluster.server(i).port(), {"DBSIZE"});
    if (keys == "0") continue;
    ++holders;
    EXPECT_EQ(keys, "5");
    EXPECT_EQ(QueryText(cluster.server(i).port(), {"CLUSTER", "COUNTKEYSINSLOT", slot}), "5");
  }
  EXPECT_EQ(holders, 1);
}

TEST(RedisControlStoreProxyTest, TwoServersBehindTwemproxyShareOneBackend) {
  testing::Nutcracker proxy;
  ASSERT_TRUE(proxy.Start()) << proxy.error();
  SystemClock clock;
  Server a = Open(proxy.url(), clock);
  Server b = Open(proxy.url(), clock);
  ASSERT_NE(a.control, nullptr);
  ASSERT_NE(b.control, nullptr);
  // Through a proxy nothing preloads the script: the first call of each
  // server goes EVALSHA, NOSCRIPT, EVAL.
  ExpectTwoServersShare(*a.control, *b.control);
  for (const char* table : {store::kOverridesTable, store::kBlocksTable, store::kRulesTable}) {
    ASSERT_TRUE(b.control->Apply(Put(table, "k", "v"), kNow).ok()) << table;
  }
  EXPECT_EQ(a.control->Load(kNow)->entries.size(), 3u);
  int holders = 0;
  for (size_t i = 0; i < proxy.backends(); ++i) {
    int here = 0;
    for (const std::string& key : kControlKeys) {
      here += QueryText(proxy.backend(i).port(), {"EXISTS", key}) == "1" ? 1 : 0;
    }
    if (here == 0) continue;
    ++holders;
    EXPECT_EQ(here, 5) << "backend " << i;
  }
  EXPECT_EQ(holders, 1);
}

TEST_F(RedisControlStoreTest, AuditLeavesTheControlKeysAlone) {
  store::ControlStore& c = *a_.control;
  for (const char* table : {store::kOverridesTable, store::kBlocksTable, store::kRulesTable}) {
    ASSERT_TRUE(c.Apply(Put(table, "k", "v", 0, "log"), kNow).ok()) << table;
  }
  for (const std::string& key : kControlKeys) ASSERT_EQ(Query({"PTTL", key}), "-1") << key;
  const std::string url = "--redis " + server_->url();

  testing::CliRun clean = testing::RunAudit(url);
  EXPECT_EQ(clean.exit_code, 0) << clean.out << clean.err;
  EXPECT_EQ(clean.out, "");
  EXPECT_NE(clean.err.find("scanned 5 keys"), std::string::npos) << clean.err;
  EXPECT_NE(clean.err.find("0 without a TTL (not counting 5 control keys under fg:{control}:"),
            std::string::npos)
      << clean.err;

  // Next to a key that does need a TTL: only that one is reported, and
  // --fix gives only that one a TTL.
  ASSERT_EQ(Query({"SET", "fg:{api:planted}", "1"}), "OK");
  testing::CliRun found = testing::RunAudit(url);
  EXPECT_EQ(found.exit_code, 1) << found.err;
  EXPECT_EQ(found.out,
            "no-ttl 127.0.0.1:" + std::to_string(server_->port()) + " fg:{api:planted}\n");
  testing::CliRun fixed = testing::RunAudit(url + " --fix --ttl 60");
  EXPECT_EQ(fixed.exit_code, 0) << fixed.err;
  EXPECT_NE(fixed.err.find("1 given one"), std::string::npos) << fixed.err;
  const std::string planted_ttl = Query({"PTTL", "fg:{api:planted}"});
  EXPECT_GT(std::stoll(planted_ttl), 0);
  for (const std::string& key : kControlKeys) EXPECT_EQ(Query({"PTTL", key}), "-1") << key;

  // Their types are still checked: a control key of another type is
  // reported (and left as it is).
  ASSERT_EQ(Query({"DEL", "fg:{control}:log"}), "1");
  ASSERT_EQ(Query({"SET", "fg:{control}:log", "x"}), "OK");
  testing::CliRun wrong = testing::RunAudit(url);
  EXPECT_EQ(wrong.exit_code, 1) << wrong.err;
  EXPECT_EQ(wrong.out, "wrong-type 127.0.0.1:" + std::to_string(server_->port()) +
                           " found=string expected=list fg:{control}:log\n");
  EXPECT_EQ(Query({"PTTL", "fg:{control}:log"}), "-1");
}

}  // namespace
}  // namespace floodgate
