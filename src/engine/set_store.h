// SetStore: expiring sets in the embedded store. Each set is one MemoryStore
// entry of its own variant whose state points at an ExpiringSet; the entry's
// expiry is its last member's, so a set is freed (by access or by the sweep)
// once every member has expired, and sets count against engine.max_entries
// like any subject. The embedded store's store::SetStore (store/sets.h).
//
// Thread-safe: every operation runs under the set's shard lock, so the
// operations on one set are atomic with respect to each other.
#pragma once

#include <cstdint>
#include <string_view>

#include "engine/memory_store.h"
#include "floodgate/clock.h"
#include "floodgate/set_types.h"
#include "floodgate/status.h"
#include "store/sets.h"

namespace floodgate::engine {

class SetStore final : public store::SetStore {
 public:
  // The layout of the sets' variant: register it with the MemoryStore.
  static VariantLayout Layout();

  // `store` and `clock` (the store's) must outlive this; `variant` was
  // registered with Layout().
  SetStore(MemoryStore& store, uint32_t variant, const Clock& clock)
      : store_(store), variant_(variant), clock_(clock) {}

  // Run at the clock's now; answers now.
  store::Answer Run(const SetRequest& request, int64_t max_members, SetReply* reply, Status* status,
                    store::Later<SetReply> later) override;

  // Runs `request` at `now_ms`, whose key, member and TTL the caller has
  // checked. A set at `max_members` live members refuses a new member with
  // RESOURCE_EXHAUSTED; a new set in a full store is RESOURCE_EXHAUSTED too
  // (reads of a set that does not exist never are: it is empty).
  Status Run(const SetRequest& request, int64_t max_members, int64_t now_ms, SetReply* reply);

 private:
  MemoryStore& store_;
  const uint32_t variant_;
  const Clock& clock_;
};

}  // namespace floodgate::engine
