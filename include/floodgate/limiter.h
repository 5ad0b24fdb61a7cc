// Limiter: the library's entry point. Rules from a Config, state in the
// embedded store, time from a Clock.
//
//   floodgate::SystemClock clock;
//   auto limiter = floodgate::Limiter::Create(*floodgate::LoadConfigFile("f.yaml"), clock);
//   auto d = (*limiter)->Check("api", "user:42");
//   if (d.ok() && d->allowed) { ... }
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>

#include "floodgate/clock.h"
#include "floodgate/config.h"
#include "floodgate/decision.h"
#include "floodgate/status.h"

namespace floodgate {

// Thread-safe: any number of threads may call any method concurrently.
class Limiter {
 public:
  struct Stats {
    int64_t entries = 0;        // live (rule, subject) entries in the store
    int64_t rejected_full = 0;  // new subjects refused because the store was full
    int64_t expired_freed = 0;  // entries freed after expiring
  };

  // Validates and compiles the config's rules. INVALID_ARGUMENT naming the
  // rule and limit when one cannot be compiled. `clock` must outlive the Limiter.
  static Result<std::unique_ptr<Limiter>> Create(const Config& config, const Clock& clock);
  ~Limiter();

  // May `key` spend `cost` units of `rule` (optionally at `tier`) now?
  // Reads the clock once. Errors: NOT_FOUND for an unknown rule or tier;
  // INVALID_ARGUMENT for an empty key, a key over kMaxKeyBytes, or a cost
  // outside [0, kMaxLimitCount]; RESOURCE_EXHAUSTED when the subject is new
  // and the store is full. An error changes no state.
  Result<Decision> Check(std::string_view rule, std::string_view key, int64_t cost = 1,
                         std::string_view tier = {});
  // The same, writing into `*decision` (no copy of the Decision): for hot paths.
  Status Check(std::string_view rule, std::string_view key, int64_t cost, std::string_view tier,
               Decision* decision);

  // Forgets `key`'s state for `rule` (every tier). NOT_FOUND for an unknown
  // rule; OK whether or not there was state.
  Status Reset(std::string_view rule, std::string_view key);

  // Frees expired entries now (a background thread also does, every
  // engine.sweep_interval_ms). Returns how many were freed.
  int64_t SweepExpired();

  Stats GetStats() const;
  const Config& config() const;

 private:
  struct Impl;
  explicit Limiter(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace floodgate
