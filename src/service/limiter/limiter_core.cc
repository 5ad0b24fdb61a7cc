// LimiterCore: rules and tiers resolved to compiled variants (RuleBook),
// decided by the store it is given, one clock read per decision.
#include "service/limiter/limiter_core.h"

#include <future>
#include <optional>
#include <string>
#include <tuple>
#include <utility>

#include "common/ip_address.h"
#include "core/alerts.h"
#include "core/rule_eval.h"
#include "service/alerts/alerts_impl.h"
#include "service/limiter/blocking.h"
#include "service/limiter/controls.h"
#include "service/limiter/variant_views.h"

namespace floodgate::service {
namespace {

// The reason of a block a rule's block_for makes (the block names its rule).
// Static text: the denial that starts the block views it, and that denial
// may be answered on another thread after its rules are gone (a later
// answer), so it must outlive any decision.
constexpr std::string_view kBlockForReason = "block_for after a denial";

}  // namespace

LimiterCore::LimiterCore(const Clock& clock, store::Store& store, const store::Backend& backend,
                         const RuleBook& rules, Controls& controls, AlertsImpl& alerts,
                         FallbackCounts& fallbacks)
    : clock_(clock),
      store_(store),
      backend_(backend),
      rules_(rules),
      controls_(controls),
      alerts_(alerts),
      fallbacks_(fallbacks) {}

void DenyAsBlocked(const core::CompiledRule& rule, int64_t left_ms, std::string_view reason,
                   Decision* decision) {
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

bool LimiterCore::Blocked(const Variant& variant, std::string_view subject,
                          Decision* decision) const {
  const core::CompiledRule& rule = variant.compiled;
  const int64_t now = clock_.NowMs();
  std::string_view reason;
  int64_t until =
      controls_.any_block() ? controls_.BlockedUntil(rule.name, subject, now, &reason) : 0;
  // A subject that is an address is blocked by a blocked network holding
  // it too, the later end winning; read as one only while some network is
  // blocked.
  if (controls_.any_address_block()) {
    if (const std::optional<IpAddress> address = IpAddress::Parse(subject)) {
      std::string_view network_reason;
      const int64_t network_until =
          controls_.AddressBlockedUntil(*address, rule.name, now, &network_reason);
      if (network_until > until) {
        until = network_until;
        reason = network_reason;
      }
    }
  }
  if (until == 0) return false;
  DenyAsBlocked(rule, until - now, reason, decision);
  return true;
}

Status LimiterCore::Finish(const Variant& variant, std::string_view subject, const Status& s,
                           Decision* decision, const core::AlertOutcome* fired) {
  if (!s.ok()) {
    const core::CompiledRule& rule = variant.compiled;
    if (fallbacks_.Count(s)) {
      core::FallbackDecision(rule, rule.on_store_full == OnStoreFull::kAllow, Fallback::kStoreFull,
                             decision);
    } else {
      core::FallbackDecision(rule, rule.on_backend_error == OnBackendError::kAllow,
                             Fallback::kBackendError, decision);
    }
    return Status::Ok();
  }
  if (fired != nullptr && variant.alerts != nullptr && fired->any()) {
    alerts_.Emit(variant.compiled, *variant.alerts, subject, *fired, fired->at_ms);
  }
  return s;
}

void LimiterCore::MaybeBlockFor(const Variant& variant, std::string_view subject, Decision* d) {
  if (variant.block_for_ms == 0 || d->allowed || d->fallback != Fallback::kNone || d->blocked)
    return;
  controls_.BlockFor(variant.compiled.name, subject, clock_.NowMs() + variant.block_for_ms,
                     kBlockForReason);
  DenyAsBlocked(variant.compiled, variant.block_for_ms, kBlockForReason, d);
}

namespace {
// A priority class's decision, counted (shadow denials as denials: they
// are what the class would have been refused).
void CountClass(ClassCounts& counts, const Decision& d) {
  const bool denied = !d.allowed || d.shadow_denied;
  (denied ? counts.denied : counts.admitted).fetch_add(1, std::memory_order_relaxed);
}

// The variant this thread decided last: the guess Check prefetches for.
thread_local uint32_t t_last_variant_id = store::kFirstRuleId;
}  // namespace

store::Answer LimiterCore::Check(const CheckArgs& args, Decision* decision, Status* status,
                                 store::Later<Decision> later, store::Batch* batch) {
  // With a million subjects the subject's state is a cache miss, the
  // largest cost of a decision on the embedded store. Unless the caller
  // prefetched (a pipeline: read_ms), start it now with the variant this
  // thread decided last, so that it overlaps resolving the rule and reading
  // the clock; a wrong guess costs a wasted prefetch. Not for keys Resolve
  // will refuse as too long: that would be work for nothing.
  const uint32_t guessed = t_last_variant_id;
  size_t prefetched = 0;
  if (args.read_ms == 0 && args.key.size() <= kMaxKeyBytes) {
    prefetched = store_.Prefetch(guessed, args.key);
  }
  const Variant* variant = nullptr;
  const RuleEntry* entry = nullptr;
  if (Status s = rules_.Resolve(args.rule, args.key, args.cost, args.tier, &variant, &entry);
      !s.ok()) {
    *status = std::move(s);
    return store::Answer::kNow;
  }
  // The control plane's: one relaxed load and a branch while there is no
  // override and no block at all (docs/benchmarks.md has the A/B).
  if (controls_.any()) [[unlikely]] {
    if (!entry->overrides.empty()) variant = Overridden(*entry, args.key, variant, clock_.NowMs());
    if ((controls_.any_block() || controls_.any_address_block()) && !args.ignore_blocks &&
        Blocked(*variant, args.key, decision)) {
      *status = Status::Ok();
      return store::Answer::kNow;
    }
  }
  // Priorities: one load and a branch for a rule without them, when the
  // check names no class.
  if (variant->classes != nullptr || !args.priority.empty()) [[unlikely]] {
    if (Status s =
            args.whole_limit ? Status::Ok() : ClassOf(args.rule, *variant, args.priority, &variant);
        !s.ok()) {
      *status = std::move(s);
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
    return DecideSlow(op, *variant, decision, status, later, batch);
  }
  return Decide(op, *variant, decision, status, later, batch);
}

store::Answer LimiterCore::Decide(const store::CheckOp& op, const Variant& variant,
                                  Decision* decision, Status* status, store::Later<Decision> later,
                                  store::Batch* batch) {
  const store::Answer answer = store_.Check(
      op, decision, status,
      [&]() -> store::CheckDone {
        // The variant lives in this thread's rule set: the callback keeps
        // that alive until the answer.
        return [this, rules = rules_.Keep(), variant = &variant,
                subject = variant.alerts != nullptr || variant.block_for_ms != 0
                              ? std::string(op.subject)
                              : std::string(),
                done = later()](const Status& s, const Decision& d,
                                const core::AlertOutcome* fired) mutable {
          Decision answered = d;
          const Status st = Finish(*variant, subject, s, &answered, fired);
          if (variant->block_for_ms != 0 && st.ok()) MaybeBlockFor(*variant, subject, &answered);
          if (variant->class_counts != nullptr && st.ok()) {
            CountClass(*variant->class_counts, answered);
          }
          done(st, answered);
        };
      },
      batch);
  if (answer == store::Answer::kNow && (!status->ok() || op.alerts != nullptr)) [[unlikely]] {
    *status = Finish(variant, op.subject, *status, decision, op.alerts);
  }
  return answer;
}

store::Answer LimiterCore::DecideSlow(store::CheckOp op, const Variant& variant, Decision* decision,
                                      Status* status, store::Later<Decision> later,
                                      store::Batch* batch) {
  core::AlertOutcome outcome;
  if (variant.alerts != nullptr) op.alerts = &outcome;
  const store::Answer answer = Decide(op, variant, decision, status, later, batch);
  // A later answer does these in its callback (Decide).
  if (variant.block_for_ms != 0 && answer == store::Answer::kNow && status->ok()) {
    MaybeBlockFor(variant, op.subject, decision);
  }
  if (variant.class_counts != nullptr && answer == store::Answer::kNow && status->ok()) {
    CountClass(*variant.class_counts, *decision);
  }
  return answer;
}

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
  Waiter<Decision> waiter(*this);
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

std::unique_ptr<store::Batch> LimiterCore::NewBatch(int max_calls_in_flight) {
  return store_.NewBatch(max_calls_in_flight);
}

store::Answer LimiterCore::Throttle(const store::ThrottleOp& op, ThrottleResult* result,
                                    Status* status, store::Later<ThrottleResult> later) {
  if (Status s = KeyError(op.key); !s.ok()) {
    *status = std::move(s);
    return store::Answer::kNow;
  }
  // No rule, so no on_backend_error: a failed backend is an error reply.
  const store::Answer answer = store_.Throttle(op, result, status, later);
  if (answer == store::Answer::kNow && status->code() == StatusCode::kResourceExhausted) {
    // No rule, so no on_store_full either: a full store denies, as a rule
    // does by default, with the figures it cannot know left unknown.
    fallbacks_.store_full.fetch_add(1, std::memory_order_relaxed);
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
  const RuleEntry* entry = rules_.Find(rule);
  if (entry == nullptr) return done(UnknownRuleError(rule));
  if (Status s = KeyError(key); !s.ok()) return done(s);
  Status status;
  const store::ResetOp op{rule, entry->tier_names, entry->ids, key};
  if (store_.Reset(op, &status, [&] { return std::move(done); }) == store::Answer::kNow) {
    done(status);
  }
}

Status LimiterCore::BlockingAllowed() const { return backend_.BlockingAllowed(); }

void LimiterCore::Prefetch(std::string_view rule, std::string_view key, std::string_view tier) {
  const RuleEntry* entry = rules_.Find(rule);
  if (entry == nullptr) return;
  const Variant* variant = TierOf(*entry, tier);
  if (variant != nullptr) store_.Prefetch(variant->id, key);
}

void LimiterCore::PrefetchThrottle(std::string_view key) {
  store_.Prefetch(store::kThrottleId, key);
}

LimiterStats LimiterCore::GetStats() const {
  const store::Store::Usage u = store_.GetUsage();
  LimiterStats stats;
  stats.entries = u.entries;
  stats.rejected_full = u.rejected_full;
  stats.expired_freed = u.expired_freed;
  stats.store_bytes = u.bytes;
  stats.fallback_store_full = fallbacks_.store_full.load(std::memory_order_relaxed);
  stats.fallback_backend_error = fallbacks_.backend_error.load(std::memory_order_relaxed);
  stats.backend_errors = u.backend_errors;
  stats.local_cache_denials = u.local_cache_denials;
  stats.local_cache_entries = u.local_cache_entries;
  stats.open_circuits = u.open_circuits;
  stats.backend_timeouts = u.backend_timeouts;
  stats.wrong_type = u.wrong_type;
  stats.store_kind = u.kind;
  return stats;
}

// --- Charges ---

void LimiterCore::Charge(const CheckArgs& args, CheckCallback done) {
  const Variant* variant = nullptr;
  const RuleEntry* entry = nullptr;
  if (Status s = rules_.Resolve(args.rule, args.key, args.cost, args.tier, &variant, &entry);
      !s.ok()) {
    return done(s, Decision{});
  }
  if (!entry->overrides.empty()) variant = Overridden(*entry, args.key, variant, clock_.NowMs());
  if (variant->charge == nullptr) {
    return done(InvalidArgumentError("rule '" + std::string(args.rule) +
                                     "' counts no units to charge (a concurrency rule)"),
                Decision{});
  }
  const Variant& charge = *variant->charge;
  store::CheckOp op{charge.Ref(), args.key, args.cost, args.at_ms, args.read_ms, nullptr};
  core::AlertOutcome outcome;
  if (charge.alerts != nullptr) op.alerts = &outcome;
  Decision decision;
  Status status;
  const store::Answer answer = store_.Check(
      op, &decision, &status,
      [&]() -> store::CheckDone {
        return [this, rules = rules_.Keep(), variant = &charge, subject = std::string(args.key),
                done = std::move(done)](const Status& s, const Decision& d,
                                        const core::AlertOutcome* fired) mutable {
          if (!s.ok()) return done(s, Decision{});
          Decision answered = d;
          done(Finish(*variant, subject, s, &answered, fired), answered);
        };
      },
      nullptr);
  if (answer == store::Answer::kNow) {
    if (!status.ok()) return done(status, Decision{});
    done(Finish(charge, args.key, status, &decision, op.alerts), decision);
  }
}

// --- Refunds ---

void LimiterCore::Refund(const RefundArgs& args, store::Done<core::RefundResult> done) {
  const Variant* variant = nullptr;
  const RuleEntry* entry = nullptr;
  // Rule, tier and key as a decision's (a cost of 0 passes Resolve); the
  // cost as a refund's: giving back nothing is a caller's mistake.
  if (Status s = rules_.Resolve(args.rule, args.key, 0, args.tier, &variant, &entry); !s.ok()) {
    return done(s, core::RefundResult{});
  }
  // A subject with an override spends its override's state: that is what
  // gets the units back.
  if (!entry->overrides.empty()) {
    variant = Overridden(*entry, args.key, variant, clock_.NowMs());
  }
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
      store_.Refund(op, &result, &status, [&]() -> store::Done<core::RefundResult> {
        // The variant lives in this thread's rule set: the callback keeps
        // that alive until the answer.
        return [rules = rules_.Keep(), done = std::move(done)](
                   const Status& s, const core::RefundResult& r) mutable { done(s, r); };
      });
  if (answer == store::Answer::kNow) done(status, status.ok() ? result : core::RefundResult{});
}

}  // namespace floodgate::service
