// Rules and limits: what a user configures.
//
// A Rule is a name, an algorithm and one to kMaxLimitsPerRule limits ("60/minute",
// "5000/day"); all limits of a rule are checked against the same instant and
// applied all-or-nothing. Tiers override a rule's limits by name.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "floodgate/status.h"

namespace floodgate {

// kConcurrency is not a rate: a subject holds at most max_in_flight leases
// at once, each expiring after its TTL unless released or renewed (see
// Rule::max_in_flight). It is decided by acquiring a lease, never by a check.
enum class Algorithm {
  kFixedWindow,
  kSlidingWindow,
  kSlidingLog,
  kTokenBucket,
  kGcra,
  kConcurrency
};

// "fixed_window", "sliding_window", "sliding_log", "token_bucket", "gcra",
// "concurrency".
std::string_view AlgorithmName(Algorithm algorithm);
std::optional<Algorithm> ParseAlgorithm(std::string_view name);

enum class TimeUnit { kMillisecond, kSecond, kMinute, kHour, kDay, kWeek, kMonth, kYear };

// Bounds every limit obeys; ParseLimit refuses anything outside them, so no
// arithmetic on a parsed limit can overflow.
inline constexpr int64_t kMaxLimitCount = 1'000'000'000'000'000;   // 10^15
inline constexpr int64_t kMaxPeriodMs = 100LL * 366 * 86'400'000;  // about a century
inline constexpr int kMaxLimitsPerRule = 8;
// Subject keys are opaque byte strings up to this length.
inline constexpr size_t kMaxKeyBytes = 512;
// A concurrency rule's bounds: leases one subject may hold at once, and a
// lease's time to live.
inline constexpr int64_t kMaxInFlight = 100'000;
inline constexpr int64_t kMaxLeaseTtlMs = 86'400'000;  // a day
// Requests held waiting for room per rule, by default (Rule::max_waiters).
inline constexpr int64_t kDefaultMaxWaiters = 1000;

// `count` units per `multiplier` x `unit`, e.g. 3/5m = {3, 5, kMinute}.
struct Limit {
  int64_t count = 0;
  int64_t multiplier = 1;
  TimeUnit unit = TimeUnit::kSecond;

  // Nominal period in ms. Calendar units use fixed lengths here (day 24 h,
  // week 7 d, month 30 d, year 365 d): that is the window of the sliding
  // algorithms and the refill period of token_bucket/gcra. Only fixed_window
  // aligns day/week/month/year to calendar boundaries in a time zone.
  int64_t PeriodMs() const;
  // True for day, week, month and year.
  bool IsCalendar() const { return unit >= TimeUnit::kDay; }
  // Canonical text, which ParseLimit reads back to the same Limit: the unit
  // word alone ("60/min" -> "60/minute", "10/s" -> "10/second"), or the
  // multiplier and the short unit ("3/5minutes" -> "3/5m", "2/3mo" -> "2/3month").
  std::string ToString() const;

