// LimiterCore: rules and tiers resolved to compiled variants, decided by the
// store given at Create, one clock read per decision.
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
#include "common/log.h"
#include "core/alerts.h"
#include "core/rule_eval.h"
#include "service/alerts_impl.h"
#include "service/block_table.h"
#include "service/control_plane.h"
#include "service/expiring_sets_impl.h"
#include "service/lease_id.h"
#include "service/otp_impl.h"
#include "service/state_keeper.h"

namespace floodgate::service {
namespace {

// Debian's abseil has its own string_view type: convert for heterogeneous lookup.
absl::string_view View(std::string_view s) { return absl::string_view(s.data(), s.size()); }

bool KeyFits(std::string_view key) { return !key.empty() && key.size() <= kMaxKeyBytes; }

// Why `key` does not fit (KeyFits false), else OK.
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
  std::string tag;           // what the store said of it (Store::Describe)
  int64_t block_for_ms = 0;  // the rule's block_for
  // Decided out of line (DecideSlow): the rule has alerts or block_for.
  bool slow = false;

  store::VariantRef Ref() const { return store::VariantRef{&compiled, id, tag}; }
};

// A subject's override of a rule (service/control_plane.h): its own
// variant, so its own state, as the tier "(override)<limits>", which no
// config tier can be named (tier names are identifiers). The limits are in
// the name so that each definition has a state (and a Redis key, which the
// Redis store's local deny cache goes by) of its own: changing an override
// starts the subject afresh under the new limits, never under a denial
// the old ones made.
constexpr std::string_view kOverrideTier = "(override)";

// The reason of a block a rule's block_for makes (the block names its rule).
// Static text: the denial that starts the block views it, and that denial
// may be answered on another thread after its rules are gone (a later
// answer), so it must outlive any decision.
constexpr std::string_view kBlockForReason = "block_for after a denial";

struct OverrideVariant {
  Variant variant;
  int64_t expires_at_ms = 0;  // 0: none
};

struct RuleEntry {
  Variant base;
  absl::flat_hash_map<std::string, Variant> tiers;
  std::vector<std::string> tier_names;  // and its overrides' (kOverrideTier...)
  std::vector<uint32_t> ids;            // base's, each tier's, then the overrides'
  // By subject. Empty for almost every rule: a check tests only that.
  absl::flat_hash_map<std::string, OverrideVariant> overrides;
  int64_t max_waiters = kDefaultMaxWaiters;  // the rule's (requests held waiting)
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

}  // namespace

struct LimiterCore::Impl {
  Impl(const Clock& clk) : clock(clk), instance_id(next_instance_id.fetch_add(1)) {}
  // The alerts' shutdown first: it hands pending events to the store's log.
  // Then the store: its shutdown answers requests in flight, whose callbacks
  // use the members below (alerts included, which then drops and counts
  // what they emit).
  ~Impl() {
    room.reset();     // answers what it holds; its attempts use the store
    control.reset();  // its thread reads the store and calls ApplyControl
    if (alerts != nullptr) alerts->Shutdown();
    store = nullptr;
    rooms.store.reset();
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

  // The rule named `rule` in the current RuleSet, or null. Inlined into
  // Check (a call of its own shows in a hot-key decision: ~3 %).
  [[gnu::always_inline]] const RuleEntry* FindRule(std::string_view rule) const {
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
  [[gnu::always_inline]] inline Status Resolve(std::string_view rule, std::string_view key,
                                               int64_t cost, std::string_view tier,
                                               const Variant** variant,
                                               const RuleEntry** found = nullptr) const;
  // The subject's override of `entry`, if one is in force; else `variant`.
  const Variant* Overridden(const RuleEntry& entry, std::string_view subject,
                            const Variant* variant) const {
    auto it = entry.overrides.find(View(subject));
    if (it == entry.overrides.end()) return variant;
    if (it->second.expires_at_ms != 0 && it->second.expires_at_ms <= clock.NowMs()) return variant;
    return &it->second.variant;
  }
  // Fills *decision for `subject` if a block of `variant`'s rule holds it.
  bool Blocked(const Variant& variant, std::string_view subject, Decision* decision) const {
    const core::CompiledRule& rule = variant.compiled;
    const int64_t now = clock.NowMs();
    std::string_view reason;
    const int64_t until = blocks.Until(rule.name, subject, now, &reason);
    if (until == 0) return false;
    DenyAsBlocked(rule, until - now, reason, decision);
    return true;
  }
  // *decision becomes the denial of a block of `rule` with `left_ms` to
  // run: every limit at its capacity with nothing remaining, retry and
  // reset the block's time left.
  static void DenyAsBlocked(const core::CompiledRule& rule, int64_t left_ms,
                            std::string_view reason, Decision* decision) {
    Decision& d = *decision;
    d.num_limits = static_cast<int>(rule.limits.size());
    for (int i = 0; i < d.num_limits; ++i) {
      LimitStatus& st = d.limits[i];
      st = LimitStatus{};
      st.limit = rule.limits[i].capacity;
      st.retry_after_ms = left_ms;
      st.reset_after_ms = left_ms;
    }
    core::FinishDecision(rule, false, &d);
    d.fallback = Fallback::kNone;
    d.blocked = true;
    d.block_reason = reason;
  }
  // A lease operation's rule, tier and key, as Resolve checks a decision's;
  // the variant in force for the subject (its override's).
  Status ResolveLease(std::string_view rule, std::string_view key, std::string_view tier,
                      const Variant** variant) const {
    const RuleEntry* entry = FindRule(rule);
    if (entry == nullptr) return NotFoundError("unknown rule '" + std::string(rule) + "'");
    if (entry->base.compiled.algorithm != Algorithm::kConcurrency) {
      return InvalidArgumentError("rule '" + std::string(rule) + "' is not a concurrency rule (" +
                                  std::string(AlgorithmName(entry->base.compiled.algorithm)) +
                                  "): check it rather than acquire a lease");
    }
    const Variant* v = TierOf(*entry, tier);
    if (v == nullptr) return NoTierError(rule, tier);
    if (!KeyFits(key)) return KeyError(key);
    *variant = entry->overrides.empty() ? v : Overridden(*entry, key, v);
    return Status::Ok();
  }

  // The variant of `tier` of `entry` (its own limits when empty), or null
  // when the rule has no such tier (NoTierError).
  [[gnu::always_inline]] static const Variant* TierOf(const RuleEntry& entry,
                                                      std::string_view tier) {
    if (tier.empty()) return &entry.base;
    auto t = entry.tiers.find(View(tier));
    return t == entry.tiers.end() ? nullptr : &t->second;
  }
  static Status NoTierError(std::string_view rule, std::string_view tier) {
    return NotFoundError("rule '" + std::string(rule) + "' has no tier '" + std::string(tier) +
                         "'");
  }

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
  // The store's decision for `op` of `variant`, finished (Finish) now or
  // when it comes. Inlined into Check: a decision on the embedded store is
  // tens of nanoseconds, and each call frame on its way shows.
  [[gnu::always_inline]] inline store::Answer Decide(const store::CheckOp& op,
                                                     const Variant& variant, Decision* decision,
                                                     Status* status, store::Later<Decision> later,
                                                     store::Batch* batch);
  // Decide for a rule with alerts (the store decides the alert bits with
  // the count) or block_for (a denial blocks the subject). Out of line, so
  // that a decision without them does not make room for the bits: GCC
  // zeroes the ~250 bytes of an AlertOutcome (even an empty std::optional
  // of one) on every call, a fifth of a hot-key decision.
  [[gnu::noinline]] store::Answer DecideSlow(store::CheckOp op, const Variant& variant,
                                             Decision* decision, Status* status,
                                             store::Later<Decision> later, store::Batch* batch);
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
  // rooms.store: the one pointer every decision reads.
  store::Store* store = nullptr;
  // The store and its features' rooms.
  store::Rooms rooms;
  // Decisions made by a fallback policy, by reason.
  std::atomic<int64_t> fallback_backend_error{0};
  std::atomic<int64_t> fallback_store_full{0};

  mutable std::mutex mu;
  std::shared_ptr<const RuleSet> current;                  // guarded by mu
  std::atomic<uint64_t> generation{1};                     // bumped under mu
  absl::flat_hash_map<std::string, uint32_t> variant_ids;  // definition -> id; guarded by mu
  absl::flat_hash_map<uint32_t, std::string>
      variant_tags;                             // id -> Store::Describe's; guarded by mu
  uint32_t num_variants = store::kFirstRuleId;  // guarded by mu
  std::unique_ptr<ExpiringSets> sets;
  std::unique_ptr<Otp> otp;
  // Never null once created; its threads run only once a rule has alerts.
  std::unique_ptr<AlertsImpl> alerts;
  // What Build makes the rules of: the config given (the file's), plus
  // the control plane's runtime rules and overrides. Guarded by mu.
  Config file_config;
  ControlRecords records;
  BlockTable blocks;
  // Whether any override or block may be in force: what a check tests
  // before looking for either.
  std::atomic<bool> controls{false};
  // Last, so that it stops (its thread calls into the members above)
  // first.
  std::unique_ptr<ControlPlane> control;
  // Leases granted here (metrics), and requests held waiting for room.
  LeaseLedger ledger;
  std::unique_ptr<WaitRoom> room;

  // The control plane's records in force from now: rules rebuilt with its
  // runtime rules and overrides, blocks replaced.
  void ApplyControl(const ControlRecords& next) {
    blocks.Replace(next.blocks);
    std::lock_guard<std::mutex> lock(mu);
    ControlRecords previous = std::move(records);
    records = next;
    auto built = Build(file_config);
    if (!built.ok()) {
      Log(LogLevel::kWarn, "control records not applied", {{"error", built.status().message()}});
      records = std::move(previous);
      return;
    }
    if (Status s = StartAlertsFor(**built); !s.ok()) {
      Log(LogLevel::kWarn, "control records not applied", {{"error", s.message()}});
      records = std::move(previous);
      return;
    }
    current = std::move(*built);
    generation.fetch_add(1, std::memory_order_release);
    controls.store(!records.overrides.empty() || blocks.any(), std::memory_order_relaxed);
  }

  // Blocks `subject` of `variant`'s rule when the rule says so (block_for)
  // and *d just denied it; *d then answers as that block does.
  void MaybeBlockFor(const Variant& variant, std::string_view subject, Decision* d) {
    if (variant.block_for_ms == 0 || d->allowed || d->fallback != Fallback::kNone || d->blocked)
      return;
    const std::string& rule = variant.compiled.name;
    const int64_t until = clock.NowMs() + variant.block_for_ms;
    // The control plane first: it lists the block from now on, and a
    // reload it makes keeps it in force from then on (ControlPlane::Reload).
    if (control != nullptr) control->AutoBlock(rule, subject, until, kBlockForReason);
    blocks.Add(rule, subject, until, std::string(kBlockForReason));
    controls.store(true, std::memory_order_relaxed);
    DenyAsBlocked(variant.compiled, variant.block_for_ms, kBlockForReason, d);
  }
};

Result<std::shared_ptr<const RuleSet>> LimiterCore::Impl::Build(const Config& file) {
  // The file's rules, then runtime rules of other names (a file rule of the
  // same name wins: a runtime rule cannot shadow the file).
  Config config = file;
  for (const RuntimeRuleRecord& r : records.rules) {
    const bool in_file = std::any_of(config.rules.begin(), config.rules.end(),
                                     [&](const Rule& f) { return f.name == r.name; });
    if (!in_file) config.rules.push_back(r.rule);
  }
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
    v.block_for_ms = rule.block_for_ms;
    v.slow = rule.block_for_ms != 0 || rule.alerts.enabled();
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
    entry.max_waiters = rule.max_waiters;
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
  // Overrides: the rule's algorithm with the override's limits. One that no
  // longer fits its rule (the file changed) is left out, and logged.
  for (const OverrideRecord& o : records.overrides) {
    auto it = set->rules.find(View(o.rule));
    if (it == set->rules.end()) continue;
    const Rule* rule = nullptr;
    for (const Rule& r : config.rules) {
      if (r.name == o.rule) rule = &r;
    }
    std::vector<Limit> limits;
    for (const std::string& text : o.limits) {
      auto limit = ParseLimitOf(*rule, text);
      if (limit.ok()) limits.push_back(*limit);
    }
    Rule shaped = *rule;
    shaped.burst.clear();
    std::string tier(kOverrideTier);
    for (size_t i = 0; i < limits.size(); ++i) tier += (i > 0 ? "," : "") + limits[i].ToString();
    auto v = make(shaped, tier, limits);
    if (!v.ok()) {
      Log(LogLevel::kWarn, "override not applied",
          {{"rule", o.rule}, {"error", v.status().message()}});
      continue;
    }
    RuleEntry& entry = it->second;
    if (std::find(entry.ids.begin(), entry.ids.end(), v->id) == entry.ids.end()) {
      entry.ids.push_back(v->id);
      entry.tier_names.push_back(tier);
    }
    entry.overrides[o.key] = OverrideVariant{std::move(*v), o.expires_at_ms};
  }
  // The store learns each new id, in order, and says what it needs of it
  // (the tag); a variant known from before keeps its tag.
  std::vector<Variant*> all;
  for (auto& [name, entry] : set->rules) {
    all.push_back(&entry.base);
    for (auto& [tier, v] : entry.tiers) all.push_back(&v);
    for (auto& [subject, o] : entry.overrides) all.push_back(&o.variant);
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
                                  std::string_view tier, const Variant** variant,
                                  const RuleEntry** found) const {
  const RuleEntry* entry = FindRule(rule);
  if (entry == nullptr) return NotFoundError("unknown rule '" + std::string(rule) + "'");
  if (found != nullptr) *found = entry;
  *variant = &entry->base;
  if (entry->base.compiled.algorithm == Algorithm::kConcurrency) [[unlikely]] {
    return InvalidArgumentError("rule '" + std::string(rule) +
                                "' is a concurrency rule: acquire a lease (FG.ACQUIRE, "
                                "POST /v1/leases) rather than check it");
  }
  if (!tier.empty()) {
    const Variant* v = TierOf(*entry, tier);
    if (v == nullptr) return NoTierError(rule, tier);
    *variant = v;
  }
  if (!KeyFits(key)) [[unlikely]] {
    return KeyError(key);
  }
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

Result<std::unique_ptr<LimiterCore>> LimiterCore::Create(const Config& config, const Clock& clock,
                                                         store::Rooms rooms) {
  if (rooms.store == nullptr) return InvalidArgumentError("LimiterCore::Create: no store");
  auto impl = std::make_unique<Impl>(clock);
  impl->rooms = std::move(rooms);
  impl->store = impl->rooms.store.get();
  std::shared_ptr<const RuleSet> rules;
  {
    std::lock_guard<std::mutex> lock(impl->mu);
    impl->file_config = config;
    auto built = impl->Build(config);
    if (!built.ok()) return built.status();
    rules = std::move(*built);
    impl->current = rules;
  }
  impl->sets = MakeExpiringSets(config.sets, *impl->rooms.sets);
  auto otp = MakeOtp(config.otp, *impl->rooms.otp, clock);
  if (!otp.ok()) return otp.status();
  impl->otp = std::move(*otp);
  impl->alerts = std::make_unique<AlertsImpl>(config.alert_delivery, impl->rooms.alert_log, clock);
  if (Status s = impl->StartAlertsFor(*rules); !s.ok()) return s;
  Impl* raw = impl.get();
  ControlPlane::Hooks hooks;
  hooks.apply = [raw](const ControlRecords& records) { raw->ApplyControl(records); };
  hooks.file_rule = [raw](std::string_view name) -> const Rule* {
    std::lock_guard<std::mutex> lock(raw->mu);
    for (const Rule& r : raw->file_config.rules) {
      if (r.name == name) return &r;
    }
    return nullptr;
  };
  hooks.add_block = [raw](const BlockRecord& b) {
    raw->blocks.Add(b.rule, b.key, b.expires_at_ms, b.reason);
    raw->controls.store(true, std::memory_order_relaxed);
  };
  hooks.rule = [raw](std::string_view name) -> std::optional<Rule> {
    const RuleSet& set = raw->Rules();
    for (const Rule& r : set.config.rules) {
      if (r.name == name) return r;
    }
    return std::nullopt;
  };
  impl->room = std::make_unique<WaitRoom>(clock);
  // The room's thread also counts the leases granted here whose TTL ran out.
  impl->room->SetTick(100, [raw](int64_t now_ms) { raw->ledger.Sweep(now_ms); });
  impl->control = std::make_unique<ControlPlane>(clock, std::move(hooks));
  if (Status s = impl->control->Start(impl->rooms.control, {config.data_dir}); !s.ok()) return s;
  return std::unique_ptr<LimiterCore>(new LimiterCore(std::move(impl)));
}

LimiterCore::LimiterCore(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
LimiterCore::~LimiterCore() = default;

Status LimiterCore::Reload(const Config& config) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  auto built = impl_->Build(config);
  if (built.ok()) impl_->file_config = config;
  if (!built.ok()) return built.status();
  // Alerts added by this config need their delivery running before any
  // decision can emit.
  if (Status s = impl_->StartAlertsFor(**built); !s.ok()) return s;
  impl_->current = std::move(*built);
  impl_->generation.fetch_add(1, std::memory_order_release);
  return Status::Ok();
}

namespace {
// The variant this thread decided last: the guess Check prefetches for.
thread_local uint32_t t_last_variant_id = store::kFirstRuleId;
}  // namespace

store::Answer LimiterCore::Check(const CheckArgs& args, Decision* decision, Status* status,
                                 store::Later<Decision> later, store::Batch* batch) {
  Impl& impl = *impl_;
  // With a million subjects the subject's state is a cache miss, the
  // largest cost of a decision on the embedded store. Unless the caller
  // prefetched (a pipeline: read_ms), start it now with the variant this
  // thread decided last, so that it overlaps resolving the rule and reading
  // the clock; a wrong guess costs a wasted prefetch. Not for keys Resolve
  // will refuse as too long: that would be work for nothing.
  const uint32_t guessed = t_last_variant_id;
  size_t prefetched = 0;
  if (args.read_ms == 0 && args.key.size() <= kMaxKeyBytes) {
    prefetched = impl.store->Prefetch(guessed, args.key);
  }
  const Variant* variant = nullptr;
  const RuleEntry* entry = nullptr;
  if (Status s = impl.Resolve(args.rule, args.key, args.cost, args.tier, &variant, &entry);
      !s.ok()) {
    *status = std::move(s);
    return store::Answer::kNow;
  }
  // The control plane's: one relaxed load and a branch while there is no
  // override and no block at all (docs/benchmarks.md has the A/B).
  if (impl.controls.load(std::memory_order_relaxed)) [[unlikely]] {
    if (!entry->overrides.empty()) variant = impl.Overridden(*entry, args.key, variant);
    if (impl.blocks.any() && !args.ignore_blocks && impl.Blocked(*variant, args.key, decision)) {
      *status = Status::Ok();
      return store::Answer::kNow;
    }
  }
  if (variant->id != guessed) {
    t_last_variant_id = variant->id;
    prefetched = 0;
  }
  store::CheckOp op{variant->Ref(), args.key, args.cost, args.at_ms, args.read_ms, nullptr};
  op.prefetched = prefetched;
  if (variant->slow) [[unlikely]] {
    return impl.DecideSlow(op, *variant, decision, status, later, batch);
  }
  return impl.Decide(op, *variant, decision, status, later, batch);
}

store::Answer LimiterCore::Impl::Decide(const store::CheckOp& op, const Variant& variant,
                                        Decision* decision, Status* status,
                                        store::Later<Decision> later, store::Batch* batch) {
  const store::Answer answer = store->Check(
      op, decision, status,
      [&]() -> store::CheckDone {
        // The variant lives in this thread's rule set: the callback keeps
        // that alive until the answer.
        return [this, rules = Cache().rules, variant = &variant,
                subject = variant.alerts != nullptr || variant.block_for_ms != 0
                              ? std::string(op.subject)
                              : std::string(),
                done = later()](const Status& s, const Decision& d,
                                const core::AlertOutcome* fired) mutable {
          Decision answered = d;
          const Status st = Finish(*variant, subject, s, &answered, fired);
          if (variant->block_for_ms != 0 && st.ok()) MaybeBlockFor(*variant, subject, &answered);
          done(st, answered);
        };
      },
      batch);
  if (answer == store::Answer::kNow && (!status->ok() || op.alerts != nullptr)) [[unlikely]] {
    *status = Finish(variant, op.subject, *status, decision, op.alerts);
  }
  return answer;
}

store::Answer LimiterCore::Impl::DecideSlow(store::CheckOp op, const Variant& variant,
                                            Decision* decision, Status* status,
                                            store::Later<Decision> later, store::Batch* batch) {
  core::AlertOutcome outcome;
  if (variant.alerts != nullptr) op.alerts = &outcome;
  const store::Answer answer = Decide(op, variant, decision, status, later, batch);
  // A later answer does this in its callback (Decide).
  if (variant.block_for_ms != 0 && answer == store::Answer::kNow && status->ok()) {
    MaybeBlockFor(variant, op.subject, decision);
  }
  return answer;
}

namespace {

// Waits for an answer that comes later: the blocking forms over any store.
// Refuses on a thread that would have to answer itself.
//
// Built on every blocking call, answered now or not: it holds nothing that
// costs to make until Callback (an answer now is most of them).
template <typename... T>
class Waiter {
 public:
  explicit Waiter(const store::Backend& backend) : backend_(backend) {}
  store::Done<T...> Callback() {
    if (Status s = backend_.BlockingAllowed(); !s.ok()) {
      refusal_.emplace(std::move(s));
      return [](const Status&, const T&...) {};
    }
    promise_.emplace();
    return [p = &*promise_](const Status& s, const T&... value) {
      p->set_value({s, std::tuple<T...>(value...)});
    };
  }
  // The answer, after Callback.
  Status Wait(T*... out) {
    if (refusal_.has_value()) return *refusal_;
    auto [status, values] = promise_->get_future().get();
    std::tie(*out...) = values;
    return status;
  }

 private:
  const store::Backend& backend_;
  std::optional<Status> refusal_;
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
  Waiter<Decision> waiter(*impl_->rooms.backend);
  if (Check(args, decision, &status, [&] { return waiter.Callback(); }) == store::Answer::kLater) {
    status = waiter.Wait(decision);
  }
  return status;  // one return: the caller's Status is built in place
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
  Waiter<ThrottleResult> waiter(*impl_->rooms.backend);
  if (Throttle(op, &result, &status, [&] { return waiter.Callback(); }) == store::Answer::kLater) {
    status = waiter.Wait(&result);
  }
  if (!status.ok()) return status;
  return result;
}

Status LimiterCore::ResetAndWait(std::string_view rule, std::string_view key) {
  if (Status s = impl_->rooms.backend->BlockingAllowed(); !s.ok()) return s;
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
  return impl_->rooms.backend->NewLoopDriver();
}

Status LimiterCore::BlockingAllowed() const { return impl_->rooms.backend->BlockingAllowed(); }

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

void LimiterCore::PrefetchThrottle(std::string_view key) {
  impl_->store->Prefetch(store::kThrottleId, key);
}

int64_t LimiterCore::NowMs() const { return impl_->clock.NowMs(); }

const Clock& LimiterCore::clock() const { return impl_->clock; }

int64_t LimiterCore::SweepExpired() { return impl_->store->SweepExpired(impl_->clock.NowMs()); }

LimiterStats LimiterCore::GetStats() const {
  const store::Store::Usage u = impl_->store->GetUsage();
  LimiterStats stats;
  stats.entries = u.entries;
  stats.rejected_full = u.rejected_full;
  stats.expired_freed = u.expired_freed;
  stats.store_bytes = u.bytes;
  stats.fallback_store_full = impl_->fallback_store_full.load(std::memory_order_relaxed);
  stats.fallback_backend_error = impl_->fallback_backend_error.load(std::memory_order_relaxed);
  stats.backend_errors = u.backend_errors;
  stats.local_cache_denials = u.local_cache_denials;
  stats.local_cache_entries = u.local_cache_entries;
  stats.open_circuits = u.open_circuits;
  stats.backend_timeouts = u.backend_timeouts;
  stats.wrong_type = u.wrong_type;
  stats.store_kind = u.kind;
  return stats;
}

Status LimiterCore::StoreHealth() const { return impl_->rooms.backend->Health(); }

std::vector<store::Metric> LimiterCore::StoreMetrics() const { return impl_->store->Metrics(); }

Config LimiterCore::config() const { return impl_->Rules().config; }

std::vector<store::NodeHealth> LimiterCore::ProbeStoreNodes() {
  return impl_->rooms.backend->ProbeNodes();
}

std::unique_ptr<StateKeeper> LimiterCore::NewStateKeeper(const std::string& data_dir,
                                                         int64_t interval_ms) {
  if (data_dir.empty() || impl_->rooms.snapshots == nullptr) return nullptr;
  return std::make_unique<StateKeeper>(*impl_->rooms.snapshots, data_dir, interval_ms,
                                       impl_->clock);
}

std::unique_ptr<store::SketchBoard> LimiterCore::NewSketchBoard() {
  return impl_->rooms.sketch_board ? impl_->rooms.sketch_board() : nullptr;
}

ExpiringSets& LimiterCore::sets() { return *impl_->sets; }

Otp& LimiterCore::otp() { return *impl_->otp; }

Alerts& LimiterCore::alerts() { return *impl_->alerts; }

ControlPlane& LimiterCore::control() { return *impl_->control; }

bool LimiterCore::HasOverride(std::string_view rule, std::string_view key) const {
  const RuleEntry* entry = impl_->FindRule(rule);
  if (entry == nullptr || entry->overrides.empty()) return false;
  return impl_->Overridden(*entry, key, &entry->base) != &entry->base;
}

// --- Refunds ---

void LimiterCore::Refund(const RefundArgs& args, store::Done<core::RefundResult> done) {
  Impl& impl = *impl_;
  const Variant* variant = nullptr;
  const RuleEntry* entry = nullptr;
  // Rule, tier and key as a decision's (a cost of 0 passes Resolve); the
  // cost as a refund's: giving back nothing is a caller's mistake.
  if (Status s = impl.Resolve(args.rule, args.key, 0, args.tier, &variant, &entry); !s.ok()) {
    return done(s, core::RefundResult{});
  }
  // A subject with an override spends its override's state: that is what
  // gets the units back.
  if (!entry->overrides.empty()) variant = impl.Overridden(*entry, args.key, variant);
  if (args.cost < 1) {
    return done(InvalidArgumentError("cost must be at least 1"), core::RefundResult{});
  }
  if (args.cost > kMaxLimitCount) {
    return done(
        InvalidArgumentError("cost " + std::to_string(args.cost) + " is above " +
                             std::to_string(kMaxLimitCount) + ", the most a limit can count"),
        core::RefundResult{});
  }
  const store::RefundOp op{variant->Ref(), args.key, args.cost, args.at_ms};
  core::RefundResult result;
  Status status;
  const store::Answer answer =
      impl.store->Refund(op, &result, &status, [&]() -> store::Done<core::RefundResult> {
        // The variant lives in this thread's rule set: the callback keeps
        // that alive until the answer.
        return [rules = impl.Cache().rules, done = std::move(done)](
                   const Status& s, const core::RefundResult& r) mutable { done(s, r); };
      });
  if (answer == store::Answer::kNow) done(status, status.ok() ? result : core::RefundResult{});
}

void LimiterCore::Refund(std::string_view rule, std::string_view key, int64_t cost,
                         std::string_view tier, store::Done<core::RefundResult> done) {
  Refund(RefundArgs{rule, key, cost, tier}, std::move(done));
}

Result<core::RefundResult> LimiterCore::RefundAndWait(const RefundArgs& args) {
  if (Status s = impl_->rooms.backend->BlockingAllowed(); !s.ok()) return s;
  std::promise<std::pair<Status, core::RefundResult>> answered;
  Refund(args, [&answered](const Status& s, const core::RefundResult& r) {
    answered.set_value({s, r});
  });
  auto [status, result] = answered.get_future().get();
  if (!status.ok()) return status;
  return result;
}

Result<core::RefundResult> LimiterCore::RefundAndWait(std::string_view rule, std::string_view key,
                                                      int64_t cost, std::string_view tier) {
  return RefundAndWait(RefundArgs{rule, key, cost, tier});
}

// --- Leases ---

void LimiterCore::Acquire(const LeaseArgs& args, store::Done<LeaseAnswer> done) {
  Impl& impl = *impl_;
  const Variant* variant = nullptr;
  if (Status s = impl.ResolveLease(args.rule, args.key, args.tier, &variant); !s.ok()) {
    return done(s, LeaseAnswer{});
  }
  const core::CompiledRule& rule = variant->compiled;
  const int64_t max_in_flight = rule.limits.empty() ? 0 : rule.limits[0].count;
  const int64_t rule_ttl = rule.limits.empty() ? 0 : rule.limits[0].period_ms;
  const int64_t ttl = args.ttl_ms == 0 ? rule_ttl : args.ttl_ms;
  if (ttl < 1 || ttl > kMaxLeaseTtlMs) {
    return done(InvalidArgumentError("ttl_ms must be from 1 to " + std::to_string(kMaxLeaseTtlMs) +
                                     ", got " + std::to_string(ttl)),
                LeaseAnswer{});
  }
  if (impl.controls.load(std::memory_order_relaxed) && impl.blocks.any()) {
    const int64_t now = impl.clock.NowMs();
    std::string_view reason;
    if (const int64_t until = impl.blocks.Until(rule.name, args.key, now, &reason); until != 0) {
      impl.ledger.Refused(rule.name);
      LeaseAnswer a;
      a.limit = max_in_flight;
      a.in_flight = -1;
      a.ms = until - now;
      a.blocked = true;
      a.block_reason = reason;
      return done(Status::Ok(), a);
    }
  }
  std::string id = NewLeaseId();
  store::LeaseOp op{
      store::LeaseOpKind::kAcquire, rule.name, args.key, id, ttl, max_in_flight, args.at_ms};
  // The answer, now or later: a store that could not decide answers by the
  // rule's fallback policy, as a decision would.
  auto finish = [&impl, &rule, max_in_flight, id](const Status& s,
                                                  const store::LeaseResult& r) -> LeaseAnswer {
    LeaseAnswer a;
    a.limit = max_in_flight;
    if (!s.ok()) {
      const bool full = s.code() == StatusCode::kResourceExhausted;
      Bump(full ? impl.fallback_store_full : impl.fallback_backend_error);
      a.fallback = full ? Fallback::kStoreFull : Fallback::kBackendError;
      a.ok = full ? rule.on_store_full == OnStoreFull::kAllow
                  : rule.on_backend_error == OnBackendError::kAllow;
      a.in_flight = -1;
      a.ms = a.ok ? rule.limits[0].period_ms : core::kFallbackRetryAfterMs;
      if (a.ok) a.lease = id;
      return a;
    }
    a.ok = r.ok;
    a.in_flight = r.in_flight;
    a.ms = r.ms;
    if (r.ok) {
      a.lease = id;
      impl.ledger.Granted(rule.name, id, r.now_ms + r.ms);
    } else {
      impl.ledger.Refused(rule.name);
    }
    return a;
  };
  store::LeaseResult result;
  Status status;
  // Rules are kept alive by the thread cache only until this thread's next
  // call: the later answer holds its own reference.
  std::shared_ptr<const RuleSet> keep = impl.Cache().rules;
  if (impl.rooms.leases->Lease(op, &result, &status, [&]() -> store::Done<store::LeaseResult> {
        return [keep, finish, done = std::move(done)](const Status& s,
                                                      const store::LeaseResult& r) mutable {
          done(Status::Ok(), finish(s, r));
        };
      }) == store::Answer::kNow) {
    done(Status::Ok(), finish(status, result));
  }
}

namespace {

// Release and Renew: the store's answer as the caller's.
LimiterCore::LeaseAnswer LeaseOutcome(const store::LeaseResult& r, int64_t limit) {
  LimiterCore::LeaseAnswer a;
  a.ok = r.ok;
  a.in_flight = r.in_flight;
  a.limit = limit;
  a.ms = r.ms;
  return a;
}

}  // namespace

void LimiterCore::Release(const LeaseArgs& args, store::Done<LeaseAnswer> done) {
  ReleaseOrRenew(store::LeaseOpKind::kRelease, args, std::move(done));
}

void LimiterCore::Renew(const LeaseArgs& args, store::Done<LeaseAnswer> done) {
  ReleaseOrRenew(store::LeaseOpKind::kRenew, args, std::move(done));
}

void LimiterCore::ReleaseOrRenew(store::LeaseOpKind kind, const LeaseArgs& args,
                                 store::Done<LeaseAnswer> done) {
  Impl& impl = *impl_;
  const Variant* variant = nullptr;
  if (Status s = impl.ResolveLease(args.rule, args.key, args.tier, &variant); !s.ok()) {
    return done(s, LeaseAnswer{});
  }
  const core::CompiledRule& compiled = variant->compiled;
  const int64_t limit = compiled.limits[0].count;
  const bool renew = kind == store::LeaseOpKind::kRenew;
  const int64_t ttl = !renew ? 0 : args.ttl_ms == 0 ? compiled.limits[0].period_ms : args.ttl_ms;
  if (renew && (ttl < 1 || ttl > kMaxLeaseTtlMs)) {
    return done(InvalidArgumentError("ttl_ms must be from 1 to " + std::to_string(kMaxLeaseTtlMs) +
                                     ", got " + std::to_string(ttl)),
                LeaseAnswer{});
  }
  if (args.lease.empty() || args.lease.size() > store::kMaxLeaseIdBytes) {
    // No lease was ever given such an id: nothing to release or renew.
    LeaseAnswer a;
    a.limit = limit;
    a.in_flight = -1;
    return done(Status::Ok(), a);
  }
  const std::string rule = compiled.name;
  store::LeaseOp op{kind, rule, args.key, args.lease, ttl, 0, args.at_ms};
  auto finish = [&impl, renew, rule, limit, lease = std::string(args.lease),
                 key = std::string(args.key)](const store::LeaseResult& r) {
    if (r.ok && renew) impl.ledger.Renewed(rule, lease, r.now_ms + r.ms);
    if (r.ok && !renew) {
      impl.ledger.Released(rule, lease);
      impl.room->Wake(LeaseWaitSubject(rule, key));  // a waiter may take it now
    }
    return LeaseOutcome(r, limit);
  };
  store::LeaseResult result;
  Status status;
  if (impl.rooms.leases->Lease(op, &result, &status, [&]() -> store::Done<store::LeaseResult> {
        return
            [finish, done = std::move(done)](const Status& s, const store::LeaseResult& r) mutable {
              if (!s.ok()) return done(s, LeaseAnswer{});
              done(s, finish(r));
            };
      }) == store::Answer::kNow) {
    if (!status.ok()) return done(status, LeaseAnswer{});
    done(status, finish(result));
  }
}

Result<LimiterCore::LeaseAnswer> LimiterCore::LeaseAndWait(store::LeaseOpKind kind,
                                                           const LeaseArgs& args) {
  if (Status s = BlockingAllowed(); !s.ok()) return s;
  std::promise<Result<LeaseAnswer>> promise;
  auto future = promise.get_future();
  auto done = [&promise](const Status& s, const LeaseAnswer& a) {
    promise.set_value(s.ok() ? Result<LeaseAnswer>(a) : Result<LeaseAnswer>(s));
  };
  switch (kind) {
    case store::LeaseOpKind::kAcquire:
      Acquire(args, done);
      break;
    case store::LeaseOpKind::kRelease:
      Release(args, done);
      break;
    case store::LeaseOpKind::kRenew:
      Renew(args, done);
      break;
  }
  return future.get();
}

std::vector<std::pair<std::string, LeaseLedger::RuleStats>> LimiterCore::LeaseStats() const {
  return impl_->ledger.Stats();
}

std::vector<std::pair<std::string, WaitRoom::RuleStats>> LimiterCore::WaitStats() const {
  return impl_->room->Stats();
}

void LimiterCore::CancelWaits(uint64_t owner) { impl_->room->Cancel(owner); }

void LimiterCore::EndWaitsBy(int64_t at_ms) { impl_->room->EndBy(at_ms); }

WaitRoom& LimiterCore::room() { return *impl_->room; }

int64_t LimiterCore::MaxWaiters(std::string_view rule) const {
  const RuleEntry* entry = impl_->FindRule(rule);
  return entry == nullptr ? -1 : entry->max_waiters;
}

}  // namespace floodgate::service
