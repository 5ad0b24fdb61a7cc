// Simulation: replays a traffic log through a rule on a virtual clock, in
// memory, so a policy can be tried on yesterday's traffic before it ships.
// Used by `floodgate simulate` and by POST /v1/admin/simulate.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "floodgate/config.h"
#include "floodgate/limiter.h"

namespace floodgate::api {

// One event of the log, and what the rule answered.
struct SimulatedEvent {
  int64_t timestamp_ms = 0;
  std::string key;
  int64_t cost = 1;
  bool allowed = false;
  int64_t remaining = 0;
  int64_t retry_after_ms = 0;
};

struct SimulationSummary {
  int64_t events = 0, allowed = 0, denied = 0;
  int64_t units_allowed = 0, units_denied = 0;
  int64_t first_ms = 0, last_ms = 0;
  absl::flat_hash_map<std::string, int64_t> denials_by_key;
  absl::flat_hash_set<std::string> keys;  // every key seen, up to kMaxSimulatedKeys
};

// Distinct keys a simulation remembers for its summary; past it the
// summary's `subjects` is a lower bound (the decisions are unaffected).
inline constexpr size_t kMaxSimulatedKeys = 1'000'000;

// Not thread-safe: one replay.
class Simulation {
 public:
  // The config's rules on a memory store of their own, alerts off (a
  // replay never reaches the production Redis or webhooks). Fails on an
  // unknown rule or tier before any event.
  static Result<std::unique_ptr<Simulation>> Create(const Config& config, std::string rule,
                                                    std::string tier);
  ~Simulation();

  // One line of the log: CSV `timestamp_ms,key[,cost]` (RFC 4180 quotes) or
  // a JSON object with those fields. Blank lines, '#' comments and a CSV
  // header before the first event are skipped (*decided false). An error
  // says what is wrong with the line (the caller names the line).
  Status Feed(std::string_view line, bool* decided, SimulatedEvent* event);

  const SimulationSummary& summary() const { return summary_; }
  const std::string& rule() const { return rule_; }
  const std::string& tier() const { return tier_; }

 private:
  Simulation() = default;
  std::unique_ptr<ManualClock> clock_;
  std::unique_ptr<Limiter> limiter_;
  std::string rule_, tier_;
  SimulationSummary summary_;
};

// POST /v1/admin/simulate's work: replays `log` (lines as Feed reads them)
// and writes the JSON answer to *json: {"rule","tier","events","admitted",
// "denied","subjects","first_ms","last_ms","bucket_ms","series":[{"t_ms",
// "admitted","denied"}],"top_denied":[{"key","denied"}]}, with at most
// kMaxSeriesPoints points. INVALID_ARGUMENT naming the line ("line 3:
// ...") for a bad line; NOT_FOUND for an unknown rule or tier.
inline constexpr size_t kMaxSeriesPoints = 600;
Status SimulateToJson(const Config& config, std::string_view rule, std::string_view tier,
                      std::string_view log, std::string* json);

}  // namespace floodgate::api
