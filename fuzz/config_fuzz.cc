// Fuzzes the YAML config: ParseConfig must never crash, hang or leak, and
// a config it accepts must describe itself and compile into a Limiter.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "floodgate/config.h"
#include "floodgate/limiter.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto config = floodgate::ParseConfig(text, "fuzz.yaml");
  if (!config.ok()) {
    // Every refusal names the source, as check-config promises.
    if (config.status().message().rfind("fuzz.yaml", 0) != 0) __builtin_trap();
    return 0;
  }
  (void)floodgate::DescribeConfig(*config);
  config->engine.sweep_interval_ms = 0;
  config->engine.max_entries = 16;
  // Secrets never come from the file: the server reads them from the
  // environment at start, an embedding program sets them. Give them here so
  // that a config the parser accepts must compile whatever the fuzzer's
  // environment holds; pending alerts stay in memory.
  config->otp.secret = "fuzz-otp-secret-0123456789";
  for (floodgate::Rule& rule : config->rules) rule.alerts.secret = "fuzz-alert-secret";
  config->alert_delivery.spool = "off";
  // Files are read when the subjects are built (check-config reads them
  // too): what a list or JWK Set file holds is its own fuzzers' business.
  for (floodgate::ListConfig& list : config->lists) list.file.clear();
  config->jwt.jwks_file.clear();
  config->jwt.hs256_secret = "fuzz-hs256-secret-of-32-bytes-at-least";
  floodgate::ManualClock clock(1'700'000'000'000);
  auto limiter = floodgate::Limiter::Create(*config, clock);
  if (!limiter.ok()) __builtin_trap();  // the parser must refuse what cannot compile
  for (const floodgate::Rule& rule : config->rules) {
    (void)(*limiter)->Check(rule.name, "k", 1);
  }
  return 0;
}
