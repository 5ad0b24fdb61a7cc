// ThreadStopper: the thread of a background worker that sleeps between
// rounds (the state keeper's saves, the event streams' ticks, the top
// recorder's drains, the sentinel watcher), and the one way it is stopped:
// a flag, a wake-up and a join, so that no sleeper misses its stop and no
// destructor returns while its thread still runs.
//
//   stopper_.Start([this] { Run(); });
//   void Run() { while (stopper_.SleepFor(kIntervalNs)) DoRound(); }
//   ~Worker() { stopper_.Stop(); }   // before the members Run uses go
//
// Thread-safe. Sleeps are in real time: a worker timed by a Clock passes
// Clock::SleepNs, so that a ManualClock still wakes it.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>

namespace floodgate {

class ThreadStopper {
 public:
  ThreadStopper() = default;
  ~ThreadStopper() { Stop(); }
  ThreadStopper(const ThreadStopper&) = delete;
  ThreadStopper& operator=(const ThreadStopper&) = delete;

  // Runs `body` on a new thread. Once only.
  void Start(std::function<void()> body) { thread_ = std::thread(std::move(body)); }
  bool started() const { return thread_.joinable(); }

  // Any thread but the worker's: ends the current or next sleep for good and
  // waits for the thread to return. Idempotent.
  void Stop() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
  }

  // Any thread: ends the worker's current (or next) sleep early, once.
  void Wake() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      woken_ = true;
    }
    cv_.notify_all();
  }

  // The worker's: sleeps up to `ns` real nanoseconds, less if woken; false
  // once stopped (the worker then returns).
  bool SleepFor(int64_t ns) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, std::chrono::nanoseconds(ns), [&] { return stopping_ || woken_; });
    woken_ = false;
    return !stopping_;
  }

  bool stopping() const {
    std::lock_guard<std::mutex> lock(mu_);
    return stopping_;
  }

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;  // guarded by mu_
  bool woken_ = false;     // guarded by mu_
  std::thread thread_;
};

}  // namespace floodgate
