// Limiter: rules and tiers resolved to compiled variants, state in the
// embedded MemoryStore, one clock read per decision.
#include "floodgate/limiter.h"

#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "core/rule_eval.h"
#include "engine/memory_store.h"

namespace floodgate {
namespace {

// A rule's variants: its own limits and one per tier, each with its own state.
struct RuleVariants {
  uint32_t base = 0;
  absl::flat_hash_map<std::string, uint32_t> tiers;
};

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

void ReleaseSlidingLog(int64_t* state) { core::ReleaseRuleState(Algorithm::kSlidingLog, state); }

}  // namespace

struct Limiter::Impl {
  Impl(Config c, const Clock& clk) : config(std::move(c)), clock(clk) {}

  Config config;
  const Clock& clock;
  std::vector<core::CompiledRule> variants;  // indexed by variant id
  absl::flat_hash_map<std::string, RuleVariants> rules;
  std::unique_ptr<engine::MemoryStore> store;
};

Result<std::unique_ptr<Limiter>> Limiter::Create(const Config& config, const Clock& clock) {
  auto impl = std::make_unique<Impl>(config, clock);
  std::vector<engine::VariantLayout> layouts;
  auto add_variant = [&](const Rule& rule, const std::string& tier,
                         const std::vector<Limit>& limits) -> Result<uint32_t> {
    auto compiled = core::CompileRule(rule, tier, limits);
    if (!compiled.ok()) return compiled.status();
    const auto id = static_cast<uint32_t>(impl->variants.size());
    if (id >= 65536) return InvalidArgumentError("too many rules and tiers (at most 65536)");
    engine::VariantLayout layout;
    layout.state_words = compiled->state_words;
    if (compiled->algorithm == Algorithm::kSlidingLog) layout.release = &ReleaseSlidingLog;
    layouts.push_back(layout);
    impl->variants.push_back(std::move(*compiled));
    return id;
  };
  for (const Rule& rule : config.rules) {
    if (impl->rules.contains(View(rule.name))) {
      return InvalidArgumentError("duplicate rule '" + rule.name + "'");
    }
    RuleVariants rv;
    auto base = add_variant(rule, "", rule.limits);
    if (!base.ok()) return base.status();
    rv.base = *base;
    for (const auto& [tier, limits] : rule.tiers) {
      auto id = add_variant(rule, tier, limits);
      if (!id.ok()) return id.status();
      rv.tiers.emplace(tier, *id);
    }
    impl->rules.emplace(rule.name, std::move(rv));
  }
  impl->store = std::make_unique<engine::MemoryStore>(config.engine, std::move(layouts), clock);
  return std::unique_ptr<Limiter>(new Limiter(std::move(impl)));
}

Limiter::Limiter(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Limiter::~Limiter() = default;

Result<Decision> Limiter::Check(std::string_view rule, std::string_view key, int64_t cost,
                                std::string_view tier) {
  Decision decision;
  if (Status s = Check(rule, key, cost, tier, &decision); !s.ok()) return s;
  return decision;
}

Status Limiter::Check(std::string_view rule, std::string_view key, int64_t cost,
                      std::string_view tier, Decision* decision) {
  auto it = impl_->rules.find(View(rule));
  if (it == impl_->rules.end()) return NotFoundError("unknown rule '" + std::string(rule) + "'");
  uint32_t variant = it->second.base;
  if (!tier.empty()) {
    auto t = it->second.tiers.find(View(tier));
    if (t == it->second.tiers.end()) {
      return NotFoundError("rule '" + std::string(rule) + "' has no tier '" + std::string(tier) +
                           "'");
    }
    variant = t->second;
  }
  if (Status s = KeyError(key); !s.ok()) return s;
  if (cost < 0 || cost > kMaxLimitCount) {
    return InvalidArgumentError("cost " + std::to_string(cost) + " is out of range [0, " +
                                std::to_string(kMaxLimitCount) + "]");
  }
  const core::CompiledRule& compiled = impl_->variants[variant];
  const int64_t now_ms = impl_->clock.NowMs();
  return impl_->store->Update(variant, key, now_ms, [&](int64_t* state, bool /*fresh*/) {
    return core::EvaluateRule(compiled, state, now_ms, cost, decision);
  });
}

Status Limiter::Reset(std::string_view rule, std::string_view key) {
  auto it = impl_->rules.find(View(rule));
  if (it == impl_->rules.end()) return NotFoundError("unknown rule '" + std::string(rule) + "'");
  if (Status s = KeyError(key); !s.ok()) return s;
  impl_->store->Erase(it->second.base, key);
  for (const auto& [tier, id] : it->second.tiers) impl_->store->Erase(id, key);
  return Status::Ok();
}

int64_t Limiter::SweepExpired() { return impl_->store->SweepExpired(impl_->clock.NowMs()); }

Limiter::Stats Limiter::GetStats() const {
  const auto s = impl_->store->GetStats();
  return Stats{s.entries, s.rejected_full, s.expired_freed};
}

const Config& Limiter::config() const { return impl_->config; }

}  // namespace floodgate
