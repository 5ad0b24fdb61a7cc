// AlertDelivery: see alert_delivery.h.
//
// Events live in one map (so a snapshot sees those being sent too) and,
// while not being sent, in a set ordered by when they are due; workers
// sleep until the earliest is due. Scheduling uses the clock's monotonic
// reading (a wall-clock step must not make a retry storm), the give-up time
// its wall-clock reading (it counts from the emission, possibly on another
// server or before a restart).
#include "service/alerts/alert_delivery.h"

#include <algorithm>
#include <optional>
#include <random>

#include "common/http_url.h"
#include "common/log.h"
#include "service/delivery/http_post.h"

namespace floodgate::service {

void AlertDelivery::FailureLog::Note(const PendingAlert& alert, const std::string& error,
                                     bool given_up, int64_t now_ns) {
  std::lock_guard<std::mutex> lock(mu_);
  ++since_last_;
  if (!given_up && now_ns < next_line_ns_) return;
  next_line_ns_ = now_ns + 1'000'000'000;
  Log(LogLevel::kWarn, given_up ? "alert given up" : "alert delivery failed",
      {{"event_id", alert.event_id},
       {"webhook", alert.url},
       {"attempts", std::to_string(alert.attempts)},
       {"error", error},
       {"failures_since_last_line", std::to_string(since_last_)}});
  since_last_ = 0;
}

AlertDelivery::AlertDelivery(Options options)
    : options_(std::move(options)),
      clock_(options_.clock != nullptr ? *options_.clock : SystemClock::Default()) {
  for (int i = 0; i < std::max(1, options_.workers); ++i) {
    workers_.emplace_back([this] { Run(); });
  }
}

AlertDelivery::~AlertDelivery() { Stop(); }

bool AlertDelivery::Add(PendingAlert alert) {
  if (clock_.NowMs() > alert.created_ms + options_.retry_for_ms) {
    // Kept too long elsewhere (a spool, the stream): given up untried.
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stop_) return false;
      ++stats_.expired;
    }
    failures_.Note(alert, "older than alert_delivery.retry_for", /*given_up=*/true,
                   clock_.MonotonicNs());
    if (options_.on_finished) options_.on_finished(alert, Outcome::kExpired);
    return true;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_ || items_.size() >= options_.capacity) return false;
    const uint64_t id = next_id_++;
    const int64_t due = clock_.MonotonicNs();
    items_.emplace(id, Item{std::move(alert), due, false});
    queue_.emplace(due, id);
    ++version_;
  }
  wake_.notify_one();
  return true;
}

size_t AlertDelivery::Room() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stop_ || items_.size() >= options_.capacity ? 0 : options_.capacity - items_.size();
}

std::vector<PendingAlert> AlertDelivery::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_) return {};
    stop_ = true;
  }
  wake_.notify_all();
  for (std::thread& t : workers_) t.join();
  std::vector<PendingAlert> left;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [id, item] : items_) left.push_back(std::move(item.alert));
    items_.clear();
    queue_.clear();
    ++version_;
    stopped_ = true;
  }
  idle_.notify_all();
  return left;
}

std::vector<PendingAlert> AlertDelivery::Snapshot() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<PendingAlert> out;
  out.reserve(items_.size());
  for (const auto& [id, item] : items_) out.push_back(item.alert);
  return out;
}

uint64_t AlertDelivery::version() const {
  std::lock_guard<std::mutex> lock(mu_);
  return version_;
}

bool AlertDelivery::WaitIdle(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  return idle_.wait_for(lock, timeout,
                        [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return items_.empty(); });
}

AlertDelivery::Stats AlertDelivery::GetStats() const {
  std::lock_guard<std::mutex> lock(mu_);
  Stats s = stats_;
  s.pending = static_cast<int64_t>(items_.size());
  return s;
}

int64_t AlertDelivery::BackoffMs(int attempts) {
  int64_t wait = options_.backoff_initial_ms;
  for (int i = 1; i < attempts && wait < options_.backoff_max_ms; ++i) wait *= 2;
  wait = std::min(wait, options_.backoff_max_ms);
  thread_local std::mt19937_64 rng{std::random_device{}()};
  // The upper half: never sooner than half the backoff, never later than it.
  return wait - static_cast<int64_t>(rng() % static_cast<uint64_t>(wait / 2 + 1));
}

void AlertDelivery::Run() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    if (stop_) return;
    if (queue_.empty()) {
      wake_.wait(lock);
      continue;
    }
    const auto [due, id] = *queue_.begin();
    if (const int64_t now = clock_.MonotonicNs(); due > now) {
      // Woken early (an Add, a bounded sleep on a manual clock): the loop
      // reads the clock again.
      wake_.wait_for(lock, std::chrono::nanoseconds(clock_.SleepNs(now, due)));
      continue;
    }
    queue_.erase(queue_.begin());
    Item& item = items_.at(id);
    item.sending = true;
    PendingAlert alert = item.alert;
    lock.unlock();

    std::string error;
    const Result<HttpUrl> url = ParseHttpUrl(alert.url);
    if (!url.ok()) {
      error = url.status().message();
    } else {
      const std::vector<std::pair<std::string, std::string>> headers = {
          {"X-Floodgate-Signature", alert.signature},
          {"Idempotency-Key", alert.event_id},
          {"X-Floodgate-Event-Id", alert.event_id}};
      const Result<HttpPostResult> r =
          HttpPost(*url, alert.body, headers, options_.timeout_ms, clock_);
      if (!r.ok()) {
        error = r.status().message();
      } else if (r->status < 200 || r->status > 299) {
        error = "HTTP status " + std::to_string(r->status);
      }
    }
    ++alert.attempts;

    lock.lock();
    Item& after = items_.at(id);
    after.alert.attempts = alert.attempts;
    after.sending = false;
    std::optional<Outcome> finished;
    if (error.empty()) {
      finished = Outcome::kDelivered;
      ++stats_.delivered;
    } else {
      const int64_t wall = clock_.NowMs();
      const int64_t deadline = alert.created_ms + options_.retry_for_ms;
      // A bad URL (a spool or stream entry written by another version) will
      // not get better: given up at once.
      if (wall >= deadline || !url.ok()) {
        finished = Outcome::kExpired;
        ++stats_.expired;
      } else {
        ++stats_.retried;
        const int64_t wait = std::min(BackoffMs(alert.attempts), deadline - wall);
        after.due_ns = clock_.MonotonicNs() + wait * 1'000'000;
        queue_.emplace(after.due_ns, id);
      }
    }
    if (finished.has_value()) {
      items_.erase(id);
      ++version_;
      if (items_.empty()) idle_.notify_all();
    }
    lock.unlock();
    if (!error.empty()) {
      failures_.Note(alert, error, /*given_up=*/finished.has_value(), clock_.MonotonicNs());
      if (options_.on_failed) options_.on_failed(alert, error);
    }
    if (finished.has_value() && options_.on_finished) options_.on_finished(alert, *finished);
    lock.lock();
  }
}

}  // namespace floodgate::service
