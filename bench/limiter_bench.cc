// Decisions per second through the public Limiter for each algorithm, on a
// hot key and on 1M distinct keys, 1 and 2 threads, beside a baseline that
// increments a plain absl::flat_hash_map<std::string, int64_t> on the same
// keys. Run: build/release/bench/limiter_bench (see docs/benchmarks.md).
#include <benchmark/benchmark.h>
#include <malloc.h>

#include <cstdio>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "api/open_services.h"
#include "floodgate/limiter.h"
#include "service/control/control_plane.h"
#include "service/limiter/limiter_core.h"

namespace {

constexpr int kDistinctKeys = 1'000'000;

const std::vector<std::string>& Keys() {
  static const auto* keys = [] {
    auto* v = new std::vector<std::string>();
    v->reserve(kDistinctKeys);
    char buf[32];
    for (int i = 0; i < kDistinctKeys; ++i) {
      std::snprintf(buf, sizeof(buf), "user:%011d", i);  // 16 bytes
      v->emplace_back(buf);
    }
    return v;
  }();
  return *keys;
}

floodgate::SystemClock& Clock() {
  static floodgate::SystemClock clock;
  return clock;
}

// Limits high enough that every decision admits: we measure the work of a
// decision, not of a denial. `alerts`: the rule has quota alerts at 80 and
// 100 %, which these limits never reach (the bits are checked on every
// admission; no event is built).
floodgate::Config ConfigFor(const char* algorithm, bool alerts) {
  // Each within its algorithm's bounds (see CompileRule).
  const std::string name = algorithm;
  const std::string limit = name == "sliding_log"    ? "100000/minute"
                            : name == "gcra"         ? "1000000000/day"
                            : name == "fixed_window" ? "1000000000/minute"
                                                     : "100000000/minute";
  auto config = floodgate::ParseConfig(
      std::string("rules:\n  r: { algorithm: ") + algorithm + ", limits: [" + limit + "] }\n",
      "bench");
  config->engine.max_entries = 4'000'000;
  if (alerts) {
    config->rules[0].alerts.thresholds = {80, 100};
    config->rules[0].alerts.webhook = "http://127.0.0.1:9/bench";
    config->rules[0].alerts.secret = "bench";
    config->alert_delivery.spool = "off";
  }
  // No background sweep: decisions, not memory reclamation, are measured.
  config->engine.sweep_interval_ms = 0;
  return *config;
}

floodgate::Limiter& LimiterFor(const char* algorithm, bool alerts = false) {
  static std::mutex mu;
  static absl::flat_hash_map<std::string, std::unique_ptr<floodgate::Limiter>> limiters;
  std::lock_guard<std::mutex> lock(mu);
  auto& slot = limiters[std::string(algorithm) + (alerts ? "+alerts" : "")];
  if (!slot) slot = floodgate::Limiter::Create(ConfigFor(algorithm, alerts), Clock()).value();
  return *slot;
}

// The server's limiter (what the fronts call), for the pipelined path.
floodgate::service::LimiterCore& CoreFor(const char* algorithm) {
  static std::mutex mu;
  static absl::flat_hash_map<std::string, std::unique_ptr<floodgate::service::Services>> cores;
  std::lock_guard<std::mutex> lock(mu);
  auto& slot = cores[algorithm];
  if (!slot) slot = floodgate::api::OpenServices(ConfigFor(algorithm, false), Clock()).value();
  return *slot->core;
}

template <const char* kAlgorithm>
void BM_CheckHotKey(benchmark::State& state) {
  floodgate::Limiter& limiter = LimiterFor(kAlgorithm);
  const std::string key = "user:hot-key-01";
  floodgate::Decision d;
  for (auto _ : state) {
    auto status = limiter.Check("r", key, 1, {}, &d);
    benchmark::DoNotOptimize(status);
    benchmark::DoNotOptimize(d);
  }
  state.SetItemsProcessed(state.iterations());
}

// The same with alerts on the rule: what the alert bits cost a decision.
template <const char* kAlgorithm>
void BM_CheckHotKeyWithAlerts(benchmark::State& state) {
  floodgate::Limiter& limiter = LimiterFor(kAlgorithm, /*alerts=*/true);
  const std::string key = "user:hot-key-01";
  floodgate::Decision d;
  for (auto _ : state) {
    auto status = limiter.Check("r", key, 1, {}, &d);
    benchmark::DoNotOptimize(status);
    benchmark::DoNotOptimize(d);
  }
  state.SetItemsProcessed(state.iterations());
}

// The control plane's cost (docs/control-plane.md), on the server's
// limiter: the hot key with an override of its own (`kOwn`), or checked
// while another subject has an override and another is blocked (`kOther`):
// what a subject with neither pays once the rule has some.
enum class Controlled { kOwn, kOther };

floodgate::service::LimiterCore& ControlledCoreFor(const char* algorithm, Controlled which) {
  static std::mutex mu;
  static absl::flat_hash_map<std::string, std::unique_ptr<floodgate::service::Services>> cores;
  std::lock_guard<std::mutex> lock(mu);
  auto& slot = cores[std::string(algorithm) + (which == Controlled::kOwn ? "+own" : "+other")];
  if (slot) return *slot->core;
  slot = floodgate::api::OpenServices(ConfigFor(algorithm, false), Clock()).value();
  const std::string high =
      std::string(algorithm) == "gcra" ? "1000000000/day" : "1000000000/minute";
  std::promise<floodgate::Status> set, blocked;
  const floodgate::service::Actor who{"admin", ""};
  slot->control->SetOverride(
      who, "r", which == Controlled::kOwn ? "user:hot-key-01" : "user:other", {high}, 0, "bench",
      [&](const floodgate::Status& s, const std::string&) { set.set_value(s); });
  slot->control->Block(
      who, "user:blocked", "", 3'600'000, "bench",
      [&](const floodgate::Status& s, const std::string&) { blocked.set_value(s); });
  if (!set.get_future().get().ok() || !blocked.get_future().get().ok()) std::abort();
  return *slot->core;
}

template <const char* kAlgorithm, Controlled kWhich>
void BM_CheckHotKeyControlled(benchmark::State& state) {
  floodgate::service::LimiterCore& core = ControlledCoreFor(kAlgorithm, kWhich);
  const std::string key = "user:hot-key-01";
  floodgate::Decision d;
  for (auto _ : state) {
    auto status = core.CheckAndWait({"r", key, 1, {}}, &d);
    benchmark::DoNotOptimize(status);
    benchmark::DoNotOptimize(d);
  }
  if (d.limit < 1'000'000) state.SkipWithError("the override is not in force");
  state.SetItemsProcessed(state.iterations());
}

// Touches every key once outside the timed loop, so the distinct-key figures
// are steady-state lookups, not first-time inserts.
void WarmUp(floodgate::Limiter& limiter) {
  floodgate::Decision d;
  for (const auto& key : Keys()) (void)limiter.Check("r", key, 1, {}, &d);
}

template <const char* kAlgorithm>
void BM_CheckDistinctKeys(benchmark::State& state) {
  floodgate::Limiter& limiter = LimiterFor(kAlgorithm);
  const auto& keys = Keys();
  if (state.thread_index() == 0 && limiter.GetStats().entries < kDistinctKeys) WarmUp(limiter);
  size_t i = static_cast<size_t>(state.thread_index()) * 7919;
  floodgate::Decision d;
  for (auto _ : state) {
    auto status = limiter.Check("r", keys[i], 1, {}, &d);
    benchmark::DoNotOptimize(status);
    benchmark::DoNotOptimize(d);
    i = (i + 1) % keys.size();
  }
  state.SetItemsProcessed(state.iterations());
}

// The RESP front's pipeline path: for a batch of 16 requests, prefetch each
// subject's state, read the clock once, then decide each in order. Items
// are decisions.
template <const char* kAlgorithm>
void BM_CheckPipelinedDistinctKeys(benchmark::State& state) {
  constexpr size_t kBatch = 16;
  floodgate::service::LimiterCore& limiter = CoreFor(kAlgorithm);
  const auto& keys = Keys();
  if (state.thread_index() == 0 && limiter.GetStats().entries < kDistinctKeys) {
    for (const auto& key : keys) (void)limiter.CheckAndWait("r", key);
  }
  size_t i = static_cast<size_t>(state.thread_index()) * 7919;
  floodgate::Decision d;
  floodgate::Status status;
  // Never called: the embedded store answers every decision at once.
  const auto later = [] { return floodgate::store::Done<floodgate::Decision>(); };
  for (auto _ : state) {
    size_t j = i;
    for (size_t b = 0; b < kBatch; ++b, j = (j + 1) % keys.size()) limiter.Prefetch("r", keys[j]);
    const int64_t now_ms = Clock().NowMs();
    for (size_t b = 0; b < kBatch; ++b, i = (i + 1) % keys.size()) {
      limiter.Check({"r", keys[i], 1, {}, nullptr, now_ms}, &d, &status, later);
      benchmark::DoNotOptimize(status);
      benchmark::DoNotOptimize(d);
    }
  }
  state.SetItemsProcessed(state.iterations() * kBatch);
}

void BM_FlatHashMapBaselineHotKey(benchmark::State& state) {
  absl::flat_hash_map<std::string, int64_t> map;
  const std::string key = "user:hot-key-01";
  for (auto _ : state) {
    benchmark::DoNotOptimize(++map[key]);
  }
  state.SetItemsProcessed(state.iterations());
}

// The parts of a decision that cost time beyond their instruction count,
// each alone on this host, beside the baseline (docs/benchmarks.md, "The
// engine's hot key"): the clock a decision reads (through the Clock
// interface, as LimiterCore reads it), and a shard's lock and unlock with
// no other thread about (engine/shard.h: std::mutex).
void BM_PartClockNowMs(benchmark::State& state) {
  const floodgate::Clock& clock = Clock();  // the benches' SystemClock
  for (auto _ : state) benchmark::DoNotOptimize(clock.NowMs());
  state.SetItemsProcessed(state.iterations());
}

void BM_PartShardLock(benchmark::State& state) {
  std::mutex mu;
  int64_t n = 0;
  for (auto _ : state) {
    std::lock_guard<std::mutex> lock(mu);
    benchmark::DoNotOptimize(++n);
  }
  state.SetItemsProcessed(state.iterations());
}

void BM_FlatHashMapBaselineDistinctKeys(benchmark::State& state) {
  static absl::flat_hash_map<std::string, int64_t> map;
  const auto& keys = Keys();
  if (map.empty()) {
    for (const auto& key : keys) map[key] = 0;
  }
  size_t i = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(++map[keys[i]]);
    i = (i + 1) % keys.size();
  }
  state.SetItemsProcessed(state.iterations());
}

