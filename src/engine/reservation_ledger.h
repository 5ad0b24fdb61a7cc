// ReservationLedger: the reservations (store/reservations.h) in the embedded
// store. Each reservation is one MemoryStore entry of its own variant, keyed
// by (rule, subject, id) (RecordKey), whose fixed-size state holds the
// record: its expiry to the millisecond, held or settled, the estimate and
// the tier. The entry expires with the record, so that nothing outlives its
// reservation's TTL (a settled marker included), and counts against
// engine.max_entries and engine.max_memory like any subject. Snapshots
// (engine/snapshot.h) keep the records as they keep every entry. The
// embedded store's store::ReservationLedger.
//
// Thread-safe: every step runs under the record's shard lock, so of any
// number of concurrent Takes of one reservation exactly one finds it held.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "engine/memory_store.h"
#include "floodgate/clock.h"
#include "floodgate/status.h"
#include "store/reservations.h"

namespace floodgate::engine {

class ReservationLedger final : public store::ReservationLedger {
 public:
  // The layout of the reservations' variant: register it with the
  // MemoryStore.
  static VariantLayout Layout();

  // The MemoryStore key of (rule, subject, id)'s record: distinct for
  // distinct triples whatever their bytes, and within kMaxKeyBytes. As
  // LeaseStore::TableKey's, with the subject's length too (the id follows
  // it); a triple too long for that form is keyed by the SHA-256 of it
  // (tagged apart: the two forms never meet).
  static std::string RecordKey(std::string_view rule, std::string_view subject,
                               std::string_view id);

  // `store` and `clock` (the store's) must outlive this; `variant` was
  // registered with Layout().
  ReservationLedger(MemoryStore& store, uint32_t variant, const Clock& clock)
      : store_(store), variant_(variant), clock_(clock) {}

  // At op.at_ms, or the clock's now; both answer now.
  store::Answer Hold(const store::HoldOp& op, Status* status, store::Later<> later) override;
  store::Answer Take(const store::TakeOp& op, store::TakeResult* result, Status* status,
                     store::Later<store::TakeResult> later) override;

  // Hold's and Take's steps at `now_ms`. Besides the errors of the
  // interface, INVALID_ARGUMENT for arguments outside the bounds of
  // store/reservations.h (which the caller checks: a defect), before
  // anything is read or written. A record is live while now_ms is before
  // its expiry (held at t with ttl_ms: live until t + ttl_ms - 1). Take
  // never creates an entry, so it works in a full store; on error *result
  // is kUnknown.
  Status HoldAt(const store::HoldOp& op, int64_t now_ms);
  Status TakeAt(const store::TakeOp& op, int64_t now_ms, store::TakeResult* result);

 private:
  MemoryStore& store_;
  const uint32_t variant_;
  const Clock& clock_;
};

}  // namespace floodgate::engine
