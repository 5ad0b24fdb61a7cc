// Envoy's rate limit service on the Limiter: see envoy_rls.h for the rules.
//
// A request is handled in at most two rounds of Limiter calls, all of a
// round issued together (with a remote store they travel together):
//  - check round (only when it matters): every counted descriptor at cost 0,
//    to learn whether each has room for its hits; any that has not means no
//    descriptor is counted, and the answer is built from these figures;
//  - count round: every counted descriptor at its hits, each denial
//    consuming nothing.
// The check round is skipped when it cannot change anything: one counted
// descriptor (its own denial consumes nothing), or only shadow ones.
#include "service/envoy_rls.h"

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
CurrentLimit Report(const Limit& limit, const std::string& name) {
  CurrentLimit c;
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

uint32_t ClampU32(int64_t v) {
  if (v <= 0) return 0;
  return v > static_cast<int64_t>(UINT32_MAX) ? UINT32_MAX : static_cast<uint32_t>(v);
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
      m.reported.push_back(CurrentLimit{rl.requests_per_unit, rl.unit, rl.name});
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

const MatchedLimit* Rules::Match(std::string_view domain, const std::vector<RequestEntry>& entries,
                                 std::string* metric) const {
  auto d = impl_->domains.find(View(domain));
  if (d == impl_->domains.end()) return nullptr;
  int level = d->second;
  const MatchedLimit* limit = nullptr;
  for (size_t i = 0; i < entries.size(); ++i) {
    const RequestEntry& e = entries[i];
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

std::string SubjectKey(std::string_view domain, const std::vector<RequestEntry>& entries) {
  std::string key;
  AppendEscaped(key, domain);
  for (const RequestEntry& e : entries) {
    key += '|';
    AppendEscaped(key, e.key);
    key += '=';
    AppendEscaped(key, e.value);
  }
  if (key.size() <= kMaxKeyBytes) return key;
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  EVP_Digest(key.data(), key.size(), digest, &size, EVP_sha256(), nullptr);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out = "sha256:";
  for (unsigned int i = 0; i < size; ++i) {
    out += kHex[digest[i] >> 4];
    out += kHex[digest[i] & 0xf];
  }
  return out;
}

// --- The service ---

// One request in flight.
struct RateLimitService::Call {
  struct Item {
    size_t index;  // into statuses
    const MatchedLimit* limit;
    std::string key;
    int64_t hits;
    std::string metric;
    Status status;  // of the Limiter call
    Decision decision;
  };
  std::shared_ptr<const Rules> rules;  // keeps `limit` pointers valid
  std::string domain;
  Response response;
  std::vector<Item> items;    // descriptors decided by the Limiter
  bool locally_over = false;  // a non-shadow descriptor is over without the Limiter
  std::vector<std::pair<size_t, std::string>> local_metrics;  // index, metric name
  std::atomic<int> pending{0};
  int64_t now_ms = 0;
  Done done;
};

// Whether a descriptor's decision puts it over its limit. In the check round
// (`peek`, cost 0) that is whether its hits would not fit; a fallback knows
// no room, only its policy.
bool Over(const Decision& d, int64_t hits, bool peek) {
  if (d.fallback != Fallback::kNone) return !d.allowed;
  return peek ? hits > d.remaining : !d.allowed || d.shadow_denied;
}

RateLimitService::RateLimitService(service::LimiterCore* limiter) : limiter_(limiter) {}

void RateLimitService::SetRules(std::shared_ptr<const Rules> rules) {
  std::lock_guard<std::mutex> lock(mu_);
  rules_ = std::move(rules);
}

std::shared_ptr<const Rules> RateLimitService::rules() const {
  std::lock_guard<std::mutex> lock(mu_);
  return rules_;
}

void RateLimitService::ShouldRateLimit(const Request& request, Done done) {
  // envoyproxy/ratelimit's own checks, with its messages.
  if (request.domain.empty()) {
    return done(InvalidArgumentError("rate limit domain must not be empty"), Response{});
  }
  if (request.descriptors.empty()) {
    return done(InvalidArgumentError("rate limit descriptor list must not be empty"), Response{});
  }
  auto call = std::make_shared<Call>();
  call->rules = rules();
  call->domain = std::string(request.domain);
  call->done = std::move(done);
  call->now_ms = limiter_->NowMs();
  const size_t n = request.descriptors.size();
  call->response.statuses.resize(n);

  // Match every descriptor, then drop the limits others replace.
  std::vector<const MatchedLimit*> matched(n, nullptr);
  std::vector<std::string> metrics(n);
  std::set<std::string_view> replaced;
  if (call->rules != nullptr) {
    for (size_t i = 0; i < n; ++i) {
      matched[i] = call->rules->Match(request.domain, request.descriptors[i].entries, &metrics[i]);
      if (matched[i] != nullptr) {
        for (const std::string& r : matched[i]->replaces) replaced.insert(r);
      }
    }
  }
  const int64_t default_hits = std::max<int64_t>(1, request.hits_addend);
  for (size_t i = 0; i < n; ++i) {
    const MatchedLimit* m = matched[i];
    if (m == nullptr || (!m->name.empty() && replaced.contains(m->name))) continue;
    DescriptorStatus& st = call->response.statuses[i];
    if (m->kind == MatchedLimit::Kind::kUnlimited) {
      st.limit_remaining = UINT32_MAX;
      continue;
    }
    const std::optional<uint64_t>& own = request.descriptors[i].hits_addend;
    const uint64_t hits = own.has_value() ? *own : static_cast<uint64_t>(default_hits);
    st.has_limit = true;
    st.current_limit = m->reported.front();
    // No limit holds more than kMaxLimitCount, and nothing fits in a zero one.
    if (m->kind == MatchedLimit::Kind::kZero || hits > static_cast<uint64_t>(kMaxLimitCount)) {
      const bool over = hits > 0;
      st.code = over && !m->shadow ? Code::kOverLimit : Code::kOk;
      if (m->kind == MatchedLimit::Kind::kZero) {
        const int64_t p = m->zero_period_ms;
        st.duration_until_reset_ms = p - (call->now_ms % p + p) % p;
      }
      if (over && !m->shadow) call->locally_over = true;
      call->local_metrics.emplace_back(i, std::move(metrics[i]));
      continue;
    }
    const std::vector<RequestEntry>& entries = request.descriptors[i].entries;
    call->items.push_back(Call::Item{i, m, SubjectKey(request.domain, entries),
                                     static_cast<int64_t>(hits), std::move(metrics[i]),
                                     Status::Ok(), Decision{}});
  }

  bool any_counted = false;
  for (const Call::Item& item : call->items) any_counted |= !item.limit->shadow;
  // The check round matters only if one descriptor's denial could leave
  // another's count behind (see the file comment).
  const bool peek = call->locally_over || (call->items.size() > 1 && any_counted);
  if (call->items.empty()) return Finish(*call, /*peek=*/false);
  Decide(std::move(call), peek);
}

void RateLimitService::Decide(std::shared_ptr<Call> call, bool peek) {
  // Each answer is written to its own item; the last one continues. The
  // count covers the loop itself, so an answer given inline cannot finish
  // the call while later items are still being issued.
  const int n = static_cast<int>(call->items.size());
  call->pending.store(n + 1, std::memory_order_relaxed);
  auto arrive = [this, call, peek]() {
    if (call->pending.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
    if (!peek) return Finish(*call, false);
    bool blocked = call->locally_over;
    for (const Call::Item& item : call->items) {
      if (!item.status.ok() || item.limit->shadow) continue;
      blocked |= Over(item.decision, item.hits, /*peek=*/true);
    }
    if (blocked) return Finish(*call, true);
    Decide(call, /*peek=*/false);
  };
  for (int i = 0; i < n; ++i) {
    Call::Item& item = call->items[i];
    limiter_->CheckAsync({item.limit->rule, item.key, peek ? 0 : item.hits},
                         [&item, arrive](const Status& s, const Decision& d) {
                           item.status = s;
                           item.decision = d;
                           arrive();
                         });
  }
  arrive();
}

void RateLimitService::Finish(Call& call, bool peek) {
  Response& r = call.response;
  Status error;
  for (Call::Item& item : call.items) {
    DescriptorStatus& st = r.statuses[item.index];
    if (!item.status.ok()) {
      // NOT_FOUND: the rule went away in a reload after this request was
      // matched; the descriptor has no limit any more.
      if (item.status.code() == StatusCode::kNotFound) {
        st = DescriptorStatus{};
        continue;
      }
      if (error.ok()) error = item.status;
      continue;
    }
    const Decision& d = item.decision;
    const bool over = Over(d, item.hits, peek);
    const bool shadow = item.limit->shadow || (!peek && d.shadow_denied);
    st.code = over && !shadow ? Code::kOverLimit : Code::kOk;
    st.fallback = d.fallback;
    st.limit_remaining = over || d.fallback != Fallback::kNone ? 0 : ClampU32(d.remaining);
    if (d.num_limits > 0) {
      const int b = std::clamp(d.binding, 0, d.num_limits - 1);
      if (static_cast<size_t>(b) < item.limit->reported.size()) {
        st.current_limit = item.limit->reported[b];
      }
      // A fallback knows no reset: duration_until_reset stays unset.
      if (d.fallback != Fallback::kNone) continue;
      const LimitStatus& ls = d.limits[b];
      int64_t reset = d.reset_after_ms;
      if (ls.window_end_ms > call.now_ms) reset = std::max(reset, ls.window_end_ms - call.now_ms);
      st.duration_until_reset_ms = std::max<int64_t>(0, reset);
    }
  }
  if (!error.ok()) {
    Done done = std::move(call.done);
    return done(error, Response{});
  }
  r.overall_code = Code::kOk;
  for (const DescriptorStatus& st : r.statuses) {
    if (st.code == Code::kOverLimit) r.overall_code = Code::kOverLimit;
  }
  if (observer_) {
    for (const Call::Item& item : call.items) {
      const bool over = Over(item.decision, item.hits, peek);
      const bool shadow_over = item.status.ok() && over && item.limit->shadow;
      observer_({call.domain, item.metric, r.statuses[item.index].code, shadow_over});
    }
    for (const auto& [i, metric] : call.local_metrics) {
      observer_({call.domain, metric, r.statuses[i].code, false});
    }
  }
  // A fallback decision is named; it knows no figures, so no RateLimit-*
  // headers then (the other descriptors' alone would tell half the story).
  Fallback fallback = Fallback::kNone;
  for (const DescriptorStatus& st : r.statuses) {
    if (st.fallback != Fallback::kNone) fallback = st.fallback;
  }
  if (fallback != Fallback::kNone) {
    r.response_headers.push_back({"floodgate-fallback", std::string(FallbackName(fallback))});
  }
  // The descriptor closest to its limit gives the headers; one over its
  // limit always does (the last such), as in envoyproxy/ratelimit.
  if (call.rules != nullptr && call.rules->options().response_headers &&
      fallback == Fallback::kNone) {
    const DescriptorStatus* pick = nullptr;
    uint32_t least = UINT32_MAX;
    for (const DescriptorStatus& st : r.statuses) {
      if (!st.has_limit) continue;
      if (st.code == Code::kOverLimit) {
        pick = &st;
        least = 0;
      } else if (st.limit_remaining < least) {
        pick = &st;
        least = st.limit_remaining;
      }
    }
    if (pick != nullptr) {
      const int64_t reset_ms = std::max<int64_t>(0, pick->duration_until_reset_ms);
      r.response_headers = {
          {"RateLimit-Limit", std::to_string(pick->current_limit.requests_per_unit)},
          {"RateLimit-Remaining", std::to_string(pick->limit_remaining)},
          {"RateLimit-Reset", std::to_string((reset_ms + 999) / 1000)}};
    }
  }
  Done done = std::move(call.done);
  done(Status::Ok(), std::move(r));
}

}  // namespace floodgate::envoy
