// The embedded store's state snapshot (data_dir, service/snapshots/state_keeper.h):
// how long writing and loading one takes, and its size, for N subjects of
// a two-limit sliding_window rule (each subject one entry of 3 words and a
// 16-byte key).
//
//   BM_SnapshotWrite/N   StateKeeper::SaveNow on a store of N subjects
//   BM_SnapshotLoad/N    StateKeeper::Load of that file into a fresh store
//
// Counters: entries, bytes (the file), and bytes per entry. The file goes
// to $TMPDIR (default /tmp). docs/benchmarks.md has the figures for
// 1,000,000 subjects:
//   build/release/bench/snapshot_bench --benchmark_filter=/1000000
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>

#include "api/open_services.h"
#include "service/services.h"
#include "service/snapshots/state_keeper.h"

namespace floodgate {
namespace {

using service::Services;
using service::StateKeeper;

Config BenchConfig() {
  auto c = ParseConfig(R"(
engine: { max_entries: 4000000 }
rules:
  api: { algorithm: sliding_window, limits: [100/minute, 5000/day] }
)",
                       "bench.yaml");
  Config config = *c;
  config.engine.sweep_interval_ms = 0;
  return config;
}

std::string Key(int64_t i) {
  char key[32];
  std::snprintf(key, sizeof(key), "user:%011lld", static_cast<long long>(i));
  return key;
}

std::string DataDir() {
  const char* tmp = std::getenv("TMPDIR");
  return std::string(tmp != nullptr ? tmp : "/tmp") + "/floodgate-snapshot-bench-" +
         std::to_string(::getpid());
}

std::unique_ptr<Services> Filled(const Clock& clock, int64_t n) {
  auto core = api::OpenServices(BenchConfig(), clock);
  for (int64_t i = 0; i < n; ++i) (void)(*core)->core->CheckAndWait("api", Key(i));
  return std::move(*core);
}

void BM_SnapshotWrite(benchmark::State& state) {
  const int64_t n = state.range(0);
  SystemClock clock;
  const std::string dir = DataDir();
  std::filesystem::create_directories(dir);
  auto core = Filled(clock, n);
  auto keeper = core->NewStateKeeper(dir, 0);
  if (!keeper->Load(true).ok()) state.SkipWithError("load");
  for (auto _ : state) {
    if (!keeper->SaveNow().ok()) state.SkipWithError("save failed");
  }
  const store::StateFigures f = keeper->GetStats().last_save;
  state.counters["entries"] = static_cast<double>(f.entries);
  state.counters["bytes"] = static_cast<double>(f.bytes);
  state.counters["bytes_per_entry"] = f.entries > 0 ? static_cast<double>(f.bytes) / f.entries : 0;
  std::filesystem::remove_all(dir);
}

void BM_SnapshotLoad(benchmark::State& state) {
  const int64_t n = state.range(0);
  SystemClock clock;
  const std::string dir = DataDir();
  std::filesystem::create_directories(dir);
  {
    auto core = Filled(clock, n);
    auto keeper = core->NewStateKeeper(dir, 0);
    if (!keeper->Load(true).ok() || !keeper->Stop().ok()) state.SkipWithError("save failed");
  }
  store::StateFigures f;
  for (auto _ : state) {
    state.PauseTiming();
    auto core = api::OpenServices(BenchConfig(), clock);
    auto keeper = (*core)->NewStateKeeper(dir, 0);
    state.ResumeTiming();
    if (!keeper->Load(false).ok()) state.SkipWithError("load failed");
    state.PauseTiming();
    f = keeper->GetStats().load;
    keeper.reset();
    core->reset();
    state.ResumeTiming();
  }
  state.counters["entries"] = static_cast<double>(f.entries);
  state.counters["bytes"] = static_cast<double>(f.bytes);
  std::filesystem::remove_all(dir);
}

BENCHMARK(BM_SnapshotWrite)->Arg(10'000)->Arg(1'000'000)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_SnapshotLoad)->Arg(10'000)->Arg(1'000'000)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace floodgate

BENCHMARK_MAIN();
