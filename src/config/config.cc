// The YAML configuration: parsing, validation and the check-config summary.
//
// yaml-cpp builds the node tree; everything after that is explicit walking of
// the expected shape, never generic recursion, so hostile nesting or alias
// loops cannot make this code recurse. Maps are walked by iteration (not by
// lookup) because yaml-cpp keeps duplicate keys silently and lookups would
// hide the second one. yaml-cpp throws; nothing escapes ParseConfig.
//
// Every error reads "source:line:column: what is wrong (near 'text')" with the
// 1-based position of the offending node, so check-config output can be
// pasted into an editor's "go to".
#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_join.h"
#include "common/store_url.h"
#include "config/admin_section.h"
#include "config/alerts_section.h"
#include "config/envoy_ratelimit_section.h"
#include "config/server_section.h"
#include "config/sets_and_otp_section.h"
#include "config/store_section.h"
#include "config/visibility_section.h"
#include "config/yaml_fields.h"
#include "core/calendar.h"
#include "floodgate/config.h"
#include "yaml-cpp/eventhandler.h"
#include "yaml-cpp/yaml.h"

namespace floodgate {
namespace {

using config::DurationText;
using config::kDayMs;
using config::ParseInt;
using config::TypeName;

// Configs are a few kilobytes; the bound keeps a hostile or mistaken input
// (a log file passed as --config) from costing seconds of parsing.
constexpr size_t kMaxConfigBytes = size_t{4} << 20;
constexpr size_t kMaxNameBytes = 64;
constexpr int64_t kMaxBlockForMs = 366LL * 86'400'000;
constexpr int64_t kDefaultLeaseTtlMs = 30'000;  // algorithm: concurrency's lease_ttl
constexpr int64_t kMaxMaxWaiters = 1'000'000;   // a block is not meant to be forever
// sliding_window and token_bucket compute count x period_ms in doubles in the
// Redis scripts (Lua numbers): beyond 2^53 they stop being exact.
constexpr __int128 kMaxExactProduct = __int128{1} << 53;
// gcra keeps TAT in microseconds: emission interval x (burst + 1) must leave
// headroom for adding it to a current time in int64 and in Lua doubles.
constexpr __int128 kMaxGcraSpanUs = __int128{1} << 52;
// sliding_log stores one timestamp per admitted unit.
constexpr int64_t kMaxSlidingLogCount = 100'000;

bool IsNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '.' || c == ':' || c == '-';
}

bool IsValidName(std::string_view name) {
  if (name.empty() || name.size() > kMaxNameBytes) return false;
  for (char c : name) {
    if (!IsNameChar(c)) return false;
  }
  return true;
}

// A limit or burst value as written, kept with its node for cross-field
// messages.
struct PlacedLimit {
  Limit limit;
  YAML::Node node;
};
struct PlacedInt {
  int64_t value;
  YAML::Node node;
};

// Walks one config document. Each method returns the first error found.
class ConfigParser : public config::Fields {
 public:
  using Fields::Fields;

  Status ParseDocument(const YAML::Node& root, Config& config) const {
    if (root.IsNull()) return Status::Ok();  // an empty file: all defaults, no rules
    if (!root.IsMap()) {
      return Fail(root.Mark(),
                  "the config must be a map of sections (store, listen, engine, rules), not " +
                      std::string(TypeName(root)),
                  root.Scalar());
    }
    return ForEachEntry(root, "key",
                        [&](const std::string& name, const YAML::Node& k, const YAML::Node& v) {
                          return ParseSection(name, k, v, config);
                        });
  }

 private:
  // A rule while it is being read: values keep their nodes until the
  // cross-field checks, which need positions, have run.
  struct Tier {
    std::string name;
    YAML::Node key;
    std::vector<PlacedLimit> limits;
    std::optional<int64_t> max_in_flight;  // written as a bare integer
  };
  struct RuleDraft {
    Rule rule;
    bool has_limits = false;
    std::vector<PlacedLimit> limits;
    std::vector<Tier> tiers;
    std::vector<PlacedInt> burst;
    YAML::Node burst_key;
    // algorithm: concurrency. A tier's max_in_flight is in its one limit.
    std::optional<int64_t> max_in_flight;
    int64_t lease_ttl_ms = kDefaultLeaseTtlMs;
    YAML::Node lease_ttl_key;
    std::vector<std::string> rate_fields;  // limits, burst, alerts, shadow, block_for: as written
    YAML::Node first_rate_key;
  };

