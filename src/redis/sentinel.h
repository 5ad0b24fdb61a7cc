// Redis Sentinel: which server is the master a redis-sentinel:// URL names,
// and a watcher that follows it through failovers. Private to src/redis/.
//
// The client (ClientState) holds the master's address; the watcher is the
// only writer. It learns of a failover three ways:
//   - `+switch-master` on a sentinel it is subscribed to (the usual way: the
//     sentinels announce the promoted replica as soon as they agree), taken
//     as it comes;
//   - a request of an I/O thread (RequestRefresh): a master that answered
//     READONLY, or a connection whose ROLE was not master;
//   - asking again after it (re)subscribes, since a failover may have ended
//     while it was not listening, and every kSafetyAskMs in any case.
// The other two ask the sentinels (SENTINEL get-master-addr-by-name) in
// turn. A new answer is published; the same one changes nothing. The sentinels speak
// plain TCP (hiredis' blocking API, on a thread of the watcher's own: they
// are asked rarely, never on a decision's path).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "common/log.h"
#include "common/store_url.h"
#include "common/thread_stopper.h"
#include "floodgate/clock.h"
#include "floodgate/status.h"

namespace floodgate::redis::internal {

// The new master in a `+switch-master` message ("<name> <old-ip> <old-port>
// <new-ip> <new-port>") when it is about `name`; nullopt for another master
// or a malformed message.
std::optional<HostPort> ParseSwitchMaster(std::string_view message, std::string_view name);

// Asks the sentinels of `url` in order, each within `timeout_ms`, for the
// master named url.master_name; the first that knows it answers. NOT_FOUND
// when the sentinels that answered know no master of that name, UNAVAILABLE
// when none answered; each message names the sentinels and what they said.
Result<HostPort> AskSentinels(const StoreUrl& url, int64_t timeout_ms);

class SentinelWatcher {
 public:
  // Called on the watcher's thread with each new master (never the one it
  // already has). Must not call back into the watcher.
  using Publish = std::function<void(const HostPort& master)>;

  SentinelWatcher(StoreUrl url, int64_t timeout_ms, const Clock& clock, Publish publish);
  ~SentinelWatcher();  // Stop()
  SentinelWatcher(const SentinelWatcher&) = delete;
  SentinelWatcher& operator=(const SentinelWatcher&) = delete;

  // Starts following, from the master `known` (AskSentinels' answer).
  void Start(const HostPort& known);
  // Any thread: ask the sentinels again soon (at most every kMinAskMs).
  // Harmless once stopped.
  void RequestRefresh();
  // Stops and joins the thread: nothing is published after it returns.
  // Idempotent.
  void Stop();

  // How often, at most, the sentinels are asked on request, and at least
  // while subscribed.
  static constexpr int64_t kMinAskMs = 100;
  static constexpr int64_t kSafetyAskMs = 10'000;

 private:
  void Run();
  // Asks the sentinels and follows their answer.
  void Ask();
  // Publishes `master` when it is not the one already followed.
  void Follow(HostPort master);

  const StoreUrl url_;
  const int64_t timeout_ms_;
  const Clock& clock_;
  const Publish publish_;
  HostPort master_;  // the watcher's thread only, after Start
  int64_t last_ask_ns_ = 0;
  LogEvery no_master_log_{1000};

  std::atomic<bool> refresh_{false};
  ThreadStopper thread_;  // last: Run uses the members above
};

}  // namespace floodgate::redis::internal
