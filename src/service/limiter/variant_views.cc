// Views of a variant: see variant_views.h.
#include "service/limiter/variant_views.h"

#include <algorithm>
#include <string>
#include <utility>

namespace floodgate::service {

core::CompiledRule KeptBack(const core::CompiledRule& compiled, int keep_percent) {
  core::CompiledRule view = compiled;
  int64_t most = 0;
  for (core::LimitParams& p : view.limits) {
    // Ceil: a share above 0 % keeps at least one unit back. capacity x 99
    // fits in int64 (capacity <= 10^15).
    const int64_t kept = (p.capacity * keep_percent + 99) / 100;
    most = std::max(most, kept);
    // token_bucket and gcra: the capacity is the burst, and count the rate,
    // which a class does not change; the others count up to `count`.
    if (view.algorithm != Algorithm::kTokenBucket && view.algorithm != Algorithm::kGcra) {
      p.count -= kept;
    }
    p.capacity -= kept;
  }
  view.kept_back = most;
  return view;
}

core::CompiledRule ChargedAnyway(const core::CompiledRule& compiled) {
  core::CompiledRule view = compiled;
  for (core::LimitParams& p : view.limits) {
    switch (view.algorithm) {
      case Algorithm::kFixedWindow:
        p.count = p.capacity = kMaxLimitCount;
        break;
      case Algorithm::kSlidingWindow:
        p.count = p.capacity = std::max(p.count, core::kMaxExact / p.period_ms);
        break;
      case Algorithm::kSlidingLog:
        p.count = p.capacity = std::max(p.count, core::kMaxSlidingLogCount);
        break;
      case Algorithm::kTokenBucket:
        p.capacity = std::max(p.capacity, core::kMaxExact / p.period_ms);
        break;
      case Algorithm::kGcra:
        p.capacity = std::max(p.capacity, core::kMaxGcraSpanUs / p.emission_us);
        break;
      case Algorithm::kConcurrency:
        break;  // leases, never charged
    }
  }
  // Straight to the shared state: the units were spent already, whatever a
  // server's slice holds (docs/slices.md).
  view.slices = SliceConfig{};
  view.kept_back = core::kChargedAnyway;
  return view;
}

void AddViews(const Rule& rule, Variant& variant,
              const std::function<std::shared_ptr<ClassCounts>(const std::string&)>& counts) {
  if (rule.is_concurrency()) return;
  auto view_of = [&variant](core::CompiledRule compiled) {
    Variant v;
    v.compiled = std::move(compiled);
    v.id = variant.id;
    v.tag = variant.tag;
    v.alerts = variant.alerts;
    v.block_for_ms = variant.block_for_ms;
    v.slow = variant.slow;
    return v;
  };
  variant.charge = std::make_shared<const Variant>(view_of(ChargedAnyway(variant.compiled)));
  if (rule.priorities.empty()) return;
  auto views = std::make_shared<ClassViews>();
  std::vector<PriorityClass> classes = rule.priorities;
  const bool named_default =
      std::any_of(classes.begin(), classes.end(),
                  [](const PriorityClass& c) { return c.name == kDefaultPriority; });
  if (!named_default) classes.push_back({std::string(kDefaultPriority), 0});
  for (const PriorityClass& c : classes) {
    ClassView view{c.name, c.keep_percent,
                   view_of(c.keep_percent > 0 ? KeptBack(variant.compiled, c.keep_percent)
                                              : variant.compiled)};
    view.variant.class_counts = counts(c.name);
    view.variant.slow = true;  // counted after each decision (LimiterCore::DecideSlow)
    views->classes.push_back(std::move(view));
  }
  views->fallback = views->Find(kDefaultPriority);
  variant.classes = std::move(views);
}

Status ClassOf(std::string_view rule, const Variant& variant, std::string_view priority,
               const Variant** out) {
  if (variant.classes == nullptr) {
    if (priority.empty() || priority == kDefaultPriority) {
      *out = &variant;
      return Status::Ok();
    }
    return InvalidArgumentError("rule '" + std::string(rule) + "' has no priority class '" +
                                std::string(priority) + "' (it has no priorities)");
  }
  const ClassView* c =
      priority.empty() ? variant.classes->fallback : variant.classes->Find(priority);
  if (c == nullptr) {
    std::string names;
    for (const ClassView& v : variant.classes->classes) {
      names += (names.empty() ? "" : ", ") + v.name;
    }
    return InvalidArgumentError("rule '" + std::string(rule) + "' has no priority class '" +
                                std::string(priority) + "'; its classes are " + names);
  }
  *out = &c->variant;
  return Status::Ok();
}

}  // namespace floodgate::service