  Status ParseSection(const std::string& name, const YAML::Node& key, const YAML::Node& value,
                      Config& config) const {
    if (name == "store") return config::ParseStore(*this, key, value, config.store);
    if (name == "listen") return config::ParseListen(*this, key, value, config.listen);
    if (name == "engine") return config::ParseEngine(*this, key, value, config.engine);
    if (name == "redis") return config::ParseRedis(*this, key, value, config.redis);
    if (name == "server") return config::ParseServer(*this, key, value, config.server);
    if (name == "rules") return ParseRules(key, value, config);
    if (name == "sets") return config::ParseSets(*this, key, value, config.sets);
    if (name == "otp") return config::ParseOtp(*this, key, value, config.otp);
    if (name == "alert_delivery") {
      return config::ParseAlertDelivery(*this, key, value, config.alert_delivery);
    }
    if (name == "envoy_ratelimit") {
      return config::ParseEnvoyRateLimit(*this, key, value, config.envoy_ratelimit);
    }
    if (name == "admin") return config::ParseAdmin(*this, key, value, config.admin);
    if (name == "visibility") return config::ParseVisibility(*this, key, value, config.visibility);
    if (name == "redact_keys") {
      Result<bool> redact = Bool(key, value, "redact_keys");
      if (!redact.ok()) return redact.status();
      config.redact_keys = *redact;
      return Status::Ok();
    }
    if (name == "data_dir") {
      Result<std::string> dir = String(key, value, "data_dir");
      if (!dir.ok()) return dir.status();
      if (dir->empty()) return FailAt(key, value, "'data_dir' must name a directory", *dir);
      config.data_dir = *std::move(dir);
      return Status::Ok();
    }
    if (name == "snapshot_interval") {
      Result<int64_t> ms = DurationOrOff(key, value, "snapshot_interval", 86'400'000);
      if (!ms.ok()) return ms.status();
      config.snapshot_interval_ms = *ms;
      return Status::Ok();
    }
    return Fail(key.Mark(),
                "unknown key '" + name +
                    "' at top level; expected store, listen, engine, redis, server, rules, sets, "
                    "otp, alert_delivery, envoy_ratelimit, admin, visibility, redact_keys, "
                    "data_dir or snapshot_interval",
                name);
  }

  Status ParseRules(const YAML::Node& key, const YAML::Node& value, Config& config) const {
    if (value.IsNull()) return Status::Ok();  // "rules:" with nothing under it
    if (!value.IsMap()) return WrongType(key, value, "rules", "a map of rule name to rule");
    return ForEachEntry(
        value, "rule",
        [&](const std::string& name, const YAML::Node& k, const YAML::Node& v) -> Status {
          Result<Rule> rule = ParseRule(name, k, v, config);
          if (!rule.ok()) return rule.status();
          config.rules.push_back(*std::move(rule));
          return Status::Ok();
        });
  }

  // A limit list: a sequence of limit strings or one string.
  Result<std::vector<PlacedLimit>> ParseLimits(const YAML::Node& key, const YAML::Node& value,
                                               const std::string& field) const {
    std::vector<PlacedLimit> out;
    auto add = [&](const YAML::Node& node) -> Status {
      if (!node.IsScalar()) {
        return Fail(
            node.IsNull() ? key.Mark() : node.Mark(),
            "each limit in '" + field + "' must be a string like 60/minute, not " + TypeName(node),
            key.Scalar());
      }
      if (out.size() == static_cast<size_t>(kMaxLimitsPerRule)) {
        return Fail(node.Mark(),
                    "'" + field + "' has too many limits (at most " +
                        std::to_string(kMaxLimitsPerRule) + ")",
                    node.Scalar());
      }
      Result<Limit> limit = ParseLimit(node.Scalar());
      if (!limit.ok()) return Fail(node.Mark(), limit.status().message(), node.Scalar());
      out.push_back({*limit, node});
      return Status::Ok();
    };
    if (value.IsScalar()) {
      if (Status s = add(value); !s.ok()) return s;
    } else if (value.IsSequence()) {
      for (const YAML::Node& item : value) {
        if (Status s = add(item); !s.ok()) return s;
      }
    } else {
      return WrongType(key, value, field, "a limit or a list of limits");
    }
    if (out.empty()) {
      return FailAt(key, value, "'" + field + "' needs at least one limit", key.Scalar());
    }
    return out;
  }

