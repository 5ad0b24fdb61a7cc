// LimiterCore: rules and tiers resolved to compiled variants, decided by the
// store picked at Create, one clock read per decision.
//
// Rules can be replaced while requests run (Reload). The rule table is an
// immutable RuleSet published under a mutex with a generation number; each
// thread caches the current RuleSet and re-reads it only when the generation
// changes, so the hot path takes no lock.
#include "service/limiter_core.h"

#include <algorithm>
#include <atomic>
#include <future>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "core/alerts.h"
#include "core/rule_eval.h"
#include "engine/embedded_store.h"
#include "redis/remote_store.h"
#include "redis/url.h"
#include "service/alerts_impl.h"
#include "service/expiring_sets_impl.h"
#include "service/otp_impl.h"

namespace floodgate::service {
namespace {

// Debian's abseil has its own string_view type: convert for heterogeneous lookup.
absl::string_view View(std::string_view s) { return absl::string_view(s.data(), s.size()); }

Status KeyError(std::string_view key) {
  if (key.empty()) return InvalidArgumentError("key must not be empty");
  if (key.size() > kMaxKeyBytes) {
    return InvalidArgumentError("key is " + std::to_string(key.size()) + " bytes; the limit is " +
                                std::to_string(kMaxKeyBytes));
  }
  return Status::Ok();
}

struct Variant {
  core::CompiledRule compiled;
  uint32_t id = 0;  // the store's state: which this rule (tier) uses
  // Where its quota alerts go; null when the rule has none (next to `id`,
  // which every decision reads anyway).
  std::shared_ptr<const AlertTarget> alerts;
  std::string tag;  // what the store said of it (Store::Describe)

  store::VariantRef Ref() const { return store::VariantRef{&compiled, id, tag}; }
};

struct RuleEntry {
  Variant base;
  absl::flat_hash_map<std::string, Variant> tiers;
  std::vector<std::string> tier_names;
  std::vector<uint32_t> ids;  // base's, then each tier's
};

// An immutable snapshot of the rules.
struct RuleSet {
  Config config;
  absl::flat_hash_map<std::string, RuleEntry> rules;
};

// What makes two variants share state: the same layout and meaning.
std::string DefinitionKey(const Rule& rule, const std::string& tier,
                          const std::vector<Limit>& limits) {
  std::string key = rule.name + '\0' + tier + '\0' + std::string(AlgorithmName(rule.algorithm)) +
                    '\0' + rule.timezone + '\0';
  for (const Limit& l : limits) key += l.ToString() + ',';
  key += '\0';
  for (int64_t b : rule.burst) key += std::to_string(b) + ',';
  // Alert thresholds add state words and name their bits: other thresholds,
  // another layout. The webhook and the secret are not part of the state.
  if (rule.alerts.enabled()) {
    key += "\0alerts:";
    for (int t : rule.alerts.thresholds) key += std::to_string(t) + ',';
  }
  return key;
}

std::atomic<uint64_t> next_instance_id{1};

void Bump(std::atomic<int64_t>& counter) { counter.fetch_add(1, std::memory_order_relaxed); }

// The store picked once: the embedded one, or Redis for a redis:// URL.
Result<std::unique_ptr<store::Store>> OpenStore(const Config& config, const Clock& clock) {
  if (config.store == "memory") {
    return std::unique_ptr<store::Store>(
        std::make_unique<engine::EmbeddedStore>(config.engine, clock));
  }
  auto url = redis::ParseStoreUrl(config.store);
  if (!url.ok()) return url.status();
  auto remote = redis::RemoteStore::Create(*url, config.redis, clock);
  if (!remote.ok()) return remote.status();
  return std::unique_ptr<store::Store>(std::move(*remote));
}

}  // namespace

struct LimiterCore::Impl {
  Impl(const Clock& clk) : clock(clk), instance_id(next_instance_id.fetch_add(1)) {}
  // The alerts' shutdown first: it hands pending events to the store's log.
  // Then the store: its shutdown answers requests in flight, whose callbacks
  // use the members below (alerts included, which then drops and counts
  // what they emit).
  ~Impl() {
    if (alerts != nullptr) alerts->Shutdown();
    store.reset();
  }

  // The current RuleSet, from this thread's cache when still current. The
  // cache keeps it alive until this thread's next call, so no reference
  // count is touched on the hot path.
  struct ThreadCache {
    uint64_t instance = 0;
    uint64_t generation = 0;
    std::shared_ptr<const RuleSet> rules;
    // The last rule looked up: a request stream mostly names one rule, and
    // comparing its name is cheaper than hashing it.
    std::string last_rule;
    const RuleEntry* last_entry = nullptr;
  };

