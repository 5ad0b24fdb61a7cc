// Envoy's rate limit rules on floodgate's Limiter: envoyproxy/ratelimit's
// matching rules over its YAML files (config/envoy_ratelimit.h), each
// matched limit decided by a floodgate rule, so every store and algorithm
// works and the counting is exact across servers sharing a store. How a
// ShouldRateLimit call is answered from these matches is the server's
// (server/rls_service.h).
//
// Matching, as envoyproxy/ratelimit: a request descriptor (k1=v1, k2=v2, ...)
// is matched level by level from the domain's top: at each level an entry
// with the same key and value first, else one whose value is a matching
// wildcard (`value: prefix*`, the first in file order), else one with the key
// and no value. The limit applies only if the entry matched by the LAST
// request entry has one; a request deeper or shallower than the config
// matches nothing. Unknown domains and unmatched descriptors match nothing.
// A matched limit says whether it is `unlimited`, which limits it
// `replaces`, and whether it is in `shadow_mode`.
//
// Counting: the subject of a matched descriptor is its domain and all of its
// entries (values included), so each value has its own counter, as in
// envoyproxy/ratelimit. A `unit` / `requests_per_unit` limit becomes a
// floodgate rule named "envoy:<algorithm>:<N>/<unit>" (fixed_window unless
// envoy_ratelimit.algorithm says otherwise); `floodgate_rule` uses the named
// rule.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/descriptor_entry.h"
#include "config/envoy_ratelimit.h"
#include "floodgate/config.h"
#include "floodgate/status.h"

namespace floodgate::envoy {

// A limit as a ShouldRateLimit answer reports it (its current_limit).
struct ReportedLimit {
  uint32_t requests_per_unit = 0;
  Unit unit = Unit::kUnknown;
  std::string name;
};

// What a matched config entry does. Immutable, owned by Rules.
struct MatchedLimit {
  enum class Kind { kCounted, kUnlimited, kZero };
  Kind kind = Kind::kCounted;
  std::string rule;  // kCounted: the floodgate rule deciding it
  bool shadow = false;
  std::string name;
  std::vector<std::string> replaces;
  bool detailed_metric = false;
  bool config_has_value = false;  // the entry named a value (no detailed_metric suffix then)
  std::string metric_name;        // "key_value.subkey", as envoyproxy/ratelimit's stats
  // current_limit as reported; for a floodgate rule, one per limit of the rule.
  std::vector<ReportedLimit> reported;
  int64_t zero_period_ms = 0;  // kZero: the unit, for duration_until_reset
};

// An immutable snapshot of every domain, and the floodgate rules the
// Limiter needs for them. Thread-safe (immutable).
class Rules {
 public:
  // Compiles `domains` against `config` (whose rules `floodgate_rule` may
  // name). Errors name the file, line and column.
  static Result<std::shared_ptr<const Rules>> Compile(const Config& config,
                                                      const std::vector<DomainConfig>& domains);
  // Reads config.envoy_ratelimit's files, then Compile.
  static Result<std::shared_ptr<const Rules>> Load(const Config& config);

  // The rules to add to the Limiter's config ("envoy:..."), sorted by name.
  const std::vector<Rule>& floodgate_rules() const { return floodgate_rules_; }
  const EnvoyRateLimitConfig& options() const { return options_; }
  size_t num_domains() const;

  // The limit for one descriptor, or null. `metric` (if not null) receives
  // the descriptor's metric name (detailed_metric appends the value); it is
  // left alone when nothing matched.
  const MatchedLimit* Match(std::string_view domain, const std::vector<DescriptorEntry>& entries,
                            std::string* metric = nullptr) const;

  struct Impl;
  ~Rules();

 private:
  Rules();
  std::unique_ptr<Impl> impl_;
  std::vector<Rule> floodgate_rules_;
  EnvoyRateLimitConfig options_;
};

// `config` plus the rules `rules` needs, and those of `previous` no longer
// needed (so that a request matched against the previous rules just before
// a reload still finds its rule; they go at the next reload). Call
// Limiter::Reload (or Create) with it before publishing `rules`.
Config WithEnvoyRules(Config config, const Rules& rules, const Rules* previous);

// The subject key of a descriptor: its domain and entries, escaped so that
// no two descriptors share one; over kMaxKeyBytes, a SHA-256 of that.
std::string SubjectKey(std::string_view domain, const std::vector<DescriptorEntry>& entries);
// The same into `*key` (replacing what it held; its storage is reused).
void SubjectKey(std::string_view domain, const std::vector<DescriptorEntry>& entries,
                std::string* key);

}  // namespace floodgate::envoy
