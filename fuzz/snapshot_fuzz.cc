// Fuzzes loading the embedded store's state snapshot (data_dir: a file
// anyone with access to the directory may have damaged): Load must
// never crash, hang or leak, and must load all of a file or nothing. The
// input's last 4 bytes are replaced by its CRC-32C, so the fuzzer explores
// the records behind the checksum rather than the checksum itself. A file
// it loads must save and load again to the same entries.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>

#include "core/rule_eval.h"
#include "engine/embedded_store.h"
#include "engine/snapshot.h"
#include "floodgate/clock.h"
#include "floodgate/config.h"

namespace {

// The same rules as fuzz/corpus/snapshot/'s seed was written with.
constexpr char kRules[] = R"(
rules:
  daily: { algorithm: fixed_window, limits: 5/day }
  api: { algorithm: sliding_window, limits: [4/minute, 100/day], tiers: { pro: [6/minute] } }
  exact: { algorithm: sliding_log, limits: [3/minute, 10/hour] }
  bucket: { algorithm: token_bucket, limits: 10/minute, burst: 4 }
  login: { algorithm: gcra, limits: 2/minute }
  exports: { algorithm: concurrency, max_in_flight: 2, lease_ttl: 10m }
)";

struct Rules {
  floodgate::Config config;
  std::vector<floodgate::core::CompiledRule> compiled;
};

const Rules& TheRules() {
  static const Rules* rules = [] {
    auto* r = new Rules;
    r->config = *floodgate::ParseConfig(kRules, "fuzz.yaml");
    r->config.engine.sweep_interval_ms = 0;
    r->config.engine.shards = 4;
    for (const floodgate::Rule& rule : r->config.rules) {
      r->compiled.push_back(*floodgate::core::CompileRule(rule, "", rule.limits));
      for (const auto& [tier, limits] : rule.tiers) {
        r->compiled.push_back(*floodgate::core::CompileRule(rule, tier, limits));
      }
    }
    return r;
  }();
  return *rules;
}

std::unique_ptr<floodgate::engine::EmbeddedStore> NewStore(const floodgate::Clock& clock) {
  const Rules& rules = TheRules();
  auto store = std::make_unique<floodgate::engine::EmbeddedStore>(rules.config.engine, clock);
  uint32_t id = floodgate::store::kFirstRuleId;
  for (const auto& c : rules.compiled) {
    if (!store->Describe(c, id++).ok()) __builtin_trap();
  }
  return store;
}

std::string TempPath(const char* what) {
  return "/tmp/floodgate-snapshot-fuzz-" + std::to_string(::getpid()) + what;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string bytes(reinterpret_cast<const char*>(data), size);
  if (bytes.size() >= 4) {
    const uint32_t crc = floodgate::engine::Crc32c(0, bytes.data(), bytes.size() - 4);
    std::memcpy(bytes.data() + bytes.size() - 4, &crc, 4);
  }
  const std::string path = TempPath(".in");
  if (FILE* f = std::fopen(path.c_str(), "wb"); f != nullptr) {
    std::fwrite(bytes.data(), 1, bytes.size(), f);
    std::fclose(f);
  }
  // The seed's instant: what it holds has not expired.
  floodgate::ManualClock clock(1'700'000'000'000);
  auto store = NewStore(clock);
  auto loaded = store->Load(path);
  if (!loaded.ok()) {
    // All or nothing.
    if (store->GetUsage().entries != 0) __builtin_trap();
  } else {
    const std::string again = TempPath(".out");
    auto saved = store->Save(again);
    if (!saved.ok()) __builtin_trap();
    auto other = NewStore(clock);
    auto reloaded = other->Load(again);
    if (!reloaded.ok() || reloaded->entries != saved->entries ||
        other->GetUsage().entries != store->GetUsage().entries) {
      __builtin_trap();
    }
    std::remove(again.c_str());
  }
  std::remove(path.c_str());
  return 0;
}
