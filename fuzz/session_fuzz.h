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

#include "api/open_services.h"
#include "floodgate/config.h"
#include "server/context/service_context.h"
#include "server/net/connection_timers.h"
#include "server/net/session.h"
#include "server/observability/metrics.h"
#include "service/services.h"

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
  net: { algorithm: fixed_window, limits: [5/s], key: "{ip/24}", deny_list: bad, allow_list: ok }
  req: { algorithm: fixed_window, limits: [5/s], key: "{method}:{path:2}:{query:q}:{host}:{cookie:c}" }
  hdr: { algorithm: gcra, limits: [5/s], key: "k:{header:x-api-key}", on_missing: skip }
  tok: { algorithm: fixed_window, limits: [5/s], key: "{jwt:sub}", on_missing: deny }
  pri: { algorithm: token_bucket, limits: [10/s], priorities: { critical: 0%, batch: 40% } }
server: { trusted_proxies: ["::/0", "0.0.0.0/0"] }
lists:
  bad: { cidrs: ["10.0.0.0/8", "2001:db8::/32"] }
  ok: { cidrs: ["192.0.2.0/24"] }
jwt: { hs256_secret_env: FUZZ_UNSET_SECRET }
sets: { max_members: 8, max_ttl: 1h }
otp: { issue_limit: 5/m, verify_limit: 5/m, max_live_codes: 2 }
)",
                              "fuzz");
    parsed->engine.sweep_interval_ms = 0;
    parsed->engine.max_entries = 1000;
    parsed->engine.shards = 1;  // built per input: keep it small
    parsed->otp.secret = "fuzz-secret-0123456789";
    parsed->jwt.hs256_secret = "fuzz-hs256-secret-of-32-bytes-at-least";
    return new Config(*std::move(parsed));
  }();
  return *config;
}

struct SessionWorld {
  SessionWorld() : metrics(1) {
    services = std::move(api::OpenServices(WorldConfig(), clock).value());
    context.services = services.get();
    context.limiter = services->core.get();
    context.metrics = &metrics;
    loop = std::make_unique<server::LoopContext>(&context, 0);
  }

  ManualClock clock{1'700'000'000'000};
  server::Metrics metrics;
  server::ServiceContext context;
  std::unique_ptr<service::Services> services;
  std::unique_ptr<server::LoopContext> loop;
};

// The bounds the fuzzed connection lives under: short enough that inputs
// spread over several chunks run into them.
inline server::ConnectionPolicy FuzzPolicy() {
  server::ConnectionPolicy p;
  p.request_timeout_ms = 50;
  p.idle_timeout_ms = 100;
  p.output_soft_limit = 4096;
  p.output_soft_timeout_ms = 30;
  p.output_hard_limit = 1 << 20;
  return p;
}

// Feeds `data` to `session` in chunks of `chunk` bytes, as reads from a
// socket would arrive, dropping what it consumes and advancing the clock
// between reads, the way the event loop does: one batch per OnInput call,
// called again while it consumes; no parsing while the output (which this
// client never reads) is over the soft limit; and the connection's timers
// (ConnectionTimers) end the feed when a timeout or the hard limit would
// close it. Traps if the session claims more bytes than it was given, or
// the timers contradict the input (a request timeout with no partial
// request, an idle timeout with one). Returns everything the session wrote.
inline std::string FeedInChunks(server::Session& session, const uint8_t* data, size_t size,
                                size_t chunk, ManualClock& clock, int64_t advance_ms) {
  const server::ConnectionPolicy policy = FuzzPolicy();
  server::ConnectionTimers timers(clock.NowMs());
  const std::string_view all(reinterpret_cast<const char*>(data), size);
  std::string input, output;
  size_t read_by_client = 0;  // the client reads its replies only now and then
  bool close = false;
  for (size_t pos = 0; pos < all.size() && !close; pos += chunk) {
    input.append(all.substr(pos, chunk));
    bool completed = false;
    while (!close && !input.empty() && output.size() - read_by_client <= policy.output_soft_limit) {
      const size_t used = session.OnInput(input, &output, &close);
      if (used > input.size()) __builtin_trap();
      if (used == 0) break;
      input.erase(0, used);
      completed = true;
    }
    const int64_t now = clock.NowMs();
    timers.AfterInput(now, completed, !input.empty());
    if (timers.AfterOutput(policy, now, output.size() - read_by_client) !=
        server::CloseReason::kNone) {
      break;  // over the hard limit: the loop closes the connection
    }
    const server::CloseReason due = timers.Due(policy, now, output.size() > read_by_client);
    if (due == server::CloseReason::kRequestTimeout && input.empty()) __builtin_trap();
    if (due == server::CloseReason::kIdleTimeout && !input.empty()) __builtin_trap();
    if (due != server::CloseReason::kNone) break;
    // Every fourth read, the client catches up with its replies.
    if ((pos / chunk) % 4 == 3) read_by_client = output.size();
    clock.AdvanceMs(advance_ms);
  }
  return output;
}

}  // namespace floodgate::fuzz
