// Envoy's rate limit service on floodgate's Limiter: envoyproxy/ratelimit's
// matching rules over its YAML files (config/envoy_ratelimit.h), each matched
// limit decided by the Limiter, so every store and algorithm works and the
// counting is exact across servers sharing a store.
//
// Matching, as envoyproxy/ratelimit: a request descriptor (k1=v1, k2=v2, ...)
// is matched level by level from the domain's top: at each level an entry
// with the same key and value first, else one whose value is a matching
// wildcard (`value: prefix*`, the first in file order), else one with the key
// and no value. The limit applies only if the entry matched by the LAST
// request entry has one; a request deeper or shallower than the config
// matches nothing. Unknown domains and unmatched descriptors are OK, with no
// limit. `unlimited` is OK and never counted; `replaces` drops the named
// limits from the request; `shadow_mode` counts but always answers OK.
//
// Counting: the subject of a matched descriptor is its domain and all of its
// entries (values included), so each value has its own counter, as in
// envoyproxy/ratelimit. A `unit` / `requests_per_unit` limit becomes a
// floodgate rule named "envoy:<algorithm>:<N>/<unit>" (fixed_window unless
// envoy_ratelimit.algorithm says otherwise); `floodgate_rule` uses the named
// rule. Over-limit requests are not counted (envoyproxy/ratelimit's
// STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT, always on): a denied decision
// consumes nothing, and when a request has several limited descriptors they
// are first checked without consuming; if any is over its limit, none is
// counted. Each check is atomic on its own subject; two concurrent requests
// sharing one descriptor can still both pass the first check and one be
// denied in the second, after its other descriptors were counted.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "config/envoy_ratelimit.h"
#include "floodgate/config.h"
#include "floodgate/limiter.h"
#include "floodgate/status.h"
#include "service/limiter_core.h"

namespace floodgate::envoy {

// --- A request and its answer (the gRPC messages' content) ---

struct RequestEntry {
  std::string_view key;
  std::string_view value;
};
struct RequestDescriptor {
  std::vector<RequestEntry> entries;
  // Units this descriptor consumes; unset: the request's. 0: check only.
  std::optional<uint64_t> hits_addend;
};
// Views into the caller's message, which must outlive the ShouldRateLimit call
// (not its callback).
struct Request {
  std::string_view domain;
  std::vector<RequestDescriptor> descriptors;
  uint32_t hits_addend = 0;  // 0: 1
};

enum class Code { kUnknown = 0, kOk = 1, kOverLimit = 2 };

struct CurrentLimit {
  uint32_t requests_per_unit = 0;
  Unit unit = Unit::kUnknown;
  std::string name;
};
struct DescriptorStatus {
  Code code = Code::kOk;
  bool has_limit = false;  // false: matched no limit (or an unlimited one)
  CurrentLimit current_limit;
  // Not known for a fallback decision: 0 (proto3's "unset") then.
  uint32_t limit_remaining = 0;
  int64_t duration_until_reset_ms = -1;  // -1: not given (always for a fallback)
  // The Limiter decided by a fallback policy (on_backend_error,
  // on_store_full): the code is that policy's, not a count.
  Fallback fallback = Fallback::kNone;
};
struct Header {
  std::string key;
  std::string value;
};
// A response with a fallback decision names it in a "floodgate-fallback"
// header ("backend_error", "store_full") and has no RateLimit-* headers
// (their figures would be made up).
struct Response {
  Code overall_code = Code::kOk;
  std::vector<DescriptorStatus> statuses;  // one per request descriptor, in order
  std::vector<Header> response_headers;
};

// --- The compiled configuration ---

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
  std::vector<CurrentLimit> reported;
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
  // the descriptor's metric name (detailed_metric appends the value).
  const MatchedLimit* Match(std::string_view domain, const std::vector<RequestEntry>& entries,
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
std::string SubjectKey(std::string_view domain, const std::vector<RequestEntry>& entries);

// --- The service ---

// Thread-safe. `limiter` must outlive it.
class RateLimitService {
 public:
  explicit RateLimitService(service::LimiterCore* limiter);

  // Publishes new rules; requests already matched finish with the old ones.
  void SetRules(std::shared_ptr<const Rules> rules);
  std::shared_ptr<const Rules> rules() const;

  // Per-descriptor outcomes, for metrics: called once per descriptor that
  // matched a limit, before `done`.
  struct DescriptorOutcome {
    std::string_view domain;
    std::string_view metric_name;
    Code code;
    bool shadow_over = false;  // over the limit, answered OK by shadow_mode
  };
  using OutcomeObserver = std::function<void(const DescriptorOutcome&)>;
  void set_observer(OutcomeObserver observer) { observer_ = std::move(observer); }

  // Decides `request`. `done` runs exactly once: before ShouldRateLimit
  // returns when every answer is local (the embedded store), else on a
  // store's I/O thread. An error status (and an empty response) for a
  // request that cannot be decided: no domain, no descriptors. A full store
  // or a failed backend is a decision (the rule's fallback policy), marked.
  using Done = std::function<void(const Status& status, Response&& response)>;
  void ShouldRateLimit(const Request& request, Done done);

 private:
  struct Call;
  void Decide(std::shared_ptr<Call> call, bool peek);
  void Finish(Call& call, bool peek);

  service::LimiterCore* const limiter_;
  OutcomeObserver observer_;
  mutable std::mutex mu_;
  std::shared_ptr<const Rules> rules_;  // guarded by mu_
};

}  // namespace floodgate::envoy
