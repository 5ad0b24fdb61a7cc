// The Alerts behind Limiter::alerts(): turns the crossings a decision fired
// (core/alerts.h) into signed events, keeps the recent ones, and runs their
// delivery (alert_delivery.h) with its persistence: the spool file on the
// embedded store (alert_spool.h), the shared stream on Redis
// (alert_stream_relay.h).
//
// Nothing runs until a rule with alerts appears (Start): a config without
// alerts costs no thread and no file.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "core/alerts.h"
#include "core/rule_eval.h"
#include "floodgate/alerts.h"
#include "floodgate/clock.h"
#include "floodgate/config.h"
#include "store/alert_log.h"
#include "store/pending_alert.h"

namespace floodgate::service {

class AlertDelivery;
class AlertStreamRelay;

// Where one variant's (a rule's, or a tier's) alerts go; built when the
// rules are compiled. Immutable.
struct AlertTarget {
  std::string rule;
  std::string tier;
  std::vector<std::string> limits;  // each limit as configured, "5000/day"
  std::string webhook;
  std::string secret;  // the HMAC key of X-Floodgate-Signature
};

// Builds the target of `compiled` (a variant of `rule`, whose alerts are
// enabled): the webhook checked, the secret from rule.alerts.secret or else
// the environment variable rule.alerts.secret_env. INVALID_ARGUMENT naming
// the rule when the URL is bad or the secret missing.
Result<AlertTarget> MakeAlertTarget(const Rule& rule, const core::CompiledRule& compiled);

// Puts a newly emitted event at the front of `recent` (newest first), after
// the events of its own subject's window that counted more, and keeps at
// most `max`. Not thread-safe: AlertsImpl holds its lock.
void InsertRecent(std::deque<AlertRecord>* recent, AlertRecord record, size_t max);

// Thread-safe.
class AlertsImpl final : public Alerts {
 public:
  // Pending events go to the alert log `open_log` opens at Start when the
  // store has one (Redis: one stream for every server; empty: none), else
  // to a spool file. The store must outlive Shutdown (or this, without
  // one). `clock` dates the events (NowMs) and times delivery, its retries
  // and the spool writes (MonotonicNs); it must outlive this.
  AlertsImpl(const AlertDeliveryConfig& config, store::AlertLogOpener open_log,
             const Clock& clock = SystemClock::Default());
  // Shutdown(), if not done.
  ~AlertsImpl() override;

  // Stops delivery and hands pending events to the spool or the stream
  // (through the client). Emit drops events from then on (counted as
  // shutdown drops): decisions still answered by a client shutting down
  // may emit after it. Idempotent.
  void Shutdown();

  // Starts delivery the first time a rule with alerts appears: on the
  // embedded store checks that the spool can be written and re-queues the
  // events it kept. Later calls do nothing. INVALID_ARGUMENT (nothing
  // started) when the spool cannot be used.
  Status Start();

  // Events for each threshold `outcome` fired, for `subject` of the variant
  // `rule` whose target is `target`. Never blocks on delivery: a full queue
  // drops the event (counted, logged). Call outside any store lock.
  void Emit(const core::CompiledRule& rule, const AlertTarget& target, std::string_view subject,
            const core::AlertOutcome& outcome, int64_t at_ms);

  bool enabled() const override;
  std::vector<AlertRecord> Recent(size_t max) const override;
  Stats GetStats() const override;
  bool WaitIdle(std::chrono::milliseconds timeout) override;

 private:
  void Record(AlertRecord record);
  // Updates the recent record of `event_id` (attempts < 0: unchanged); an
  // event emitted by another server and finished here (`alert` given) gets
  // a record of its own.
  void SetStatus(const std::string& event_id, AlertStatus status, int attempts,
                 const std::string* error, const PendingAlert* alert);
  // Embedded store: writes the spool whenever the pending events changed,
  // at most once per second (on clock_), until stopped.
  void SpoolLoop();
  // Marks an event dropped, bumps *counter (a member of stats_) under the
  // lock, logs at most once a second (on clock_).
  void NoteDropped(const std::string& event_id, const char* why, int64_t* counter);

  const AlertDeliveryConfig config_;
  const store::AlertLogOpener open_log_;  // empty: the store has no alert log
  const Clock& clock_;
  std::string spool_path_;

  std::mutex start_mu_;  // serialises Start and Shutdown
  std::atomic<bool> started_{false};
  std::atomic<bool> shut_down_{false};
  std::unique_ptr<AlertDelivery> delivery_;
  std::unique_ptr<store::AlertLog> log_;  // null: the spool
  std::unique_ptr<AlertStreamRelay> relay_;
  std::thread spool_thread_;

  mutable std::mutex mu_;
  std::condition_variable spool_wake_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::deque<AlertRecord> recent_ ABSL_GUARDED_BY(mu_);  // newest at the front
  Stats stats_ ABSL_GUARDED_BY(mu_);
  int64_t next_drop_log_ns_ ABSL_GUARDED_BY(mu_) = 0;  // a line before this is held back
  int64_t drops_since_log_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace floodgate::service
