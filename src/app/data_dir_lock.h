// DataDirLock: one floodgate process at a time owns a data_dir (its state
// snapshot and control-plane records): <data_dir>/floodgate.lock, held with
// flock(2) for the process's life and holding its pid. The kernel drops the
// lock when the process exits, however it exits, so a crash never leaves a
// stale lock behind.
#pragma once

#include <cstdint>
#include <string>

#include "floodgate/status.h"

namespace floodgate::app {

class DataDirLock {
 public:
  // Creates `data_dir` if missing (0750) and takes its lock. Without
  // `wait_ms`, a lock another process holds is an error naming that
  // process; with it, waits up to wait_ms for that process to exit (a
  // graceful restart: the old process still drains and saves its state).
  static Result<DataDirLock> Acquire(const std::string& data_dir, int64_t wait_ms);

  DataDirLock(DataDirLock&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
  DataDirLock& operator=(DataDirLock&&) = delete;
  ~DataDirLock();

 private:
  explicit DataDirLock(int fd) : fd_(fd) {}
  int fd_;
};

}  // namespace floodgate::app
