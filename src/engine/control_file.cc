// LocalControlStore: see control_file.h.
#include "engine/control_file.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "common/file_replacement.h"
#include "common/length_fields.h"

namespace floodgate::engine {
namespace {

constexpr size_t kLogKeep = 1000;
constexpr std::string_view kMagic = "floodgate-control 1";

bool KnownTable(const std::string& table) {
  return table == store::kOverridesTable || table == store::kBlocksTable ||
         table == store::kRulesTable;
}

}  // namespace

Result<std::unique_ptr<LocalControlStore>> LocalControlStore::Open(const std::string& data_dir) {
  std::unique_ptr<LocalControlStore> store(new LocalControlStore(data_dir));
  if (!data_dir.empty()) {
    if (Status s = store->ReadFile(); !s.ok()) return s;
    // The change log's last entries, one JSON object per line.
    std::ifstream log(data_dir + "/control.log");
    for (std::string line; std::getline(log, line);) {
      if (line.empty()) continue;
      store->log_.push_back(std::move(line));
      if (store->log_.size() > 2 * kLogKeep) {
        store->log_.erase(store->log_.begin(), store->log_.begin() + kLogKeep);
      }
    }
    if (store->log_.size() > kLogKeep) {
      store->log_.erase(store->log_.begin(), store->log_.end() - kLogKeep);
    }
  }
  return store;
}

Status LocalControlStore::ReadFile() {
  const std::string path = data_dir_ + "/control.db";
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    if (access(path.c_str(), F_OK) != 0 && errno == ENOENT) return Status::Ok();  // first start
    return InvalidArgumentError("cannot read " + path + ": " + std::strerror(errno));
  }
  std::stringstream buffer;
  buffer << in.rdbuf();
  const std::string text = buffer.str();
  auto corrupt = [&](const std::string& why) {
    return InvalidArgumentError(path + " is corrupt (" + why +
                                "): move it away to start without its records");
  };
  std::string_view rest(text);
  const size_t eol = rest.find('\n');
  if (eol == std::string_view::npos) return corrupt("no header");
  std::string_view header = rest.substr(0, eol);
  if (header.substr(0, kMagic.size()) != kMagic) return corrupt("not a floodgate control file");
  header.remove_prefix(kMagic.size());
  try {
    version_ = std::stoull(std::string(header));
  } catch (...) {
    return corrupt("bad version");
  }
  rest.remove_prefix(eol + 1);
  while (!rest.empty()) {
    std::string table, key, value, expires;
    if (!fields::Read(&rest, &table) || !fields::Read(&rest, &key) ||
        !fields::Read(&rest, &value) || !fields::Read(&rest, &expires) || rest.empty() ||
        rest.front() != '\n') {
      return corrupt("bad entry");
    }
    rest.remove_prefix(1);
    if (!KnownTable(table)) return corrupt("unknown table '" + table + "'");
    int64_t expires_at = 0;
    try {
      expires_at = std::stoll(expires);
    } catch (...) {
      return corrupt("bad expiry");
    }
    entries_[{table, key}] = {value, expires_at};
  }
  return Status::Ok();
}

Status LocalControlStore::WriteFile() const {
  if (data_dir_.empty()) return Status::Ok();
  std::string text(kMagic);
  text += ' ' + std::to_string(version_) + '\n';
  for (const auto& [name, entry] : entries_) {
    fields::Append(&text, name.first);
    fields::Append(&text, name.second);
    fields::Append(&text, entry.first);
    fields::Append(&text, std::to_string(entry.second));
    text += '\n';
  }
  FileReplacement file(data_dir_ + "/control.db");
  if (!file.Append(text) || !file.Commit()) {
    const std::string_view step = file.failed_step();
    const char* verb = step == "fsync" ? "sync" : step == "rename" ? "rename" : "write";
    return InternalError(std::string("cannot ") + verb + " " + file.tmp_path() + ": " +
                         std::strerror(file.error()));
  }
  return Status::Ok();
}

Result<uint64_t> LocalControlStore::Version() {
  std::lock_guard<std::mutex> lock(mu_);
  return version_;
}

Result<store::ControlSnapshot> LocalControlStore::Load(int64_t now_ms) {
  std::lock_guard<std::mutex> lock(mu_);
  store::ControlSnapshot snapshot;
  snapshot.version = version_;
  for (const auto& [name, entry] : entries_) {
    if (entry.second != 0 && entry.second <= now_ms) continue;
    snapshot.entries.push_back({name.first, name.second, entry.first, entry.second});
  }
  return snapshot;
}

Result<uint64_t> LocalControlStore::Apply(const store::ControlWrite& write, int64_t now_ms) {
  if (!KnownTable(write.entry.table)) {
    return InvalidArgumentError("unknown control table '" + write.entry.table + "'");
  }
  std::lock_guard<std::mutex> lock(mu_);
  auto before = entries_;
  for (auto it = entries_.begin(); it != entries_.end();) {
    it = it->second.second != 0 && it->second.second <= now_ms ? entries_.erase(it) : std::next(it);
  }
  const auto name = std::make_pair(write.entry.table, write.entry.key);
  if (write.erase) {
    entries_.erase(name);
  } else {
    entries_[name] = {write.entry.value, write.entry.expires_at_ms};
  }
  ++version_;
  if (Status s = WriteFile(); !s.ok()) {
    // Not kept, so not applied: memory stays as the file says.
    entries_ = std::move(before);
    --version_;
    return s;
  }
  if (!write.log.empty()) {
    log_.push_back(write.log);
    if (log_.size() > kLogKeep) log_.erase(log_.begin(), log_.begin() + (log_.size() - kLogKeep));
    if (!data_dir_.empty()) {
      std::ofstream out(data_dir_ + "/control.log", std::ios::app);
      out << write.log << '\n';
    }
  }
  return version_;
}

Result<std::vector<std::string>> LocalControlStore::RecentLog(size_t limit) {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::string> out;
  for (auto it = log_.rbegin(); it != log_.rend() && out.size() < limit; ++it) out.push_back(*it);
  return out;
}

}  // namespace floodgate::engine
