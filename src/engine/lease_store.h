// LeaseStore: the leases of concurrency rules in the embedded store. The
// leases of one (rule, subject) are one MemoryStore entry of its own variant
// whose state points at an ExpiringSet of lease id -> expiry, decided by
// core/concurrency.h; the entry's expiry is its last lease's, so a table is
// freed (by access or by the sweep) once every lease has expired, at once
// when its last lease is released, and tables count against
// engine.max_entries and engine.max_memory like any subject. The embedded
// store's store::LeaseStore (store/lease_ops.h).
//
// Thread-safe: every operation runs under the table's shard lock, so the
// operations on one table are atomic with respect to each other.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "engine/memory_store.h"
#include "floodgate/clock.h"
#include "floodgate/status.h"
#include "store/lease_ops.h"

namespace floodgate::engine {

class LeaseStore final : public store::LeaseStore {
 public:
  // The layout of the leases' variant: register it with the MemoryStore.
  static VariantLayout Layout();

  // The MemoryStore key of (rule, subject)'s table: distinct for distinct
  // pairs whatever their bytes, and within kMaxKeyBytes. The rule's length
  // comes first, so no rule name and subject run into another pair's; a
  // pair too long for that form is keyed by the SHA-256 of it (tagged
  // apart: the two forms never meet).
  static std::string TableKey(std::string_view rule, std::string_view subject);

  // `store` and `clock` (the store's) must outlive this; `variant` was
  // registered with Layout().
  LeaseStore(MemoryStore& store, uint32_t variant, const Clock& clock)
      : store_(store), variant_(variant), clock_(clock) {}

  // Run at op.at_ms, or the clock's now; answers now.
  store::Answer Lease(const store::LeaseOp& op, store::LeaseResult* result, Status* status,
                      store::Later<store::LeaseResult> later) override;

  // Runs `op` (arguments checked by the caller) at `now_ms` into *result.
  // RESOURCE_EXHAUSTED when a first lease of a subject does not fit in the
  // store (nothing is kept, *result is a refusal). A release or renewal on a
  // subject with no table finds nothing and creates nothing.
  Status Run(const store::LeaseOp& op, int64_t now_ms, store::LeaseResult* result);

 private:
  MemoryStore& store_;
  const uint32_t variant_;
  const Clock& clock_;
};

}  // namespace floodgate::engine