  // An integer or a list of integers; the per-algorithm range is checked
  // once the algorithm is known.
  Result<std::vector<PlacedInt>> ParseBurst(const YAML::Node& key, const YAML::Node& value,
                                            const std::string& field) const {
    std::vector<PlacedInt> out;
    auto add = [&](const YAML::Node& node) -> Status {
      Result<int64_t> n = Int(key, node, field, 0, kMaxLimitCount);
      if (!n.ok()) return n.status();
      out.push_back({*n, node});
      return Status::Ok();
    };
    if (value.IsSequence()) {
      for (const YAML::Node& item : value) {
        if (out.size() == static_cast<size_t>(kMaxLimitsPerRule)) {
          return Fail(item.Mark(),
                      "'" + field + "' has more values than a rule has limits (at most " +
                          std::to_string(kMaxLimitsPerRule) + ")",
                      item.Scalar());
        }
        if (Status s = add(item); !s.ok()) return s;
      }
      if (out.empty()) return FailAt(key, value, "'" + field + "' is an empty list", key.Scalar());
    } else if (Status s = add(value); !s.ok()) {
      return s;
    }
    return out;
  }

  Result<Rule> ParseRule(const std::string& name, const YAML::Node& name_key,
                         const YAML::Node& body, Config& config) const {
    if (!IsValidName(name)) {
      return Fail(name_key.Mark(),
                  "rule names are 1 to 64 characters of A-Z, a-z, 0-9, '_', '.', ':' or '-'", name);
    }
    if (!body.IsMap()) return WrongType(name_key, body, "rules." + name, "a map");
    RuleDraft draft;
    draft.rule.name = name;
    Status s = ForEachEntry(
        body, "key", [&](const std::string& field, const YAML::Node& k, const YAML::Node& v) {
          return ParseRuleField(field, k, v, draft, config);
        });
    if (!s.ok()) return s;
    if (draft.rule.is_concurrency()) return FinishConcurrencyRule(name, name_key, draft);
    if (draft.max_in_flight.has_value() || !draft.lease_ttl_key.IsNull()) {
      return Fail(draft.lease_ttl_key.IsNull() ? name_key.Mark() : draft.lease_ttl_key.Mark(),
                  "'max_in_flight' and 'lease_ttl' are for algorithm: concurrency, not " +
                      std::string(AlgorithmName(draft.rule.algorithm)),
                  name);
    }
    if (!draft.has_limits) {
      return Fail(name_key.Mark(), "rule '" + name + "' has no 'limits'", name);
    }
    for (const Tier& tier : draft.tiers) {
      if (tier.max_in_flight.has_value()) {
        return Fail(tier.key.Mark(),
                    "tier '" + tier.name + "' must be limits like 600/minute (a bare number is " +
                        "a concurrency rule's max_in_flight)",
                    tier.name);
      }
    }
    if (s = CheckBurst(draft); !s.ok()) return s;
    if (s = CheckLimits(draft.rule, draft.limits); !s.ok()) return s;
    for (const Tier& tier : draft.tiers) {
      if (s = CheckLimits(draft.rule, tier.limits); !s.ok()) return s;
    }

    Rule& rule = draft.rule;
    for (const PlacedLimit& l : draft.limits) rule.limits.push_back(l.limit);
    for (const Tier& tier : draft.tiers) {
      std::vector<Limit>& out = rule.tiers[tier.name];
      for (const PlacedLimit& l : tier.limits) out.push_back(l.limit);
    }
    return std::move(rule);
  }

