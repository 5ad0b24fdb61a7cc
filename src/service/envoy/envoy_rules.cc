// Envoy's rate limit rules: see envoy_rules.h.
#include "service/envoy/envoy_rules.h"

#include <openssl/evp.h>

#include <algorithm>
#include <limits>
#include <map>
#include <set>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "core/rule_eval.h"

namespace floodgate::envoy {
namespace {

absl::string_view View(std::string_view s) { return absl::string_view(s.data(), s.size()); }

std::optional<TimeUnit> ToTimeUnit(Unit unit) {
  switch (unit) {
    case Unit::kSecond:
      return TimeUnit::kSecond;
    case Unit::kMinute:
      return TimeUnit::kMinute;
    case Unit::kHour:
      return TimeUnit::kHour;
    case Unit::kDay:
      return TimeUnit::kDay;
    case Unit::kMonth:
      return TimeUnit::kMonth;
    case Unit::kYear:
      return TimeUnit::kYear;
    case Unit::kUnknown:
      break;
  }
  return std::nullopt;
}

// How a floodgate limit is reported in Envoy's terms: a count per one unit
// when it is one (60/minute), else the count with an unknown unit (3/5m).
ReportedLimit Report(const Limit& limit, const std::string& name) {
  ReportedLimit c;
  c.requests_per_unit =
      static_cast<uint32_t>(std::min<int64_t>(limit.count, std::numeric_limits<uint32_t>::max()));
  c.name = name;
  if (limit.multiplier == 1) {
    switch (limit.unit) {
      case TimeUnit::kSecond:
        c.unit = Unit::kSecond;
        break;
      case TimeUnit::kMinute:
        c.unit = Unit::kMinute;
        break;
      case TimeUnit::kHour:
        c.unit = Unit::kHour;
        break;
      case TimeUnit::kDay:
        c.unit = Unit::kDay;
        break;
      case TimeUnit::kMonth:
        c.unit = Unit::kMonth;
        break;
      case TimeUnit::kYear:
        c.unit = Unit::kYear;
        break;
      default:
        break;
    }
  }
  return c;
}

void AppendEscaped(std::string& out, std::string_view s) {
  for (char c : s) {
    if (c == '\\' || c == '|' || c == '=') out += '\\';
    out += c;
  }
}

}  // namespace

// --- Rules ---

// One level of a domain's tree.
struct Level {
  struct ByKey {
    absl::flat_hash_map<std::string, int> exact;         // value -> node
    std::vector<std::pair<std::string, int>> wildcards;  // prefix -> node, file order
    int any = -1;                                        // the entry without a value
  };
  absl::flat_hash_map<std::string, ByKey> keys;
};

struct Node {
  int limit = -1;     // index into Impl::limits
  int children = -1;  // index into Impl::levels
};

struct Rules::Impl {
  std::vector<Level> levels;
  std::vector<Node> nodes;
  std::vector<MatchedLimit> limits;
  absl::flat_hash_map<std::string, int> domains;  // domain -> root level
};

Rules::Rules() : impl_(std::make_unique<Impl>()) {}
Rules::~Rules() = default;

size_t Rules::num_domains() const { return impl_->domains.size(); }

namespace {

// Builds the trees; one per Compile call.
class Compiler {
 public:
  Compiler(const Config& config, Rules::Impl& impl, std::map<std::string, Rule>& synthetic)
      : config_(config), impl_(impl), synthetic_(synthetic) {
    for (const Rule& r : config.rules) user_rules_.emplace(r.name, &r);
  }

