// The Redis store's Lua scripts (src/redis/scripts/*.lua, embedded in the
// binary at build time) and their SHA-1 digests, for EVALSHA with an EVAL
// fallback: one per algorithm, and the feature scripts (expiring sets, OTP,
// the leases of concurrency rules, the alert stream, the control records).
#pragma once

#include <span>
#include <string_view>

#include "floodgate/rule.h"

namespace floodgate::redis {

struct Script {
  Algorithm algorithm;      // the algorithm it decides (algorithm scripts only)
  std::string_view name;    // "fixed_window", … (the .lua file's name)
  std::string_view source;  // the script's text, for EVAL and SCRIPT LOAD
  std::string_view sha1;    // 40 lowercase hex digits of SHA-1(source), for EVALSHA
};

// The script that decides `algorithm` (gcra's also serves CL.THROTTLE);
// concurrency has none (see Feature::kConcurrency). Thread-safe; the
// digests are computed once, on first use.
const Script& ScriptFor(Algorithm algorithm);

// Every algorithm script, one per algorithm.
std::span<const Script> AllScripts();

// The scripts that are not a rate algorithm's, by file name:
// "expiring_set", "otp", "alert_stream", "control", "concurrency" (the
// leases of concurrency rules, which are acquired, never checked: its
// calls are LeaseStore::Lease's, not a decision's), "top_board" (the servers'
// top-subjects sketches) and "reservations" (the reservations' ledger).
// Thread-safe.
enum class Feature {
  kExpiringSet,
  kOtp,
  kAlertStream,
  kControl,
  kConcurrency,
  kTopBoard,
  kReservations
};
const Script& ScriptFor(Feature feature);
std::span<const Script> FeatureScripts();

}  // namespace floodgate::redis
