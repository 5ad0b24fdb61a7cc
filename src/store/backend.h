// Backend: how a store's I/O runs and how its backend fares, apart from the
// decisions (store/store.h) because nothing on a decision's path asks it:
// the blocking forms ask whether they may wait, each event loop asks for
// its driver once, the health checks and the admin API ask how the backend
// is. The embedded store answers each at once (no I/O of its own, no
// nodes); the Redis store answers from its client.
//
// Thread-safe.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "floodgate/loop_driver.h"
#include "floodgate/status.h"

namespace floodgate::store {

// One node of a remote store, as ProbeNodes found it.
struct NodeHealth {
  std::string address;        // "host:port"
  bool up = false;            // answered the PING
  bool circuit_open = false;  // refused at once: its circuit breaker is open
  double latency_ms = 0;      // the PING's round trip, when up
  std::string error;          // why not up
};

class Backend {
 public:
  virtual ~Backend() = default;
  // Whether a caller may wait here for a later answer: not on a thread
  // that runs this store's I/O (it would wait for itself).
  virtual Status BlockingAllowed() const = 0;
  // The store's I/O run by one event loop (floodgate/loop_driver.h); null
  // when there is none to run.
  virtual Result<std::unique_ptr<LoopDriver>> NewLoopDriver() = 0;
  // Whether the store can be expected to answer now (see Limiter::StoreHealth).
  virtual Status Health() const = 0;
  // A remote store's nodes as one round trip finds them now (PING each):
  // blocking, never on a thread that runs the store's I/O. Empty for a
  // store without nodes (the embedded one).
  virtual std::vector<NodeHealth> ProbeNodes() = 0;
};

}  // namespace floodgate::store