  Result<int> AddLevel(const std::vector<DescriptorConfig>& list, const std::string& parent,
                       int depth) {
    if (depth > kMaxDescriptorDepth) return InvalidArgumentError("descriptors nested too deep");
    const int level = static_cast<int>(impl_.levels.size());
    impl_.levels.emplace_back();
    for (const DescriptorConfig& d : list) {
      const int node = static_cast<int>(impl_.nodes.size());
      impl_.nodes.emplace_back();
      const std::string path =
          parent + (parent.empty() ? "" : ".") + d.key + (d.value.empty() ? "" : "_" + d.value);
      if (d.has_rate_limit) {
        Result<int> limit = AddLimit(d, path);
        if (!limit.ok()) return limit.status();
        impl_.nodes[node].limit = *limit;
      }
      if (!d.descriptors.empty()) {
        Result<int> children = AddLevel(d.descriptors, path, depth + 1);
        if (!children.ok()) return children.status();
        impl_.nodes[node].children = *children;
      }
      Level::ByKey& by_key = impl_.levels[level].keys[d.key];
      if (d.value.empty()) {
        by_key.any = node;
      } else if (d.value.back() == '*') {
        by_key.wildcards.emplace_back(d.value.substr(0, d.value.size() - 1), node);
      } else {
        by_key.exact.emplace(d.value, node);
      }
    }
    return level;
  }

 private:
  Result<int> AddLimit(const DescriptorConfig& d, const std::string& path) {
    const RateLimitSpec& rl = d.rate_limit;
    MatchedLimit m;
    m.shadow = d.shadow_mode;
    m.name = rl.name;
    m.replaces = rl.replaces;
    m.detailed_metric = d.detailed_metric;
    m.config_has_value = !d.value.empty();
    m.metric_name = path;
    if (!rl.floodgate_rule.empty()) {
      auto it = user_rules_.find(rl.floodgate_rule);
      if (it == user_rules_.end()) {
        return InvalidArgumentError(rl.position + ": floodgate_rule '" + rl.floodgate_rule +
                                    "' is not a rule of " + config_.source);
      }
      m.rule = rl.floodgate_rule;
      const std::string& shown = rl.name.empty() ? rl.floodgate_rule : rl.name;
      for (const Limit& l : it->second->limits) m.reported.push_back(Report(l, shown));
    } else if (rl.unlimited) {
      m.kind = MatchedLimit::Kind::kUnlimited;
    } else {
      m.reported.push_back(ReportedLimit{rl.requests_per_unit, rl.unit, rl.name});
      const Limit limit{rl.requests_per_unit, 1, *ToTimeUnit(rl.unit)};
      if (rl.requests_per_unit == 0) {
        m.kind = MatchedLimit::Kind::kZero;
        m.zero_period_ms = limit.PeriodMs();
      } else {
        Result<std::string> rule = Synthetic(limit, rl.position);
        if (!rule.ok()) return rule.status();
        m.rule = *std::move(rule);
      }
    }
    impl_.limits.push_back(std::move(m));
    return static_cast<int>(impl_.limits.size()) - 1;
  }

  // The floodgate rule of an Envoy limit, created on first use.
  Result<std::string> Synthetic(const Limit& limit, const std::string& position) {
    const EnvoyRateLimitConfig& o = config_.envoy_ratelimit;
    const std::string name =
        "envoy:" + std::string(AlgorithmName(o.algorithm)) + ":" + limit.ToString();
    if (synthetic_.contains(name)) return name;
    Rule rule;
    rule.name = name;
    rule.algorithm = o.algorithm;
    rule.limits = {limit};
    rule.on_backend_error = o.on_backend_error;
    rule.on_store_full = o.on_store_full;
    if (auto compiled = core::CompileRule(rule, "", rule.limits); !compiled.ok()) {
      return InvalidArgumentError(position + ": " + compiled.status().message());
    }
    if (o.algorithm == Algorithm::kSlidingLog && limit.count > 100'000) {
      return InvalidArgumentError(position +
                                  ": sliding_log keeps one timestamp per request, so "
                                  "requests_per_unit must be at most 100000");
    }
    synthetic_.emplace(name, std::move(rule));
    return name;
  }

