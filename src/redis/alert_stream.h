// AlertStream: the Redis store's pending quota alert events, in one stream
// (fg:{alerts}) that every floodgate server on this Redis writes to and
// reads from through one consumer group, so that each event is delivered by
// one of them; scripts/alert_stream.lua does each step atomically. The key
// always has an expiry (set in the same call that creates it), refreshed
// by each write to at least ttl_ms.
//
// Blocking calls: run them on a background thread, never on an event loop
// or a client I/O thread. Thread-safe (each call is one script call).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "floodgate/status.h"
#include "redis/client.h"
#include "store/alert_log.h"
#include "store/pending_alert.h"

namespace floodgate::redis {

class AlertStream final : public store::AlertLog {
 public:
  struct Options {
    std::string group = "floodgate";
    std::string consumer;  // this server's name in the group; unique per process
    int64_t max_len = 100'000;
    int64_t ttl_ms = 25LL * 3'600'000;
  };

  // The stream's key.
  static constexpr std::string_view kKey = "fg:{alerts}";

  // `client` must outlive the stream.
  AlertStream(Client& client, Options options);

  // Appends `alerts` (at most a few hundred per call). Returns how many
  // entries the length bound trimmed (oldest first, delivered or not).
  Result<int64_t> Add(std::span<const PendingAlert> alerts) override;

  // Up to `count` events for this consumer to deliver: entries another
  // consumer has held unacknowledged for min_idle_ms first, then new ones.
  // Each comes with its stream_id set.
  Result<std::vector<PendingAlert>> Claim(size_t count, int64_t min_idle_ms) override;

  // Tells the group this consumer still works on `stream_ids` (resets their
  // idle time, so Claim elsewhere leaves them alone).
  Status Touch(std::span<const std::string> stream_ids) override;

  // Acknowledges and deletes finished entries.
  Status Ack(std::span<const std::string> stream_ids) override;

  // Hands unfinished events back (a graceful stop): each becomes a new
  // entry any consumer takes at once, with its attempts so far, and the
  // entry it was read from is acknowledged.
  Status Release(std::span<const PendingAlert> alerts) override;

  // Deletes the group's other consumers that hold no entry and have been
  // idle for idle_ms (servers gone without leaving; what they held was
  // claimed first). One with entries is never deleted: XGROUP DELCONSUMER
  // would drop them. Returns how many were deleted.
  Result<int64_t> Forget(int64_t idle_ms) override;

  // Deletes this consumer from the group if it holds no entry.
  Status Leave() override;

  const Options& options() const { return options_; }

 private:
  // One call of the script (EVALSHA, EVAL when Redis lacks it).
  Result<OwnedReply> Run(std::vector<std::string> argv);

  Client& client_;
  const Options options_;
};

}  // namespace floodgate::redis
