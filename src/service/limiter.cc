// Limiter: rules and tiers resolved to compiled variants, state in the
// embedded MemoryStore, one clock read per decision.
//
// Rules can be replaced while requests run (Reload). The rule table is an
// immutable RuleSet published under a mutex with a generation number; each
// thread caches the current RuleSet and re-reads it only when the generation
// changes, so the hot path takes no lock.
#include "floodgate/limiter.h"

#include <algorithm>
#include <atomic>
#include <future>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "core/alerts.h"
#include "core/gcra.h"
#include "core/rule_eval.h"
#include "engine/memory_store.h"
#include "engine/otp_store.h"
#include "engine/set_store.h"
#include "redis/redis_store.h"
#include "redis/script_call.h"
#include "service/alerts_impl.h"
#include "service/expiring_sets_impl.h"
#include "service/local_deny_cache.h"
#include "service/otp_impl.h"

namespace floodgate {
namespace {

// Debian's abseil has its own string_view type: convert for heterogeneous lookup.
absl::string_view View(std::string_view s) { return absl::string_view(s.data(), s.size()); }

// The variant of this thread's last embedded decision, whatever the
// Limiter: the next decision most likely has the same (see Decide). A plain
// int, so reading it costs no thread_local initialisation check.
thread_local uint32_t t_last_variant_id = 0;

Status KeyError(std::string_view key) {
  if (key.empty()) return InvalidArgumentError("key must not be empty");
  if (key.size() > kMaxKeyBytes) {
    return InvalidArgumentError("key is " + std::to_string(key.size()) + " bytes; the limit is " +
                                std::to_string(kMaxKeyBytes));
  }
  return Status::Ok();
}

void ReleaseSlidingLog(int64_t* state) { core::ReleaseRuleState(Algorithm::kSlidingLog, state); }

// CL.THROTTLE's state (one TAT per key) lives in this variant.
constexpr uint32_t kThrottleVariant = 0;
// The expiring sets' states, and the OTP states of subjects.
constexpr uint32_t kSetVariant = 1;
constexpr uint32_t kOtpVariant = 2;
// Rules' variants are numbered from here.
constexpr uint32_t kFirstRuleVariant = 3;

struct Variant {
  core::CompiledRule compiled;
  uint32_t id = 0;  // the store's variant: which state this rule (tier) uses
  // Where its quota alerts go; null when the rule has none (next to `id`,
  // which every decision reads anyway).
  std::shared_ptr<const service::AlertTarget> alerts;
  std::string fingerprint;  // remote stores: redis::Fingerprint(compiled)
};

struct RuleEntry {
  Variant base;
  absl::flat_hash_map<std::string, Variant> tiers;
  std::vector<std::string> tier_names;
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

// The answer when the store failed: the rule's on_backend_error (usage is
// unknown; see core::FallbackDecision).
Decision BackendErrorDecision(const core::CompiledRule& rule) {
  Decision d;
  core::FallbackDecision(rule, rule.on_backend_error == OnBackendError::kAllow,
                         Fallback::kBackendError, &d);
  return d;
}

redis::ClientOptions RedisOptions(const redis::StoreUrl& url, const RedisConfig& c) {
  redis::ClientOptions o;
  o.url = url;
  o.timeout_ms = c.timeout_ms;
  o.connect_timeout_ms = c.connect_timeout_ms;
  o.connections_per_node = c.connections_per_node;
  o.io_threads = c.io_threads;
  return o;
}

void Bump(std::atomic<int64_t>& counter) { counter.fetch_add(1, std::memory_order_relaxed); }

// A remote decision waiting in an AsyncBatch.
struct PendingCheck {
  const RuleSet* rules;    // holds `variant`; kept alive by the batch's rule_sets
  const Variant* variant;  // the rule or tier to decide with
  std::optional<int64_t> at_ms;
  std::string key;  // redis::StateKey of the subject
  int64_t cost;
  int64_t sent_ms;  // see QueueRemote
  // When the answer is due (redis::MonotonicNowNs's clock): the store's
  // timeout from when the request came, however long it waits in a batch.
  int64_t deadline_ns;
  Limiter::CheckCallback done;
  std::string subject;  // variants with alerts only: the events name it
};

}  // namespace

struct Limiter::AsyncBatch::Items {
  std::vector<PendingCheck> checks;
  int max_in_flight = 0;        // 0: no bound
  int64_t timeout_from_ns = 0;  // see CountTimeoutFrom; 0: from each CheckAsync
  // Calls sent and not answered; decremented on the store's I/O thread.
  std::shared_ptr<std::atomic<int>> in_flight = std::make_shared<std::atomic<int>>(0);
  // The rule sets the checks' variants belong to (usually one).
  std::vector<std::shared_ptr<const RuleSet>> rule_sets;
  std::vector<char> taken;  // scratch for SendChecks
};

struct Limiter::Impl {
  Impl(const Clock& clk) : clock(clk), instance_id(next_instance_id.fetch_add(1)) {}
  // The alerts' shutdown first: it hands pending events to the Redis stream
  // through the client. Then the client: its shutdown answers requests in
  // flight, whose callbacks use the members below (alerts included, which
  // then drops and counts what they emit).
  ~Impl() {
    if (alerts != nullptr) alerts->Shutdown();
    redis.reset();
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

  // Check and CheckAt: the clock is read after the prefetch unless `at_ms`.
  Status Decide(std::string_view rule, std::string_view key, int64_t cost, std::string_view tier,
                const int64_t* at_ms, Decision* decision);
  // Throttle and ThrottleAt, likewise.
  Result<ThrottleResult> Throttle(std::string_view key, int64_t max_burst, int64_t count,
                                  int64_t period_s, int64_t quantity, const int64_t* at_ms);

  // Builds a RuleSet from `config`, registering new variants with the store
  // (or collecting their layouts before the store exists).
  Result<std::shared_ptr<const RuleSet>> Build(const Config& config,
                                               std::vector<engine::VariantLayout>* layouts);

  // The remote path of CheckAsync, once the request is known valid: answers
  // from the local over-limit cache, or queues the decision in `items`.
  void QueueRemote(const Variant& variant, std::string_view key, int64_t cost,
                   std::optional<int64_t> at_ms, CheckCallback done, AsyncBatch::Items& items);
  // Sends the decisions queued in `items` and empties it.
  void SendChecks(AsyncBatch::Items& items);
  // A blocking call on the remote store waits for an answer that only this
  // thread would deliver when it runs the store's I/O (a loop driver's, a
  // callback on an I/O thread): refused.
  Status BlockingAllowed() const {
    if (!redis->client().RunsIoHere()) return Status::Ok();
    return InternalError(
        "a blocking call on the Redis store from a thread that runs its I/O would wait for "
        "itself; use the *Async forms");
  }
  // The embedded decision of a variant with alerts: the alert bits are
  // decided under the same lock as the count, the events emitted after.
  Status DecideWithAlerts(const Variant& variant, const engine::MemoryStore::PreparedKey& key,
                          int64_t now_ms, int64_t cost, Decision* decision);
  // The embedded store had no room for a new subject of `rule`: its
  // on_store_full decides (counted). Other errors pass.
  Status StoreFull(const Status& s, const core::CompiledRule& rule, Decision* decision) {
    if (s.code() != StatusCode::kResourceExhausted) return s;
    Bump(fallback_store_full);
    core::FallbackDecision(rule, rule.on_store_full == OnStoreFull::kAllow, Fallback::kStoreFull,
                           decision);
    return Status::Ok();
  }
  // Starts the alerts' delivery when `rules` has a rule with alerts.
  Status StartAlertsFor(const RuleSet& rules);
  // Checks rule, tier, key and cost; the variant to decide with.
  Status Resolve(std::string_view rule, std::string_view key, int64_t cost, std::string_view tier,
                 const Variant** variant) const;

  const Clock& clock;
  const uint64_t instance_id;
  std::unique_ptr<engine::MemoryStore> store;
  // A remote store (store: redis…), or null for the embedded one.
  std::unique_ptr<redis::RedisStore> redis;
  std::unique_ptr<service::LocalDenyCache> deny_cache;  // null when disabled
  std::atomic<int64_t> backend_errors{0};
  // Decisions whose deadline passed while a batch held them (not sent).
  std::atomic<int64_t> held_timeouts{0};
  std::atomic<int64_t> local_cache_denials{0};
  // Decisions made by a fallback policy, by reason.
  std::atomic<int64_t> fallback_backend_error{0};
  std::atomic<int64_t> fallback_store_full{0};
  int64_t timeout_ns = 0;  // the remote store's request timeout

  mutable std::mutex mu;
  std::shared_ptr<const RuleSet> current;                  // guarded by mu
  std::atomic<uint64_t> generation{1};                     // bumped under mu
  absl::flat_hash_map<std::string, uint32_t> variant_ids;  // definition -> id; guarded by mu
  uint32_t num_variants = kFirstRuleVariant;               // guarded by mu; see kThrottleVariant
  bool remote_build = false;  // Create() for a remote store, before `redis` exists
  std::unique_ptr<ExpiringSets> sets;
  std::unique_ptr<Otp> otp;
  // Never null once created; its threads run only once a rule has alerts.
  std::unique_ptr<service::AlertsImpl> alerts;
};

Result<std::shared_ptr<const RuleSet>> Limiter::Impl::Build(
    const Config& config, std::vector<engine::VariantLayout>* layouts) {
  auto set = std::make_shared<RuleSet>();
  set->config = config;
  // Ids are assigned to a scratch copy and committed only if all rules compile.
  auto ids = variant_ids;
  uint32_t next_id = num_variants;
  std::vector<std::pair<uint32_t, engine::VariantLayout>> added;
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
      engine::VariantLayout layout;
      layout.state_words = compiled->state_words;
      layout.ages_itself = true;  // every algorithm's state does (see VariantLayout)
      if (compiled->algorithm == Algorithm::kSlidingLog) layout.release = &ReleaseSlidingLog;
      added.emplace_back(v.id, layout);
    }
    v.compiled = std::move(*compiled);
    if (rule.alerts.enabled()) {
      auto target = service::MakeAlertTarget(rule, v.compiled);
      if (!target.ok()) return target.status();
      v.alerts = std::make_shared<const service::AlertTarget>(std::move(*target));
    }
    if (redis != nullptr || remote_build) v.fingerprint = redis::Fingerprint(v.compiled);
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
    for (const auto& [tier, limits] : rule.tiers) {
      auto v = make(rule, tier, limits);
      if (!v.ok()) return v.status();
      entry.tiers.emplace(tier, std::move(*v));
      entry.tier_names.push_back(tier);
    }
    set->rules.emplace(rule.name, std::move(entry));
  }
  for (auto& [id, layout] : added) {
    if (layouts != nullptr) {
      layouts->push_back(layout);
    } else {
      auto added_id = store->AddVariant(layout);
      if (!added_id.ok()) return added_id.status();
      if (*added_id != id) return InternalError("variant ids out of step with the store");
    }
  }
  variant_ids = std::move(ids);
  num_variants = next_id;
  return std::shared_ptr<const RuleSet>(std::move(set));
}

Result<std::unique_ptr<Limiter>> Limiter::Create(const Config& config, const Clock& clock) {
  auto impl = std::make_unique<Impl>(clock);
  std::optional<redis::StoreUrl> url;
  if (config.store != "memory") {
    auto parsed = redis::ParseStoreUrl(config.store);
    if (!parsed.ok()) return parsed.status();
    url = std::move(*parsed);
    impl->remote_build = true;
  }
  std::vector<engine::VariantLayout> layouts(kFirstRuleVariant);
  layouts[kThrottleVariant].state_words = 1;  // a TAT
  layouts[kThrottleVariant].ages_itself = true;
  layouts[kSetVariant] = engine::SetStore::Layout();
  layouts[kOtpVariant] = engine::OtpStore::Layout();
  std::shared_ptr<const RuleSet> rules;
  {
    std::lock_guard<std::mutex> lock(impl->mu);
    auto built = impl->Build(config, &layouts);
    if (!built.ok()) return built.status();
    rules = std::move(*built);
    impl->current = rules;
  }
  impl->store = std::make_unique<engine::MemoryStore>(config.engine, std::move(layouts), clock);
  if (url.has_value()) {
    auto store = redis::RedisStore::Create(RedisOptions(*url, config.redis));
    if (!store.ok()) return store.status();
    impl->redis = std::move(*store);
    impl->timeout_ns = config.redis.timeout_ms * 1'000'000;
    if (config.redis.local_cache) {
      impl->deny_cache = std::make_unique<service::LocalDenyCache>(
          static_cast<size_t>(config.redis.local_cache_max_entries));
    }
  }
  redis::Client* client = impl->redis != nullptr ? &impl->redis->client() : nullptr;
  impl->sets =
      service::MakeExpiringSets(config.sets, clock, impl->store.get(), kSetVariant, client);
  auto otp = service::MakeOtp(config.otp, clock, impl->store.get(), kOtpVariant, client);
  if (!otp.ok()) return otp.status();
  impl->otp = std::move(*otp);
  impl->alerts = std::make_unique<service::AlertsImpl>(config.alert_delivery, client);
  if (Status s = impl->StartAlertsFor(*rules); !s.ok()) return s;
  return std::unique_ptr<Limiter>(new Limiter(std::move(impl)));
}

Limiter::Limiter(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Limiter::~Limiter() = default;

Status Limiter::Reload(const Config& config) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  auto built = impl_->Build(config, nullptr);
  if (!built.ok()) return built.status();
  // Alerts added by this config need their delivery running before any
  // decision can emit.
  if (Status s = impl_->StartAlertsFor(**built); !s.ok()) return s;
  impl_->current = std::move(*built);
  impl_->generation.fetch_add(1, std::memory_order_release);
  return Status::Ok();
}

Result<Decision> Limiter::Check(std::string_view rule, std::string_view key, int64_t cost,
                                std::string_view tier) {
  Decision decision;
  if (Status s = Check(rule, key, cost, tier, &decision); !s.ok()) return s;
  return decision;
}

Status Limiter::Check(std::string_view rule, std::string_view key, int64_t cost,
                      std::string_view tier, Decision* decision) {
  return impl_->Decide(rule, key, cost, tier, /*at_ms=*/nullptr, decision);
}

Status Limiter::CheckAt(int64_t now_ms, std::string_view rule, std::string_view key, int64_t cost,
                        std::string_view tier, Decision* decision) {
  return impl_->Decide(rule, key, cost, tier, &now_ms, decision);
}

void Limiter::CheckAsync(std::string_view rule, std::string_view key, int64_t cost,
                         std::string_view tier, CheckCallback done) {
  CheckAsync(rule, key, cost, tier, std::move(done), nullptr);
}

void Limiter::CheckAsync(std::string_view rule, std::string_view key, int64_t cost,
                         std::string_view tier, CheckCallback done, AsyncBatch* batch) {
  if (impl_->redis != nullptr) {
    const Variant* variant = nullptr;
    if (Status s = impl_->Resolve(rule, key, cost, tier, &variant); !s.ok()) {
      return done(s, Decision{});
    }
    if (batch != nullptr) {
      impl_->QueueRemote(*variant, key, cost, std::nullopt, std::move(done), *batch->items_);
    } else {
      AsyncBatch::Items items;
      impl_->QueueRemote(*variant, key, cost, std::nullopt, std::move(done), items);
      impl_->SendChecks(items);
    }
    return;
  }
  Decision decision;
  const Status s = impl_->Decide(rule, key, cost, tier, /*at_ms=*/nullptr, &decision);
  done(s, s.ok() ? decision : Decision{});
}

bool Limiter::remote() const { return impl_->redis != nullptr; }

Result<std::unique_ptr<LoopDriver>> Limiter::NewLoopDriver() {
  if (impl_->redis == nullptr) return std::unique_ptr<LoopDriver>();
  return impl_->redis->client().NewLoopDriver();
}

Limiter::AsyncBatch::AsyncBatch(Limiter& limiter, int max_calls_in_flight)
    : limiter_(limiter), items_(std::make_unique<Items>()) {
  items_->max_in_flight = max_calls_in_flight;
}

Limiter::AsyncBatch::~AsyncBatch() {
  items_->max_in_flight = 0;  // nothing may be left behind
  Flush();
}

void Limiter::AsyncBatch::Flush() {
  items_->timeout_from_ns = 0;
  if (items_->checks.empty()) return;
  // Held while the calls in flight are at the bound, unless there is a
  // full call's worth already (see the class comment).
  if (items_->max_in_flight > 0 &&
      items_->checks.size() < redis::RedisStore::kMaxDecisionsPerCall &&
      items_->in_flight->load(std::memory_order_acquire) >= items_->max_in_flight) {
    return;
  }
  limiter_.impl_->SendChecks(*items_);
}

void Limiter::AsyncBatch::FlushAll() {
  items_->timeout_from_ns = 0;
  if (items_->checks.empty()) return;
  limiter_.impl_->SendChecks(*items_);
}

bool Limiter::AsyncBatch::empty() const { return items_->checks.empty(); }

size_t Limiter::AsyncBatch::size() const { return items_->checks.size(); }

void Limiter::AsyncBatch::CountTimeoutFrom(int64_t monotonic_ns) {
  items_->timeout_from_ns = monotonic_ns;
}

Status Limiter::Impl::Resolve(std::string_view rule, std::string_view key, int64_t cost,
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

// Waits for an asynchronous answer: the blocking API over a remote store.
template <typename T>
class Waiter {
 public:
  std::function<void(const Status&, const T&)> Callback() {
    return [this](const Status& s, const T& value) { promise_.set_value({s, value}); };
  }
  std::pair<Status, T> Wait() { return promise_.get_future().get(); }

 private:
  std::promise<std::pair<Status, T>> promise_;
};

Status Limiter::Impl::Decide(std::string_view rule, std::string_view key, int64_t cost,
                             std::string_view tier, const int64_t* at_ms, Decision* decision) {
  // With a million subjects the entry's table slot is a cache miss, the
  // largest cost of a decision. Hash the key with the variant this thread
  // used last and start that miss now, so that it overlaps resolving the
  // rule, validating, reading the clock and locking; a wrong guess costs
  // one wasted prefetch and a second hash. Not for keys Resolve will refuse
  // as too long: hashing those is work for nothing.
  engine::MemoryStore::PreparedKey guessed{~uint32_t{0}, key, 0};
  if (redis == nullptr && key.size() <= kMaxKeyBytes) {
    guessed = store->Prepare(t_last_variant_id, key);
  }
  const Variant* variant = nullptr;
  if (Status s = Resolve(rule, key, cost, tier, &variant); !s.ok()) return s;
  if (redis != nullptr) {
    if (Status s = BlockingAllowed(); !s.ok()) return s;
    Waiter<Decision> waiter;
    AsyncBatch::Items items;
    QueueRemote(*variant, key, cost,
                at_ms != nullptr ? std::optional<int64_t>(*at_ms) : std::nullopt, waiter.Callback(),
                items);
    SendChecks(items);
    auto [status, d] = waiter.Wait();
    *decision = d;
    return status;
  }
  const core::CompiledRule& compiled = variant->compiled;
  engine::MemoryStore::PreparedKey prepared = guessed;
  if (variant->id != guessed.variant) {
    t_last_variant_id = variant->id;
    prepared = store->Prepare(variant->id, key);
  }
  const int64_t now_ms = at_ms != nullptr ? *at_ms : clock.NowMs();
  if (variant->alerts != nullptr)
    return DecideWithAlerts(*variant, prepared, now_ms, cost, decision);
  const Status s = store->Update(prepared, now_ms, [&](int64_t* state, bool /*fresh*/) {
    return core::EvaluateRule(compiled, state, now_ms, cost, decision);
  });
  if (!s.ok()) [[unlikely]] {
    return StoreFull(s, compiled, decision);
  }
  return s;
}

Status Limiter::Impl::DecideWithAlerts(const Variant& variant,
                                       const engine::MemoryStore::PreparedKey& key, int64_t now_ms,
                                       int64_t cost, Decision* decision) {
  core::AlertOutcome outcome;
  const Status s = store->Update(key, now_ms, [&](int64_t* state, bool /*fresh*/) {
    return core::EvaluateRuleWithAlerts(variant.compiled, state, now_ms, cost, decision, &outcome);
  });
  // Outside the shard lock: building and queueing the events waits for nothing.
  // A full store kept nothing: no alert fired.
  if (!s.ok()) return StoreFull(s, variant.compiled, decision);
  if (outcome.any()) alerts->Emit(variant.compiled, *variant.alerts, key.key, outcome, now_ms);
  return s;
}

Status Limiter::Impl::StartAlertsFor(const RuleSet& rules) {
  for (const auto& [name, entry] : rules.rules) {
    if (entry.base.alerts != nullptr) return alerts->Start();
  }
  return Status::Ok();
}

void Limiter::Impl::QueueRemote(const Variant& variant, std::string_view key, int64_t cost,
                                std::optional<int64_t> at_ms, CheckCallback done,
                                AsyncBatch::Items& items) {
  // The instant the request leaves: a denial until T is remembered from
  // here, so a slow reply can only shorten the local denial.
  const int64_t sent_ms = at_ms.has_value() ? *at_ms : clock.NowMs();
  // The answer is due one timeout after the request came (here, or when the
  // loop began a wait that left it unread), whether it goes to Redis at once
  // or waits in a batch for a call in flight.
  const int64_t deadline_ns =
      (items.timeout_from_ns > 0 ? items.timeout_from_ns : redis::MonotonicNowNs()) + timeout_ns;
  std::string state_key = redis::StateKey(variant.compiled.name, variant.compiled.tier, key);
  if (deny_cache != nullptr) {
    Decision d;
    if (deny_cache->Lookup(state_key, cost, sent_ms, &d)) {
      Bump(local_cache_denials);
      done(Status::Ok(), d);
      return;
    }
  }
  // The variant belongs to this thread's current rule set (Resolve found it
  // there): the batch keeps that set alive until the answers.
  const std::shared_ptr<const RuleSet>& rules = Cache().rules;
  if (items.rule_sets.empty() || items.rule_sets.back() != rules) items.rule_sets.push_back(rules);
  items.checks.push_back(
      PendingCheck{rules.get(), &variant, at_ms, std::move(state_key), cost, sent_ms, deadline_ns,
                   std::move(done), variant.alerts != nullptr ? std::string(key) : std::string()});
}

void Limiter::Impl::SendChecks(AsyncBatch::Items& items) {
  std::vector<PendingCheck>& checks = items.checks;
  if (checks.empty()) return;
  const size_t per_call = redis->batches() ? redis::RedisStore::kMaxDecisionsPerCall : 1;
  redis::Batch out;
  items.taken.assign(checks.size(), 0);
  // Due already (held back too long: a loop that could not flush in time):
  // answered by on_backend_error now, not sent.
  const int64_t now_ns = redis::MonotonicNowNs();
  for (size_t i = 0; i < checks.size(); ++i) {
    if (checks[i].deadline_ns > now_ns) continue;
    items.taken[i] = 1;
    Bump(backend_errors);
    Bump(held_timeouts);
    checks[i].done(Status::Ok(), BackendErrorDecision(checks[i].variant->compiled));
  }
  // What one script call's answers need.
  struct Entry {
    int64_t cost;
    int64_t sent_ms;
    CheckCallback done;
    std::string subject;  // variants with alerts only
  };
  for (size_t first = 0; first < checks.size(); ++first) {
    if (items.taken[first]) continue;
    const PendingCheck& head = checks[first];
    // One call: this check and the next ones of the same variant and
    // instant, in arrival order (a subject named twice is decided in order).
    std::vector<std::string> keys;
    std::vector<int64_t> costs;
    std::vector<Entry> entries;
    // The call is due when its earliest decision is.
    int64_t deadline_ns = head.deadline_ns;
    for (size_t i = first; i < checks.size() && keys.size() < per_call; ++i) {
      PendingCheck& c = checks[i];
      if (items.taken[i] || c.variant != head.variant || c.at_ms != head.at_ms) continue;
      items.taken[i] = 1;
      deadline_ns = std::min(deadline_ns, c.deadline_ns);
      keys.push_back(std::move(c.key));
      costs.push_back(c.cost);
      entries.push_back(Entry{c.cost, c.sent_ms, std::move(c.done), std::move(c.subject)});
    }
    std::shared_ptr<const RuleSet> rules;
    for (const auto& set : items.rule_sets) {
      if (set.get() == head.rules) rules = set;
    }
    const core::CompiledRule* compiled = &head.variant->compiled;
    const service::AlertTarget* alert_target = head.variant->alerts.get();
    // Moving a vector keeps its elements in place: the spans stay valid
    // while the callback below takes the vectors.
    const std::span<const std::string> key_span(keys);
    const std::span<const int64_t> cost_span(costs);
    items.in_flight->fetch_add(1, std::memory_order_relaxed);
    redis->CheckMany(
        *compiled, head.variant->fingerprint, key_span, cost_span, head.at_ms, head.sent_ms,
        [this, rules = std::move(rules), compiled, alert_target, keys = std::move(keys),
         entries = std::move(entries),
         in_flight = items.in_flight](size_t i, const Status& s, const Decision& d,
                                      const core::AlertOutcome* alert_outcome) mutable {
          // Before any answer: the first one may wake the batch's owner,
          // whose next Flush must see the call done.
          if (i == 0) in_flight->fetch_sub(1, std::memory_order_release);
          Entry& e = entries[i];
          if (!s.ok()) {
            // A key of the wrong type fails its decision alone: made
            // visible (counted, logged once a minute), then answered as
            // any other failure.
            redis->client().NoteWrongType(s.message(), std::span<const std::string>(&keys[i], 1));
            Bump(backend_errors);
            Bump(fallback_backend_error);
            e.done(Status::Ok(), BackendErrorDecision(*compiled));
            return;
          }
          if (deny_cache != nullptr && !d.allowed) {
            deny_cache->Remember(keys[i], e.cost, e.sent_ms, d);
          }
          // The script decided the alert bits with the count: emit before
          // answering, so that a caller who sees the decision can see its events.
          if (alert_outcome != nullptr && alert_target != nullptr && alert_outcome->any()) {
            alerts->Emit(*compiled, *alert_target, e.subject, *alert_outcome, alert_outcome->at_ms);
          }
          e.done(Status::Ok(), d);
        },
        &out, deadline_ns);
  }
  checks.clear();
  items.rule_sets.clear();
  redis->client().Send(std::move(out));
}

int64_t Limiter::NowMs() const { return impl_->clock.NowMs(); }

void Limiter::Prefetch(std::string_view rule, std::string_view key, std::string_view tier) {
  if (impl_->redis != nullptr) return;
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

void Limiter::PrefetchThrottle(std::string_view key) {
  if (impl_->redis != nullptr) return;
  impl_->store->Prefetch(kThrottleVariant, key);
}

Result<Limiter::ThrottleResult> Limiter::Throttle(std::string_view key, int64_t max_burst,
                                                  int64_t count, int64_t period_s,
                                                  int64_t quantity) {
  return impl_->Throttle(key, max_burst, count, period_s, quantity, /*at_ms=*/nullptr);
}

Result<Limiter::ThrottleResult> Limiter::ThrottleAt(int64_t now_ms, std::string_view key,
                                                    int64_t max_burst, int64_t count,
                                                    int64_t period_s, int64_t quantity) {
  return impl_->Throttle(key, max_burst, count, period_s, quantity, &now_ms);
}

void Limiter::ThrottleAsync(std::string_view key, int64_t max_burst, int64_t count,
                            int64_t period_s, int64_t quantity, ThrottleCallback done) {
  if (impl_->redis != nullptr) {
    if (Status s = KeyError(key); !s.ok()) return done(s, ThrottleResult{});
    // No rule, so no on_backend_error: a failed backend is an error reply.
    impl_->redis->Throttle(
        key, max_burst, count, period_s, quantity, std::nullopt,
        [this, done = std::move(done)](const Status& s, const ThrottleResult& r) {
          if (!s.ok()) Bump(impl_->backend_errors);
          done(s, r);
        });
    return;
  }
  auto r = impl_->Throttle(key, max_burst, count, period_s, quantity, /*at_ms=*/nullptr);
  done(r.status(), r.ok() ? *r : ThrottleResult{});
}

Result<Limiter::ThrottleResult> Limiter::Impl::Throttle(std::string_view key, int64_t max_burst,
                                                        int64_t count, int64_t period_s,
                                                        int64_t quantity, const int64_t* at_ms) {
  if (Status s = KeyError(key); !s.ok()) return s;
  if (redis != nullptr) {
    if (Status s = BlockingAllowed(); !s.ok()) return s;
    Waiter<ThrottleResult> waiter;
    redis->Throttle(key, max_burst, count, period_s, quantity,
                    at_ms != nullptr ? std::optional<int64_t>(*at_ms) : std::nullopt,
                    waiter.Callback());
    auto [status, r] = waiter.Wait();
    if (!status.ok()) return status;
    return r;
  }
  auto params = core::ThrottleParams(max_burst, count, period_s, quantity);
  if (!params.ok()) return params.status();
  const core::LimitParams& p = *params;
  // As in Decide: hash once and prefetch before the clock read.
  const engine::MemoryStore::PreparedKey prepared = store->Prepare(kThrottleVariant, key);
  const int64_t now_ms = at_ms != nullptr ? *at_ms : clock.NowMs();
  core::GcraFigures f;
  Status s = store->Update(prepared, now_ms, [&](int64_t* state, bool) {
    auto* gcra = reinterpret_cast<core::GcraState*>(state);
    f = core::GcraStep(p, *gcra, now_ms, quantity);
    return gcra->tat_us > now_ms * 1000 ? (gcra->tat_us + 999) / 1000 : 0;
  });
  if (s.code() == StatusCode::kResourceExhausted) {
    // No rule, so no on_store_full: a full store denies, as a rule does by
    // default, with the figures it cannot know left unknown.
    Bump(fallback_store_full);
    ThrottleResult r;
    r.limited = true;
    r.limit = f.limit;
    r.remaining = -1;
    r.retry_after_s = core::kFallbackRetryAfterMs / 1000;
    r.reset_after_s = -1;
    r.fallback = Fallback::kStoreFull;
    return r;
  }
  if (!s.ok()) return s;
  ThrottleResult r;
  r.limited = !f.allowed;
  r.limit = f.limit;
  r.remaining = f.remaining;
  // redis-cell reports -1 both for "not limited" and for "never".
  r.retry_after_s = f.allowed ? -1 : core::CellSeconds(f.retry_after_us);
  r.reset_after_s = core::CellSeconds(f.ttl_us);
  return r;
}

Status Limiter::Reset(std::string_view rule, std::string_view key) {
  if (impl_->redis != nullptr) {
    if (Status s = impl_->BlockingAllowed(); !s.ok()) return s;
    std::promise<Status> done;
    ResetAsync(rule, key, [&done](const Status& s) { done.set_value(s); });
    return done.get_future().get();
  }
  const RuleSet& rules = impl_->Rules();
  auto it = rules.rules.find(View(rule));
  if (it == rules.rules.end()) return NotFoundError("unknown rule '" + std::string(rule) + "'");
  if (Status s = KeyError(key); !s.ok()) return s;
  impl_->store->Erase(it->second.base.id, key);
  for (const auto& [tier, v] : it->second.tiers) impl_->store->Erase(v.id, key);
  return Status::Ok();
}

void Limiter::ResetAsync(std::string_view rule, std::string_view key, ResetCallback done) {
  if (impl_->redis == nullptr) return done(Reset(rule, key));
  const RuleSet& rules = impl_->Rules();
  auto it = rules.rules.find(View(rule));
  if (it == rules.rules.end())
    return done(NotFoundError("unknown rule '" + std::string(rule) + "'"));
  if (Status s = KeyError(key); !s.ok()) return done(s);
  const RuleEntry& entry = it->second;
  if (impl_->deny_cache != nullptr) {
    impl_->deny_cache->Forget(redis::StateKey(rule, "", key));
    for (const std::string& tier : entry.tier_names) {
      impl_->deny_cache->Forget(redis::StateKey(rule, tier, key));
    }
  }
  impl_->redis->Reset(rule, entry.tier_names, key,
                      [done = std::move(done)](const Status& s) { done(s); });
}

int64_t Limiter::SweepExpired() { return impl_->store->SweepExpired(impl_->clock.NowMs()); }

Limiter::Stats Limiter::GetStats() const {
  const auto s = impl_->store->GetStats();
  Stats stats{s.entries, s.rejected_full, s.expired_freed};
  stats.store_bytes = s.bytes;
  stats.fallback_store_full = impl_->fallback_store_full.load(std::memory_order_relaxed);
  stats.fallback_backend_error = impl_->fallback_backend_error.load(std::memory_order_relaxed);
  if (impl_->redis != nullptr) {
    const auto c = impl_->redis->client().GetStats();
    stats.backend_errors = impl_->backend_errors.load(std::memory_order_relaxed);
    stats.local_cache_denials = impl_->local_cache_denials.load(std::memory_order_relaxed);
    stats.local_cache_entries =
        impl_->deny_cache != nullptr ? static_cast<int64_t>(impl_->deny_cache->size()) : 0;
    stats.open_circuits = c.open_circuits;
    stats.backend_timeouts =
        static_cast<int64_t>(c.timeouts) + impl_->held_timeouts.load(std::memory_order_relaxed);
    stats.wrong_type = static_cast<int64_t>(c.wrong_type);
  }
  return stats;
}

Status Limiter::StoreHealth() const {
  if (impl_->redis == nullptr) return Status::Ok();
  return impl_->redis->client().Health();
}

Config Limiter::config() const { return impl_->Rules().config; }

ExpiringSets& Limiter::sets() { return *impl_->sets; }

Otp& Limiter::otp() { return *impl_->otp; }

Alerts& Limiter::alerts() { return *impl_->alerts; }

}  // namespace floodgate