  // A concurrency rule: max_in_flight (required) and lease_ttl, tiers of a
  // max_in_flight each; none of a rate's fields.
  Result<Rule> FinishConcurrencyRule(const std::string& name, const YAML::Node& name_key,
                                     RuleDraft& draft) const {
    if (!draft.rate_fields.empty()) {
      return Fail(draft.first_rate_key.Mark(),
                  "'" + draft.rate_fields.front() +
                      "' is not for algorithm: concurrency (it takes max_in_flight, lease_ttl, "
                      "tiers of a max_in_flight each, on_backend_error, on_store_full and "
                      "max_waiters)",
                  draft.rate_fields.front());
    }
    if (!draft.max_in_flight.has_value()) {
      return Fail(name_key.Mark(), "concurrency rule '" + name + "' has no 'max_in_flight'", name);
    }
    Rule& rule = draft.rule;
    rule.limits = {ConcurrencyLimit(*draft.max_in_flight, draft.lease_ttl_ms)};
    for (const Tier& tier : draft.tiers) {
      // A tier is parsed before the algorithm may be known: as a limit, or
      // as the integer it must be here (Tier::max_in_flight).
      if (!tier.max_in_flight.has_value()) {
        return Fail(tier.key.Mark(),
                    "a tier of a concurrency rule is its max_in_flight, an integer from 0 to " +
                        std::to_string(kMaxInFlight),
                    tier.name);
      }
      rule.tiers[tier.name] = {ConcurrencyLimit(*tier.max_in_flight, draft.lease_ttl_ms)};
    }
    return std::move(rule);
  }

  Status ParseRuleField(const std::string& field, const YAML::Node& key, const YAML::Node& value,
                        RuleDraft& draft, Config& config) const {
    Rule& rule = draft.rule;
    const std::string path = "rules." + rule.name + "." + field;
    if (field == "limits" || field == "burst" || field == "alerts" || field == "shadow" ||
        field == "block_for" || field == "timezone") {
      if (draft.rate_fields.empty()) draft.first_rate_key = key;
      draft.rate_fields.push_back(field);
    }
    if (field == "max_in_flight") {
      Result<int64_t> n = Int(key, value, path, 0, kMaxInFlight);
      if (!n.ok()) return n.status();
      draft.max_in_flight = *n;
      if (draft.lease_ttl_key.IsNull()) draft.lease_ttl_key = key;
    } else if (field == "lease_ttl") {
      Result<int64_t> ms = Duration(key, value, path, 1, kMaxLeaseTtlMs);
      if (!ms.ok()) return ms.status();
      draft.lease_ttl_ms = *ms;
      draft.lease_ttl_key = key;
    } else if (field == "max_waiters") {
      Result<int64_t> n = Int(key, value, path, 0, kMaxMaxWaiters);
      if (!n.ok()) return n.status();
      rule.max_waiters = *n;
    } else if (field == "algorithm") {
      Result<Algorithm> algorithm = AlgorithmValue(key, value, path);
      if (!algorithm.ok()) return algorithm.status();
      rule.algorithm = *algorithm;
    } else if (field == "limits") {
      Result<std::vector<PlacedLimit>> limits = ParseLimits(key, value, path);
      if (!limits.ok()) return limits.status();
      draft.limits = *std::move(limits);
      draft.has_limits = true;
    } else if (field == "burst") {
      Result<std::vector<PlacedInt>> burst = ParseBurst(key, value, path);
      if (!burst.ok()) return burst.status();
      draft.burst = *std::move(burst);
      draft.burst_key = key;
    } else if (field == "tiers") {
      if (!value.IsMap()) return WrongType(key, value, path, "a map of tier name to limits");
      return ForEachEntry(value, "tier",
                          [&](const std::string& tier, const YAML::Node& k, const YAML::Node& v) {
                            return ParseTier(tier, k, v, path, draft);
                          });
    } else if (field == "timezone") {
      Result<std::string> text = String(key, value, path);
      if (!text.ok()) return text.status();
      Result<std::shared_ptr<const core::Zone>> zone = core::Zone::Load(*text);
      if (!zone.ok()) return FailAt(key, value, zone.status().message(), *text);
      rule.timezone = (*zone)->name();
    } else if (field == "shadow") {
      Result<bool> shadow = Bool(key, value, path);
      if (!shadow.ok()) return shadow.status();
      rule.shadow = *shadow;
    } else if (field == "on_backend_error") {
      Result<OnBackendError> on_error = OnBackendErrorValue(key, value, path);
      if (!on_error.ok()) return on_error.status();
      rule.on_backend_error = *on_error;
    } else if (field == "on_store_full") {
      Result<OnStoreFull> on_full = OnStoreFullValue(key, value, path);
      if (!on_full.ok()) return on_full.status();
      rule.on_store_full = *on_full;
    } else if (field == "alerts") {
      return config::ParseRuleAlerts(*this, key, value, path, rule.alerts);
    } else if (field == "block_for") {
      Result<int64_t> ms = Duration(key, value, path, 1, kMaxBlockForMs);
      if (!ms.ok()) return ms.status();
      rule.block_for_ms = *ms;
    } else {
      return Fail(key.Mark(),
                  "unknown key '" + field + "' in rule '" + rule.name +
                      "'; expected algorithm, limits, burst, tiers, timezone, shadow, "
                      "on_backend_error, on_store_full, alerts, block_for, max_waiters, "
                      "max_in_flight or lease_ttl",
                  field);
    }
    return Status::Ok();
  }

