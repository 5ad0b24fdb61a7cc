// AlertsImpl: see alerts_impl.h.
#include "service/alerts/alerts_impl.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <random>

#include "common/enum_table.h"
#include "common/http_url.h"
#include "common/log.h"
#include "service/alerts/alert_delivery.h"
#include "service/alerts/alert_event.h"
#include "service/alerts/alert_spool.h"
#include "service/alerts/alert_stream_relay.h"

namespace floodgate {

constexpr EnumRow<AlertStatus, const char*> kAlertStatusNames[] = {
    {AlertStatus::kPending, "pending"},
    {AlertStatus::kQueued, "queued"},
    {AlertStatus::kDelivered, "delivered"},
    {AlertStatus::kDropped, "dropped"}};

const char* AlertStatusName(AlertStatus status) {
  return ValueIn(kAlertStatusNames, status, "pending");
}

namespace service {
namespace {

// alert_delivery.spool's value for "keep no spool".
constexpr std::string_view kNoSpool = "off";

constexpr int64_t kNsPerSecond = 1'000'000'000;

// This process's name in the stream's consumer group: unique per process
// (a restarted server is a new consumer; what the old one held is handed
// back at its stop, or taken over after claim_after).
std::string ConsumerName() {
  char host[256] = {};
  if (::gethostname(host, sizeof(host) - 1) != 0) host[0] = '\0';
  std::random_device rd;
  char suffix[17];
  std::snprintf(suffix, sizeof(suffix), "%08x%08x", rd(), rd());
  return std::string(host) + ":" + std::to_string(::getpid()) + ":" + suffix;
}

}  // namespace

Result<AlertTarget> MakeAlertTarget(const Rule& rule, const core::CompiledRule& compiled) {
  const AlertConfig& a = rule.alerts;
  if (Result<HttpUrl> url = ParseHttpUrl(a.webhook); !url.ok()) {
    return InvalidArgumentError("rule '" + rule.name +
                                "': alerts.webhook: " + url.status().message());
  }
  std::string secret = a.secret;
  if (secret.empty()) {
    const char* v = std::getenv(a.secret_env.c_str());
    if (v != nullptr) secret = v;
  }
  if (secret.empty()) {
    return InvalidArgumentError("rule '" + rule.name +
                                "' has alerts, but the environment variable " + a.secret_env +
                                " (its alerts.secret_env), which holds the webhook's signing "
                                "secret, is not set");
  }
  AlertTarget t;
  t.rule = compiled.name;
  t.tier = compiled.tier;
  for (const core::LimitParams& l : compiled.limits) {
    t.limits.push_back(Limit{l.count, l.multiplier, l.unit}.ToString());
  }
  t.webhook = a.webhook;
  t.secret = std::move(secret);
  return t;
}

AlertsImpl::AlertsImpl(const AlertDeliveryConfig& config, store::AlertLogOpener open_log,
                       const Clock& clock)
    : config_(config),
      open_log_(std::move(open_log)),
      clock_(clock),
      spool_path_(config.spool.empty() ? DefaultAlertSpoolPath() : config.spool) {}

AlertsImpl::~AlertsImpl() { Shutdown(); }

void AlertsImpl::Shutdown() {
  std::lock_guard<std::mutex> start_lock(start_mu_);
  if (shut_down_.exchange(true) || !started_.load()) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  spool_wake_.notify_all();
  if (spool_thread_.joinable()) spool_thread_.join();
  std::vector<PendingAlert> left = delivery_->Stop();
  int64_t lost = 0;
  if (relay_ != nullptr) {
    lost = relay_->Stop(std::move(left));
  } else if (spool_path_ == kNoSpool) {
    lost = static_cast<int64_t>(left.size());
    if (lost > 0) {
      Log(LogLevel::kWarn, "pending alert events dropped at shutdown (alert_delivery.spool: off)",
          {{"events", std::to_string(lost)}});
    }
  } else if (Status s = WriteAlertSpool(spool_path_, left); !s.ok()) {
    lost = static_cast<int64_t>(left.size());
    Log(LogLevel::kError, "alert events lost at shutdown: the spool cannot be written",
        {{"events", std::to_string(lost)}, {"error", s.message()}});
  } else if (!left.empty()) {
    Log(LogLevel::kInfo, "pending alert events kept for the next start",
        {{"events", std::to_string(left.size())}, {"spool", spool_path_}});
  }
  std::lock_guard<std::mutex> lock(mu_);
  stats_.dropped_shutdown += lost;
}

Status AlertsImpl::Start() {
  std::lock_guard<std::mutex> start_lock(start_mu_);
  if (started_.load()) return Status::Ok();
  if (shut_down_.load()) return UnavailableError("alerts are shut down");
  // Entries older than retry_for are given up anyway; the margin covers a
  // takeover after claim_after.
  if (open_log_) {
    log_ = open_log_({ConsumerName(), config_.stream_max_len,
                      config_.retry_for_ms + config_.claim_after_ms + 3'600'000});
  }
  std::vector<PendingAlert> kept;
  if (log_ == nullptr && spool_path_ != kNoSpool) {
    if (Status s = PrepareAlertSpool(spool_path_); !s.ok()) return s;
    std::string warning;
    auto read = ReadAlertSpool(spool_path_, &warning);
    if (!read.ok()) {
      return InvalidArgumentError("alert_delivery.spool: " + read.status().message());
    }
    if (!warning.empty()) {
      Log(LogLevel::kWarn, "alert spool damaged", {{"spool", spool_path_}, {"detail", warning}});
    }
    kept = std::move(*read);
  }

  AlertDelivery::Options o;
  o.workers = config_.workers;
  o.timeout_ms = config_.timeout_ms;
  o.retry_for_ms = config_.retry_for_ms;
  o.backoff_initial_ms = config_.backoff_initial_ms;
  o.backoff_max_ms = config_.backoff_max_ms;
  o.capacity = static_cast<size_t>(config_.queue_size);
  o.clock = &clock_;
  o.on_finished = [this](const PendingAlert& a, AlertDelivery::Outcome outcome) {
    SetStatus(a.event_id,
              outcome == AlertDelivery::Outcome::kDelivered ? AlertStatus::kDelivered
                                                            : AlertStatus::kDropped,
              a.attempts, nullptr, &a);
    if (relay_ != nullptr) relay_->Finished(a);
  };
  o.on_failed = [this](const PendingAlert& a, const std::string& error) {
    SetStatus(a.event_id, AlertStatus::kPending, a.attempts, &error, &a);
  };
  delivery_ = std::make_unique<AlertDelivery>(std::move(o));

  if (log_ != nullptr) {
    AlertStreamRelay::Options ro;
    ro.outbox_capacity = static_cast<size_t>(config_.queue_size);
    ro.claim_after_ms = config_.claim_after_ms;
    ro.clock = &clock_;
    ro.on_queued = [this](const std::vector<std::string>& ids) {
      for (const std::string& id : ids) SetStatus(id, AlertStatus::kQueued, -1, nullptr, nullptr);
    };
    ro.on_trimmed = [this](int64_t trimmed) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        stats_.dropped_stream_full += trimmed;
      }
      Log(LogLevel::kWarn, "alert stream full: oldest entries trimmed",
          {{"entries", std::to_string(trimmed)},
           {"max_len", std::to_string(config_.stream_max_len)}});
    };
    relay_ = std::make_unique<AlertStreamRelay>(*log_, *delivery_, std::move(ro));
    relay_->Start();
  } else {
    size_t requeued = 0;
    for (PendingAlert& a : kept) {
      if (delivery_->Add(std::move(a))) {
        ++requeued;
      } else {
        std::lock_guard<std::mutex> lock(mu_);
        ++stats_.dropped_queue_full;
      }
    }
    if (!kept.empty()) {
      Log(LogLevel::kInfo, "alert events re-queued from the spool",
          {{"events", std::to_string(requeued)}, {"spool", spool_path_}});
    }
    if (spool_path_ != kNoSpool) spool_thread_ = std::thread([this] { SpoolLoop(); });
  }
  started_.store(true);
  return Status::Ok();
}

