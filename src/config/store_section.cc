// The store sections: `store`, `engine` and `redis` (store_section.h).
#include "config/store_section.h"

#include <cstdint>
#include <string>
#include <utility>

#include "common/store_url.h"

namespace floodgate::config {
namespace {

constexpr int kMaxShards = 4096;

Status ParseEngineEntry(const Fields& fields, const std::string& name, const YAML::Node& key,
                        const YAML::Node& value, EngineConfig& engine) {
  if (name == "max_entries") {
    Result<int64_t> n = fields.Int(key, value, "engine.max_entries", 1, INT64_MAX);
    if (!n.ok()) return n.status();
    engine.max_entries = *n;
  } else if (name == "max_memory") {
    Result<int64_t> n = fields.Size(key, value, "engine.max_memory", 1, INT64_MAX);
    if (!n.ok()) return n.status();
    engine.max_memory = *n;
  } else if (name == "shards") {
    Result<int64_t> n = fields.Int(key, value, "engine.shards", 1, kMaxShards);
    if (!n.ok()) return n.status();
    if ((*n & (*n - 1)) != 0) {
      return fields.FailAt(key, value, "'engine.shards' must be a power of two", value.Scalar());
    }
    engine.shards = static_cast<int>(*n);
  } else if (name == "sweep_interval_ms") {
    Result<int64_t> n = fields.Int(key, value, "engine.sweep_interval_ms", 0, INT64_MAX);
    if (!n.ok()) return n.status();
    engine.sweep_interval_ms = *n;
  } else {
    return fields.Fail(
        key.Mark(),
        "unknown key '" + name +
            "' in engine; expected max_entries, max_memory, shards or sweep_interval_ms",
        name);
  }
  return Status::Ok();
}

Status ParseRedisEntry(const Fields& fields, const std::string& name, const YAML::Node& key,
                       const YAML::Node& value, RedisConfig& redis) {
  struct IntField {
    const char* name;
    int64_t min, max;
    int64_t* target;
  };
  int64_t connections = redis.connections_per_node, threads = redis.io_threads;
  const IntField ints[] = {
      {"timeout_ms", 1, 60'000, &redis.timeout_ms},
      {"connect_timeout_ms", 1, 60'000, &redis.connect_timeout_ms},
      {"connections_per_node", 1, 64, &connections},
      {"io_threads", 1, 64, &threads},
      {"local_cache_max_entries", 1, 100'000'000, &redis.local_cache_max_entries},
  };
  for (const IntField& f : ints) {
    if (name != f.name) continue;
    Result<int64_t> n = fields.Int(key, value, "redis." + name, f.min, f.max);
    if (!n.ok()) return n.status();
    *f.target = *n;
    redis.connections_per_node = static_cast<int>(connections);
    redis.io_threads = static_cast<int>(threads);
    return Status::Ok();
  }
  if (name == "local_cache") {
    Result<bool> b = fields.Bool(key, value, "redis.local_cache");
    if (!b.ok()) return b.status();
    redis.local_cache = *b;
    return Status::Ok();
  }
  return fields.Fail(
      key.Mark(),
      "unknown key '" + name +
          "' in redis; expected timeout_ms, connect_timeout_ms, connections_per_node, "
          "io_threads, local_cache or local_cache_max_entries",
      name);
}

}  // namespace

Status ParseStore(const Fields& fields, const YAML::Node& key, const YAML::Node& value,
                  std::string& store) {
  Result<std::string> text = fields.String(key, value, "store");
  if (!text.ok()) return text.status();
  if (*text != "memory") {
    if (auto url = ParseStoreUrl(*text); !url.ok()) {
      // The message quotes only the faulty part, never a password.
      return fields.Fail(value.Mark(),
                         "invalid store: " + url.status().message() +
                             "; use memory or a Redis URL (redis://host:port, rediss://…, "
                             "redis+cluster://h1:p1,h2:p2, redis+proxy://host:port, "
                             "redis-sentinel://s1:p1,s2:p2/master)",
                         "store");
    }
  }
  store = *std::move(text);
  return Status::Ok();
}

Status ParseEngine(const Fields& fields, const YAML::Node& key, const YAML::Node& value,
                   EngineConfig& engine) {
  return fields.ForEachInSection(
      key, value, "engine", [&](const std::string& name, const YAML::Node& k, const YAML::Node& v) {
        return ParseEngineEntry(fields, name, k, v, engine);
      });
}

Status ParseRedis(const Fields& fields, const YAML::Node& key, const YAML::Node& value,
                  RedisConfig& redis) {
  return fields.ForEachInSection(
      key, value, "redis", [&](const std::string& name, const YAML::Node& k, const YAML::Node& v) {
        return ParseRedisEntry(fields, name, k, v, redis);
      });
}

}  // namespace floodgate::config
