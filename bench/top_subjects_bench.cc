// Micro benchmarks of TopSubjects::Record, the cost every decision pays to
// feed GET /v1/admin/top: Zipf(1.1) keys over 100,000 subjects, on 1 and 2
// threads, all on one rule (each thread in its own shard of it) or each on
// its own rule, with the clock still or running (a 10 s bucket ends every 10,000
// records per thread, and is compacted and merged up), and on a warm key.
//
// Run (release preset):
//   ./build/release/bench/top_subjects_bench --benchmark_min_time=0.2
// Figures and the command that produced them go to docs/benchmarks.md.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "benchmark/benchmark.h"
#include "service/top/top_subjects.h"

namespace floodgate::service {
namespace {

constexpr size_t kSubjects = 100'000;
constexpr size_t kStream = 1 << 20;
constexpr int64_t kNowMs = 1'700'000'100'000;  // on a 5 min boundary

// "user:00000000042" keys (16 bytes: one past what std::string keeps
// inline, as most real subjects are), drawn Zipf(1.1) from a fixed seed,
// built once, outside every timed region.
struct Stream {
  std::vector<std::string> keys;
  std::vector<uint32_t> picks;
};

const Stream& ZipfKeys() {
  static const Stream* stream = [] {
    auto* s = new Stream();
    char buf[32];
    for (size_t i = 0; i < kSubjects; ++i) {
      std::snprintf(buf, sizeof(buf), "user:%011zu", i * 7919 % 100'003);
      s->keys.emplace_back(buf);
    }
    std::vector<double> cdf(kSubjects);
    double sum = 0;
    for (size_t i = 0; i < kSubjects; ++i) cdf[i] = sum += 1.0 / std::pow(i + 1.0, 1.1);
    std::mt19937_64 rng(42);
    s->picks.reserve(kStream);
    for (size_t i = 0; i < kStream; ++i) {
      const double u = static_cast<double>(rng() >> 11) * 0x1.0p-53 * sum;
      const size_t r = std::upper_bound(cdf.begin(), cdf.end(), u) - cdf.begin();
      s->picks.push_back(static_cast<uint32_t>(std::min(r, kSubjects - 1)));
    }
    return s;
  }();
  return *stream;
}

// args: 0 = one rule for all threads, 1 = a rule per thread;
//       0 = a still clock, 1 = 1 ms per record.
void BM_Record(benchmark::State& state) {
  static TopSubjects* top = new TopSubjects();
  const Stream& s = ZipfKeys();
  const std::string rule =
      state.range(0) == 0 ? "shared" : "own" + std::to_string(state.thread_index());
  const bool running = state.range(1) == 1;
  size_t i = static_cast<size_t>(state.thread_index()) * 7777;
  int64_t now = kNowMs;
  for (auto _ : state) {
    top->Record(rule, s.keys[s.picks[i & (kStream - 1)]], 1, (i & 3) == 0, now);
    ++i;
    if (running) ++now;
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_Record)
    ->ArgNames({"own_rule", "clock"})
    ->Args({0, 0})
    ->Args({0, 1})
    ->Args({1, 0})
    ->Threads(1)
    ->Threads(2)
    ->UseRealTime();

// Uniform keys over kSubjects, one thread, as the server's A/B sends them
// (redis-benchmark -r 100000): no heavy hitter, so nearly every Record
// evicts, and the counters tie at the floor: the sketch's worst case.
void BM_RecordUniform(benchmark::State& state) {
  static TopSubjects* top = [] {
    TopSubjectsOptions options;
    options.shards = 1;
    return new TopSubjects(options);
  }();
  const Stream& s = ZipfKeys();
  std::mt19937_64 rng(9);
  std::vector<uint32_t> picks(kStream);
  for (uint32_t& p : picks) p = static_cast<uint32_t>(rng() % kSubjects);
  size_t i = 0;
  for (auto _ : state) {
    top->Record("uniform", s.keys[picks[i & (kStream - 1)]], 1, true, kNowMs);
    ++i;
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_RecordUniform);

// A warm key: the 64 heaviest subjects in turn, all holding a counter, so
// no Record evicts: the floor of what a decision pays.
void BM_RecordWarm(benchmark::State& state) {
  static TopSubjects* top = new TopSubjects();
  const Stream& s = ZipfKeys();
  const std::string rule = "warm";
  size_t i = static_cast<size_t>(state.thread_index()) * 17;
  for (auto _ : state) {
    top->Record(rule, s.keys[i & 63], 1, false, kNowMs);
    ++i;
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_RecordWarm)->Threads(1)->Threads(2)->UseRealTime();

// The admin side, for scale: an hour's top 10 of a rule whose every bucket
// is full.
void BM_QueryHour(benchmark::State& state) {
  TopSubjects top;
  const Stream& s = ZipfKeys();
  int64_t now = kNowMs;
  for (size_t i = 0; i < 3'700'000; ++i, now += 1) {
    top.Record("r", s.keys[s.picks[i & (kStream - 1)]], 1, true, now);
  }
  for (auto _ : state) {
    benchmark::DoNotOptimize(top.Query("r", TopBy::kDenied, TopWindow::k1h, 10, now));
  }
}
BENCHMARK(BM_QueryHour)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace floodgate::service

BENCHMARK_MAIN();