void AlertsImpl::SpoolLoop() {
  uint64_t written = ~uint64_t{0};
  int64_t next_error_log = 0;  // an error line before this is dropped
  int64_t next_check = clock_.MonotonicNs() + kNsPerSecond;
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopping_) {
    if (const int64_t now = clock_.MonotonicNs(); now < next_check) {
      spool_wake_.wait_for(lock, std::chrono::nanoseconds(clock_.SleepNs(now, next_check)));
      continue;
    }
    lock.unlock();
    const int64_t now = clock_.MonotonicNs();
    next_check = now + kNsPerSecond;
    const uint64_t version = delivery_->version();
    if (version != written) {
      if (Status s = WriteAlertSpool(spool_path_, delivery_->Snapshot()); s.ok()) {
        written = version;
      } else if (now >= next_error_log) {
        next_error_log = now + 60 * kNsPerSecond;
        Log(LogLevel::kError, "cannot write the alert spool; retrying",
            {{"spool", spool_path_}, {"error", s.message()}});
      }
    }
    lock.lock();
  }
}

void AlertsImpl::Emit(const core::CompiledRule& rule, const AlertTarget& target,
                      std::string_view subject, const core::AlertOutcome& outcome, int64_t at_ms) {
  if (!started_.load(std::memory_order_acquire)) return;
  const core::AlertPolicy& policy = rule.alerts;
  const int64_t now = clock_.NowMs();
  for (int i = 0; i < outcome.num_limits; ++i) {
    for (int j = 0; j < policy.num_thresholds; ++j) {
      if ((outcome.fired[i] & (1u << j)) == 0) continue;
      AlertRecord record;
      AlertEvent& e = record.event;
      e.rule = target.rule;
      e.key = std::string(subject);
      e.tier = target.tier;
      e.limit = i < static_cast<int>(target.limits.size()) ? target.limits[i] : "";
      e.limit_index = i;
      e.capacity = rule.limits[i].capacity;
      e.threshold = policy.percents[j];
      e.used = outcome.used[i];
      e.window_start_ms = outcome.window[i].start_ms;
      e.window_end_ms = outcome.window[i].end_ms;
      e.at_ms = at_ms;
      e.event_id =
          AlertEventId(e.rule, e.tier, subject, e.limit_index, e.threshold, e.window_start_ms);
      record.body = AlertEventJson(e);
      PendingAlert p{e.event_id,  target.webhook,
                     record.body, AlertSignature(target.secret, record.body),
                     now,         0,
                     ""};
      Record(std::move(record));
      const std::string id = p.event_id;
      const bool queued =
          relay_ != nullptr ? relay_->Publish(std::move(p)) : delivery_->Add(std::move(p));
      if (queued) continue;
      if (shut_down_.load()) {
        NoteDropped(id, "shutting down", &stats_.dropped_shutdown);
      } else {
        NoteDropped(id, "the queue is full (alert_delivery.queue_size)",
                    &stats_.dropped_queue_full);
      }
    }
  }
}

