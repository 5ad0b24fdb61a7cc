// The embedded store's ControlStore (store/control.h): the records in
// memory and, with a data_dir, in <data_dir>/control.db, rewritten whole
// and atomically (a temporary file, fsync, rename) on every change, so
// that a crash leaves the old file or the new one, never half of either.
// The change log is appended to <data_dir>/control.log, and its last 1000
// entries kept in memory (read back at Open).
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "store/control.h"

namespace floodgate::engine {

class LocalControlStore final : public store::ControlStore {
 public:
  // Loads <data_dir>/control.db when there is one. An unreadable or corrupt
  // file is an error naming it (nothing is silently dropped).
  static Result<std::unique_ptr<LocalControlStore>> Open(const std::string& data_dir);

  Result<uint64_t> Version() override;
  Result<store::ControlSnapshot> Load(int64_t now_ms) override;
  Result<uint64_t> Apply(const store::ControlWrite& write, int64_t now_ms) override;
  Result<std::vector<std::string>> RecentLog(size_t limit) override;

 private:
  explicit LocalControlStore(std::string data_dir) : data_dir_(std::move(data_dir)) {}
  Status ReadFile();
  Status WriteFile() const;  // under mu_

  const std::string data_dir_;
  std::mutex mu_;
  uint64_t version_ = 0;  // guarded by mu_
  // (table, key) -> (value, expires_at_ms); guarded by mu_
  std::map<std::pair<std::string, std::string>, std::pair<std::string, int64_t>> entries_;
  std::vector<std::string> log_;  // oldest first, at most kLogKeep; guarded by mu_
};

}  // namespace floodgate::engine
