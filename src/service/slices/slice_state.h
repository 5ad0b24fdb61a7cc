// What FG.STATE and GET /v1/admin/subjects/{rule}/{key} show of a
// subject's slices (docs/slices.md): this server's holding of the variant
// the subject is decided with (its override's when one is in force).
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "service/limiter/rule_set.h"
#include "store/slices.h"

namespace floodgate::service {

// Nullopt when the rule (or tier) is unknown or has no slices, or the store
// has none (`view` null: the embedded store).
inline std::optional<store::SliceHolding> SlicesOf(const RuleBook& rules,
                                                   const store::SliceView* view,
                                                   std::string_view rule, std::string_view key,
                                                   std::string_view tier, int64_t now_ms) {
  if (view == nullptr) return std::nullopt;
  const RuleEntry* entry = rules.Find(rule);
  if (entry == nullptr) return std::nullopt;
  const Variant* variant = TierOf(*entry, tier);
  if (variant == nullptr) return std::nullopt;
  if (!entry->overrides.empty()) variant = Overridden(*entry, key, variant, now_ms);
  if (!variant->compiled.slices.enabled()) return std::nullopt;
  return view->HeldFor(variant->id, key);
}

}  // namespace floodgate::service
