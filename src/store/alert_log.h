// AlertLog: pending quota alert events shared by every server on one store,
// each delivered by one of them (the Redis store: one stream, one consumer
// group; redis/alert_stream.h has the details). A store without one (the
// embedded store) leaves the events in this process: the alerts keep a
// spool file (service/alerts/alert_spool.h).
//
// Opened by the alerts (service/alerts/alerts_impl.h) when the first rule with
// alerts appears, with options of their own (this server's name among the
// readers): hence an opener (store/rooms.h), not a log made with the store.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "floodgate/status.h"
#include "store/pending_alert.h"

namespace floodgate::store {

// Blocking calls: for a background thread only. Thread-safe.
class AlertLog {
 public:
  virtual ~AlertLog() = default;
  // Appends `alerts`; how many old entries the length bound trimmed.
  virtual Result<int64_t> Add(std::span<const PendingAlert> alerts) = 0;
  // Up to `count` events for this server: those another server has held
  // for min_idle_ms first, then new ones; each with its stream_id.
  virtual Result<std::vector<PendingAlert>> Claim(size_t count, int64_t min_idle_ms) = 0;
  // This server still works on these (others leave them alone).
  virtual Status Touch(std::span<const std::string> stream_ids) = 0;
  // Finished: acknowledged and deleted.
  virtual Status Ack(std::span<const std::string> stream_ids) = 0;
  // Handed back unfinished (a graceful stop), for any server to take.
  virtual Status Release(std::span<const PendingAlert> alerts) = 0;
  // Forgets the other readers that hold nothing and have not read for
  // idle_ms (servers that stopped without leaving); how many.
  virtual Result<int64_t> Forget(int64_t idle_ms) = 0;
  // This server leaves the readers, if it holds nothing (a clean stop).
  virtual Status Leave() = 0;
};

// How the alerts open the log.
struct AlertLogOptions {
  std::string consumer;  // this server's name among the log's readers
  int64_t max_len = 100'000;
  int64_t ttl_ms = 0;
};
using AlertLogOpener = std::function<std::unique_ptr<AlertLog>(const AlertLogOptions& options)>;

}  // namespace floodgate::store
