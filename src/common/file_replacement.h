// FileReplacement: a file's new contents written beside it (<path>.tmp),
// flushed to disk, then renamed over it, and the rename made durable by
// flushing the directory: a crash at any point leaves the old file or the
// new one whole, never a mix. The control plane's control.db, the alert
// spool and the embedded store's state snapshot are all replaced this way.
#pragma once

#include <string>
#include <string_view>

namespace floodgate {

// Not thread-safe.
class FileReplacement {
 public:
  // Opens <path>.tmp (mode 0600), truncating one a crash left behind.
  explicit FileReplacement(std::string path);
  // A replacement not committed is removed; the file stays as it was.
  ~FileReplacement();
  FileReplacement(const FileReplacement&) = delete;
  FileReplacement& operator=(const FileReplacement&) = delete;

  // Appends to the new contents. False when a step failed (this one or an
  // earlier one): failed_step() and error() say which and why.
  bool Append(std::string_view data);
  // Flushes the new contents, renames them over the file and flushes the
  // directory. False (and the file as it was) when a step failed.
  bool Commit();

  const std::string& path() const { return path_; }
  const std::string& tmp_path() const { return tmp_; }
  // "open", "write", "fsync", "close" or "rename"; nullptr while all went well.
  const char* failed_step() const { return failed_step_; }
  int error() const { return error_; }  // errno of the failed step

 private:
  bool Fail(const char* step);

  const std::string path_;
  const std::string tmp_;
  int fd_ = -1;
  bool committed_ = false;
  const char* failed_step_ = nullptr;
  int error_ = 0;
};

}  // namespace floodgate
