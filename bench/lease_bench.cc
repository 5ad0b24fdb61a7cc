// Acquire+release pairs of a concurrency rule (docs/leases.md), per second:
//
//   BM_LeasePairEmbedded       the Leases room on the embedded store
//   BM_LeasePairRedis          the Leases room on the Redis store: one script call
//                              per acquire and one per release, blocking
//   BM_IncrDecrPairRedis       the hand-rolled pair on the same Redis, over
//                              hiredis: EVALSHA of INCR + EXPIRE-on-first +
//                              DECR-if-over to acquire, DECR to release
//                              (a slot leaks for the key's TTL if the
//                              holder dies; floodgate's lease does not)
//
// Each at 1 and 8 client threads, each thread its own subject (a subject's
// leases are one key, which one Redis core serialises anyway). The Redis
// cells need a redis-server: FLOODGATE_BENCH_REDIS_PORT names one on
// 127.0.0.1 (bench/leases_vs_incr.sh starts one); without it they are
// skipped with a message.
#include <benchmark/benchmark.h>
#include <hiredis/hiredis.h>

#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>

#include "api/open_services.h"
#include "service/services.h"

namespace floodgate {
namespace {

constexpr char kRules[] = R"(
rules:
  jobs: { algorithm: concurrency, max_in_flight: 1000, lease_ttl: 30s }
)";

int RedisPort() {
  const char* port = std::getenv("FLOODGATE_BENCH_REDIS_PORT");
  return port == nullptr ? 0 : std::atoi(port);
}

// One limiter per store, shared by the benchmark's threads.
service::Services* Limiter(bool redis) {
  static std::mutex mu;
  static std::unique_ptr<service::Services> cores[2];
  static SystemClock clock;
  std::lock_guard<std::mutex> lock(mu);
  std::unique_ptr<service::Services>& core = cores[redis ? 1 : 0];
  if (core == nullptr) {
    auto config = ParseConfig(kRules, "bench.yaml");
    if (!config.ok()) return nullptr;
    if (redis) {
      config->store = "redis://127.0.0.1:" + std::to_string(RedisPort());
      config->redis.timeout_ms = 1000;
    }
    auto made = api::OpenServices(*config, clock);
    if (!made.ok()) return nullptr;
    core = std::move(*made);
  }
  return core.get();
}

void LeasePairs(benchmark::State& state, bool redis) {
  if (redis && RedisPort() == 0) {
    state.SkipWithError("set FLOODGATE_BENCH_REDIS_PORT (bench/leases_vs_incr.sh does)");
    return;
  }
  service::Services* core = Limiter(redis);
  if (core == nullptr) {
    state.SkipWithError("could not open the limiter");
    return;
  }
  const std::string key = "subject" + std::to_string(state.thread_index());
  for (auto _ : state) {
    auto a = core->leases->AndWait(store::LeaseOpKind::kAcquire, {"jobs", key});
    if (!a.ok() || !a->ok) {
      state.SkipWithError("an acquire was refused or failed");
      return;
    }
    auto r = core->leases->AndWait(store::LeaseOpKind::kRelease, {"jobs", key, {}, a->lease});
    if (!r.ok() || !r->ok) {
      state.SkipWithError("a release failed");
      return;
    }
  }
  state.SetItemsProcessed(state.iterations());
}

void BM_LeasePairEmbedded(benchmark::State& state) { LeasePairs(state, false); }
void BM_LeasePairRedis(benchmark::State& state) { LeasePairs(state, true); }

// The hand-rolled pair: a counter with an expiry.
constexpr char kAcquireScript[] =
    "local n = redis.call('INCR', KEYS[1]) "
    "if n == 1 then redis.call('EXPIRE', KEYS[1], ARGV[1]) end "
    "if n > tonumber(ARGV[2]) then redis.call('DECR', KEYS[1]) return 0 end "
    "return 1";

void BM_IncrDecrPairRedis(benchmark::State& state) {
  if (RedisPort() == 0) {
    state.SkipWithError("set FLOODGATE_BENCH_REDIS_PORT (bench/leases_vs_incr.sh does)");
    return;
  }
  redisContext* c = redisConnect("127.0.0.1", RedisPort());
  if (c == nullptr || c->err) {
    state.SkipWithError("cannot connect to redis");
    if (c != nullptr) redisFree(c);
    return;
  }
  auto* loaded = static_cast<redisReply*>(redisCommand(c, "SCRIPT LOAD %s", kAcquireScript));
  const std::string sha = loaded != nullptr && loaded->type == REDIS_REPLY_STRING
                              ? std::string(loaded->str, loaded->len)
                              : std::string();
  if (loaded != nullptr) freeReplyObject(loaded);
  const std::string key = "incr:{subject" + std::to_string(state.thread_index()) + "}";
  for (auto _ : state) {
    auto* a = static_cast<redisReply*>(
        redisCommand(c, "EVALSHA %s 1 %s 30 1000", sha.c_str(), key.c_str()));
    const bool ok = a != nullptr && a->type == REDIS_REPLY_INTEGER && a->integer == 1;
    if (a != nullptr) freeReplyObject(a);
    if (!ok) {
      state.SkipWithError("an acquire was refused or failed");
      break;
    }
    auto* r = static_cast<redisReply*>(redisCommand(c, "DECR %s", key.c_str()));
    if (r != nullptr) freeReplyObject(r);
  }
  redisFree(c);
  state.SetItemsProcessed(state.iterations());
}

BENCHMARK(BM_LeasePairEmbedded)->Threads(1)->Threads(8)->UseRealTime();
BENCHMARK(BM_LeasePairRedis)->Threads(1)->Threads(8)->UseRealTime();
BENCHMARK(BM_IncrDecrPairRedis)->Threads(1)->Threads(8)->UseRealTime();

}  // namespace
}  // namespace floodgate

BENCHMARK_MAIN();
