// LocalDenyCache: subjects a remote store denied until some instant, so that
// their further requests are denied here, without a round trip, until then.
//
// Why it is safe: it only ever denies, and only requests that the store
// would deny too: one for the same variant and subject costing at least as
// much, before the instant the store named (measured from when the request
// was sent, so a slow reply shortens the local denial, never lengthens it).
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "floodgate/decision.h"

namespace floodgate::redis {

// Thread-safe.
class LocalDenyCache {
 public:
  // A denial is held here at most this long, however long the store said
  // to wait: another server's refund, reset, override or unblock
  // (docs/control-plane.md) must reach this one within a second. A flood of
  // denied requests still reaches the store once a second per subject.
  static constexpr int64_t kMaxHoldMs = 1000;

  // Holds at most `max_entries` subjects (expired ones are dropped first;
  // past the bound new denials are simply not cached).
  explicit LocalDenyCache(size_t max_entries);

  // Remembers that `key` (a store key: variant and subject) was denied
  // `cost` with decision `d` for a request sent at sent_ms.
  void Remember(std::string_view key, int64_t cost, int64_t sent_ms, const Decision& d);

  // If `key` is denied locally for `cost` at now_ms, fills *d with the
  // remembered denial, its waits shortened by the time since, and returns true.
  bool Lookup(std::string_view key, int64_t cost, int64_t now_ms, Decision* d);

  // Forgets `key` (FG.RESET).
  void Forget(std::string_view key);

  size_t size() const;

 private:
  struct Entry {
    int64_t until_ms;  // denied before this instant (at most kMaxHoldMs after sent_ms)
    int64_t cost;      // for requests costing at least this much
    int64_t sent_ms;   // the decision's instant, as this server's clock saw it
    Decision decision;
  };
  struct Shard {
    mutable std::mutex mu;
    absl::flat_hash_map<std::string, std::unique_ptr<Entry>> entries ABSL_GUARDED_BY(mu);
  };
  static constexpr size_t kShards = 16;
  Shard& ShardFor(std::string_view key);

  const size_t max_per_shard_;
  Shard shards_[kShards];
};

}  // namespace floodgate::redis