void AlertsImpl::NoteDropped(const std::string& event_id, const char* why, int64_t* counter) {
  SetStatus(event_id, AlertStatus::kDropped, -1, nullptr, nullptr);
  bool log = false;
  int64_t drops = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++*counter;
    ++drops_since_log_;
    const int64_t now = clock_.MonotonicNs();
    if (now >= next_drop_log_ns_) {
      log = true;
      drops = drops_since_log_;
      drops_since_log_ = 0;
      next_drop_log_ns_ = now + kNsPerSecond;
    }
  }
  // At most a line per second, whatever the rate of drops.
  if (log) {
    Log(LogLevel::kWarn, "alert event dropped",
        {{"reason", why},
         {"event_id", event_id},
         {"dropped_since_last_line", std::to_string(drops)}});
  }
}

void InsertRecent(std::deque<AlertRecord>* recent, AlertRecord record, size_t max) {
  // Newest first. Two loops can emit one window's thresholds in either
  // order (both crossings decided in the same instant on Redis), so an
  // event goes after those of its own window that counted more: the list
  // then reads 100 % before 80 % however the loops raced.
  const AlertEvent& e = record.event;
  auto at = recent->begin();
  while (at != recent->end() && at->event.rule == e.rule && at->event.key == e.key &&
         at->event.tier == e.tier && at->event.window_start_ms == e.window_start_ms &&
         at->event.used > e.used) {
    ++at;
  }
  recent->insert(at, std::move(record));
  while (recent->size() > max) recent->pop_back();
}

