// TlsReloader: puts new certificate files into service (TlsContextHolder),
// on demand (SIGHUP) and when the files change on disk: a renewal tool
// (certbot, cert-manager's secret volume, a cron'd `cp`) needs no signal.
//
// A change is taken once the files have stayed the same for one more look,
// so a certificate and key replaced one after the other are loaded as a
// pair, not refused between the two writes. A bad new file keeps the old
// certificate serving; the log says why and refusals() counts it; the same
// files are not tried again until they change again.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "common/thread_stopper.h"
#include "floodgate/status.h"
#include "server/net/tls_context.h"

namespace floodgate::server {

// How often `serve` looks at the files.
inline constexpr int64_t kTlsWatchIntervalMs = 1000;

class TlsReloader {
 public:
  // Watches `holder`'s current files every `watch_ms` (0: on demand only).
  // `holder` must outlive the reloader.
  TlsReloader(TlsContextHolder* holder, int64_t watch_ms);
  ~TlsReloader();  // stops watching
  TlsReloader(const TlsReloader&) = delete;
  TlsReloader& operator=(const TlsReloader&) = delete;

  // Loads `files` now (SIGHUP: the config's tls section as read again),
  // logging the outcome; from here on these are the files watched.
  Status Reload(const TlsFiles& files);

  int64_t reloads() const { return reloads_.load(std::memory_order_relaxed); }
  int64_t refusals() const { return refusals_.load(std::memory_order_relaxed); }
  // The serving certificate's end of validity (seconds since the epoch).
  int64_t not_after_s() const { return holder_->Current()->not_after_s(); }

 private:
  // What stat says of each file (device, inode, size, modification time):
  // a replaced file (rename, a symlink swapped) or one written in place
  // changes it.
  using Signature = std::vector<int64_t>;
  static Signature SignatureOf(const TlsFiles& files);
  Status LoadLocked(const TlsFiles& files, std::string_view trigger);
  void Watch(int64_t watch_ms);

  TlsContextHolder* const holder_;
  std::mutex mu_;  // one load at a time; guards the fields below
  TlsFiles files_;
  Signature loaded_;   // the files as last loaded (or tried)
  Signature changed_;  // a change seen, waiting for one more look
  std::atomic<int64_t> reloads_{0};
  std::atomic<int64_t> refusals_{0};
  ThreadStopper watcher_;
};

}  // namespace floodgate::server
