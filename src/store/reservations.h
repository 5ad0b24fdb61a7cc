// ReservationLedger: where the reservations of FG.RESERVE / POST
// /v1/reservations wait for their settle (docs/reservations.md). A
// reservation is a record under (rule, subject, id): the estimate charged
// when it was made and the tier it was charged to, kept until it is settled
// or its TTL passes. The units themselves are charged and given back on the
// rule's state (store/store.h: Check, Refund) by service/reservations/; the
// ledger only makes sure that each reservation is settled at most once, by
// whichever server of a fleet sees the settle first.
//
// Apart from the decisions because a reservation is not a decision on a
// rule's state: it names its record and lives until it is taken. It answers
// now or later as the decisions do (store.h: Answer, Later). Implemented by
// the embedded store's engine/reservation_ledger.h and the Redis store's
// redis/reservation_ledger.h.
//
// Thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "floodgate/rule.h"
#include "floodgate/status.h"
#include "store/store.h"

namespace floodgate::store {

inline constexpr size_t kMaxReservationIdBytes = 64;
inline constexpr size_t kMaxReservationTierBytes = 64;

// Records a reservation: `id` (made above, unguessable, at most
// kMaxReservationIdBytes) of (rule, subject) holds `estimate` units charged
// to `tier` (empty: the rule's own limits), until `ttl_ms` from now.
struct HoldOp {
  std::string_view rule;     // the rule's name
  std::string_view subject;  // checked above: non-empty, within kMaxKeyBytes
  std::string_view id;
  std::string_view tier;  // at most kMaxReservationTierBytes
  int64_t estimate = 0;   // in [1, kMaxLimitCount]
  int64_t ttl_ms = 0;     // in [1, kMaxReservationTtlMs]
  // An explicit instant (tests, replays), or null for the store's clock
  // (Redis: its TIME).
  const int64_t* at_ms = nullptr;
};
inline constexpr int64_t kMaxReservationTtlMs = 86'400'000;  // a day

// Takes a reservation for its settle: at most once, whoever asks.
struct TakeOp {
  std::string_view rule;
  std::string_view subject;
  std::string_view id;
  const int64_t* at_ms = nullptr;  // as HoldOp's
};

// What a Take found.
enum class TakeOutcome {
  kTaken,    // it was held: now it is settled, and `estimate`, `tier` say what it held
  kSettled,  // it was settled already (by an earlier Take): nothing changed
  kUnknown,  // no such reservation of (rule, subject): never made, another
             // subject's or rule's id, or past its TTL (settled at its estimate)
};
struct TakeResult {
  TakeOutcome outcome = TakeOutcome::kUnknown;
  int64_t estimate = 0;  // kTaken; else 0
  std::string tier;      // kTaken; else ""
};

// The bounds every ledger holds its arguments to, before anything is kept or
// sent: INVALID_ARGUMENT naming the bound.
inline Status CheckReservationId(std::string_view id) {
  if (id.empty() || id.size() > kMaxReservationIdBytes) {
    return InvalidArgumentError("a reservation id is 1 to " +
                                std::to_string(kMaxReservationIdBytes) + " bytes, not " +
                                std::to_string(id.size()));
  }
  return Status::Ok();
}
inline Status CheckHoldArgs(const HoldOp& op) {
  if (Status s = CheckReservationId(op.id); !s.ok()) return s;
  if (op.tier.size() > kMaxReservationTierBytes) {
    return InvalidArgumentError("a reservation's tier is at most " +
                                std::to_string(kMaxReservationTierBytes) + " bytes");
  }
  if (op.estimate < 1 || op.estimate > kMaxLimitCount) {
    return InvalidArgumentError("a reservation's estimate is 1 to " +
                                std::to_string(kMaxLimitCount));
  }
  if (op.ttl_ms < 1 || op.ttl_ms > kMaxReservationTtlMs) {
    return InvalidArgumentError("a reservation's TTL is 1 to " +
                                std::to_string(kMaxReservationTtlMs) + " ms");
  }
  return Status::Ok();
}

class ReservationLedger {
 public:
  virtual ~ReservationLedger() = default;

  // Records op's reservation in one atomic step. A record of the same
  // (rule, subject, id) already there, held or settled, is left alone and
  // answered ALREADY_EXISTS (ids are unguessable: only a caller's defect
  // repeats one). Arguments out of their bounds (an empty id included) are
  // INVALID_ARGUMENT, and nothing is sent or kept. Errors as Store::Check's: RESOURCE_EXHAUSTED
  // when the embedded store is full; UNAVAILABLE / DEADLINE_EXCEEDED / INTERNAL when Redis failed
  // (the record may or may not be there).
  virtual Answer Hold(const HoldOp& op, Status* status, Later<> later) = 0;

  // Takes op's reservation in one atomic step: a held record becomes a
  // settled marker (kept until the record's TTL would have passed, so that a
  // second settle is told "settled already", then gone) and is answered
  // kTaken with what it held; a settled one kSettled; none kUnknown. Only
  // one of any number of concurrent Takes of one reservation, on any
  // servers sharing the store, is answered kTaken. Errors as Hold's.
  // On Redis an explicit at_ms decides whether a record is live (its
  // expiry is kept in it); the key's own TTL runs on Redis's clock.
  virtual Answer Take(const TakeOp& op, TakeResult* result, Status* status,
                      Later<TakeResult> later) = 0;
};

}  // namespace floodgate::store
