// The rules section (rules_section.h).
//
// A rule is read in two passes: each field as it comes, into a draft that
// keeps every value's node for positions, then the checks across fields,
// which wait for the whole rule because the algorithm may come after the
// limits, burst or tiers it decides about.
#include "config/rules_section.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "config/alerts_section.h"
#include "config/priorities_option.h"
#include "config/slices_option.h"
#include "config/subjects_section.h"
#include "core/calendar.h"

namespace floodgate::config {
namespace {

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
  YAML::Node slices_key;
  YAML::Node priorities_key;
};

// A limit list: a sequence of limit strings or one string.
Result<std::vector<PlacedLimit>> ParseLimits(const Fields& fields, const YAML::Node& key,
                                             const YAML::Node& value, const std::string& field) {
  std::vector<PlacedLimit> out;
  auto add = [&](const YAML::Node& node) -> Status {
    if (!node.IsScalar()) {
      return fields.Fail(
          node.IsNull() ? key.Mark() : node.Mark(),
          "each limit in '" + field + "' must be a string like 60/minute, not " + TypeName(node),
          key.Scalar());
    }
    if (out.size() == static_cast<size_t>(kMaxLimitsPerRule)) {
      return fields.Fail(
          node.Mark(),
          "'" + field + "' has too many limits (at most " + std::to_string(kMaxLimitsPerRule) + ")",
          node.Scalar());
    }
    Result<Limit> limit = ParseLimit(node.Scalar());
    if (!limit.ok()) return fields.Fail(node.Mark(), limit.status().message(), node.Scalar());
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
    return fields.WrongType(key, value, field, "a limit or a list of limits");
  }
  if (out.empty()) {
    return fields.FailAt(key, value, "'" + field + "' needs at least one limit", key.Scalar());
  }
  return out;
}

// An integer or a list of integers; the per-algorithm range is checked
// once the algorithm is known.
Result<std::vector<PlacedInt>> ParseBurst(const Fields& fields, const YAML::Node& key,
                                          const YAML::Node& value, const std::string& field) {
  std::vector<PlacedInt> out;
  auto add = [&](const YAML::Node& node) -> Status {
    Result<int64_t> n = fields.Int(key, node, field, 0, kMaxLimitCount);
    if (!n.ok()) return n.status();
    out.push_back({*n, node});
    return Status::Ok();
  };
  if (value.IsSequence()) {
    for (const YAML::Node& item : value) {
      if (out.size() == static_cast<size_t>(kMaxLimitsPerRule)) {
        return fields.Fail(item.Mark(),
                           "'" + field + "' has more values than a rule has limits (at most " +
                               std::to_string(kMaxLimitsPerRule) + ")",
                           item.Scalar());
      }
      if (Status s = add(item); !s.ok()) return s;
    }
    if (out.empty())
      return fields.FailAt(key, value, "'" + field + "' is an empty list", key.Scalar());
  } else if (Status s = add(value); !s.ok()) {
    return s;
  }
  return out;
}

Status ParseTier(const Fields& fields, const std::string& tier, const YAML::Node& key,
                 const YAML::Node& value, const std::string& tiers_path, RuleDraft& draft) {
  if (!IsValidName(tier)) {
    return fields.Fail(key.Mark(),
                       "tier names are 1 to 64 characters of A-Z, a-z, 0-9, '_', '.', ':' or '-'",
                       tier);
  }
  // A bare integer is a concurrency rule's tier (its max_in_flight); the
  // algorithm may come later in the rule, so both readings wait for it.
  if (value.IsScalar()) {
    if (const std::optional<int64_t> n = ParseInt(value.Scalar()); n.has_value()) {
      if (*n < 0 || *n > kMaxInFlight) {
        return fields.Fail(
            value.Mark(),
            "tier '" + tier + "': max_in_flight must be from 0 to " + std::to_string(kMaxInFlight),
            value.Scalar());
      }
      draft.tiers.push_back({tier, key, {}, *n});
      return Status::Ok();
    }
  }
  Result<std::vector<PlacedLimit>> limits =
      ParseLimits(fields, key, value, tiers_path + "." + tier);
  if (!limits.ok()) return limits.status();
  draft.tiers.push_back({tier, key, *std::move(limits), std::nullopt});
  return Status::Ok();
}

Status ParseRuleField(const Fields& fields, const std::string& field, const YAML::Node& key,
                      const YAML::Node& value, RuleDraft& draft) {
  Rule& rule = draft.rule;
  const std::string path = "rules." + rule.name + "." + field;
  if (field == "limits" || field == "burst" || field == "alerts" || field == "shadow" ||
      field == "block_for" || field == "timezone" || field == "slices" || field == "priorities") {
    if (draft.rate_fields.empty()) draft.first_rate_key = key;
    draft.rate_fields.push_back(field);
  }
  if (field == "max_in_flight") {
    Result<int64_t> n = fields.Int(key, value, path, 0, kMaxInFlight);
    if (!n.ok()) return n.status();
    draft.max_in_flight = *n;
    if (draft.lease_ttl_key.IsNull()) draft.lease_ttl_key = key;
  } else if (field == "lease_ttl") {
    Result<int64_t> ms = fields.Duration(key, value, path, 1, kMaxLeaseTtlMs);
    if (!ms.ok()) return ms.status();
    draft.lease_ttl_ms = *ms;
    draft.lease_ttl_key = key;
  } else if (field == "max_waiters") {
    Result<int64_t> n = fields.Int(key, value, path, 0, kMaxMaxWaiters);
    if (!n.ok()) return n.status();
    rule.max_waiters = *n;
  } else if (field == "algorithm") {
    Result<Algorithm> algorithm = fields.AlgorithmValue(key, value, path);
    if (!algorithm.ok()) return algorithm.status();
    rule.algorithm = *algorithm;
  } else if (field == "limits") {
    Result<std::vector<PlacedLimit>> limits = ParseLimits(fields, key, value, path);
    if (!limits.ok()) return limits.status();
    draft.limits = *std::move(limits);
    draft.has_limits = true;
  } else if (field == "burst") {
    Result<std::vector<PlacedInt>> burst = ParseBurst(fields, key, value, path);
    if (!burst.ok()) return burst.status();
    draft.burst = *std::move(burst);
    draft.burst_key = key;
  } else if (field == "tiers") {
    if (!value.IsMap()) return fields.WrongType(key, value, path, "a map of tier name to limits");
    return fields.ForEachEntry(
        value, "tier", [&](const std::string& tier, const YAML::Node& k, const YAML::Node& v) {
          return ParseTier(fields, tier, k, v, path, draft);
        });
  } else if (field == "timezone") {
    Result<std::string> text = fields.String(key, value, path);
    if (!text.ok()) return text.status();
    Result<std::shared_ptr<const core::Zone>> zone = core::Zone::Load(*text);
    if (!zone.ok()) return fields.FailAt(key, value, zone.status().message(), *text);
    rule.timezone = (*zone)->name();
  } else if (field == "shadow") {
    Result<bool> shadow = fields.Bool(key, value, path);
    if (!shadow.ok()) return shadow.status();
    rule.shadow = *shadow;
  } else if (field == "on_backend_error") {
    Result<OnBackendError> on_error = fields.OnBackendErrorValue(key, value, path);
    if (!on_error.ok()) return on_error.status();
    rule.on_backend_error = *on_error;
  } else if (field == "on_store_full") {
    Result<OnStoreFull> on_full = fields.OnStoreFullValue(key, value, path);
    if (!on_full.ok()) return on_full.status();
    rule.on_store_full = *on_full;
  } else if (field == "alerts") {
    return ParseRuleAlerts(fields, key, value, path, rule.alerts);
  } else if (field == "block_for") {
    Result<int64_t> ms = fields.Duration(key, value, path, 1, kMaxBlockForMs);
    if (!ms.ok()) return ms.status();
    rule.block_for_ms = *ms;
  } else if (field == "slices") {
    draft.slices_key = key;
    return ParseRuleSlices(fields, key, value, path, &rule.slices);
  } else if (field == "priorities") {
    draft.priorities_key = key;
    return ParseRulePriorities(fields, key, value, path, &rule.priorities);
  } else {
    bool known = false;
    Status s = ParseRuleSubjectField(fields, field, key, value, path, rule.subject, &known);
    if (known) return s;
    return fields.Fail(key.Mark(),
                       "unknown key '" + field + "' in rule '" + rule.name +
                           "'; expected algorithm, limits, burst, tiers, timezone, shadow, "
                           "on_backend_error, on_store_full, alerts, block_for, max_waiters, "
                           "slices, priorities, max_in_flight, lease_ttl, key, on_missing, "
                           "deny_list or allow_list",
                       field);
  }
  return Status::Ok();
}

// burst needs the algorithm and the limit counts, which may come after it.
Status CheckBurst(const Fields& fields, RuleDraft& draft) {
  Rule& rule = draft.rule;
  if (draft.burst.empty()) return Status::Ok();
  const bool bucket = rule.algorithm == Algorithm::kTokenBucket;
  if (!bucket && rule.algorithm != Algorithm::kGcra) {
    return fields.Fail(draft.burst_key.Mark(),
                       "'burst' is only allowed with token_bucket and gcra, not " +
                           std::string(AlgorithmName(rule.algorithm)),
                       "burst");
  }
  // gcra's capacity is burst + 1 and must itself be a valid count.
  const int64_t min = bucket ? 1 : 0;
  const int64_t max = bucket ? kMaxLimitCount : kMaxLimitCount - 1;
  for (const PlacedInt& b : draft.burst) {
    if (b.value < min || b.value > max) {
      return fields.Fail(b.node.Mark(),
                         std::string(AlgorithmName(rule.algorithm)) + " 'burst' must be between " +
                             std::to_string(min) + " and " + std::to_string(max),
                         b.node.Scalar());
    }
    rule.burst.push_back(b.value);
  }
  if (rule.burst.size() == 1) return Status::Ok();
  if (rule.burst.size() != draft.limits.size()) {
    return fields.Fail(draft.burst_key.Mark(),
                       "'burst' has " + std::to_string(rule.burst.size()) +
                           " values but the rule has " + std::to_string(draft.limits.size()) +
                           " limits; give one value, or one per limit",
                       "burst");
  }
  // One value per limit must also mean one per limit of every tier.
  for (const Tier& tier : draft.tiers) {
    if (tier.limits.size() != rule.burst.size()) {
      return fields.Fail(tier.key.Mark(),
                         "tier '" + tier.name + "' has " + std::to_string(tier.limits.size()) +
                             " limits but 'burst' has " + std::to_string(rule.burst.size()) +
                             " values",
                         tier.name);
    }
  }
  return Status::Ok();
}

// Bounds that depend on the algorithm and burst: beyond them the state
// arithmetic (C++ int64, Lua doubles) would lose exactness or overflow.
Status CheckLimits(const Fields& fields, const Rule& rule, const std::vector<PlacedLimit>& limits) {
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
      return fields.Fail(limits[i].node.Mark(), "limit \"" + text + "\" is too large: " + problem,
                         limits[i].node.Scalar());
    }
  }
  return Status::Ok();
}

