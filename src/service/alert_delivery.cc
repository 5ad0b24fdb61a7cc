// AlertDelivery: see alert_delivery.h.
//
// Events live in one map (so a snapshot sees those being sent too) and,
// while not being sent, in a set ordered by when they are due; workers
// sleep until the earliest is due. Scheduling uses the steady clock (a
// wall-clock step must not make a retry storm), the give-up time the wall
// clock (it counts from the emission, possibly on another server or before
// a restart).
#include "service/alert_delivery.h"

#include <algorithm>
#include <optional>
#include <random>

#include "common/http_url.h"
#include "common/log.h"
#include "service/http_post.h"

namespace floodgate::service {
namespace {

int64_t WallMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// At most one failure line per second, however many events fail: a dead
// webhook with thousands of events waiting must not flood the log.
class FailureLog {
 public:
  void Note(const PendingAlert& alert, const std::string& error, bool given_up) {
    std::lock_guard<std::mutex> lock(mu_);
    ++since_last_;
    const auto now = std::chrono::steady_clock::now();
    if (!given_up && now - last_ < std::chrono::seconds(1)) return;
    last_ = now;
    Log(LogLevel::kWarn, given_up ? "alert given up" : "alert delivery failed",
        {{"event_id", alert.event_id},
         {"webhook", alert.url},
         {"attempts", std::to_string(alert.attempts)},
         {"error", error},
         {"failures_since_last_line", std::to_string(since_last_)}});
    since_last_ = 0;
  }

 private:
  std::mutex mu_;
  std::chrono::steady_clock::time_point last_{};
  int64_t since_last_ = 0;
};

FailureLog& Failures() {
  static FailureLog* const log = new FailureLog();  // used by workers until exit
  return *log;
}

}  // namespace

AlertDelivery::AlertDelivery(Options options) : options_(std::move(options)) {
  for (int i = 0; i < std::max(1, options_.workers); ++i) {
    workers_.emplace_back([this] { Run(); });
  }
}

AlertDelivery::~AlertDelivery() { Stop(); }

bool AlertDelivery::Add(PendingAlert alert) {
  if (WallMs() > alert.created_ms + options_.retry_for_ms) {
    // Kept too long elsewhere (a spool, the stream): given up untried.
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stop_) return false;
      ++stats_.expired;
    }
    Failures().Note(alert, "older than alert_delivery.retry_for", /*given_up=*/true);
    if (options_.on_finished) options_.on_finished(alert, Outcome::kExpired);
    return true;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_ || items_.size() >= options_.capacity) return false;
    const uint64_t id = next_id_++;
    const auto due = std::chrono::steady_clock::now();
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
    if (due > std::chrono::steady_clock::now()) {
      wake_.wait_until(lock, due);
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
      const Result<HttpPostResult> r = HttpPost(*url, alert.body, headers, options_.timeout_ms);
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
      const int64_t wall = WallMs();
      const int64_t deadline = alert.created_ms + options_.retry_for_ms;
      // A bad URL (a spool or stream entry written by another version) will
      // not get better: given up at once.
      if (wall >= deadline || !url.ok()) {
        finished = Outcome::kExpired;
        ++stats_.expired;
      } else {
        ++stats_.retried;
        const int64_t wait = std::min(BackoffMs(alert.attempts), deadline - wall);
        after.due = std::chrono::steady_clock::now() + std::chrono::milliseconds(wait);
        queue_.emplace(after.due, id);
      }
    }
    if (finished.has_value()) {
      items_.erase(id);
      ++version_;
      if (items_.empty()) idle_.notify_all();
    }
    lock.unlock();
    if (!error.empty()) {
      Failures().Note(alert, error, /*given_up=*/finished.has_value());
      if (options_.on_failed) options_.on_failed(alert, error);
    }
    if (finished.has_value() && options_.on_finished) options_.on_finished(alert, *finished);
    lock.lock();
  }
}

}  // namespace floodgate::service