  ThreadCache& Cache() const {
    thread_local ThreadCache cache;
    const uint64_t gen = generation.load(std::memory_order_acquire);
    if (cache.instance != instance_id || cache.generation != gen || !cache.rules) {
      std::lock_guard<std::mutex> lock(mu);
      cache.instance = instance_id;
      cache.generation = generation.load(std::memory_order_relaxed);
      cache.rules = current;
      cache.last_entry = nullptr;
    }
    return cache;
  }
  const RuleSet& Rules() const { return *Cache().rules; }

  // The rule named `rule` in the current RuleSet, or null.
  const RuleEntry* FindRule(std::string_view rule) const {
    ThreadCache& cache = Cache();
    if (cache.last_entry != nullptr && cache.last_rule == rule) return cache.last_entry;
    auto it = cache.rules->rules.find(View(rule));
    if (it == cache.rules->rules.end()) return nullptr;
    cache.last_rule.assign(rule);
    cache.last_entry = &it->second;
    return cache.last_entry;
  }

  // Builds a RuleSet from `config`, describing new variants to the store.
  Result<std::shared_ptr<const RuleSet>> Build(const Config& config);
  // Checks rule, tier, key and cost; the variant to decide with.
  Status Resolve(std::string_view rule, std::string_view key, int64_t cost, std::string_view tier,
                 const Variant** variant) const;
  // What follows the store's answer `s` for `subject` of `variant`, now or
  // later: a decision the store could not make becomes the rule's fallback
  // (a full store kept nothing, so no alert fired); what it took to an
  // alert threshold is emitted before the caller sees the decision, so that
  // a caller who sees it can see its events.
  Status Finish(const Variant& variant, std::string_view subject, const Status& s,
                Decision* decision, const core::AlertOutcome* fired) {
    if (!s.ok()) return Fallback(s, variant.compiled, decision);
    if (fired != nullptr && variant.alerts != nullptr && fired->any()) {
      alerts->Emit(variant.compiled, *variant.alerts, subject, *fired, fired->at_ms);
    }
    return s;
  }
  // Starts the alerts' delivery when `rules` has a rule with alerts.
  Status StartAlertsFor(const RuleSet& rules);
  // A decision the store could not make: the rule's fallback (counted).
  // Other errors pass.
  Status Fallback(const Status& s, const core::CompiledRule& rule, Decision* decision) {
    if (s.ok()) return s;
    if (s.code() == StatusCode::kResourceExhausted) {
      Bump(fallback_store_full);
      core::FallbackDecision(rule, rule.on_store_full == OnStoreFull::kAllow, Fallback::kStoreFull,
                             decision);
    } else {
      Bump(fallback_backend_error);
      core::FallbackDecision(rule, rule.on_backend_error == OnBackendError::kAllow,
                             Fallback::kBackendError, decision);
    }
    return Status::Ok();
  }

  const Clock& clock;
  const uint64_t instance_id;
  std::unique_ptr<store::Store> store;
  // Decisions made by a fallback policy, by reason.
  std::atomic<int64_t> fallback_backend_error{0};
  std::atomic<int64_t> fallback_store_full{0};

