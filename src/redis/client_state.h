// The Redis client's internals shared by its I/O threads: a request in
// flight (Pending), the statistics counters, the circuit breakers, the
// cluster slot map and the master a sentinel URL names. Private to src/redis/.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "redis/circuit_breaker.h"
#include "redis/client.h"
#include "redis/sentinel.h"
#include "redis/slot_map.h"
#include "redis/tls.h"
#include "redis/wrong_type.h"

namespace floodgate::redis::internal {

class Connection;
class IoThread;
struct Node;

enum class PendingKind : uint8_t {
  kUser,     // a caller's command: counted in Stats, redirects followed
  kPinned,   // a caller's command for one node (SendToNode): no redirects
  kProbe,    // a circuit breaker's PING: bypasses the open circuit
  kRefresh,  // CLUSTER SLOTS
  kAsking,   // the ASKING before an ASK-redirected command: its reply is dropped
};

// One command from submission to answer. Owned by exactly one container at
// a time (a submission queue, a node's waiting list, a connection's
// in-flight list); also linked into its I/O thread's deadline list until
// answered. Once answered (`done` has run, or it timed out) it stays where
// it is as a tombstone until its reply, if one is due, has been read.
// Loop-thread only once submitted.
struct Pending {
  Pending() = default;
  Pending(const Pending&) = delete;
  Pending& operator=(const Pending&) = delete;
  ~Pending() {
    if (live_counter != nullptr) live_counter->fetch_sub(1, std::memory_order_relaxed);
  }

  ReplyCallback done;
  std::string command;  // RESP-encoded
  std::string node;     // target node id ("host:port"); empty: route by slot
  int64_t deadline_ns = 0;
  int64_t timeout_ms = 0;  // deadline_ns less its submission: what a timeout reports
  int slot = 0;
  uint8_t redirects = 0;
  PendingKind kind = PendingKind::kUser;
  bool asking = false;    // send ASKING first (ASK redirect)
  bool rejected = false;  // over the pending bound: answered UNAVAILABLE
  bool answered = false;
  std::string invalid;         // non-empty: answered INVALID_ARGUMENT with this message
  Node* target = nullptr;      // the node it was last routed to
  Connection* conn = nullptr;  // the connection it was written to

  // The I/O thread's deadline list (sorted by deadline_ns).
  Pending* prev = nullptr;
  Pending* next = nullptr;
  bool timed = false;

  // Counts live Pending objects per I/O thread (the pending bound).
  std::atomic<int64_t>* live_counter = nullptr;
};

// Stats as relaxed atomics. Mostly written by I/O threads.
struct Counters {
  std::atomic<uint64_t> requests{0};
  std::atomic<uint64_t> replies{0};
  std::atomic<uint64_t> error_replies{0};
  std::atomic<uint64_t> timeouts{0};
  std::atomic<uint64_t> unavailable{0};
  std::atomic<uint64_t> circuit_rejections{0};
  std::atomic<uint64_t> queue_full{0};
  std::atomic<int64_t> open_circuits{0};
  std::atomic<uint64_t> circuit_opens{0};
  std::atomic<int64_t> connections{0};
  std::atomic<uint64_t> connects{0};
  std::atomic<uint64_t> reconnects{0};
  std::atomic<uint64_t> connect_failures{0};
  std::atomic<uint64_t> connections_lost{0};
  std::atomic<uint64_t> stale_replies{0};
  std::atomic<uint64_t> stale_resets{0};
  std::atomic<uint64_t> moved{0};
  std::atomic<uint64_t> ask{0};
  std::atomic<uint64_t> slot_map_refreshes{0};
  std::atomic<uint64_t> writes{0};
  std::atomic<uint64_t> commands_written{0};
};

inline void Bump(std::atomic<uint64_t>& counter, uint64_t n = 1) {
  counter.fetch_add(n, std::memory_order_relaxed);
}

// Everything the I/O threads share. Thread-safe.
class ClientState {
 public:
  ClientState(ClientOptions options, std::shared_ptr<TlsContext> tls);
  ~ClientState();

  const ClientOptions options;
  const Clock& clock;                     // options.clock, or the default
  const std::shared_ptr<TlsContext> tls;  // null without TLS
  Counters counters;
  WrongTypeLog wrong_types;
  // Written once in Client::Create before any other thread sees the state.
  std::vector<std::unique_ptr<IoThread>> threads;
  // Indexes of driven loops (Client::NewLoopDriver) count on from the threads'.
  std::atomic<int> next_loop_index{0};

  // The breaker of node `id`, created on first use; shared by all threads.
  std::shared_ptr<CircuitBreaker> BreakerFor(const std::string& id);
  // Whether node `id`'s circuit is open or half-open (false before its
  // breaker exists: nothing has failed yet).
  bool CircuitOpen(const std::string& id) const;

  // Cluster: the current slot map (null before the first CLUSTER SLOTS).
  std::shared_ptr<const SlotMap> slot_map() const;
  uint64_t slot_map_version() const { return map_version_.load(std::memory_order_acquire); }
  void PublishSlotMap(SlotMap map);
  // Waits until a slot map exists or `timeout_ns` passes (on `clock`).
  std::shared_ptr<const SlotMap> WaitForSlotMap(int64_t timeout_ns);

  // Asks I/O thread 0 to read CLUSTER SLOTS again (soon, rate-limited).
  void RequestSlotRefresh();
  // Sentinel: the master's address as last published (Client::Create
  // publishes the first before any thread starts), and a version that
  // changes with it, which each I/O thread compares with the one it follows.
  HostPort master() const;
  uint64_t master_version() const { return master_version_.load(std::memory_order_acquire); }
  // The watcher's: publishes a new master and wakes the I/O threads.
  void PublishMaster(const HostPort& master);
  // Any thread: the master answered READONLY or its ROLE was not master, so
  // the sentinels are asked again (no-op without a sentinel).
  void RequestMasterRefresh();
  // Set once in Client::Create, before the threads start; Client::~Client
  // stops its thread first, while what it publishes into is still there.
  std::unique_ptr<SentinelWatcher> sentinel;

  // I/O thread 0: whether a refresh was asked for (clears the request).
  bool TakeSlotRefreshRequest() { return refresh_wanted_.exchange(false); }
  bool slot_refresh_wanted() const { return refresh_wanted_.load(std::memory_order_relaxed); }

 private:
  mutable std::mutex breakers_mu_;
  absl::flat_hash_map<std::string, std::shared_ptr<CircuitBreaker>> breakers_
      ABSL_GUARDED_BY(breakers_mu_);

  mutable std::mutex map_mu_;
  std::condition_variable map_cv_;
  std::shared_ptr<const SlotMap> map_ ABSL_GUARDED_BY(map_mu_);
  std::atomic<uint64_t> map_version_{0};
  std::atomic<bool> refresh_wanted_{false};

  mutable std::mutex master_mu_;
  HostPort master_ ABSL_GUARDED_BY(master_mu_);
  std::atomic<uint64_t> master_version_{0};
};

}  // namespace floodgate::redis::internal
