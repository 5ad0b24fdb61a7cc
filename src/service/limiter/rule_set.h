// The rules in force, compiled to the variants the store decides with.
//
// A rule (and each of its tiers, and each subject's override of it) is one
// Variant: its compiled limits and the store's id for its state. Variants
// of the same definition share an id, so a reload that keeps a rule keeps
// its subjects' state, and one that changes it starts them afresh.
//
// The rules can be replaced while requests run (RuleBook::Load, Apply). A
// RuleSet is immutable once published, under a mutex with a generation
// number; each thread caches the current one and re-reads it only when the
// generation changes, so the decision path takes no lock and touches no
// reference count (RuleBook::Find).
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

#include "absl/container/flat_hash_map.h"
#include "core/rule_eval.h"
#include "floodgate/config.h"
#include "floodgate/status.h"
#include "service/alerts/alerts_impl.h"
#include "store/store.h"

namespace floodgate::service {

struct ControlRecords;

// Debian's abseil has its own string_view type: convert for heterogeneous lookup.
inline absl::string_view View(std::string_view s) { return absl::string_view(s.data(), s.size()); }

inline bool KeyFits(std::string_view key) { return !key.empty() && key.size() <= kMaxKeyBytes; }
// Why `key` does not fit (KeyFits false), else OK.
Status KeyError(std::string_view key);

struct ClassViews;
struct ClassCounts;

struct Variant {
  core::CompiledRule compiled;
  uint32_t id = 0;  // the store's state: which this rule (tier) uses
  // Where its quota alerts go; null when the rule has none (next to `id`,
  // which every decision reads anyway).
  std::shared_ptr<const AlertTarget> alerts;
  std::string tag;           // what the store said of it (Store::Describe)
  int64_t block_for_ms = 0;  // the rule's block_for
  // Decided out of line (LimiterCore's DecideSlow): the rule has alerts or
  // block_for.
  bool slow = false;
  // The rule has priorities: the view each class decides with, and its
  // counts (service/limiter/variant_views.h). Null for almost every rule: a
  // check tests only that.
  std::shared_ptr<const ClassViews> classes;
  // A priority class's view: its counts of decisions; else null.
  std::shared_ptr<ClassCounts> class_counts;
  // The view a reservation's overrun is charged with, whatever the limit
  // (variant_views.h); null in the views themselves.
  std::shared_ptr<const Variant> charge;

  store::VariantRef Ref() const { return store::VariantRef{&compiled, id, tag}; }
};

// A subject's override of a rule (service/control/control_plane.h): its own
// variant, so its own state, as the tier "(override)<limits>", which no
// config tier can be named (tier names are identifiers). The limits are in
// the name so that each definition has a state (and a Redis key, which the
// Redis store's local deny cache goes by) of its own: changing an override
// starts the subject afresh under the new limits, never under a denial
// the old ones made.
inline constexpr std::string_view kOverrideTier = "(override)";

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

// The variant of `tier` of `entry` (its own limits when empty), or null
// when the rule has no such tier (NoTierError).
[[gnu::always_inline]] inline const Variant* TierOf(const RuleEntry& entry, std::string_view tier) {
  if (tier.empty()) return &entry.base;
  auto t = entry.tiers.find(View(tier));
  return t == entry.tiers.end() ? nullptr : &t->second;
}
Status NoTierError(std::string_view rule, std::string_view tier);
Status UnknownRuleError(std::string_view rule);

// The subject's override of `entry`, if one is in force at now_ms; else
// `variant`.
inline const Variant* Overridden(const RuleEntry& entry, std::string_view subject,
                                 const Variant* variant, int64_t now_ms) {
  auto it = entry.overrides.find(View(subject));
  if (it == entry.overrides.end()) return variant;
  if (it->second.expires_at_ms != 0 && it->second.expires_at_ms <= now_ms) return variant;
  return &it->second.variant;
}

// The rules in force: the config file's, plus the control plane's runtime
// rules and overrides. Thread-safe.
class RuleBook {
 public:
  // Called with a rule set about to be published, under the book's lock:
  // an error keeps the rules in force (the alerts' delivery must run
  // before a rule with alerts can decide).
  using BeforePublish = std::function<Status(const RuleSet&)>;

  // Variants are described to `store` (Store::Describe) as they first
  // appear; both must outlive the book.
  RuleBook(store::Store& store, BeforePublish before_publish);
  ~RuleBook();

  // The config file's rules (at start, and at a reload), with the control
  // records given last. An error changes nothing.
  Status Load(const Config& file);
  // The control plane's records in force from now, with the file given
  // last. An error changes nothing.
  Status Apply(const ControlRecords& records);