  mutable std::mutex mu;
  std::shared_ptr<const RuleSet> current;                  // guarded by mu
  std::atomic<uint64_t> generation{1};                     // bumped under mu
  absl::flat_hash_map<std::string, uint32_t> variant_ids;  // definition -> id; guarded by mu
  absl::flat_hash_map<uint32_t, std::string>
      variant_tags;  // id -> Store::Describe's; guarded by mu
  uint32_t num_variants = engine::EmbeddedStore::kFirstRuleId;  // guarded by mu
  std::unique_ptr<ExpiringSets> sets;
  std::unique_ptr<Otp> otp;
  // Never null once created; its threads run only once a rule has alerts.
  std::unique_ptr<AlertsImpl> alerts;
};

Result<std::shared_ptr<const RuleSet>> LimiterCore::Impl::Build(const Config& config) {
  auto set = std::make_shared<RuleSet>();
  set->config = config;
  // Ids are assigned to a scratch copy and committed only if all rules
  // compile; a new id is described to the store once all have.
  auto ids = variant_ids;
  uint32_t next_id = num_variants;
  auto make = [&](const Rule& rule, const std::string& tier,
                  const std::vector<Limit>& limits) -> Result<Variant> {
    auto compiled = core::CompileRule(rule, tier, limits);
    if (!compiled.ok()) return compiled.status();
    Variant v;
    const std::string def = DefinitionKey(rule, tier, limits);
    auto it = ids.find(def);
    if (it != ids.end()) {
      v.id = it->second;
    } else {
      if (next_id >= 65536) return InvalidArgumentError("too many rule definitions (65536)");
      v.id = next_id++;
      ids.emplace(def, v.id);
    }
    v.compiled = std::move(*compiled);
    if (rule.alerts.enabled()) {
      auto target = MakeAlertTarget(rule, v.compiled);
      if (!target.ok()) return target.status();
      v.alerts = std::make_shared<const AlertTarget>(std::move(*target));
    }
    return v;
  };
  for (const Rule& rule : config.rules) {
    if (set->rules.contains(View(rule.name))) {
      return InvalidArgumentError("duplicate rule '" + rule.name + "'");
    }
    RuleEntry entry;
    auto base = make(rule, "", rule.limits);
    if (!base.ok()) return base.status();
    entry.base = std::move(*base);
    entry.ids.push_back(entry.base.id);
    for (const auto& [tier, limits] : rule.tiers) {
      auto v = make(rule, tier, limits);
      if (!v.ok()) return v.status();
      entry.ids.push_back(v->id);
      entry.tiers.emplace(tier, std::move(*v));
      entry.tier_names.push_back(tier);
    }
    set->rules.emplace(rule.name, std::move(entry));
  }
  // The store learns each new id, in order, and says what it needs of it
  // (the tag); a variant known from before keeps its tag.
  std::vector<Variant*> all;
  for (auto& [name, entry] : set->rules) {
    all.push_back(&entry.base);
    for (auto& [tier, v] : entry.tiers) all.push_back(&v);
  }
  std::sort(all.begin(), all.end(),
            [](const Variant* a, const Variant* b) { return a->id < b->id; });
  auto tags = variant_tags;
  for (Variant* v : all) {
    auto it = tags.find(v->id);
    if (it == tags.end()) {
      auto tag = store->Describe(v->compiled, v->id);
      if (!tag.ok()) return tag.status();
      it = tags.emplace(v->id, std::move(*tag)).first;
    }
    v->tag = it->second;
  }
  variant_tags = std::move(tags);
  variant_ids = std::move(ids);
  num_variants = next_id;
  return std::shared_ptr<const RuleSet>(std::move(set));
}

Status LimiterCore::Impl::Resolve(std::string_view rule, std::string_view key, int64_t cost,
                                  std::string_view tier, const Variant** variant) const {
  const RuleEntry* entry = FindRule(rule);
  if (entry == nullptr) return NotFoundError("unknown rule '" + std::string(rule) + "'");
  *variant = &entry->base;
  if (!tier.empty()) {
    auto t = entry->tiers.find(View(tier));
    if (t == entry->tiers.end()) {
      return NotFoundError("rule '" + std::string(rule) + "' has no tier '" + std::string(tier) +
                           "'");
    }
    *variant = &t->second;
  }
  if (Status s = KeyError(key); !s.ok()) return s;
  if (cost < 0 || cost > kMaxLimitCount) {
    return InvalidArgumentError("cost " + std::to_string(cost) + " is out of range [0, " +
                                std::to_string(kMaxLimitCount) + "]");
  }
  return Status::Ok();
}

Status LimiterCore::Impl::StartAlertsFor(const RuleSet& rules) {
  for (const auto& [name, entry] : rules.rules) {
    if (entry.base.alerts != nullptr) return alerts->Start();
  }
  return Status::Ok();
}

Result<std::unique_ptr<LimiterCore>> LimiterCore::Create(const Config& config, const Clock& clock) {
  auto impl = std::make_unique<Impl>(clock);
  auto store = OpenStore(config, clock);
  if (!store.ok()) return store.status();
  impl->store = std::move(*store);
  std::shared_ptr<const RuleSet> rules;
  {
    std::lock_guard<std::mutex> lock(impl->mu);
    auto built = impl->Build(config);
    if (!built.ok()) return built.status();
    rules = std::move(*built);
    impl->current = rules;
  }
  impl->sets = MakeExpiringSets(config.sets, *impl->store);
  auto otp = MakeOtp(config.otp, *impl->store);
  if (!otp.ok()) return otp.status();
  impl->otp = std::move(*otp);
  impl->alerts = std::make_unique<AlertsImpl>(config.alert_delivery, *impl->store);
  if (Status s = impl->StartAlertsFor(*rules); !s.ok()) return s;
  return std::unique_ptr<LimiterCore>(new LimiterCore(std::move(impl)));
}

LimiterCore::LimiterCore(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
LimiterCore::~LimiterCore() = default;

Status LimiterCore::Reload(const Config& config) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  auto built = impl_->Build(config);
  if (!built.ok()) return built.status();
  // Alerts added by this config need their delivery running before any
  // decision can emit.
  if (Status s = impl_->StartAlertsFor(**built); !s.ok()) return s;
  impl_->current = std::move(*built);
  impl_->generation.fetch_add(1, std::memory_order_release);
  return Status::Ok();
}

store::Answer LimiterCore::Check(const CheckArgs& args, Decision* decision, Status* status,
                                 store::Later<Decision> later, store::Batch* batch) {
  Impl& impl = *impl_;
  const Variant* variant = nullptr;
  if (Status s = impl.Resolve(args.rule, args.key, args.cost, args.tier, &variant); !s.ok()) {
    *status = std::move(s);
    return store::Answer::kNow;
  }
  store::CheckOp op{variant->Ref(), args.key, args.cost, args.at_ms, args.read_ms, nullptr};
  // A rule with alerts: the store decides the alert bits with the count.
  core::AlertOutcome outcome;
  if (variant->alerts != nullptr) [[unlikely]] {
    op.alerts = &outcome;
  }
  const store::Answer answer = impl.store->Check(
      op, decision, status,
      [&]() -> store::CheckDone {
        // The variant lives in this thread's rule set: the callback keeps
        // that alive until the answer.
        return [&impl, rules = impl.Cache().rules, variant,
                subject = variant->alerts != nullptr ? std::string(args.key) : std::string(),
                done = later()](const Status& s, const Decision& d,
                                const core::AlertOutcome* fired) mutable {
          Decision answered = d;
          const Status st = impl.Finish(*variant, subject, s, &answered, fired);
          done(st, answered);
        };
      },
      batch);
  if (answer == store::Answer::kNow && (!status->ok() || op.alerts != nullptr)) [[unlikely]] {
    *status = impl.Finish(*variant, args.key, *status, decision, op.alerts);
  }
  return answer;
}

namespace {

// Waits for an answer that comes later: the blocking forms over any store.
// Refuses on a thread that would have to answer itself.
template <typename... T>
class Waiter {
 public:
  explicit Waiter(const store::Store& store) : store_(store) {}
  store::Done<T...> Callback() {
    refusal_ = store_.BlockingAllowed();
    if (!refusal_.ok()) return [](const Status&, const T&...) {};
    promise_.emplace();
    return [p = &*promise_](const Status& s, const T&... value) {
      p->set_value({s, std::tuple<T...>(value...)});
    };
  }
  // The answer; `now` when there was no later one.
  Status Wait(T*... out) {
    if (!refusal_.ok()) return refusal_;
    auto [status, values] = promise_->get_future().get();
    std::tie(*out...) = values;
    return status;
  }

