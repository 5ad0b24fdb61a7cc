// A test's own event loop driving a LoopDriver on a thread of its own, as a
// server's event loop does: epoll on the driver's descriptor, PollEvents when
// it is ready, then the tasks posted to the loop (the "requests" of the
// iteration), then Step.
//
//   floodgate::testing::DrivenLoop loop(std::move(driver));
//   loop.RunAndWait([&] { client->Send(...); });   // sent from the loop's thread
//
// Thread-safe: Post, RunAndWait and Stop from any thread but the loop's.
#pragma once

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "floodgate/loop_driver.h"

namespace floodgate::testing {

class DrivenLoop {
 public:
  explicit DrivenLoop(std::unique_ptr<LoopDriver> driver) : driver_(std::move(driver)) {
    epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
    wake_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = kDriver;
    epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, driver_->fd(), &ev);
    ev.data.u64 = kWake;
    epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, wake_fd_, &ev);
    thread_ = std::thread([this] { Run(); });
    RunAndWait([this] { id_ = std::this_thread::get_id(); });
  }
  ~DrivenLoop() {
    Stop();
    driver_.reset();
    ::close(wake_fd_);
    ::close(epoll_fd_);
  }
  DrivenLoop(const DrivenLoop&) = delete;
  DrivenLoop& operator=(const DrivenLoop&) = delete;

  // Runs `fn` on the loop's thread in its next iteration, before Step.
  void Post(std::function<void()> fn) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      tasks_.push_back(std::move(fn));
    }
    Wake();
  }

  // Runs `fn` on the loop's thread and waits until it has run.
  void RunAndWait(std::function<void()> fn) {
    std::mutex done_mu;
    std::condition_variable done_cv;
    bool done = false;
    Post([&] {
      fn();
      std::lock_guard<std::mutex> lock(done_mu);
      done = true;
      done_cv.notify_all();
    });
    std::unique_lock<std::mutex> lock(done_mu);
    done_cv.wait(lock, [&] { return done; });
  }

  // Detaches the driver on the loop's thread (answering what is pending)
  // and ends the thread.
  void Stop() {
    if (!thread_.joinable()) return;
    stop_.store(true);
    Wake();
    thread_.join();
  }

  std::thread::id thread_id() const { return id_; }
  // Iterations run so far (each one epoll_wait that returned).
  int64_t iterations() const { return iterations_.load(); }

 private:
  static constexpr uint64_t kDriver = 1;
  static constexpr uint64_t kWake = 2;

  void Wake() {
    const uint64_t one = 1;
    [[maybe_unused]] const ssize_t n = ::write(wake_fd_, &one, sizeof(one));
  }

  void Run() {
    driver_->Attach();
    epoll_event events[4];
    std::vector<std::function<void()>> running;
    for (;;) {
      const bool last = stop_.load();  // then this iteration runs what is left
      const int n = epoll_wait(epoll_fd_, events, 4, last ? 0 : driver_->TimeoutMs());
      iterations_.fetch_add(1);
      bool ready = false;
      for (int i = 0; i < n; ++i) {
        if (events[i].data.u64 == kDriver) ready = true;
        if (events[i].data.u64 == kWake) {
          uint64_t value;
          [[maybe_unused]] const ssize_t r = ::read(wake_fd_, &value, sizeof(value));
        }
      }
      if (ready) driver_->PollEvents();
      {
        std::lock_guard<std::mutex> lock(mu_);
        running.swap(tasks_);
      }
      for (auto& fn : running) fn();
      running.clear();
      driver_->Step();
      if (last) break;
    }
    driver_->Detach();
  }

  std::unique_ptr<LoopDriver> driver_;
  int epoll_fd_ = -1;
  int wake_fd_ = -1;
  std::thread thread_;
  std::thread::id id_;
  std::atomic<bool> stop_{false};
  std::atomic<int64_t> iterations_{0};
  std::mutex mu_;
  std::vector<std::function<void()>> tasks_;
};

}  // namespace floodgate::testing
