// SetStore: where the expiring sets (floodgate/expiring_sets.h) live: per
// key a set of members, each with its own expiry, a set gone once its last
// member has expired.
//
// Apart from the decisions (store/store.h) because a set is the sets'
// state alone: no rule, no batch. It answers now or later as the
// decisions do (store.h: Answer, Later). Implemented by the embedded
// store's engine/set_store.h and the Redis store's redis/set_store.h.
//
// Thread-safe.
#pragma once

#include <cstdint>

#include "floodgate/set_types.h"
#include "floodgate/status.h"
#include "store/store.h"

namespace floodgate::store {

class SetStore {
 public:
  virtual ~SetStore() = default;
  // Runs `request` (key, member and TTL checked above) in one atomic step
  // on the set, at the store's instant. RESOURCE_EXHAUSTED for a new member
  // of a set at `max_members` live members, and on the embedded store for
  // a new set in a full store (reads of a set that does not exist never
  // are: it is empty); UNAVAILABLE / DEADLINE_EXCEEDED / INTERNAL when
  // Redis failed.
  virtual Answer Run(const SetRequest& request, int64_t max_members, SetReply* reply,
                     Status* status, Later<SetReply> later) = 0;
};

}  // namespace floodgate::store
