// ReservationLedger: the reservations (store/reservations.h) on Redis, one
// string key per reservation (ReservationKey) holding the record or, once
// taken, a settled marker, always with a TTL: the reservation's. Holds and
// takes are one call each of src/redis/scripts/reservations.lua, so a take
// is atomic on Redis, and of the servers sharing it only one takes a
// reservation. The Redis store's store::ReservationLedger.
//
// Thread-safe (the Client is; the failure count is atomic).
#pragma once

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "absl/functional/any_invocable.h"
#include "floodgate/status.h"
#include "redis/client.h"
#include "store/reservations.h"

namespace floodgate::redis {

// The Redis key of (rule, subject)'s reservation `id`:
// fg:rsv:{<rule>:<subject>}:<id>. The hash tag is the rule state's
// (StateKey) and the lease table's (LeaseKey), so the record sits in the
// slot of the subject's other keys. As there, a ':' in the rule is written
// %3A and a '%' %25, so the rule part ends at the first ':'; in the id a
// '}' is written %7D and a '%' %25, so the id is what follows the key's
// last '}' (after a ':'), and no two triples share a key whatever the
// subject holds.
std::string ReservationKey(std::string_view rule, std::string_view subject, std::string_view id);

class ReservationLedger final : public store::ReservationLedger {
 public:
  // `client` must outlive this.
  explicit ReservationLedger(Client& client) : client_(client) {}

  // At op.at_ms, or Redis's TIME: answer later, but for arguments outside
  // the bounds of store/reservations.h (a caller's defect), answered now
  // INVALID_ARGUMENT with nothing sent. A failure of Redis is counted
  // (errors()).
  store::Answer Hold(const store::HoldOp& op, Status* status, store::Later<> later) override;
  store::Answer Take(const store::TakeOp& op, store::TakeResult* result, Status* status,
                     store::Later<store::TakeResult> later) override;

  // Hold's and Take's script call (arguments checked by the caller), sent
  // at once (EVALSHA, then EVAL on NOSCRIPT). now_ms: an explicit instant
  // (tests), or nullopt for Redis's TIME; it decides whether a record is
  // live (held at t with ttl_ms: live until t + ttl_ms - 1), while the
  // key's own TTL is always ttl_ms on Redis's clock. `done` runs exactly
  // once, on a client I/O thread (or on the caller's thread when the
  // client refuses at once): OK with the result; ALREADY_EXISTS (Hold)
  // for a live record of the key; UNAVAILABLE or DEADLINE_EXCEEDED when
  // Redis failed (a key of another type: UNAVAILABLE "redis: WRONGTYPE
  // ...", noted with the client; a string that is no record: UNAVAILABLE
  // "redis: ERR floodgate: the key holds no reservation"); INTERNAL for a
  // reply of the wrong shape. The result is kUnknown on error.
  using HoldDone = absl::AnyInvocable<void(const Status& status)>;
  using TakeDone = absl::AnyInvocable<void(const Status& status, const store::TakeResult& result)>;
  void HoldAt(const store::HoldOp& op, std::optional<int64_t> now_ms, HoldDone done);
  void TakeAt(const store::TakeOp& op, std::optional<int64_t> now_ms, TakeDone done);

  // Ledger calls Redis failed: part of the store's backend errors
  // (store::Store::Usage), as a decision Redis failed is. A refusal
  // (ALREADY_EXISTS, INVALID_ARGUMENT) is no failure.
  int64_t errors() const { return errors_.load(std::memory_order_relaxed); }

 private:
  void Count(const Status& s);

  Client& client_;
  std::atomic<int64_t> errors_{0};
};

}  // namespace floodgate::redis
