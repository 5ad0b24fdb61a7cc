// Reservations: see reservations.h.
#include "service/reservations/reservations.h"

#include <algorithm>
#include <memory>
#include <string>
#include <utility>

#include "common/log.h"
#include "common/random_id.h"

namespace floodgate::service {
namespace {

Status CountError(std::string_view what, int64_t value, int64_t min) {
  return InvalidArgumentError(std::string(what) + " " + std::to_string(value) +
                              " is out of range: it must be from " + std::to_string(min) + " to " +
                              std::to_string(kMaxLimitCount));
}

// Whether `d` charged the estimate: admitted and counted. A fallback
// counted nothing (the store could not decide), a shadow rule's denial
// neither.
bool Charged(const Decision& d) {
  return d.allowed && !d.shadow_denied && d.fallback == Fallback::kNone && !d.blocked;
}

}  // namespace

Reservations::Reservations(LimiterCore& core, store::ReservationLedger& ledger)
    : core_(core), ledger_(ledger) {}

void Reservations::Reserve(const ReserveArgs& args, ReserveDone done) {
  if (args.estimate < 1 || args.estimate > kMaxLimitCount) {
    return done(CountError("estimate", args.estimate, 1), Reserved{});
  }
  if (args.ttl_ms < 1 || args.ttl_ms > store::kMaxReservationTtlMs) {
    return done(InvalidArgumentError("ttl_ms " + std::to_string(args.ttl_ms) +
                                     " is out of range: it must be from 1 to " +
                                     std::to_string(store::kMaxReservationTtlMs) + " (a day)"),
                Reserved{});
  }
  if (args.tier.size() > store::kMaxReservationTierBytes) {
    return done(InvalidArgumentError("tier is too long"), Reserved{});
  }
  // What the ledger needs once the check is answered, kept past this call.
  struct Pending {
    std::string rule, key, tier;
    int64_t estimate, ttl_ms;
    ReserveDone done;
    Reserved reserved;  // once the estimate is charged
  };
  auto p = std::make_shared<Pending>(Pending{std::string(args.rule),
                                             std::string(args.key),
                                             std::string(args.tier),
                                             args.estimate,
                                             args.ttl_ms,
                                             std::move(done),
                                             {}});
  LimiterCore::CheckArgs check;
  check.rule = args.rule;
  check.key = args.key;
  check.cost = args.estimate;
  check.tier = args.tier;
  check.priority = args.priority;
  core_.CheckAsync(check, [this, p](const Status& s, const Decision& d) {
    if (!s.ok() || !Charged(d)) return p->done(s, Reserved{d, {}});
    p->reserved = Reserved{d, NewRandomId()};
    const store::HoldOp hold{p->rule, p->key, p->reserved.id, p->tier, p->estimate, p->ttl_ms};
    auto held = [this, p](const Status& hs) {
      if (hs.ok()) return p->done(hs, p->reserved);
      // Not recorded: nobody could settle it, so the estimate goes back.
      LimiterCore::RefundArgs refund;
      refund.rule = p->rule;
      refund.key = p->key;
      refund.cost = p->estimate;
      refund.tier = p->tier;
      core_.Refund(refund, [p, hs](const Status& rs, const core::RefundResult&) {
        if (!rs.ok()) {
          Log(LogLevel::kWarn, "reservation not recorded, and its estimate not given back",
              {{"rule", p->rule}, {"error", rs.message()}});
        }
        p->done(hs, Reserved{});
      });
    };
    Status status;
    if (ledger_.Hold(hold, &status, [&]() -> store::Done<> { return std::move(held); }) ==
        store::Answer::kNow) {
      held(status);
    }
  });
}

void Reservations::Settle(const SettleArgs& args, SettleDone done) {
  if (args.actual < 0 || args.actual > kMaxLimitCount) {
    return done(CountError("actual", args.actual, 0), Settled{});
  }
  if (Status s = store::CheckReservationId(args.id); !s.ok()) return done(s, Settled{});
  // Rule and key as a check's, before the ledger is asked: a settle of an
  // unknown rule is a clear error, not "no reservation".
  if (const RuleEntry* entry = core_.rules().Find(args.rule); entry == nullptr) {
    return done(UnknownRuleError(args.rule), Settled{});
  }
  if (Status s = KeyError(args.key); !s.ok()) return done(s, Settled{});
  struct Pending {
    std::string rule, key, id;
    int64_t actual;
    SettleDone done;
    store::TakeResult taken;
    Settled settled;
  };
  auto p = std::make_shared<Pending>(Pending{std::string(args.rule),
                                             std::string(args.key),
                                             std::string(args.id),
                                             args.actual,
                                             std::move(done),
                                             {},
                                             {}});
  // The subject as a plain check sees it, to end with.
  auto peek = [this](std::shared_ptr<Pending> p) {
    LimiterCore::CheckArgs check;
    check.rule = p->rule;
    check.key = p->key;
    check.cost = 0;
    check.tier = p->taken.tier;
    check.ignore_blocks = true;
    check.whole_limit = true;
    core_.CheckAsync(check, [p](const Status& s, const Decision& d) {
      p->settled.after = d;
      p->done(s, p->settled);
    });
  };
  auto taken = [this, p, peek](const Status& s, const store::TakeResult& r) {
    if (!s.ok()) return p->done(s, Settled{});
    switch (r.outcome) {
      case store::TakeOutcome::kUnknown:
        return p->done(NotFoundError("no reservation '" + p->id + "' of rule '" + p->rule +
                                     "' for this key: never made, made for another key or "
                                     "rule, or past its TTL (then settled at its estimate)"),
                       Settled{});
      case store::TakeOutcome::kSettled:
        return p->done(FailedPreconditionError("reservation '" + p->id + "' was settled already"),
                       Settled{});
      case store::TakeOutcome::kTaken:
        break;
    }
    p->taken = r;
    p->settled.estimate = r.estimate;
    p->settled.actual = p->actual;
    const int64_t delta = p->actual - r.estimate;
    if (delta > 0) {
      LimiterCore::CheckArgs charge;
      charge.rule = p->rule;
      charge.key = p->key;
      charge.cost = delta;
      charge.tier = p->taken.tier;
      core_.Charge(charge, [p, peek, delta](const Status& cs, const Decision& d) {
        if (!cs.ok()) return p->done(cs, Settled{});
        p->settled.charged = p->taken.estimate + (d.allowed ? delta : 0);
        peek(p);
      });
    } else if (delta < 0) {
      LimiterCore::RefundArgs refund;
      refund.rule = p->rule;
      refund.key = p->key;
      refund.cost = -delta;
      refund.tier = p->taken.tier;
      core_.Refund(refund, [p](const Status& rs, const core::RefundResult& rr) {
        if (!rs.ok()) return p->done(rs, Settled{});
        // Each limit gives back what it counts; the least any gave back is
        // what the subject surely got back.
        int64_t least = rr.after.num_limits > 0 ? rr.refunded[0] : 0;
        for (int i = 1; i < rr.after.num_limits; ++i) least = std::min(least, rr.refunded[i]);
        p->settled.charged = p->taken.estimate - least;
        p->settled.after = rr.after;
        p->done(rs, p->settled);
      });
    } else {
      p->settled.charged = r.estimate;
      peek(p);
    }
  };
  const store::TakeOp op{p->rule, p->key, p->id};
  store::TakeResult result;
  Status status;
  if (ledger_.Take(op, &result, &status, [&]() -> store::Done<store::TakeResult> {
        return std::move(taken);
      }) == store::Answer::kNow) {
    taken(status, result);
  }
}

}  // namespace floodgate::service
