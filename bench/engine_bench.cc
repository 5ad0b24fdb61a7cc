// Micro benchmarks of the embedded store (MemoryStore): update throughput on
// one hot key and on 1M distinct keys (also behind a clock read, with and
// without MemoryStore::Prefetch), against an absl::flat_hash_map baseline,
// and the heap cost of an entry.
//
// Run (release preset):
//   ./build/release/bench/engine_bench --benchmark_min_time=0.2
// Figures and the command that produced them go to docs/benchmarks.md.
#include <malloc.h>

#include <cstdint>
#include <cstdio>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"
#include "benchmark/benchmark.h"
#include "engine/memory_store.h"
#include "floodgate/clock.h"
#include "floodgate/config.h"

namespace floodgate::engine {
namespace {

constexpr int kDistinctKeys = 1'000'000;
constexpr size_t kKeyBytes = 16;
constexpr int64_t kNowMs = 1'700'000'000'000;  // a fixed instant: time is not what we measure

// 16-byte keys "user:00000000042", built once, outside every timed region.
const std::vector<std::string>& Keys() {
  static const std::vector<std::string>* keys = [] {
    auto* v = new std::vector<std::string>();
    v->reserve(kDistinctKeys);
    char buf[32];
    for (int i = 0; i < kDistinctKeys; ++i) {
      std::snprintf(buf, sizeof(buf), "user:%011d", i);
      v->emplace_back(buf);
    }
    return v;
  }();
  return *keys;
}

EngineConfig BenchConfig() {
  EngineConfig config;  // production defaults: 256 shards, 10M entries
  config.sweep_interval_ms = 0;
  return config;
}

// The fn of every update: a counter in word 0, a minute of expiry.
int64_t Increment(int64_t* state, bool /*fresh*/, core::MemoryRoom* /*room*/) {
  ++state[0];
  return kNowMs + 60'000;
}

// One store holding all 1M keys, shared by every MemoryStore benchmark so
// that the distinct-key runs update existing entries (not create them).
MemoryStore& PopulatedStore() {
  static const ManualClock* clock = new ManualClock(kNowMs);
  static MemoryStore* store = [] {
    auto* s = new MemoryStore(BenchConfig(), {VariantLayout{2, nullptr}}, *clock);
    for (const std::string& key : Keys()) (void)s->Update(0, key, kNowMs, Increment);
    return s;
  }();
  return *store;
}

absl::flat_hash_map<std::string, int64_t>& PopulatedMap() {
  static auto* map = [] {
    auto* m = new absl::flat_hash_map<std::string, int64_t>();
    for (const std::string& key : Keys()) (*m)[key] = 0;
    return m;
  }();
  return *map;
}

// The first `n` keys packed back to back (16 bytes each) in the order thread
// `thread` visits them: a different stride per thread, coprime with n, so two
// threads do not follow each other through the same entries. Packed and
// walked sequentially, the keys themselves stay in cache, as a request's key
// would; only the store's memory is accessed at random.
const std::string& KeyOrder(int n, int thread) {
  static constexpr int kStrides[] = {1, 7'919, 104'729, 611'953};  // primes
  static std::mutex mu;
  static auto* orders = new std::vector<std::unique_ptr<std::string>>(8);
  const size_t slot = (n == 1 ? 0 : 4) + thread % 4;
  std::lock_guard<std::mutex> lock(mu);
  std::unique_ptr<std::string>& order = (*orders)[slot];
  if (order == nullptr) {
    order = std::make_unique<std::string>();
    order->reserve(static_cast<size_t>(n) * kKeyBytes);
    const int stride = kStrides[thread % 4] % n;
    int i = (thread * 7'919) % n;
    for (int k = 0; k < n; ++k) {
      order->append(Keys()[i]);
      i += stride;
      if (i >= n) i -= n;
    }
  }
  return *order;
}

// Cycles through KeyOrder(range(0), thread); range(0) = 1 is one hot key.
class KeyCursor {
 public:
  explicit KeyCursor(const benchmark::State& state)
      : keys_(KeyOrder(static_cast<int>(state.range(0)), state.thread_index())) {}
  std::string_view Next() {
    std::string_view key(keys_.data() + pos_, kKeyBytes);
    pos_ += kKeyBytes;
    if (pos_ == keys_.size()) pos_ = 0;
    return key;
  }

 private:
  const std::string& keys_;
  size_t pos_ = 0;
};

void BM_MemoryStoreUpdate(benchmark::State& state) {
  MemoryStore& store = PopulatedStore();  // built before the timed loop
  KeyCursor cursor(state);
  for (auto _ : state) {
    Status s = store.Update(0, cursor.Next(), kNowMs, Increment);
    benchmark::DoNotOptimize(s);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_MemoryStoreUpdate)
    ->ArgName("keys")
    ->Arg(1)
    ->Arg(kDistinctKeys)
    ->Threads(1)
    ->Threads(2)
    ->UseRealTime();

// The same updates with a SystemClock read before each, as Limiter::Check
// makes. The clock's rdtscp (or lfence) waits for every earlier load and
// holds back every later one, so consecutive updates' cache misses cannot
// overlap as they do above. prefetch:1 calls MemoryStore::Prefetch before
// the clock read, which a prefetch is not ordered by. (The clock's value is
// not used: the populated entries' expiries are relative to kNowMs.)
void BM_MemoryStoreUpdateAfterClockRead(benchmark::State& state) {
  MemoryStore& store = PopulatedStore();
  SystemClock clock;
  KeyCursor cursor(state);
  const bool prefetch = state.range(1) != 0;
  for (auto _ : state) {
    const std::string_view key = cursor.Next();
    if (prefetch) store.Prefetch(0, key);
    benchmark::DoNotOptimize(clock.NowMs());
    Status s = store.Update(0, key, kNowMs, Increment);
    benchmark::DoNotOptimize(s);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_MemoryStoreUpdateAfterClockRead)
    ->ArgNames({"keys", "prefetch"})
    ->Args({kDistinctKeys, 0})
    ->Args({kDistinctKeys, 1})
    ->UseRealTime();

void BM_FlatHashMapBaseline(benchmark::State& state) {
  auto& map = PopulatedMap();
  KeyCursor cursor(state);
  for (auto _ : state) {
    const std::string_view key = cursor.Next();
    int64_t& v = map.find(absl::string_view(key.data(), key.size()))->second;  // all present
    ++v;
    benchmark::DoNotOptimize(v);
  }
  state.SetItemsProcessed(state.iterations());
  state.SetLabel("no lock");
}
BENCHMARK(BM_FlatHashMapBaseline)->ArgName("keys")->Arg(1)->Arg(kDistinctKeys)->UseRealTime();

std::mutex g_map_mu;

void BM_FlatHashMapBaselineOneMutex(benchmark::State& state) {
  auto& map = PopulatedMap();
  KeyCursor cursor(state);
  for (auto _ : state) {
    std::lock_guard<std::mutex> lock(g_map_mu);
    const std::string_view key = cursor.Next();
    int64_t& v = map.find(absl::string_view(key.data(), key.size()))->second;  // all present
    ++v;
    benchmark::DoNotOptimize(v);
  }
  state.SetItemsProcessed(state.iterations());
  state.SetLabel("under one std::mutex");
}
BENCHMARK(BM_FlatHashMapBaselineOneMutex)
    ->ArgName("keys")
    ->Arg(1)
    ->Arg(kDistinctKeys)
    ->Threads(1)
    ->Threads(2)
    ->UseRealTime();

// Heap bytes per entry for 1M entries with 16-byte keys and 2-word states,
// as glibc counts them (in-use arena bytes plus mmapped blocks, so malloc
// chunk overhead and the tables are included). The time is that of 1M
// creations on an empty store.
void BM_MemoryStoreBytesPerEntry(benchmark::State& state) {
  const std::vector<std::string>& keys = Keys();
  ManualClock clock(kNowMs);
  for (auto _ : state) {
    state.PauseTiming();
    const struct mallinfo2 before = mallinfo2();
    auto store = std::make_unique<MemoryStore>(BenchConfig(),
                                               std::vector<VariantLayout>{{2, nullptr}}, clock);
    state.ResumeTiming();
    for (const std::string& key : keys) (void)store->Update(0, key, kNowMs, Increment);
    state.PauseTiming();
    const struct mallinfo2 after = mallinfo2();
    const double bytes =
        static_cast<double>((after.uordblks + after.hblkhd) - (before.uordblks + before.hblkhd));
    state.counters["bytes_per_entry"] = bytes / kDistinctKeys;
    state.counters["estimated_bytes_per_entry"] =
        static_cast<double>(store->ApproximateMemoryBytes()) / kDistinctKeys;
    state.counters["entries"] = static_cast<double>(store->GetStats().entries);
    store.reset();
    state.ResumeTiming();
  }
  state.SetItemsProcessed(state.iterations() * kDistinctKeys);
}
BENCHMARK(BM_MemoryStoreBytesPerEntry)->Iterations(1)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace floodgate::engine

BENCHMARK_MAIN();
