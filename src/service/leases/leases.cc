// Leases: see leases.h.
#include "service/leases/leases.h"

#include <future>
#include <memory>

#include "common/random_id.h"
#include "core/rule_eval.h"

namespace floodgate::service {

Leases::Leases(const Clock& clock, store::LeaseStore& store, const store::Backend& backend,
               const RuleBook& rules, const Controls& controls, FallbackCounts& fallbacks)
    : clock_(clock),
      store_(store),
      backend_(backend),
      rules_(rules),
      controls_(controls),
      fallbacks_(fallbacks) {}

void Leases::Acquire(const LeaseArgs& args, store::Done<LeaseAnswer> done) {
  const Variant* variant = nullptr;
  if (Status s = rules_.ResolveLease(args.rule, args.key, args.tier, clock_.NowMs(), &variant);
      !s.ok()) {
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
  if (controls_.any() && controls_.any_block()) {
    const int64_t now = clock_.NowMs();
    std::string_view reason;
    if (const int64_t until = controls_.BlockedUntil(rule.name, args.key, now, &reason);
        until != 0) {
      ledger_.Refused(rule.name);
      LeaseAnswer a;
      a.limit = max_in_flight;
      a.in_flight = -1;
      a.ms = until - now;
      a.blocked = true;
      a.block_reason = reason;
      return done(Status::Ok(), a);
    }
  }
  std::string id = NewRandomId();
  store::LeaseOp op{
      store::LeaseOpKind::kAcquire, rule.name, args.key, id, ttl, max_in_flight, args.at_ms};
  // The answer, now or later: a store that could not decide answers by the
  // rule's fallback policy, as a decision would.
  auto finish = [this, &rule, max_in_flight, id](const Status& s,
                                                 const store::LeaseResult& r) -> LeaseAnswer {
    LeaseAnswer a;
    a.limit = max_in_flight;
    if (!s.ok()) {
      const bool full = fallbacks_.Count(s);
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
      ledger_.Granted(rule.name, id, r.now_ms + r.ms);
    } else {
      ledger_.Refused(rule.name);
    }
    return a;
  };
  store::LeaseResult result;
  Status status;
  // Rules are kept alive by the thread cache only until this thread's next
  // call: the later answer holds its own reference.
  std::shared_ptr<const RuleSet> keep = rules_.Keep();
  if (store_.Lease(op, &result, &status, [&]() -> store::Done<store::LeaseResult> {
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
Leases::LeaseAnswer LeaseOutcome(const store::LeaseResult& r, int64_t limit) {
  Leases::LeaseAnswer a;
  a.ok = r.ok;
  a.in_flight = r.in_flight;
  a.limit = limit;
  a.ms = r.ms;
  return a;
}

}  // namespace

void Leases::Release(const LeaseArgs& args, store::Done<LeaseAnswer> done) {
  ReleaseOrRenew(store::LeaseOpKind::kRelease, args, std::move(done));
}

void Leases::Renew(const LeaseArgs& args, store::Done<LeaseAnswer> done) {
  ReleaseOrRenew(store::LeaseOpKind::kRenew, args, std::move(done));
}

void Leases::ReleaseOrRenew(store::LeaseOpKind kind, const LeaseArgs& args,
                            store::Done<LeaseAnswer> done) {
  const Variant* variant = nullptr;
  if (Status s = rules_.ResolveLease(args.rule, args.key, args.tier, clock_.NowMs(), &variant);
      !s.ok()) {
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
  auto finish = [this, renew, rule, limit, lease = std::string(args.lease),
                 key = std::string(args.key)](const store::LeaseResult& r) {
    if (r.ok && renew) ledger_.Renewed(rule, lease, r.now_ms + r.ms);
    if (r.ok && !renew) {
      ledger_.Released(rule, lease);
      if (on_release_) on_release_(rule, key);  // a waiter may take it now
    }
    return LeaseOutcome(r, limit);
  };
  store::LeaseResult result;
  Status status;
  if (store_.Lease(op, &result, &status, [&]() -> store::Done<store::LeaseResult> {
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

Result<Leases::LeaseAnswer> Leases::AndWait(store::LeaseOpKind kind, const LeaseArgs& args) {
  if (Status s = backend_.BlockingAllowed(); !s.ok()) return s;
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

}  // namespace floodgate::service
