// TlsReloader: see tls_reloader.h.
#include "server/net/tls_reloader.h"

#include <sys/stat.h>

#include <ctime>
#include <utility>

#include "common/log.h"

namespace floodgate::server {

TlsReloader::TlsReloader(TlsContextHolder* holder, int64_t watch_ms) : holder_(holder) {
  files_ = holder_->Current()->files();
  loaded_ = SignatureOf(files_);
  changed_ = loaded_;
  if (watch_ms > 0) watcher_.Start([this, watch_ms] { Watch(watch_ms); });
}

TlsReloader::~TlsReloader() { watcher_.Stop(); }

TlsReloader::Signature TlsReloader::SignatureOf(const TlsFiles& files) {
  Signature signature;
  for (const std::string* path : {&files.cert_file, &files.key_file, &files.client_ca_file}) {
    struct stat st {};
    if (path->empty() || ::stat(path->c_str(), &st) != 0) {
      signature.insert(signature.end(), {-1, -1, -1, -1, -1});  // absent: a state of its own
      continue;
    }
    signature.insert(signature.end(),
                     {static_cast<int64_t>(st.st_dev), static_cast<int64_t>(st.st_ino),
                      static_cast<int64_t>(st.st_size), static_cast<int64_t>(st.st_mtim.tv_sec),
                      static_cast<int64_t>(st.st_mtim.tv_nsec)});
  }
  return signature;
}

Status TlsReloader::Reload(const TlsFiles& files) {
  std::lock_guard<std::mutex> lock(mu_);
  files_ = files;
  return LoadLocked(files, "SIGHUP");
}

Status TlsReloader::LoadLocked(const TlsFiles& files, std::string_view trigger) {
  // Taken before the load: a change made while loading is seen next time.
  loaded_ = SignatureOf(files);
  changed_ = loaded_;
  Status s = holder_->Reload(files, static_cast<int64_t>(std::time(nullptr)));
  if (!s.ok()) {
    refusals_.fetch_add(1, std::memory_order_relaxed);
    Log(LogLevel::kError, "tls reload refused; the previous certificate keeps serving",
        {{"trigger", std::string(trigger)},
         {"error", s.message()},
         {"serial", holder_->Current()->serial()}});
    return s;
  }
  reloads_.fetch_add(1, std::memory_order_relaxed);
  Log(LogLevel::kInfo, "tls reloaded",
      {{"trigger", std::string(trigger)}, {"serial", holder_->Current()->serial()}});
  for (const std::string& warning : holder_->Current()->warnings()) {
    Log(LogLevel::kWarn, "tls certificate", {{"warning", warning}});
  }
  return Status::Ok();
}

void TlsReloader::Watch(int64_t watch_ms) {
  while (watcher_.SleepFor(watch_ms * 1'000'000)) {
    std::lock_guard<std::mutex> lock(mu_);
    const Signature now = SignatureOf(files_);
    if (now == loaded_) {
      changed_ = now;
      continue;
    }
    // Changed since the load: taken when it looks the same twice running.
    if (now != changed_) {
      changed_ = now;
      continue;
    }
    LoadLocked(files_, "files changed");
  }
}

}  // namespace floodgate::server