  friend bool operator==(const Limit&, const Limit&) = default;
};

// Parses "N/period": N a positive integer, period an optional positive
// multiplier then a unit (ms, s|sec|second, m|min|minute, h|hr|hour, d|day,
// w|wk|week, mo|month, y|yr|year; plurals of the words accepted; any case).
// Errors quote the offending text.
Result<Limit> ParseLimit(std::string_view text);

enum class OnBackendError { kAllow, kDeny };
// What a new subject gets when the embedded store has no room for its state
// (engine.max_entries or engine.max_memory reached, expired entries already
// reclaimed), and a known one whose state would grow past engine.max_memory
// (a sliding_log's log needing a larger ring): a denial (the default: a
// flood of new keys cannot buy admissions) or an admission. Either way the
// decision is marked Fallback::kStoreFull and counted, nothing is recorded,
// and subjects the store already holds are otherwise decided as usual.
enum class OnStoreFull { kDeny, kAllow };

// Thresholds per rule at most: each limit keeps one "already sent" bit per
// threshold for its current window.
inline constexpr int kMaxAlertThresholds = 8;

// Quota alerts of a rule (seed 002): when an admitted request takes a
// limit's usage in its current window to a threshold, one event per (rule,
// subject, tier, limit, threshold, window) is POSTed to `webhook`, signed
// with HMAC-SHA256 under the secret in the environment variable
// `secret_env`. Usage is the limit's capacity minus what remains after the
// request: units counted in the window for the windowed algorithms, burst
// consumed for token_bucket and gcra (docs/alerts.md).
struct AlertConfig {
  // Percentages of the capacity, 1 to 100, strictly increasing; empty: no
  // alerts.
  std::vector<int> thresholds;
  std::string webhook;  // http://host[:port]/path
  std::string secret_env = "FG_ALERT_SECRET";
  // The secret itself: never read from the file. Empty: read from
  // secret_env when the Limiter is created or reloaded (an embedding
  // program may set it directly).
  std::string secret;
  bool enabled() const { return !thresholds.empty(); }
};

// Quota slices (docs/slices.md): on a store shared by several servers, each
// server takes a slice of a subject's remaining quota in one store call and
// decides from it locally, taking the next when it runs out (sized to its
// recent demand, at most max_share of the limit) and giving unused units
// back after idle_return without demand and at shutdown. The units granted
// in a window never exceed the limit. fixed_window only: a slice is a
// number of units of one window, which token_bucket and gcra (refilling
// continuously) and the sliding algorithms (whose windows overlap) do not
// have. No effect on the embedded store, whose decisions are already local.
inline constexpr int64_t kSliceShareScale = 1'000'000;  // max_share is in parts per million
struct SliceConfig {
  int64_t max_share_ppm = 0;      // (0, kSliceShareScale]; 0: no slices
  int64_t idle_return_ms = 2000;  // > 0
  bool enabled() const { return max_share_ppm > 0; }
  friend bool operator==(const SliceConfig&, const SliceConfig&) = default;
};
// What `slices: {}` means.
inline constexpr int64_t kDefaultSliceSharePpm = 50'000;  // 5 %

// A rule's subject built from the request, and the network lists its
// checks are tested against (docs/keys-from-requests.md).
// What a check gets when a part of the key template is missing from the
// request (no such header, no valid token): a 400 by default, or a
// denial, an admission that counts nothing, or the rule left out.
enum class OnMissing { kError, kDeny, kAllow, kSkip };
struct SubjectConfig {
  // A key template (common/key_template.h): "{ip/24}", "{header:x-api-key}".
  // Empty: the caller names the subject, as always.
  std::string key;
  OnMissing on_missing = OnMissing::kError;
  // Names of the config's lists (Config::lists); empty: none.
  std::string deny_list;
  std::string allow_list;
  bool any() const { return !key.empty() || !deny_list.empty() || !allow_list.empty(); }
  friend bool operator==(const SubjectConfig&, const SubjectConfig&) = default;
};

// Priority classes of a rule (docs/reservations.md#priorities): how much of
// each limit a check of a class may not use, kept back for the classes
// above it (Stripe's fleet load shedder keeps 20 % for critical requests).
// `batch: 40%` denies batch once 60 % of a limit is used; 0 % may use the
// whole limit. A check names its class (RESP PRIORITY, HTTP "priority", an
// Envoy descriptor entry `priority`); none means "default", which keeps 0 %
// unless the rule lists it.
inline constexpr int kMaxPriorityClasses = 8;
inline constexpr std::string_view kDefaultPriority = "default";
struct PriorityClass {
  std::string name;      // an identifier
  int keep_percent = 0;  // [0, 99]
  friend bool operator==(const PriorityClass&, const PriorityClass&) = default;
};

struct Rule {
  std::string name;
  Algorithm algorithm = Algorithm::kFixedWindow;
  std::vector<Limit> limits;
  // token_bucket: capacity per limit (default: the limit's count).
  // gcra: redis-cell's max_burst per limit (default: count - 1, so that a
  // fresh subject may spend the whole limit at once, like the other algorithms).
  // Either empty, one value for every limit, or one value per limit.
  std::vector<int64_t> burst;
  // Named overrides of `limits`; a tier has its own state per subject.
  std::map<std::string, std::vector<Limit>, std::less<>> tiers;
  // IANA zone (or "UTC") for fixed_window's day/week/month/year boundaries.
  std::string timezone = "UTC";
  // Dry run: evaluate and count, but always admit.
  bool shadow = false;
  OnBackendError on_backend_error = OnBackendError::kAllow;
  OnStoreFull on_store_full = OnStoreFull::kDeny;
  AlertConfig alerts;
  // A subject this rule denies is blocked on it for this long (0: never);
  // see docs/control-plane.md.
  int64_t block_for_ms = 0;
  // Requests held waiting for room (FG.CHECK ... WAIT, wait_ms) at most, per
  // rule; past it a request is answered at once.
  int64_t max_waiters = kDefaultMaxWaiters;
  // Quota slices (SliceConfig); disabled by default.
  SliceConfig slices;
  // The subject from the request and the lists (SubjectConfig); HTTP
  // /v1/check builds the key, every front tests the lists.
  SubjectConfig subject;
  // Priority classes (PriorityClass), in the config's order; empty: none.
  std::vector<PriorityClass> priorities;

  // algorithm: concurrency. The config's `max_in_flight` and `lease_ttl`;
  // a tier (or an override) replaces max_in_flight alone. They are kept as
  // the one limit every rule has, so that tiers and overrides work alike:
  // limits = {{max_in_flight, lease_ttl_ms, kMillisecond}}, each tier's
  // likewise (ConcurrencyLimit). Printed as the config's words, never as
  // "10/30000ms".
  bool is_concurrency() const { return algorithm == Algorithm::kConcurrency; }
  int64_t max_in_flight() const { return limits.empty() ? 0 : limits[0].count; }
  int64_t lease_ttl_ms() const { return limits.empty() ? 0 : limits[0].multiplier; }
};

// A concurrency rule's limit: `max_in_flight` leases of `lease_ttl_ms`.
inline Limit ConcurrencyLimit(int64_t max_in_flight, int64_t lease_ttl_ms) {
  return Limit{max_in_flight, lease_ttl_ms, TimeUnit::kMillisecond};
}

// One limit of `rule` as an operator writes it (an override's): "N/period"
// (ParseLimit), or for a concurrency rule its max_in_flight, a bare integer
// from 0 to kMaxInFlight (the rule's lease_ttl goes with it).
Result<Limit> ParseLimitOf(const Rule& rule, std::string_view text);
// The text ParseLimitOf reads back to `limit`.
std::string LimitTextOf(const Rule& rule, const Limit& limit);

}  // namespace floodgate
