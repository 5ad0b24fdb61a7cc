// ControlStore: where the control plane's records live (overrides, blocks,
// runtime rules) and its change log, shared by every server on one store.
//
// The records are opaque to the store: the control plane (service/) encodes
// each as a string and names it by table and key. What the store adds is
// sharing and keeping them:
//   - the Redis store keeps them in Redis (redis/control_store.h), one hash
//     per table under the hash tag {control} so that a change is one script
//     on one slot (single server, Cluster, Twemproxy alike), with a version
//     counter every server polls: Twemproxy has no pub/sub;
//   - the embedded store keeps them in memory and, with a data_dir, in a
//     file there written atomically (engine/control_file.h), so that they
//     survive a restart.
//
// Blocking calls, for the control plane's own thread (never an event loop
// or a store I/O thread). Thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "floodgate/status.h"

namespace floodgate::store {

// The tables, by name (a store may reject any other).
inline constexpr const char* kOverridesTable = "overrides";
inline constexpr const char* kBlocksTable = "blocks";
inline constexpr const char* kRulesTable = "rules";

struct ControlEntry {
  std::string table;
  std::string key;
  std::string value;
  // Wall-clock ms since the epoch after which the entry is gone; 0: never.
  int64_t expires_at_ms = 0;
};

struct ControlSnapshot {
  uint64_t version = 0;
  std::vector<ControlEntry> entries;  // live ones only (unexpired at Load's now_ms)
};

// One change: put `entry` (erase false) or delete (table, key) (erase
// true), and append `log` to the change log; applied as one atomic step,
// which bumps the version.
struct ControlWrite {
  ControlEntry entry;
  bool erase = false;
  std::string log;  // one change-log entry (JSON text), or "" for none
};

class ControlStore {
 public:
  virtual ~ControlStore() = default;
  // Changes whenever any server applies a write; cheap (it is polled).
  virtual Result<uint64_t> Version() = 0;
  // Every entry unexpired at now_ms, and the version they are as of.
  virtual Result<ControlSnapshot> Load(int64_t now_ms) = 0;
  // Applies `write`; the version after it. Entries expired by now_ms may be
  // dropped on the way. Deleting an absent entry is not an error (the log
  // entry is still appended).
  virtual Result<uint64_t> Apply(const ControlWrite& write, int64_t now_ms) = 0;
  // The last `limit` change-log entries, newest first. The log keeps at
  // least the last 1000.
  virtual Result<std::vector<std::string>> RecentLog(size_t limit) = 0;
};

// How the control plane opens its ControlStore when it starts (store/rooms.h:
// Rooms::control), and owns it from then on. Opening reads the embedded
// store's file: a corrupt one fails that start.
struct ControlStoreOptions {
  // The embedded store: a directory the records are kept in across
  // restarts ("" : in memory only). The Redis store ignores it.
  std::string data_dir;
};
using ControlStoreOpener =
    std::function<Result<std::unique_ptr<ControlStore>>(const ControlStoreOptions& options)>;

}  // namespace floodgate::store