  // The current rule set, from this thread's cache when still current; the
  // cache keeps it alive until this thread's next call.
  const RuleSet& Current() const { return *Cache().rules; }
  // The current rule set, kept alive by the caller (an answer that comes
  // later holds it).
  std::shared_ptr<const RuleSet> Keep() const { return Cache().rules; }
  // The rule named `rule` in force, or null. Inlined into a decision (a
  // call of its own shows in a hot-key decision: ~3 %).
  [[gnu::always_inline]] const RuleEntry* Find(std::string_view rule) const {
    ThreadCache& cache = Cache();
    if (cache.last_entry != nullptr && cache.last_rule == rule) return cache.last_entry;
    auto it = cache.rules->rules.find(View(rule));
    if (it == cache.rules->rules.end()) return nullptr;
    cache.last_rule.assign(rule);
    cache.last_entry = &it->second;
    return cache.last_entry;
  }
  // A decision's rule, tier, key and cost, checked; the variant to decide
  // with (before any override) and its entry.
  [[gnu::always_inline]] Status Resolve(std::string_view rule, std::string_view key, int64_t cost,
                                        std::string_view tier, const Variant** variant,
                                        const RuleEntry** found) const;
  // A lease operation's rule, tier and key, checked as Resolve does a
  // decision's; the variant in force for the subject at now_ms (its
  // override's).
  Status ResolveLease(std::string_view rule, std::string_view key, std::string_view tier,
                      int64_t now_ms, const Variant** variant) const;

  // Whether an override of `rule` is in force for `key` at now_ms (what
  // checks use).
  bool HasOverride(std::string_view rule, std::string_view key, int64_t now_ms) const {
    const RuleEntry* entry = Find(rule);
    if (entry == nullptr || entry->overrides.empty()) return false;
    return Overridden(*entry, key, &entry->base, now_ms) != &entry->base;
  }
  // Each priority class of each rule in force (Rule::priorities), in the
  // config's order, with its decisions since the server started (every
  // tier's and override's together).
  struct ClassStat {
    std::string rule;
    std::string name;
    int keep_percent = 0;
    int64_t admitted = 0;
    int64_t denied = 0;
  };
  std::vector<ClassStat> ClassStats() const;
  // The config in force (the file's rules and the runtime ones).
  Config config() const { return Current().config; }
  // The config file's rule named `name`, if any (a runtime rule is not).
  // The pointer is valid until the next Load.
  const Rule* FileRule(std::string_view name) const;
  // The rule named `name` in force (file or runtime), if any: a copy.
  std::optional<Rule> RuleNamed(std::string_view name) const;

 private:
  struct ThreadCache {
    uint64_t book = 0;
    uint64_t generation = 0;
    std::shared_ptr<const RuleSet> rules;
    // The last rule looked up: a request stream mostly names one rule, and
    // comparing its name is cheaper than hashing it.
    std::string last_rule;
    const RuleEntry* last_entry = nullptr;
  };
  ThreadCache& Cache() const {
    thread_local ThreadCache cache;
    const uint64_t gen = generation_.load(std::memory_order_acquire);
    if (cache.book != id_ || cache.generation != gen || !cache.rules) [[unlikely]] {
      Refresh(cache);
    }
    return cache;
  }
  void Refresh(ThreadCache& cache) const;
  // Builds a RuleSet from file_ and records_, describing new variants to
  // the store; publishes it if before_publish_ agrees. Under mu_.
  Status Rebuild();
  Result<std::shared_ptr<const RuleSet>> Build();

  store::Store& store_;
  const BeforePublish before_publish_;
  // By rule and class (Build, under mu_): kept across reloads.
  absl::flat_hash_map<std::string, std::shared_ptr<ClassCounts>> class_counts_;
  const uint64_t id_;  // tells books apart in the thread caches

  mutable std::mutex mu_;
  std::shared_ptr<const RuleSet> current_;   // guarded by mu_
  std::atomic<uint64_t> generation_{1};      // bumped under mu_
  Config file_;                              // guarded by mu_
  std::unique_ptr<ControlRecords> records_;  // guarded by mu_
  // Definition -> id, and id -> Store::Describe's tag: a variant keeps
  // its id and tag across rebuilds. Guarded by mu_ (Build works on copies
  // and commits them when every rule compiled).
  absl::flat_hash_map<std::string, uint32_t> variant_ids_;
  absl::flat_hash_map<uint32_t, std::string> variant_tags_;
  uint32_t num_variants_ = store::kFirstRuleId;
};

inline Status RuleBook::Resolve(std::string_view rule, std::string_view key, int64_t cost,
                                std::string_view tier, const Variant** variant,
                                const RuleEntry** found) const {
  const RuleEntry* entry = Find(rule);
  if (entry == nullptr) return UnknownRuleError(rule);
  *found = entry;
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

}  // namespace floodgate::service