// The least a thread-safe fixed_window limiter does per decision, beside
// the flat_hash_map baseline: read the clock (through Clock, as floodgate
// does), take a lock, find the key's (window, count), decide one limit and
// say how many are left. No rules, no expiry, no result beyond that: the
// floor floodgate's own decision is compared with in docs/benchmarks.md
// ("The engine's hot key"), because the baseline alone reads no clock and
// takes no lock, which a limiter cannot skip.
struct MinimalWindow {
  int64_t start_ms = 0;
  int64_t used = 0;
};

inline int64_t MinimalDecide(MinimalWindow& w, int64_t now_ms) {
  constexpr int64_t kWindowMs = 60'000;
  constexpr int64_t kLimit = 1'000'000'000;
  const int64_t start = now_ms - now_ms % kWindowMs;
  if (w.start_ms != start) w = {start, 0};
  if (w.used + 1 > kLimit) return -1;
  return kLimit - ++w.used;
}

void BM_MinimalLimiterBaselineHotKey(benchmark::State& state) {
  absl::flat_hash_map<std::string, MinimalWindow> map;
  std::mutex mu;
  const floodgate::Clock& clock = Clock();
  const std::string key = "user:hot-key-01";
  for (auto _ : state) {
    const int64_t now_ms = clock.NowMs();
    std::lock_guard<std::mutex> lock(mu);
    benchmark::DoNotOptimize(MinimalDecide(map[key], now_ms));
  }
  state.SetItemsProcessed(state.iterations());
}