  Status ParseTier(const std::string& tier, const YAML::Node& key, const YAML::Node& value,
                   const std::string& tiers_path, RuleDraft& draft) const {
    if (!IsValidName(tier)) {
      return Fail(key.Mark(),
                  "tier names are 1 to 64 characters of A-Z, a-z, 0-9, '_', '.', ':' or '-'", tier);
    }
    // A bare integer is a concurrency rule's tier (its max_in_flight); the
    // algorithm may come later in the rule, so both readings wait for it.
    if (value.IsScalar()) {
      if (const std::optional<int64_t> n = ParseInt(value.Scalar()); n.has_value()) {
        if (*n < 0 || *n > kMaxInFlight) {
          return Fail(value.Mark(),
                      "tier '" + tier + "': max_in_flight must be from 0 to " +
                          std::to_string(kMaxInFlight),
                      value.Scalar());
        }
        draft.tiers.push_back({tier, key, {}, *n});
        return Status::Ok();
      }
    }
    Result<std::vector<PlacedLimit>> limits = ParseLimits(key, value, tiers_path + "." + tier);
    if (!limits.ok()) return limits.status();
    draft.tiers.push_back({tier, key, *std::move(limits), std::nullopt});
    return Status::Ok();
  }

  // burst needs the algorithm and the limit counts, which may come after it.
  Status CheckBurst(RuleDraft& draft) const {
    Rule& rule = draft.rule;
    if (draft.burst.empty()) return Status::Ok();
    const bool bucket = rule.algorithm == Algorithm::kTokenBucket;
    if (!bucket && rule.algorithm != Algorithm::kGcra) {
      return Fail(draft.burst_key.Mark(),
                  "'burst' is only allowed with token_bucket and gcra, not " +
                      std::string(AlgorithmName(rule.algorithm)),
                  "burst");
    }
    // gcra's capacity is burst + 1 and must itself be a valid count.
    const int64_t min = bucket ? 1 : 0;
    const int64_t max = bucket ? kMaxLimitCount : kMaxLimitCount - 1;
    for (const PlacedInt& b : draft.burst) {
      if (b.value < min || b.value > max) {
        return Fail(b.node.Mark(),
                    std::string(AlgorithmName(rule.algorithm)) + " 'burst' must be between " +
                        std::to_string(min) + " and " + std::to_string(max),
                    b.node.Scalar());
      }
      rule.burst.push_back(b.value);
    }
    if (rule.burst.size() == 1) return Status::Ok();
    if (rule.burst.size() != draft.limits.size()) {
      return Fail(draft.burst_key.Mark(),
                  "'burst' has " + std::to_string(rule.burst.size()) + " values but the rule has " +
                      std::to_string(draft.limits.size()) +
                      " limits; give one value, or one per limit",
                  "burst");
    }
    // One value per limit must also mean one per limit of every tier.
    for (const Tier& tier : draft.tiers) {
      if (tier.limits.size() != rule.burst.size()) {
        return Fail(tier.key.Mark(),
                    "tier '" + tier.name + "' has " + std::to_string(tier.limits.size()) +
                        " limits but 'burst' has " + std::to_string(rule.burst.size()) + " values",
                    tier.name);
      }
    }
    return Status::Ok();
  }

