// SetStore: expiring sets on Redis, one sorted set per set scored by each
// member's expiry (src/redis/scripts/expiring_set.lua), pruned and
// re-expired by the same script call that reads or writes it. The Redis
// store's store::SetStore (store/sets.h).
//
// Thread-safe (the Client is).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "absl/functional/any_invocable.h"
#include "floodgate/set_types.h"
#include "floodgate/status.h"
#include "redis/client.h"
#include "store/sets.h"

namespace floodgate::redis {

// The Redis key of the expiring set `key`: fg:set:{key} (the hash tag
// places it on one cluster slot by the whole key).
std::string SetKey(std::string_view key);

class SetStore final : public store::SetStore {
 public:
  // `client` must outlive this.
  explicit SetStore(Client& client) : client_(client) {}

  // Run at Redis's TIME: always answers later.
  store::Answer Run(const SetRequest& request, int64_t max_members, SetReply* reply, Status* status,
                    store::Later<SetReply> later) override;

  // Runs `request` (key, member and TTL checked by the caller) in one script
  // call. now_ms: an explicit instant (tests), or nullopt for Redis's TIME.
  // `done` runs exactly once, on a client I/O thread (or on the caller's
  // thread when the client refuses at once): OK with the reply;
  // RESOURCE_EXHAUSTED for a new member of a set at `max_members`;
  // UNAVAILABLE or DEADLINE_EXCEEDED when Redis failed; INTERNAL for a
  // reply of the wrong shape.
  using Done = absl::AnyInvocable<void(const Status& status, const SetReply& reply)>;
  void Run(const SetRequest& request, int64_t max_members, std::optional<int64_t> now_ms,
           Done done);

 private:
  Client& client_;
};

}  // namespace floodgate::redis