void BM_MinimalLimiterBaselineDistinctKeys(benchmark::State& state) {
  static absl::flat_hash_map<std::string, MinimalWindow> map;
  static std::mutex mu;
  const floodgate::Clock& clock = Clock();
  const auto& keys = Keys();
  if (map.empty()) {
    for (const auto& key : keys) map[key] = {};
  }
  size_t i = 0;
  for (auto _ : state) {
    const int64_t now_ms = clock.NowMs();
    std::lock_guard<std::mutex> lock(mu);
    benchmark::DoNotOptimize(MinimalDecide(map[keys[i]], now_ms));
    i = (i + 1) % keys.size();
  }
  state.SetItemsProcessed(state.iterations());
}

// Heap bytes per live entry: 1M subjects with 16-byte keys on a one-limit
// fixed_window rule, measured as the glibc heap growth (chunk overhead and
// hash tables included). Reported as the counter bytes_per_entry.
void BM_MemoryPerEntryFixedWindow(benchmark::State& state) {
  const auto& keys = Keys();
  for (auto _ : state) {
    auto config = floodgate::ParseConfig(
        "rules:\n  r: { algorithm: fixed_window, limits: [1000/hour] }\n", "bench");
    config->engine.sweep_interval_ms = 0;
    floodgate::ManualClock clock(1'700'000'000'000);
    auto limiter = floodgate::Limiter::Create(*config, clock);
    const struct mallinfo2 before = mallinfo2();
    floodgate::Decision d;
    for (const auto& key : keys) (void)(*limiter)->Check("r", key, 1, {}, &d);
    const struct mallinfo2 after = mallinfo2();
    const double bytes =
        static_cast<double>((after.uordblks + after.hblkhd) - (before.uordblks + before.hblkhd));
    state.counters["bytes_per_entry"] = bytes / static_cast<double>(keys.size());
    state.counters["entries"] = static_cast<double>((*limiter)->GetStats().entries);
  }
}

