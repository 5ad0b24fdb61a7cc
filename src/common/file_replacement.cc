// FileReplacement: see file_replacement.h.
#include "common/file_replacement.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <utility>

namespace floodgate {

FileReplacement::FileReplacement(std::string path) : path_(std::move(path)), tmp_(path_ + ".tmp") {
  fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd_ < 0) Fail("open");
}

FileReplacement::~FileReplacement() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_) ::unlink(tmp_.c_str());
}

bool FileReplacement::Fail(const char* step) {
  if (failed_step_ == nullptr) {
    failed_step_ = step;
    error_ = errno;
  }
  return false;
}

bool FileReplacement::Append(std::string_view data) {
  if (failed_step_ != nullptr) return false;
  while (!data.empty()) {
    const ssize_t n = ::write(fd_, data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Fail("write");
    if (n == 0) {
      errno = EIO;
      return Fail("write");
    }
    data.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

bool FileReplacement::Commit() {
  if (failed_step_ != nullptr) return false;
  if (::fsync(fd_) != 0) return Fail("fsync");
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) return Fail("close");
  if (::rename(tmp_.c_str(), path_.c_str()) != 0) return Fail("rename");
  committed_ = true;
  // The rename is durable once the directory is.
  const size_t slash = path_.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : path_.substr(0, slash + 1);
  if (const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC); dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
  return true;
}

}  // namespace floodgate
