// WebhookQueue: see webhook_queue.h.
#include "service/delivery/webhook_queue.h"

#include <algorithm>

#include "common/log.h"
#include "service/delivery/http_post.h"

namespace floodgate::service {

WebhookQueue::WebhookQueue(Options options)
    : options_(std::move(options)),
      clock_(options_.clock != nullptr ? *options_.clock : SystemClock::Default()) {
  worker_ = std::thread([this] { Run(); });
}

WebhookQueue::~WebhookQueue() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  worker_.join();
  std::lock_guard<std::mutex> lock(mu_);
  stats_.dropped += static_cast<int64_t>(bodies_.size());
  bodies_.clear();
}

bool WebhookQueue::TryReserve() {
  std::lock_guard<std::mutex> lock(mu_);
  if (stop_ || claimed_ >= options_.capacity) {
    ++stats_.dropped;
    return false;
  }
  ++claimed_;
  return true;
}

void WebhookQueue::Push(std::string body) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    bodies_.push_back(std::move(body));
  }
  wake_.notify_one();
}

void WebhookQueue::Unreserve() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    --claimed_;
  }
  idle_.notify_all();
}

bool WebhookQueue::WaitIdle(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  return idle_.wait_for(lock, timeout, [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return bodies_.empty() && !sending_;
  });
}

WebhookQueue::Stats WebhookQueue::GetStats() const {
  std::lock_guard<std::mutex> lock(mu_);
  Stats s = stats_;
  s.queued = static_cast<int64_t>(bodies_.size()) + (sending_ ? 1 : 0);
  return s;
}

void WebhookQueue::Run() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    wake_.wait(lock,
               [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stop_ || !bodies_.empty(); });
    if (stop_) return;
    std::string body = std::move(bodies_.front());
    bodies_.pop_front();
    sending_ = true;
    lock.unlock();
    const Result<HttpPostResult> r =
        HttpPost(options_.url, body, options_.headers, options_.timeout_ms, clock_);
    // The body may hold a secret: wipe it before its memory is reused.
    std::fill(body.begin(), body.end(), '\0');
    const bool ok = r.ok() && r->status >= 200 && r->status < 300;
    if (!ok) {
      Log(LogLevel::kWarn, "delivery failed",
          {{"to", options_.what},
           {"error", r.ok() ? "HTTP status " + std::to_string(r->status) : r.status().message()}});
    }
    lock.lock();
    ++(ok ? stats_.sent : stats_.failed);
    sending_ = false;
    --claimed_;
    if (bodies_.empty()) idle_.notify_all();
  }
}

}  // namespace floodgate::service