  // Bounds that depend on the algorithm and burst: beyond them the state
  // arithmetic (C++ int64, Lua doubles) would lose exactness or overflow.
  Status CheckLimits(const Rule& rule, const std::vector<PlacedLimit>& limits) const {
    for (size_t i = 0; i < limits.size(); ++i) {
      const Limit& l = limits[i].limit;
      const std::string text = l.ToString();
      const __int128 period_ms = l.PeriodMs();
      const std::optional<int64_t> burst = rule.burst.empty() ? std::nullopt
                                           : rule.burst.size() == 1
                                               ? std::optional<int64_t>(rule.burst[0])
                                               : std::optional<int64_t>(rule.burst[i]);
      std::string problem;
      switch (rule.algorithm) {
        case Algorithm::kFixedWindow:
        case Algorithm::kConcurrency:
          break;
        case Algorithm::kSlidingWindow:
          if (l.count * period_ms > kMaxExactProduct) {
            problem = "count x period must be at most 2^53 ms for sliding_window";
          }
          break;
        case Algorithm::kTokenBucket: {
          const int64_t capacity = burst.value_or(l.count);
          if ((capacity > l.count ? capacity : l.count) * period_ms > kMaxExactProduct) {
            problem = "max(count, burst) x period must be at most 2^53 ms for token_bucket";
          }
          break;
        }
        case Algorithm::kGcra: {
          const __int128 max_burst = burst.value_or(l.count - 1);
          const __int128 emission_us = period_ms * 1000 / l.count;
          if (emission_us < 1) {
            problem = "gcra needs at least 1 us per unit (period / count)";
          } else if (emission_us * (max_burst + 1) > kMaxGcraSpanUs) {
            problem = "period / count x (burst + 1) must be at most 2^52 us for gcra";
          }
          break;
        }
        case Algorithm::kSlidingLog:
          if (l.count > kMaxSlidingLogCount) {
            problem = "sliding_log keeps one timestamp per request, so count must be at most " +
                      std::to_string(kMaxSlidingLogCount);
          }
          break;
      }
      if (!problem.empty()) {
        return Fail(limits[i].node.Mark(), "limit \"" + text + "\" is too large: " + problem,
                    limits[i].node.Scalar());
      }
    }
    return Status::Ok();
  }
};

// The source line holding `mark`, trimmed, for the "near" of a YAML syntax
// error. yaml-cpp reports unclosed brackets and the like at the end of the
// input, so an empty line yields the last non-empty one before it.
std::string_view LineAt(std::string_view text, const YAML::Mark& mark) {
  if (mark.is_null() || mark.pos < 0) return {};
  size_t end = std::min(static_cast<size_t>(mark.pos), text.size());
  const size_t newline = text.find('\n', end);
  end = newline == std::string_view::npos ? text.size() : newline;
  while (true) {
    const size_t previous = end == 0 ? std::string_view::npos : text.rfind('\n', end - 1);
    const size_t begin = previous == std::string_view::npos ? 0 : previous + 1;
    std::string_view line = text.substr(begin, end - begin);
    while (!line.empty() && (line.front() == ' ' || line.front() == '\t')) line.remove_prefix(1);
    while (!line.empty() && (line.back() == ' ' || line.back() == '\t' || line.back() == '\r')) {
      line.remove_suffix(1);
    }
    if (!line.empty() || begin == 0) return line;
    end = begin - 1;  // the newline that ends the line before
  }
}

// Records where the first node of a document starts.
class FirstNodeMark final : public YAML::EventHandler {
 public:
  bool seen() const { return seen_; }
  const YAML::Mark& mark() const { return mark_; }

