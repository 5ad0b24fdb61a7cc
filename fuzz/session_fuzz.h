// Shared set-up for the session fuzzers: a small limiter and one event
// loop's context, so fuzz input runs through the real request handling
// (parse, route, limiter, reply) exactly as a connection would.
//
// A fresh world per input: an input's outcome then depends on that input
// alone (a crash replays from its file), and what an input stored is freed
// when it ends. A world kept across inputs would hold store entries that
// LeakSanitizer cannot see referenced (the entry table tags its pointers
// in their high bits), so libFuzzer's per-input leak check would report
// them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "floodgate/config.h"
#include "floodgate/limiter.h"
#include "server/metrics.h"
#include "server/service_context.h"
#include "server/session.h"

namespace floodgate::fuzz {

// The config, parsed once.
inline const Config& WorldConfig() {
  static const Config* const config = [] {
    auto parsed = ParseConfig(R"(
rules:
  api: { algorithm: sliding_window, limits: [5/s, 100/minute], tiers: { pro: [50/s] } }
  otp: { algorithm: sliding_log, limits: [3/5m] }
  login: { algorithm: gcra, limits: [5/minute] }
  up: { algorithm: token_bucket, limits: [10/s], burst: 3 }
  day: { algorithm: fixed_window, limits: [1000/day], timezone: Europe/Berlin }
sets: { max_members: 8, max_ttl: 1h }
otp: { issue_limit: 5/m, verify_limit: 5/m, max_live_codes: 2 }
)",
                              "fuzz");
    parsed->engine.sweep_interval_ms = 0;
    parsed->engine.max_entries = 1000;
    parsed->engine.shards = 1;  // built per input: keep it small
    parsed->otp.secret = "fuzz-secret-0123456789";
    return new Config(*std::move(parsed));
  }();
  return *config;
}

struct SessionWorld {
  SessionWorld() : metrics(1) {
    limiter = std::move(Limiter::Create(WorldConfig(), clock).value());
    context.limiter = limiter.get();
    context.metrics = &metrics;
    loop = std::make_unique<server::LoopContext>(&context, 0);
  }

  ManualClock clock{1'700'000'000'000};
  server::Metrics metrics;
  server::ServiceContext context;
  std::unique_ptr<Limiter> limiter;
  std::unique_ptr<server::LoopContext> loop;
};

// Feeds `data` to `session` in chunks of `chunk` bytes, as reads from a
// socket would arrive, dropping what it consumes and advancing the clock
// between reads. Traps if the session claims more bytes than it was given.
// Returns everything the session wrote.
inline std::string FeedInChunks(server::Session& session, const uint8_t* data, size_t size,
                                size_t chunk, ManualClock& clock, int64_t advance_ms) {
  const std::string_view all(reinterpret_cast<const char*>(data), size);
  std::string input, output;
  bool close = false;
  for (size_t pos = 0; pos < all.size() && !close; pos += chunk) {
    input.append(all.substr(pos, chunk));
    const size_t used = session.OnInput(input, &output, &close);
    if (used > input.size()) __builtin_trap();
    input.erase(0, used);
    clock.AdvanceMs(advance_ms);
  }
  return output;
}

}  // namespace floodgate::fuzz
