// The Redis client's LoopDriver: one driven I/O loop of the client, with
// connections of its own to every node, run on the caller's thread. Private
// to src/redis/ (Client::NewLoopDriver makes them).
#pragma once

#include <memory>

#include "floodgate/loop_driver.h"
#include "redis/io_thread.h"

namespace floodgate::redis::internal {

// Not thread-safe (see LoopDriver).
class ClientLoopDriver final : public LoopDriver {
 public:
  // `loop` has been started with StartDriven.
  explicit ClientLoopDriver(std::unique_ptr<IoThread> loop) : loop_(std::move(loop)) {}
  ~ClientLoopDriver() override { loop_->Detach(); }

  void Attach() override { loop_->Attach(); }
  int fd() const override { return loop_->epoll_fd(); }
  void PollEvents() override { loop_->PollEvents(); }
  void Step() override { loop_->Step(); }
  int TimeoutMs() const override { return loop_->TimeoutMs(); }
  void Detach() override { loop_->Detach(); }

 private:
  std::unique_ptr<IoThread> loop_;
};

}  // namespace floodgate::redis::internal