  void OnDocumentStart(const YAML::Mark& mark) override { Note(mark); }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark& mark, YAML::anchor_t) override { Note(mark); }
  void OnAlias(const YAML::Mark& mark, YAML::anchor_t) override { Note(mark); }
  void OnScalar(const YAML::Mark& mark, const std::string&, YAML::anchor_t,
                const std::string&) override {
    Note(mark);
  }
  void OnSequenceStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t,
                       YAML::EmitterStyle::value) override {
    Note(mark);
  }
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t,
                  YAML::EmitterStyle::value) override {
    Note(mark);
  }
  void OnMapEnd() override {}

 private:
  void Note(const YAML::Mark& mark) {
    if (!seen_) mark_ = mark;
    seen_ = true;
  }
  bool seen_ = false;
  YAML::Mark mark_;
};

// Whether anything follows the first document, and where. A config is one
// document: a second one ("---") would otherwise be silently ignored. This
// asks the parser for exactly one more document instead of using
// YAML::LoadAll, which never returns on some inputs (yaml-cpp 0.7 yields
// empty documents forever for a stray ',' at top level, until memory runs
// out).
std::optional<YAML::Mark> SecondDocument(const std::string& text) {
  std::istringstream in(text);
  YAML::Parser parser(in);
  FirstNodeMark first, second;
  if (!parser.HandleNextDocument(first)) return std::nullopt;
  if (!parser.HandleNextDocument(second) || !second.seen()) return std::nullopt;
  return second.mark();
}

std::string JoinLimits(const std::vector<Limit>& limits) {
  return absl::StrJoin(limits, ", ",
                       [](std::string* out, const Limit& l) { out->append(l.ToString()); });
}

// A concurrency rule's one limit, in the config's words.
std::string ConcurrencyText(const std::vector<Limit>& limits) {
  if (limits.empty()) return "";
  return "max_in_flight=" + std::to_string(limits[0].count) +
         ", lease_ttl=" + std::to_string(limits[0].multiplier) + "ms";
}

}  // namespace

Result<Config> ParseConfig(std::string_view yaml, std::string_view source) {
  ConfigParser parser(source);
  if (yaml.size() > kMaxConfigBytes) {
    return parser.Fail(YAML::Mark(), "config is larger than 4 MiB", yaml.substr(0, 32));
  }
  try {
    const std::string text(yaml);
    const YAML::Node root = YAML::Load(text);
    if (const std::optional<YAML::Mark> second = SecondDocument(text)) {
      return parser.Fail(*second, "only one YAML document is allowed", LineAt(yaml, *second));
    }
    Config config;
    config.source = std::string(source);
    if (Status s = parser.ParseDocument(root, config); !s.ok()) return s;
    return config;
  } catch (const YAML::Exception& e) {
    // The line is quoted as it is, unless it may hold the auth token.
    std::string_view line = LineAt(yaml, e.mark);
    if (line.find("auth_token") != std::string_view::npos) line = "(auth_token line not shown)";
    return parser.Fail(e.mark, "YAML syntax error: " + e.msg, line);
  } catch (const std::exception& e) {
    return parser.Fail(YAML::Mark(), std::string("cannot read YAML: ") + e.what(), "");
  } catch (...) {
    return parser.Fail(YAML::Mark(), "cannot read YAML", "");
  }
}