  const Config& config_;
  Rules::Impl& impl_;
  std::map<std::string, Rule>& synthetic_;
  absl::flat_hash_map<std::string, const Rule*> user_rules_;
};

}  // namespace

Result<std::shared_ptr<const Rules>> Rules::Compile(const Config& config,
                                                    const std::vector<DomainConfig>& domains) {
  std::shared_ptr<Rules> rules(new Rules());
  rules->options_ = config.envoy_ratelimit;
  std::map<std::string, Rule> synthetic;
  Compiler compiler(config, *rules->impl_, synthetic);
  for (const DomainConfig& domain : domains) {
    if (rules->impl_->domains.contains(domain.domain)) {
      return InvalidArgumentError(domain.source + ": duplicate domain '" + domain.domain + "'");
    }
    Result<int> root = compiler.AddLevel(domain.descriptors, "", 1);
    if (!root.ok()) return root.status();
    rules->impl_->domains.emplace(domain.domain, *root);
  }
  for (auto& [name, rule] : synthetic) rules->floodgate_rules_.push_back(std::move(rule));
  return std::shared_ptr<const Rules>(std::move(rules));
}

Result<std::shared_ptr<const Rules>> Rules::Load(const Config& config) {
  Result<std::vector<DomainConfig>> domains = LoadDomains(config.envoy_ratelimit);
  if (!domains.ok()) return domains.status();
  return Compile(config, *domains);
}

const MatchedLimit* Rules::Match(std::string_view domain,
                                 const std::vector<DescriptorEntry>& entries,
                                 std::string* metric) const {
  auto d = impl_->domains.find(View(domain));
  if (d == impl_->domains.end()) return nullptr;
  int level = d->second;
  const MatchedLimit* limit = nullptr;
  for (size_t i = 0; i < entries.size(); ++i) {
    const DescriptorEntry& e = entries[i];
    const Level& l = impl_->levels[level];
    int node = -1;
    if (auto k = l.keys.find(View(e.key)); k != l.keys.end()) {
      const Level::ByKey& by_key = k->second;
      if (auto v = by_key.exact.find(View(e.value)); v != by_key.exact.end()) {
        node = v->second;
      } else {
        for (const auto& [prefix, n] : by_key.wildcards) {
          if (e.value.substr(0, prefix.size()) == prefix) {
            node = n;
            break;
          }
        }
        if (node < 0) node = by_key.any;
      }
    }
    if (node < 0) break;
    const Node& n = impl_->nodes[node];
    // A limit counts only at the request's own depth.
    if (n.limit >= 0 && i + 1 == entries.size()) limit = &impl_->limits[n.limit];
    if (n.children < 0) break;
    level = n.children;
  }
  if (metric != nullptr && limit != nullptr) {
    *metric = limit->metric_name;
    // detailed_metric: a value the config did not spell out shows in the name.
    if (limit->detailed_metric && !limit->config_has_value && !entries.empty()) {
      *metric += "_";
      metric->append(entries.back().value);
    }
  }
  return limit;
}

Config WithEnvoyRules(Config config, const Rules& rules, const Rules* previous) {
  std::set<std::string, std::less<>> names;
  for (const Rule& r : config.rules) names.insert(r.name);
  auto add = [&](const Rule& r) {
    if (names.insert(r.name).second) config.rules.push_back(r);
  };
  for (const Rule& r : rules.floodgate_rules()) add(r);
  if (previous != nullptr) {
    for (const Rule& r : previous->floodgate_rules()) add(r);
  }
  return config;
}

std::string SubjectKey(std::string_view domain, const std::vector<DescriptorEntry>& entries) {
  std::string key;
  SubjectKey(domain, entries, &key);
  return key;
}

void SubjectKey(std::string_view domain, const std::vector<DescriptorEntry>& entries,
                std::string* key) {
  key->clear();
  AppendEscaped(*key, domain);
  for (const DescriptorEntry& e : entries) {
    *key += '|';
    AppendEscaped(*key, e.key);
    *key += '=';
    AppendEscaped(*key, e.value);
  }
  if (key->size() <= kMaxKeyBytes) return;
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  EVP_Digest(key->data(), key->size(), digest, &size, EVP_sha256(), nullptr);
  static constexpr char kHex[] = "0123456789abcdef";
  key->assign("sha256:");
  for (unsigned int i = 0; i < size; ++i) {
    *key += kHex[digest[i] >> 4];
    *key += kHex[digest[i] & 0xf];
  }
}

}  // namespace floodgate::envoy