constexpr char kFixedWindow[] = "fixed_window";
constexpr char kSlidingWindow[] = "sliding_window";
constexpr char kSlidingLog[] = "sliding_log";
constexpr char kTokenBucket[] = "token_bucket";
constexpr char kGcra[] = "gcra";

#define FLOODGATE_PIPELINED_BENCH(NAME)              \
  BENCHMARK(BM_CheckPipelinedDistinctKeys<NAME>)     \
      ->Name("BM_CheckPipelinedDistinctKeys/" #NAME) \
      ->Threads(1)                                   \
      ->Threads(2)                                   \
      ->UseRealTime()

#define FLOODGATE_ALGORITHM_BENCH(NAME)     \
  BENCHMARK(BM_CheckHotKey<NAME>)           \
      ->Name("BM_CheckHotKey/" #NAME)       \
      ->Threads(1)                          \
      ->Threads(2)                          \
      ->UseRealTime();                      \
  BENCHMARK(BM_CheckDistinctKeys<NAME>)     \
      ->Name("BM_CheckDistinctKeys/" #NAME) \
      ->Threads(1)                          \
      ->Threads(2)                          \
      ->UseRealTime()

FLOODGATE_ALGORITHM_BENCH(kFixedWindow);
FLOODGATE_ALGORITHM_BENCH(kSlidingWindow);
FLOODGATE_ALGORITHM_BENCH(kSlidingLog);
FLOODGATE_ALGORITHM_BENCH(kTokenBucket);
FLOODGATE_ALGORITHM_BENCH(kGcra);
BENCHMARK(BM_CheckHotKeyWithAlerts<kFixedWindow>)
    ->Name("BM_CheckHotKeyWithAlerts/kFixedWindow")
    ->Threads(1)
    ->UseRealTime();
BENCHMARK(BM_CheckHotKeyWithAlerts<kGcra>)
    ->Name("BM_CheckHotKeyWithAlerts/kGcra")
    ->Threads(1)
    ->UseRealTime();
BENCHMARK(BM_CheckHotKeyControlled<kFixedWindow, Controlled::kOwn>)
    ->Name("BM_CheckHotKeyWithOverride/kFixedWindow")
    ->Threads(1)
    ->UseRealTime();
BENCHMARK(BM_CheckHotKeyControlled<kFixedWindow, Controlled::kOther>)
    ->Name("BM_CheckHotKeyOthersOverriddenAndBlocked/kFixedWindow")
    ->Threads(1)
    ->UseRealTime();
BENCHMARK(BM_CheckHotKeyControlled<kGcra, Controlled::kOwn>)
    ->Name("BM_CheckHotKeyWithOverride/kGcra")
    ->Threads(1)
    ->UseRealTime();
BENCHMARK(BM_CheckHotKeyControlled<kGcra, Controlled::kOther>)
    ->Name("BM_CheckHotKeyOthersOverriddenAndBlocked/kGcra")
    ->Threads(1)
    ->UseRealTime();
FLOODGATE_PIPELINED_BENCH(kFixedWindow);
FLOODGATE_PIPELINED_BENCH(kGcra);
BENCHMARK(BM_FlatHashMapBaselineHotKey)->Threads(1);
BENCHMARK(BM_PartClockNowMs);
BENCHMARK(BM_PartShardLock);
BENCHMARK(BM_FlatHashMapBaselineDistinctKeys)->Threads(1)->UseRealTime();
BENCHMARK(BM_MinimalLimiterBaselineHotKey)->Threads(1);
BENCHMARK(BM_MinimalLimiterBaselineDistinctKeys)->Threads(1)->UseRealTime();
BENCHMARK(BM_MemoryPerEntryFixedWindow)->Iterations(1)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