 private:
  const store::Store& store_;
  Status refusal_;
  std::optional<std::promise<std::pair<Status, std::tuple<T...>>>> promise_;
};

}  // namespace

void LimiterCore::CheckAsync(const CheckArgs& args, CheckCallback done, store::Batch* batch) {
  Decision decision;
  Status status;
  if (Check(
          args, &decision, &status, [&]() -> store::Done<Decision> { return std::move(done); },
          batch) == store::Answer::kNow) {
    done(status, status.ok() ? decision : Decision{});
  }
}

Status LimiterCore::CheckAndWait(const CheckArgs& args, Decision* decision) {
  Status status;
  Waiter<Decision> waiter(*impl_->store);
  if (Check(args, decision, &status, [&] { return waiter.Callback(); }) == store::Answer::kNow) {
    return status;
  }
  return waiter.Wait(decision);
}

Result<Decision> LimiterCore::CheckAndWait(std::string_view rule, std::string_view key,
                                           int64_t cost, std::string_view tier) {
  Decision decision;
  if (Status s = CheckAndWait({rule, key, cost, tier}, &decision); !s.ok()) return s;
  return decision;
}

Result<ThrottleResult> LimiterCore::ThrottleAndWait(const store::ThrottleOp& op) {
  Status status;
  ThrottleResult result;
  Waiter<ThrottleResult> waiter(*impl_->store);
  if (Throttle(op, &result, &status, [&] { return waiter.Callback(); }) == store::Answer::kLater) {
    status = waiter.Wait(&result);
  }
  if (!status.ok()) return status;
  return result;
}

Status LimiterCore::ResetAndWait(std::string_view rule, std::string_view key) {
  if (Status s = impl_->store->BlockingAllowed(); !s.ok()) return s;
  std::promise<Status> done;
  Reset(rule, key, [&done](const Status& s) { done.set_value(s); });
  return done.get_future().get();
}

std::unique_ptr<store::Batch> LimiterCore::NewBatch(int max_calls_in_flight) {
  return impl_->store->NewBatch(max_calls_in_flight);
}

store::Answer LimiterCore::Throttle(const store::ThrottleOp& op, ThrottleResult* result,
                                    Status* status, store::Later<ThrottleResult> later) {
  if (Status s = KeyError(op.key); !s.ok()) {
    *status = std::move(s);
    return store::Answer::kNow;
  }
  // No rule, so no on_backend_error: a failed backend is an error reply.
  const store::Answer answer = impl_->store->Throttle(op, result, status, later);
  if (answer == store::Answer::kNow && status->code() == StatusCode::kResourceExhausted) {
    // No rule, so no on_store_full either: a full store denies, as a rule
    // does by default, with the figures it cannot know left unknown.
    Bump(impl_->fallback_store_full);
    result->limited = true;
    result->remaining = -1;
    result->retry_after_s = core::kFallbackRetryAfterMs / 1000;
    result->reset_after_s = -1;
    result->fallback = Fallback::kStoreFull;
    *status = Status::Ok();
  }
  return answer;
}

void LimiterCore::Reset(std::string_view rule, std::string_view key, store::Done<> done) {
  const RuleSet& rules = impl_->Rules();
  auto it = rules.rules.find(View(rule));
  if (it == rules.rules.end()) {
    return done(NotFoundError("unknown rule '" + std::string(rule) + "'"));
  }
  if (Status s = KeyError(key); !s.ok()) return done(s);
  const RuleEntry& entry = it->second;
  Status status;
  const store::ResetOp op{rule, entry.tier_names, entry.ids, key};
  if (impl_->store->Reset(op, &status, [&] { return std::move(done); }) == store::Answer::kNow) {
    done(status);
  }
}

Result<std::unique_ptr<LoopDriver>> LimiterCore::NewLoopDriver() {
  return impl_->store->NewLoopDriver();
}

Status LimiterCore::BlockingAllowed() const { return impl_->store->BlockingAllowed(); }

void LimiterCore::Prefetch(std::string_view rule, std::string_view key, std::string_view tier) {
  const RuleSet& rules = impl_->Rules();
  auto it = rules.rules.find(View(rule));
  if (it == rules.rules.end()) return;
  uint32_t id = it->second.base.id;
  if (!tier.empty()) {
    auto t = it->second.tiers.find(View(tier));
    if (t == it->second.tiers.end()) return;
    id = t->second.id;
  }
  impl_->store->Prefetch(id, key);
}

void LimiterCore::PrefetchThrottle(std::string_view key) { impl_->store->PrefetchThrottle(key); }

int64_t LimiterCore::NowMs() const { return impl_->clock.NowMs(); }

int64_t LimiterCore::SweepExpired() { return impl_->store->SweepExpired(impl_->clock.NowMs()); }

Limiter::Stats LimiterCore::GetStats() const {
  const store::Store::Usage u = impl_->store->GetUsage();
  Limiter::Stats stats{u.entries, u.rejected_full, u.expired_freed};
  stats.store_bytes = u.bytes;
  stats.fallback_store_full = impl_->fallback_store_full.load(std::memory_order_relaxed);
  stats.fallback_backend_error = impl_->fallback_backend_error.load(std::memory_order_relaxed);
  stats.backend_errors = u.backend_errors;
  stats.local_cache_denials = u.local_cache_denials;
  stats.local_cache_entries = u.local_cache_entries;
  stats.open_circuits = u.open_circuits;
  stats.backend_timeouts = u.backend_timeouts;
  stats.wrong_type = u.wrong_type;
  return stats;
}

Status LimiterCore::StoreHealth() const { return impl_->store->Health(); }

std::vector<store::Metric> LimiterCore::StoreMetrics() const { return impl_->store->Metrics(); }

Config LimiterCore::config() const { return impl_->Rules().config; }

ExpiringSets& LimiterCore::sets() { return *impl_->sets; }

Otp& LimiterCore::otp() { return *impl_->otp; }

Alerts& LimiterCore::alerts() { return *impl_->alerts; }

}  // namespace floodgate::service
