// Reservations: charge what a request really cost when that is known only
// after it ran (an LLM call's tokens, a query's rows; docs/reservations.md).
// Reserve checks an estimate as a decision of the rule (admitted only if it
// fits, at the caller's priority class) and records it in the ledger
// (store/reservations.h) under an unguessable id; Settle takes the record
// once and charges the difference: more when the request cost more than
// its estimate (whatever the limit: the subject is then in debt until its
// window or refill covers it), back when it cost less. A reservation not
// settled within its TTL keeps its estimate charged. Every server on one
// Redis shares both the rule's state and the ledger, so a reservation made
// on one can be settled on another, once.
//
// The units move through LimiterCore (Check, Charge, Refund): this room
// holds no state of its own.
//
// Thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "floodgate/clock.h"
#include "floodgate/decision.h"
#include "floodgate/status.h"
#include "service/limiter/limiter_core.h"
#include "store/reservations.h"

namespace floodgate::service {

inline constexpr int64_t kDefaultReservationTtlMs = 300'000;  // 5 minutes

class Reservations {
 public:
  // Each must outlive this.
  Reservations(LimiterCore& core, store::ReservationLedger& ledger);

  struct ReserveArgs {
    std::string_view rule = {};
    std::string_view key = {};
    int64_t estimate = 1;                       // [1, kMaxLimitCount]
    int64_t ttl_ms = kDefaultReservationTtlMs;  // [1, kMaxReservationTtlMs]
    std::string_view tier = {};
    std::string_view priority = {};
  };
  struct Reserved {
    // The check of the estimate, as Check answers it (a denial, a block, a
    // fallback, shadow mode).
    Decision decision;
    // The reservation's id when the estimate was charged; empty when it was
    // not: denied, or admitted without counting (a fallback decision, a
    // shadow rule's denial), when there is nothing to settle.
    std::string id;
  };
  // Rule, tier, priority and key are checked as Check does; estimate and
  // ttl_ms as above (INVALID_ARGUMENT otherwise). A ledger failure after the
  // estimate was charged gives the estimate back (as far as the store
  // lets it) and answers the failure. `done` runs once, maybe before this
  // returns.
  using ReserveDone = store::Done<Reserved>;
  void Reserve(const ReserveArgs& args, ReserveDone done);

  struct SettleArgs {
    std::string_view rule = {};
    std::string_view key = {};
    std::string_view id = {};
    int64_t actual = 0;  // [0, kMaxLimitCount]
  };
  struct Settled {
    int64_t estimate = 0;
    int64_t actual = 0;
    // What the reservation cost the subject in the end: `actual`, unless a
    // refund found less to give back (the estimate's window is over) or
    // the overrun passed the most an algorithm can hold in debt
    // (service/limiter/variant_views.h).
    int64_t charged = 0;
    // The subject right after, as a plain check with cost 0 sees it: its
    // remaining is negative (or 0, for sliding_log) while it is in debt.
    Decision after;
  };
  // NOT_FOUND for a reservation of (rule, key) the ledger does not hold
  // (never made, another subject's or rule's, or past its TTL and so
  // settled at its estimate); FAILED_PRECONDITION for one settled already;
  // INVALID_ARGUMENT for a bad actual or id; a store failure as itself
  // (when the ledger failed nothing was settled; when a later step did,
  // the reservation is settled and its difference may be lost).
  using SettleDone = store::Done<Settled>;
  void Settle(const SettleArgs& args, SettleDone done);

 private:
  LimiterCore& core_;
  store::ReservationLedger& ledger_;
};

}  // namespace floodgate::service
