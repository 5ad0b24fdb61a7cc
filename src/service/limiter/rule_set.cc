// RuleBook: see rule_set.h.
#include "service/limiter/rule_set.h"

#include <algorithm>
#include <utility>

#include "common/log.h"
#include "service/control/control_plane.h"
#include "service/limiter/variant_views.h"

namespace floodgate::service {
namespace {

std::atomic<uint64_t> next_book_id{1};

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

}  // namespace

Status KeyError(std::string_view key) {
  if (key.empty()) return InvalidArgumentError("key must not be empty");
  if (key.size() > kMaxKeyBytes) {
    return InvalidArgumentError("key is " + std::to_string(key.size()) + " bytes; the limit is " +
                                std::to_string(kMaxKeyBytes));
  }
  return Status::Ok();
}

Status NoTierError(std::string_view rule, std::string_view tier) {
  return NotFoundError("rule '" + std::string(rule) + "' has no tier '" + std::string(tier) + "'");
}

Status UnknownRuleError(std::string_view rule) {
  return NotFoundError("unknown rule '" + std::string(rule) + "'");
}

RuleBook::RuleBook(store::Store& store, BeforePublish before_publish)
    : store_(store),
      before_publish_(std::move(before_publish)),
      id_(next_book_id.fetch_add(1)),
      records_(std::make_unique<ControlRecords>()) {}

RuleBook::~RuleBook() = default;

void RuleBook::Refresh(ThreadCache& cache) const {
  std::lock_guard<std::mutex> lock(mu_);
  cache.book = id_;
  cache.generation = generation_.load(std::memory_order_relaxed);
  cache.rules = current_;
  cache.last_entry = nullptr;
}

Status RuleBook::Load(const Config& file) {
  std::lock_guard<std::mutex> lock(mu_);
  Config previous = std::move(file_);
  file_ = file;
  Status s = Rebuild();
  if (!s.ok()) file_ = std::move(previous);
  return s;
}

Status RuleBook::Apply(const ControlRecords& records) {
  std::lock_guard<std::mutex> lock(mu_);
  auto previous = std::move(records_);
  records_ = std::make_unique<ControlRecords>(records);
  Status s = Rebuild();
  if (!s.ok()) records_ = std::move(previous);
  return s;
}

Status RuleBook::Rebuild() {
  auto built = Build();
  if (!built.ok()) return built.status();
  if (before_publish_) {
    if (Status s = before_publish_(**built); !s.ok()) return s;
  }
  current_ = std::move(*built);
  generation_.fetch_add(1, std::memory_order_release);
  return Status::Ok();
}

const Rule* RuleBook::FileRule(std::string_view name) const {
  std::lock_guard<std::mutex> lock(mu_);
  for (const Rule& r : file_.rules) {
    if (r.name == name) return &r;
  }
  return nullptr;
}

std::optional<Rule> RuleBook::RuleNamed(std::string_view name) const {
  const RuleSet& set = Current();
  for (const Rule& r : set.config.rules) {
    if (r.name == name) return r;
  }
  return std::nullopt;
}

std::vector<RuleBook::ClassStat> RuleBook::ClassStats() const {
  std::vector<ClassStat> out;
  const RuleSet& set = Current();
  for (const Rule& rule : set.config.rules) {
    const RuleEntry* entry = Find(rule.name);
    if (entry == nullptr || entry->base.classes == nullptr) continue;
    for (const ClassView& c : entry->base.classes->classes) {
      const ClassCounts& n = *c.variant.class_counts;
      out.push_back({rule.name, c.name, c.keep_percent, n.admitted.load(std::memory_order_relaxed),
                     n.denied.load(std::memory_order_relaxed)});
    }
  }
  return out;
}

Status RuleBook::ResolveLease(std::string_view rule, std::string_view key, std::string_view tier,
                              int64_t now_ms, const Variant** variant) const {
  const RuleEntry* entry = Find(rule);
  if (entry == nullptr) return UnknownRuleError(rule);
  if (entry->base.compiled.algorithm != Algorithm::kConcurrency) {
    return InvalidArgumentError("rule '" + std::string(rule) + "' is not a concurrency rule (" +
                                std::string(AlgorithmName(entry->base.compiled.algorithm)) +
                                "): check it rather than acquire a lease");
  }
  const Variant* v = TierOf(*entry, tier);
  if (v == nullptr) return NoTierError(rule, tier);
  if (!KeyFits(key)) return KeyError(key);
  *variant = entry->overrides.empty() ? v : Overridden(*entry, key, v, now_ms);
  return Status::Ok();
}

Result<std::shared_ptr<const RuleSet>> RuleBook::Build() {
  const Config& file = file_;
  // The file's rules, then runtime rules of other names (a file rule of the
  // same name wins: a runtime rule cannot shadow the file).
  Config config = file;
  for (const RuntimeRuleRecord& r : records_->rules) {
    const bool in_file = std::any_of(config.rules.begin(), config.rules.end(),
                                     [&](const Rule& f) { return f.name == r.name; });
    if (!in_file) config.rules.push_back(r.rule);
  }
  auto set = std::make_shared<RuleSet>();
  set->config = config;
  // Ids are assigned to a scratch copy and committed only if all rules
  // compile; a new id is described to the store once all have.
  auto ids = variant_ids_;
  uint32_t next_id = num_variants_;
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
  for (const OverrideRecord& o : records_->overrides) {
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
  auto tags = variant_tags_;
  for (Variant* v : all) {
    auto it = tags.find(v->id);
    if (it == tags.end()) {
      auto tag = store_.Describe(v->compiled, v->id);
      if (!tag.ok()) return tag.status();
      it = tags.emplace(v->id, std::move(*tag)).first;
    }
    v->tag = it->second;
  }
  // The views (variant_views.h), once each variant has its tag: a class's
  // counts outlive reloads, found by rule and class.
  auto counts = [this](const std::string& rule, const std::string& name) {
    std::shared_ptr<ClassCounts>& c = class_counts_[rule + '\0' + name];
    if (c == nullptr) c = std::make_shared<ClassCounts>();
    return c;
  };
  for (const Rule& rule : config.rules) {
    RuleEntry& entry = set->rules.find(View(rule.name))->second;
    auto for_rule = [&](const std::string& name) { return counts(rule.name, name); };
    AddViews(rule, entry.base, for_rule);
    for (auto& [tier, v] : entry.tiers) AddViews(rule, v, for_rule);
    for (auto& [subject, o] : entry.overrides) AddViews(rule, o.variant, for_rule);
  }
  variant_tags_ = std::move(tags);
  variant_ids_ = std::move(ids);
  num_variants_ = next_id;
  return std::shared_ptr<const RuleSet>(std::move(set));
}

}  // namespace floodgate::service
