// DataDirLock: see data_dir_lock.h.
#include "app/data_dir_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

namespace floodgate::app {
namespace {

std::string Holder(int fd) {
  char buf[32] = {};
  const ssize_t n = ::pread(fd, buf, sizeof(buf) - 1, 0);
  std::string pid = n > 0 ? std::string(buf, static_cast<size_t>(n)) : "";
  while (!pid.empty() && (pid.back() == '\n' || pid.back() == ' ')) pid.pop_back();
  return pid.empty() ? "another floodgate" : "floodgate pid " + pid;
}

}  // namespace

Result<DataDirLock> DataDirLock::Acquire(const std::string& data_dir, int64_t wait_ms) {
  if (::mkdir(data_dir.c_str(), 0750) != 0 && errno != EEXIST) {
    return UnavailableError("cannot create data_dir " + data_dir + ": " + std::strerror(errno));
  }
  const std::string path = data_dir + "/floodgate.lock";
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0640);
  if (fd < 0) {
    return UnavailableError("cannot open " + path + ": " + std::strerror(errno) +
                            " (data_dir must be writable by the user floodgate runs as)");
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(wait_ms);
  while (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    if (errno == EINTR) continue;
    if (errno != EWOULDBLOCK) {
      const int err = errno;
      ::close(fd);
      return UnavailableError("cannot lock " + path + ": " + std::strerror(err));
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      const std::string holder = Holder(fd);
      ::close(fd);
      if (wait_ms <= 0) {
        return UnavailableError("data_dir " + data_dir + " is in use by " + holder +
                                " (one process per data_dir; to take over from it, start this "
                                "one with --replace)");
      }
      return UnavailableError("data_dir " + data_dir + " is still in use by " + holder + " after " +
                              std::to_string(wait_ms / 1000) +
                              " s (stop it with SIGTERM to hand over)");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  const std::string pid = std::to_string(::getpid()) + "\n";
  if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, pid.data(), pid.size(), 0) < 0) {
    // The pid only makes messages clearer; the lock is what counts.
  }
  return DataDirLock(fd);
}

DataDirLock::~DataDirLock() {
  if (fd_ >= 0) ::close(fd_);  // releases the lock
}

}  // namespace floodgate::app
