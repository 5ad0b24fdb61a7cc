// The store sections (config/store_section.h): `store`, `engine` and
// `redis`, their values and defaults, and each mistake's exact message.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "floodgate/config.h"
#include "testing/config_text.h"

namespace floodgate {
namespace {

using testing::Error;
using testing::Parse;

using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

TEST(ParseConfigTest, StoreSchemes) {
  for (const char* store : {"memory", "redis://127.0.0.1:6379", "rediss://cache:6380",
                            "redis+cluster://h1:1,h2:2", "redis+proxy://twemproxy:22121"}) {
    EXPECT_EQ(Parse(std::string("store: \"") + store + "\"\n").store, store);
  }
  EXPECT_THAT(Error("store: mysql://db\n"),
              AllOf(StartsWith("test.yaml:1:8: invalid store: "), HasSubstr("'mysql'"),
                    HasSubstr("use memory or a Redis URL")));
  EXPECT_THAT(Error("store: redis://\n"), StartsWith("test.yaml:1:8: invalid store: "));
  EXPECT_THAT(Error("store: Memory\n"), StartsWith("test.yaml:1:8: invalid store: "));
  EXPECT_THAT(Error("store: redis://localhost\n"), HasSubstr("port"));
  // A password never appears in an error.
  EXPECT_THAT(Error("store: redis://u:sekrit@host\n"), Not(HasSubstr("sekrit")));
}

TEST(ParseConfigTest, RedisSection) {
  const Config defaults = Parse("store: redis://127.0.0.1:6379\n");
  EXPECT_EQ(defaults.redis.timeout_ms, 20);
  EXPECT_TRUE(defaults.redis.local_cache);
  const Config c = Parse(
      "redis: { timeout_ms: 50, connect_timeout_ms: 300, connections_per_node: 4, "
      "io_threads: 2, local_cache: false, local_cache_max_entries: 10 }\n");
  EXPECT_EQ(c.redis.timeout_ms, 50);
  EXPECT_EQ(c.redis.connect_timeout_ms, 300);
  EXPECT_EQ(c.redis.connections_per_node, 4);
  EXPECT_EQ(c.redis.io_threads, 2);
  EXPECT_FALSE(c.redis.local_cache);
  EXPECT_EQ(c.redis.local_cache_max_entries, 10);
  EXPECT_THAT(Error("redis: { timeout_ms: 0 }\n"), HasSubstr("redis.timeout_ms"));
  EXPECT_THAT(Error("redis: { local_cache: maybe }\n"), HasSubstr("redis.local_cache"));
  EXPECT_THAT(Error("redis: { timeout: 5 }\n"),
              HasSubstr("unknown key 'timeout' in redis; expected timeout_ms"));
  EXPECT_THAT(Error("redis: 5\n"), HasSubstr("redis"));
}

// As Redis reads maxmemory: k, m, g are powers of 1000, kb, mb, gb (and
// kib, mib, gib) powers of 1024, in any case.
TEST(ParseConfigTest, MaxMemoryUnits) {
  const struct {
    const char* text;
    int64_t bytes;
  } cases[] = {
      {"1", 1},
      {"4096", 4096},
      {"100b", 100},
      {"1k", 1000},
      {"1kb", 1024},
      {"2KiB", 2048},
      {"64mb", 64LL << 20},
      {"64MB", 64LL << 20},
      {"512MiB", 512LL << 20},
      {"3m", 3'000'000},
      {"1gb", 1LL << 30},
      {"1G", 1'000'000'000},
      {"2gib", 2LL << 30},
      {"16 gb", 16LL << 30},
      {"8589934591gb", 8589934591LL << 30},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.text);
    EXPECT_EQ(Parse(std::string("engine: { max_memory: ") + c.text + " }\n").engine.max_memory,
              c.bytes);
  }
}

TEST(ParseConfigErrorTest, MaxMemoryRefusesNonsense) {
  const std::string what =
      "'engine.max_memory' must be a positive size in bytes: an integer, or one with a unit k, "
      "kb, m, mb, g or gb (e.g. 512mb, 1gb)";
  for (const char* bad : {"0", "0gb", "-1", "-64mb", "lots", "mb", "1.5gb", "1tb", "64 m b", "1e9",
                          "8589934592gb", "99999999999999999999", "0x100", "+5"}) {
    SCOPED_TRACE(bad);
    EXPECT_EQ(Error(std::string("engine:\n  max_memory: \"") + bad + "\"\n"),
              "test.yaml:2:15: " + what + " (near '" + bad + "')");
  }
  EXPECT_EQ(Error("engine:\n  max_memory: [1gb]\n"),
            "test.yaml:2:15: 'engine.max_memory' must be a size in bytes, not a list (near "
            "'max_memory')");
  EXPECT_EQ(Error("engine:\n  max_memory:\n"),
            "test.yaml:2:3: 'engine.max_memory' must be a size in bytes, not empty (near "
            "'max_memory')");
}

TEST(ParseConfigErrorTest, EngineBounds) {
  EXPECT_EQ(Error("engine:\n  shards: 100\n"),
            "test.yaml:2:11: 'engine.shards' must be a power of two (near '100')");
  EXPECT_EQ(Error("engine:\n  shards: 8192\n"),
            "test.yaml:2:11: 'engine.shards' must be an integer between 1 and 4096 (near '8192')");
  EXPECT_EQ(Error("engine:\n  shards: 0\n"),
            "test.yaml:2:11: 'engine.shards' must be an integer between 1 and 4096 (near '0')");
  EXPECT_EQ(Parse("engine:\n  shards: 1\n").engine.shards, 1);
  EXPECT_EQ(Error("engine:\n  max_entries: 0\n"),
            "test.yaml:2:16: 'engine.max_entries' must be an integer >= 1 (near '0')");
  EXPECT_EQ(Error("engine:\n  max_entries: 99999999999999999999\n"),
            "test.yaml:2:16: 'engine.max_entries' must be an integer >= 1 "
            "(near '99999999999999999999')");
  EXPECT_EQ(Error("engine:\n  sweep_interval_ms: -1\n"),
            "test.yaml:2:22: 'engine.sweep_interval_ms' must be an integer >= 0 (near '-1')");
  EXPECT_EQ(Error("engine:\n  max_entries: 1e6\n"),
            "test.yaml:2:16: 'engine.max_entries' must be an integer >= 1 (near '1e6')");
}

}  // namespace
}  // namespace floodgate
