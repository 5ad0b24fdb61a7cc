// Alerts: the quota alerts of a Limiter's rules (Rule::alerts, seed 002).
//
// When an admitted request takes a limit's usage in its current window to
// a configured threshold, exactly one event is emitted per (rule, subject,
// tier, limit, threshold, window), decided together with the count (on the
// embedded store under the subject's lock, on Redis in the same script
// call), however many threads or servers decide at once. The event is
// POSTed as JSON to the rule's webhook off the request path by background
// workers, signed (X-Floodgate-Signature: sha256=<hex HMAC-SHA256 of the
// body>), with Idempotency-Key: <event_id>; failures are retried with
// exponential backoff and jitter for alert_delivery.retry_for. Delivery is
// at least once on the wire and exactly once by event_id: the id is the
// same on every server and after a restart, so a receiver drops repeats.
// Pending events survive a graceful restart: a spool file on the embedded
// store, a Redis stream (shared by every server on that Redis) on Redis.
// docs/alerts.md has the receiver's view.
//
//   for (const AlertRecord& r : limiter->alerts().Recent(10)) { ... }
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace floodgate {

// One alert event, as the webhook receives it (the body is its JSON).
struct AlertEvent {
  // 32 hex digits, a digest of (rule, tier, key, limit index, threshold,
  // window start): the same wherever and whenever it is emitted.
  std::string event_id;
  std::string rule;
  std::string key;
  std::string tier;      // empty for the rule's own limits
  std::string limit;     // the limit as configured, e.g. "5000/day"
  int limit_index = 0;   // its place in the rule's (or tier's) list
  int64_t capacity = 0;  // its count (token_bucket, gcra: the burst)
  int threshold = 0;     // percent of the capacity
  int64_t used = 0;      // usage after the request that crossed it
  int64_t window_start_ms = 0;
  int64_t window_end_ms = 0;
  int64_t at_ms = 0;  // the decision's instant (Redis's clock on Redis)
};

enum class AlertStatus {
  kPending,    // waiting here for delivery or for a retry
  kQueued,     // in the Redis stream, for whichever server takes it
  kDelivered,  // the webhook answered 2xx
  kDropped,    // not delivered: queue full, retry_for passed, or shut down without a spool
};

// What this process knows of one recent event.
struct AlertRecord {
  AlertEvent event;
  std::string body;  // the exact JSON bytes POSTed (and signed)
  AlertStatus status = AlertStatus::kPending;
  int attempts = 0;        // POSTs made by this process
  std::string last_error;  // of the last failed POST, or ""
};

// "pending", "queued", "delivered", "dropped".
const char* AlertStatusName(AlertStatus status);

// Thread-safe.
class Alerts {
 public:
  struct Stats {
    int64_t emitted = 0;    // events this process's decisions emitted
    int64_t delivered = 0;  // POSTs answered 2xx
    int64_t retried = 0;    // failed POSTs that were scheduled again
    // Events given up: no room in the queue (alert_delivery.queue_size),
    // retry_for passed, trimmed from a full Redis stream, or left without a
    // place to keep them at shutdown.
    int64_t dropped_queue_full = 0;
    int64_t dropped_expired = 0;
    int64_t dropped_stream_full = 0;
    int64_t dropped_shutdown = 0;
    int64_t pending = 0;  // gauge: waiting here for delivery or a retry
  };

  virtual ~Alerts() = default;

  // Whether any rule has ever had alerts in this process (the machinery
  // runs only then).
  virtual bool enabled() const = 0;

  // The latest events this process emitted or delivered, newest first, at
  // most `max` (and at most alert_delivery.recent).
  virtual std::vector<AlertRecord> Recent(size_t max) const = 0;

  virtual Stats GetStats() const = 0;

  // Waits until nothing is pending here (every event delivered or dropped,
  // and on Redis handed to the stream); false if that takes longer than
  // `timeout`. For tests and orderly shutdowns.
  virtual bool WaitIdle(std::chrono::milliseconds timeout) = 0;
};

}  // namespace floodgate