Result<Config> LoadConfigFile(const std::string& path) {
  std::FILE* file = std::fopen(path.c_str(), "rb");
  if (file == nullptr) {
    return InvalidArgumentError(path + ": cannot open config file: " + std::strerror(errno));
  }
  // One byte past the bound is enough for ParseConfig to refuse a huge file
  // without reading all of it.
  std::string text;
  char buffer[1 << 16];
  while (text.size() <= kMaxConfigBytes) {
    const size_t n = std::fread(buffer, 1, sizeof(buffer), file);
    text.append(buffer, n);
    if (n < sizeof(buffer)) break;
  }
  const bool failed = std::ferror(file) != 0;
  const int error = errno;
  std::fclose(file);
  if (failed) {
    return InvalidArgumentError(path + ": cannot read config file: " + std::strerror(error));
  }
  return ParseConfig(text, path);
}

std::string DescribeConfig(const Config& config) {
  std::string store = config.store;
  if (store != "memory") {
    auto url = redis::ParseStoreUrl(store);
    store = url.ok() ? url->Redacted() : "?";  // never print a password
  }
  std::string out = "store: " + store + "\n";
  const EngineConfig default_engine;
  if (config.engine.max_entries != default_engine.max_entries ||
      config.engine.max_memory != default_engine.max_memory) {
    out += "engine: max_entries=" + std::to_string(config.engine.max_entries) +
           ", max_memory=" + std::to_string(config.engine.max_memory) + " bytes\n";
  }
  out += "rules (" + std::to_string(config.rules.size()) + "):\n";
  for (const Rule& rule : config.rules) {
    out += "  " + rule.name + ": " + std::string(AlgorithmName(rule.algorithm)) + " " +
           (rule.is_concurrency() ? ConcurrencyText(rule.limits) : JoinLimits(rule.limits));
    if (!rule.burst.empty()) out += "; burst=" + absl::StrJoin(rule.burst, ", ");
    if (!rule.tiers.empty()) {
      out += "; tiers: " +
             absl::StrJoin(rule.tiers, "; ", [&rule](std::string* dst, const auto& tier) {
               dst->append(tier.first + "=" +
                           (rule.is_concurrency() ? std::to_string(tier.second.at(0).count)
                                                  : JoinLimits(tier.second)));
             });
    }
    if (rule.timezone != "UTC") out += "; timezone=" + rule.timezone;
    if (rule.shadow) out += "; shadow";
    if (rule.block_for_ms > 0) out += "; block_for=" + DurationText(rule.block_for_ms);
    out += rule.on_backend_error == OnBackendError::kAllow ? "; on_backend_error=allow"
                                                           : "; on_backend_error=deny";
    out += rule.on_store_full == OnStoreFull::kAllow ? "; on_store_full=allow"
                                                     : "; on_store_full=deny";
    if (rule.alerts.enabled()) {
      out += "; alerts at " + absl::StrJoin(rule.alerts.thresholds, "%, ") + "% to " +
             rule.alerts.webhook + " (secret_env=" + rule.alerts.secret_env + ")";
    }
    out += "\n";
  }
  const SetsConfig default_sets;
  if (config.sets.max_members != default_sets.max_members ||
      config.sets.max_ttl_ms != default_sets.max_ttl_ms) {
    out += "sets: max_members=" + std::to_string(config.sets.max_members) +
           ", max_ttl=" + std::to_string(config.sets.max_ttl_ms) + "ms\n";
  }
  if (config.otp.enabled) {
    const OtpConfig& otp = config.otp;
    out += "otp: digits=" + std::to_string(otp.digits) + ", ttl=" + std::to_string(otp.ttl_ms) +
           "ms, issue_limit=" + otp.issue_limit.ToString() +
           ", verify_limit=" + otp.verify_limit.ToString() +
           ", max_live_codes=" + std::to_string(otp.max_live_codes) +
           ", secret_env=" + otp.secret_env;
    if (!otp.delivery.url.empty()) out += ", delivery=" + otp.delivery.url;
    out += "\n";
  }
  if (!config.envoy_ratelimit.files.empty()) {
    out += "envoy_ratelimit: " + absl::StrJoin(config.envoy_ratelimit.files, ", ") + " (" +
           std::string(AlgorithmName(config.envoy_ratelimit.algorithm)) + ")\n";
  }
  return out;
}

}  // namespace floodgate