// A concurrency rule: max_in_flight (required) and lease_ttl, tiers of a
// max_in_flight each; none of a rate's fields.
Result<Rule> FinishConcurrencyRule(const Fields& fields, const std::string& name,
                                   const YAML::Node& name_key, RuleDraft& draft) {
  if (!draft.rate_fields.empty()) {
    return fields.Fail(
        draft.first_rate_key.Mark(),
        "'" + draft.rate_fields.front() +
            "' is not for algorithm: concurrency (it takes max_in_flight, lease_ttl, "
            "tiers of a max_in_flight each, on_backend_error, on_store_full and "
            "max_waiters)",
        draft.rate_fields.front());
  }
  if (!draft.max_in_flight.has_value()) {
    return fields.Fail(name_key.Mark(), "concurrency rule '" + name + "' has no 'max_in_flight'",
                       name);
  }
  Rule& rule = draft.rule;
  rule.limits = {ConcurrencyLimit(*draft.max_in_flight, draft.lease_ttl_ms)};
  for (const Tier& tier : draft.tiers) {
    // A tier is parsed before the algorithm may be known: as a limit, or
    // as the integer it must be here (Tier::max_in_flight).
    if (!tier.max_in_flight.has_value()) {
      return fields.Fail(
          tier.key.Mark(),
          "a tier of a concurrency rule is its max_in_flight, an integer from 0 to " +
              std::to_string(kMaxInFlight),
          tier.name);
    }
    rule.tiers[tier.name] = {ConcurrencyLimit(*tier.max_in_flight, draft.lease_ttl_ms)};
  }
  return std::move(rule);
}