void AlertsImpl::Record(AlertRecord record) {
  std::lock_guard<std::mutex> lock(mu_);
  ++stats_.emitted;
  InsertRecent(&recent_, std::move(record), static_cast<size_t>(config_.recent));
}

void AlertsImpl::SetStatus(const std::string& event_id, AlertStatus status, int attempts,
                           const std::string* error, const PendingAlert* alert) {
  std::lock_guard<std::mutex> lock(mu_);
  for (AlertRecord& r : recent_) {
    if (r.event.event_id != event_id) continue;
    // A late "queued" (the stream write) does not undo a delivery that
    // another thread already reported.
    if (status == AlertStatus::kQueued && r.status != AlertStatus::kPending) return;
    r.status = status;
    if (attempts >= 0) r.attempts = attempts;
    if (error != nullptr) r.last_error = *error;
    return;
  }
  // An event another server emitted, delivered (or given up) here.
  if (alert == nullptr || status == AlertStatus::kQueued) return;
  AlertRecord r;
  r.event.event_id = event_id;
  r.body = alert->body;
  r.status = status;
  r.attempts = std::max(attempts, 0);
  if (error != nullptr) r.last_error = *error;
  recent_.push_front(std::move(r));
  while (recent_.size() > static_cast<size_t>(config_.recent)) recent_.pop_back();
}

bool AlertsImpl::enabled() const { return started_.load(); }

std::vector<AlertRecord> AlertsImpl::Recent(size_t max) const {
  std::lock_guard<std::mutex> lock(mu_);
  const size_t n = std::min(max, recent_.size());
  return std::vector<AlertRecord>(recent_.begin(), recent_.begin() + static_cast<ptrdiff_t>(n));
}

Alerts::Stats AlertsImpl::GetStats() const {
  Stats s;
  {
    std::lock_guard<std::mutex> lock(mu_);
    s = stats_;
  }
  if (started_.load()) {
    const AlertDelivery::Stats d = delivery_->GetStats();
    s.delivered = d.delivered;
    s.retried = d.retried;
    s.dropped_expired = d.expired;
    s.pending = d.pending + (relay_ != nullptr ? static_cast<int64_t>(relay_->outbox_size()) : 0);
  }
  return s;
}

bool AlertsImpl::WaitIdle(std::chrono::milliseconds timeout) {
  if (!started_.load()) return true;
  // Real time, not clock_: how long the caller will block (a test on a
  // ManualClock still gets its answer within `timeout`).
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  auto left = [&] {
    return std::chrono::duration_cast<std::chrono::milliseconds>(deadline -
                                                                 std::chrono::steady_clock::now());
  };
  if (relay_ != nullptr && !relay_->WaitFlushed(left())) return false;
  return delivery_->WaitIdle(std::max(left(), std::chrono::milliseconds(0)));
}

}  // namespace service
}  // namespace floodgate
