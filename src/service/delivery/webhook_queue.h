// WebhookQueue: JSON bodies POSTed to one URL by a worker thread, off the
// request path: a caller claims a place, queues its body and returns at
// once; the worker sends one POST at a time, each within its timeout.
// Bounded: at most `capacity` bodies claimed or waiting; past it, TryReserve
// refuses (counted as dropped) rather than let a slow gateway grow memory.
// A POST that fails (no connection, timeout, a non-2xx status) is counted
// and logged, without its body (it may hold a code), and not retried: a
// user asks for a new code sooner than a retry would help.
//
// Thread-safe.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "common/http_url.h"
#include "floodgate/clock.h"

namespace floodgate::service {

class WebhookQueue {
 public:
  struct Options {
    HttpUrl url;
    int64_t timeout_ms = 2000;
    size_t capacity = 1000;
    std::vector<std::pair<std::string, std::string>> headers;  // e.g. Authorization
    std::string what = "webhook";                              // names it in log lines
    // Times each POST's timeout; must outlive the queue. Null:
    // SystemClock::Default().
    const Clock* clock = nullptr;
  };
  struct Stats {
    int64_t sent = 0;     // answered 2xx
    int64_t failed = 0;   // no answer in time, or not 2xx
    int64_t dropped = 0;  // refused because the queue was full, or left at shutdown
    int64_t queued = 0;   // waiting or being sent now (gauge)
  };

  explicit WebhookQueue(Options options);
  // Stops the worker: a POST in progress finishes (within its timeout);
  // bodies still waiting are dropped and counted.
  ~WebhookQueue();
  WebhookQueue(const WebhookQueue&) = delete;
  WebhookQueue& operator=(const WebhookQueue&) = delete;

  // Claims a place for one body. False (counted as dropped) when full.
  bool TryReserve();
  // Queues `body` in a place TryReserve claimed.
  void Push(std::string body);
  // Gives back a claimed place that will not be used.
  void Unreserve();

  // Waits until every body queued so far has been attempted; false if that
  // takes longer than `timeout`, in real time (how long the caller will
  // block, whatever the clock). For tests and orderly shutdowns.
  bool WaitIdle(std::chrono::milliseconds timeout);

  Stats GetStats() const;

 private:
  void Run();

  const Options options_;
  const Clock& clock_;
  mutable std::mutex mu_;
  std::condition_variable wake_;  // the worker: a body or stop
  std::condition_variable idle_;  // WaitIdle: the queue drained
  std::deque<std::string> bodies_ ABSL_GUARDED_BY(mu_);
  size_t claimed_ ABSL_GUARDED_BY(mu_) = 0;  // reserved, queued or being sent
  bool sending_ ABSL_GUARDED_BY(mu_) = false;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  Stats stats_ ABSL_GUARDED_BY(mu_);
  std::thread worker_;
};

}  // namespace floodgate::service