Result<Rule> ParseRule(const Fields& fields, const std::string& name, const YAML::Node& name_key,
                       const YAML::Node& body) {
  if (!IsValidName(name)) {
    return fields.Fail(name_key.Mark(),
                       "rule names are 1 to 64 characters of A-Z, a-z, 0-9, '_', '.', ':' or '-'",
                       name);
  }
  if (!body.IsMap()) return fields.WrongType(name_key, body, "rules." + name, "a map");
  RuleDraft draft;
  draft.rule.name = name;
  Status s = fields.ForEachEntry(
      body, "key", [&](const std::string& field, const YAML::Node& k, const YAML::Node& v) {
        return ParseRuleField(fields, field, k, v, draft);
      });
  if (!s.ok()) return s;
  if (draft.rule.is_concurrency()) return FinishConcurrencyRule(fields, name, name_key, draft);
  if (draft.max_in_flight.has_value() || !draft.lease_ttl_key.IsNull()) {
    return fields.Fail(draft.lease_ttl_key.IsNull() ? name_key.Mark() : draft.lease_ttl_key.Mark(),
                       "'max_in_flight' and 'lease_ttl' are for algorithm: concurrency, not " +
                           std::string(AlgorithmName(draft.rule.algorithm)),
                       name);
  }
  if (!draft.has_limits) {
    return fields.Fail(name_key.Mark(), "rule '" + name + "' has no 'limits'", name);
  }
  for (const Tier& tier : draft.tiers) {
    if (tier.max_in_flight.has_value()) {
      return fields.Fail(tier.key.Mark(),
                         "tier '" + tier.name +
                             "' must be limits like 600/minute (a bare number is " +
                             "a concurrency rule's max_in_flight)",
                         tier.name);
    }
  }
  if (draft.rule.slices.enabled() && draft.rule.algorithm != Algorithm::kFixedWindow) {
    return fields.Fail(draft.slices_key.Mark(),
                       "'slices' needs algorithm: fixed_window, not " +
                           std::string(AlgorithmName(draft.rule.algorithm)) +
                           " (a slice is units of one window: token_bucket and gcra refill "
                           "continuously and the sliding algorithms' windows overlap, so no "
                           "slice of theirs can bound what a fleet admits)",
                       "slices");
  }
  if (!draft.rule.priorities.empty() && draft.rule.slices.enabled()) {
    return fields.Fail(draft.priorities_key.Mark(),
                       "'priorities' cannot go with 'slices': a slice is taken for every "
                       "class at once, so no class could be kept back from it",
                       "priorities");
  }
  if (s = CheckBurst(fields, draft); !s.ok()) return s;
  if (s = CheckLimits(fields, draft.rule, draft.limits); !s.ok()) return s;
  for (const Tier& tier : draft.tiers) {
    if (s = CheckLimits(fields, draft.rule, tier.limits); !s.ok()) return s;
  }

  Rule& rule = draft.rule;
  for (const PlacedLimit& l : draft.limits) rule.limits.push_back(l.limit);
  for (const Tier& tier : draft.tiers) {
    std::vector<Limit>& out = rule.tiers[tier.name];
    for (const PlacedLimit& l : tier.limits) out.push_back(l.limit);
  }
  return std::move(rule);
}

}  // namespace

Status ParseRules(const Fields& fields, const YAML::Node& key, const YAML::Node& value,
                  std::vector<Rule>& rules) {
  if (value.IsNull()) return Status::Ok();  // "rules:" with nothing under it
  if (!value.IsMap()) return fields.WrongType(key, value, "rules", "a map of rule name to rule");
  return fields.ForEachEntry(
      value, "rule",
      [&](const std::string& name, const YAML::Node& k, const YAML::Node& v) -> Status {
        Result<Rule> rule = ParseRule(fields, name, k, v);
        if (!rule.ok()) return rule.status();
        rules.push_back(*std::move(rule));
        return Status::Ok();
      });
}

}  // namespace floodgate::config
