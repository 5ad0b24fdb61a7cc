// Micro benchmarks of the network lists (service/lists/): loading a list
// of 100,000 networks (a file, its text, the set from parsed networks),
// what the set holds in memory, and the cost of a lookup, hits and misses
// of each family, on one thread and two.
//
// The list is generated from a fixed seed: half IPv4 networks of /8 to /32,
// the longer ones likelier (a length's weight doubles every two bits, so a
// handful of /8s and a third of /32s, as deny lists run: mostly hosts and
// /24s), half IPv6 networks of /32 to /128 in 2000::/3, every length alike.
// Lookups (2^16 of each kind, visited in turn):
//   hit          an address inside a network of the list, drawn at random
//   near miss    a hit with one bit of its network's prefix flipped, kept if
//                no network holds it: the walk goes as deep as the networks
//                it resembles
//   random miss  a random address (IPv6: in 2000::/3) no network holds
//
// Run (release preset):
//   ./build/release/bench/cidr_bench --benchmark_min_time=0.5
// Figures and the command that produced them go to docs/benchmarks.md.
#include <malloc.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "benchmark/benchmark.h"
#include "service/lists/cidr_list_file.h"
#include "service/lists/cidr_set.h"

namespace floodgate::service {
namespace {

constexpr int kNetworks = 100'000;
constexpr size_t kLookups = 1 << 16;
constexpr uint64_t kSeed = 20240601;

// A random IPv6 address in 2000::/3, the global unicast space.
IpAddress RandomV6(std::mt19937_64& rng) {
  std::array<uint8_t, 16> bytes;
  const uint64_t high = (rng() >> 3) | (uint64_t{1} << 61), low = rng();
  for (int b = 0; b < 8; ++b) {
    bytes[b] = static_cast<uint8_t>(high >> (56 - 8 * b));
    bytes[8 + b] = static_cast<uint8_t>(low >> (56 - 8 * b));
  }
  return IpAddress::FromV6Bytes(bytes);
}

IpAddress RandomAddress(std::mt19937_64& rng, bool v4) {
  return v4 ? IpAddress::FromV4(static_cast<uint32_t>(rng())) : RandomV6(rng);
}

// /8../32, the weight of /L being 2^((L - 8) / 2).
int RandomV4Length(std::mt19937_64& rng) {
  uint64_t total = 0;
  for (int len = 8; len <= 32; ++len) total += uint64_t{1} << ((len - 8) / 2);
  uint64_t pick = rng() % total;
  for (int len = 8;; ++len) {
    const uint64_t weight = uint64_t{1} << ((len - 8) / 2);
    if (pick < weight) return len;
    pick -= weight;
  }
}

// `address` with bit `bit` of its family's (the most significant is 0) flipped.
IpAddress FlipBit(const IpAddress& address, int bit) {
  std::array<uint8_t, 16> bytes = address.bytes();
  const int at = address.is_v4() ? 96 + bit : bit;
  bytes[at / 8] ^= static_cast<uint8_t>(0x80 >> (at % 8));
  return IpAddress::FromV6Bytes(bytes);
}
// An address of `network`: its prefix, then `noise`'s bits.
IpAddress Within(const Cidr& network, const IpAddress& noise) {
  std::array<uint8_t, 16> bytes = network.address().bytes();
  const int from = (network.is_v4() ? 96 : 0) + network.prefix_len();
  for (int at = from; at < 128; ++at) {
    const uint8_t m = static_cast<uint8_t>(0x80 >> (at % 8));
    bytes[at / 8] = static_cast<uint8_t>((bytes[at / 8] & ~m) | (noise.bytes()[at / 8] & m));
  }
  return IpAddress::FromV6Bytes(bytes);
}

struct Fixture {
  std::vector<Cidr> networks;  // as generated, before dedupe
  std::string text;            // the list file's text: one network a line
  std::string path;            // that text in a file
  CidrSet set;
  // [family: 0 IPv4, 1 IPv6][kind: 0 hit, 1 near miss, 2 random miss]
  std::vector<IpAddress> lookups[2][3];
};

const Fixture* g_fixture = nullptr;  // made by the first benchmark that runs

const Fixture& TheFixture() {
  static const Fixture* fixture = [] {
    auto* f = new Fixture();
    std::mt19937_64 rng(kSeed);
    for (int i = 0; i < kNetworks; ++i) {
      const bool v4 = i % 2 == 0;
      const int len = v4 ? RandomV4Length(rng) : 32 + static_cast<int>(rng() % 97);
      f->networks.push_back(*Cidr::Of(RandomAddress(rng, v4), len));
      f->text += f->networks.back().ToString();
      f->text += '\n';
    }
    char path[] = "/tmp/floodgate-cidr-bench-XXXXXX";
    const int fd = mkstemp(path);
    if (fd < 0 ||
        write(fd, f->text.data(), f->text.size()) != static_cast<ssize_t>(f->text.size())) {
      std::perror("cidr_bench: writing the list");
      std::exit(1);
    }
    close(fd);
    f->path = path;
    f->set = CidrSet::Build(f->networks).value();

    std::vector<Cidr> by_family[2];
    for (const Cidr& c : f->set.Networks()) by_family[c.is_v4() ? 0 : 1].push_back(c);
    for (int family = 0; family < 2; ++family) {
      const std::vector<Cidr>& mine = by_family[family];
      const bool v4 = family == 0;
      auto& hits = f->lookups[family][0];
      auto& near = f->lookups[family][1];
      auto& random = f->lookups[family][2];
      while (hits.size() < kLookups || near.size() < kLookups) {
        const Cidr& network = mine[rng() % mine.size()];
        const IpAddress hit = Within(network, RandomAddress(rng, v4));
        if (hits.size() < kLookups) hits.push_back(hit);
        if (network.prefix_len() == 0) continue;
        const IpAddress miss = FlipBit(hit, static_cast<int>(rng() % network.prefix_len()));
        if (near.size() < kLookups && !f->set.Contains(miss)) near.push_back(miss);
      }
      while (random.size() < kLookups) {
        const IpAddress miss = RandomAddress(rng, v4);
        if (!f->set.Contains(miss)) random.push_back(miss);
      }
    }
    g_fixture = f;
    return f;
  }();
  return *fixture;
}

// Heap bytes in use, as glibc counts them: the arena's in-use chunks plus
// the mmapped blocks (where vectors of 128 KiB and more go).
double HeapBytes() {
  const struct mallinfo2 info = mallinfo2();
  return static_cast<double>(info.uordblks + info.hblkhd);
}

void SetMemoryCounters(benchmark::State& state, const CidrSet& set, double heap_before) {
  state.counters["networks"] = static_cast<double>(set.size());
  state.counters["set_bytes"] = static_cast<double>(set.MemoryBytes());
  state.counters["heap_bytes"] = HeapBytes() - heap_before;
}

// The whole load a reload pays: read the file, parse each line, build.
void BM_LoadListFile(benchmark::State& state) {
  const Fixture& f = TheFixture();
  for (auto _ : state) {
    const double before = HeapBytes();
    Result<CidrSet> set = LoadCidrListFile(f.path);
    if (!set.ok()) {
      state.SkipWithError(set.status().ToString().c_str());
      break;
    }
    state.PauseTiming();
    SetMemoryCounters(state, *set, before);
    set = CidrSet();
    state.ResumeTiming();
  }
  state.SetItemsProcessed(state.iterations() * kNetworks);
}
BENCHMARK(BM_LoadListFile)->Unit(benchmark::kMillisecond);

// The same from the text in memory: the parse and the build, no I/O.
void BM_ParseListText(benchmark::State& state) {
  const Fixture& f = TheFixture();
  for (auto _ : state) {
    Result<CidrSet> set = ParseCidrListText(f.text, "bench");
    benchmark::DoNotOptimize(set);
  }
  state.SetItemsProcessed(state.iterations() * kNetworks);
}
BENCHMARK(BM_ParseListText)->Unit(benchmark::kMillisecond);

// The build alone, from networks already parsed: sort, dedupe, lay out.
void BM_BuildSet(benchmark::State& state) {
  const Fixture& f = TheFixture();
  for (auto _ : state) {
    state.PauseTiming();
    const double before = HeapBytes();
    std::vector<Cidr> networks = f.networks;  // Build takes it and frees it
    state.ResumeTiming();
    Result<CidrSet> set = CidrSet::Build(std::move(networks));
    state.PauseTiming();
    SetMemoryCounters(state, *set, before);
    set = CidrSet();
    state.ResumeTiming();
  }
  state.SetItemsProcessed(state.iterations() * kNetworks);
}
BENCHMARK(BM_BuildSet)->Unit(benchmark::kMillisecond);

const char* const kKinds[] = {"hit", "near miss", "random miss"};

// args: family (4 or 6), kind (0 hit, 1 near miss, 2 random miss)
void BM_LongestMatch(benchmark::State& state) {
  const Fixture& f = TheFixture();
  const int family = state.range(0) == 4 ? 0 : 1;
  const std::vector<IpAddress>& lookups = f.lookups[family][state.range(1)];
  size_t i = static_cast<size_t>(state.thread_index()) * (kLookups / 2);
  size_t found = 0;
  for (auto _ : state) {
    const std::optional<Cidr> match = f.set.LongestMatch(lookups[i++ % kLookups]);
    found += match.has_value();
    benchmark::DoNotOptimize(match);
  }
  state.SetItemsProcessed(state.iterations());
  state.SetLabel(std::string(state.range(0) == 4 ? "IPv4 " : "IPv6 ") + kKinds[state.range(1)]);
  // The share of lookups that found a network (1 for hits, 0 for misses).
  state.counters["found"] =
      benchmark::Counter(static_cast<double>(found) / static_cast<double>(state.iterations()),
                         benchmark::Counter::kAvgThreads);
}
BENCHMARK(BM_LongestMatch)
    ->ArgNames({"family", "kind"})
    ->ArgsProduct({{4, 6}, {0, 1, 2}})
    ->Threads(1)
    ->Threads(2)
    ->UseRealTime();

// Whether any network holds the address (a deny list's question): stops
// at the first network on the path.
void BM_Contains(benchmark::State& state) {
  const Fixture& f = TheFixture();
  const int family = state.range(0) == 4 ? 0 : 1;
  const std::vector<IpAddress>& lookups = f.lookups[family][state.range(1)];
  size_t i = 0;
  for (auto _ : state) benchmark::DoNotOptimize(f.set.Contains(lookups[i++ % kLookups]));
  state.SetItemsProcessed(state.iterations());
  state.SetLabel(std::string(state.range(0) == 4 ? "IPv4 " : "IPv6 ") + kKinds[state.range(1)]);
}
BENCHMARK(BM_Contains)->ArgNames({"family", "kind"})->ArgsProduct({{4, 6}, {0, 1, 2}});

}  // namespace
}  // namespace floodgate::service

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  if (floodgate::service::g_fixture != nullptr) unlink(floodgate::service::g_fixture->path.c_str());
  return 0;
}
