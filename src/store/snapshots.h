// Snapshots: a store's whole state written to a file and read back, so that
// a restart keeps today's quotas (data_dir, docs/operations.md "State
// across restarts"; service/snapshots/state_keeper.h runs it). Only a store whose
// state is this process's own has it (the embedded store, engine/snapshot.h
// has the file's format); a shared store's state (Redis) outlives the
// process anyway and has none.
#pragma once

#include <cstdint>
#include <string>

#include "floodgate/status.h"

namespace floodgate::store {

// What saving or loading a store's state in a file did.
struct StateFigures {
  int64_t entries = 0;          // written, or loaded
  int64_t bytes = 0;            // the file's size
  int64_t duration_ms = 0;      // how long it took
  int64_t skipped_expired = 0;  // load: expired since they were written
  int64_t skipped_unknown = 0;  // load: of a rule (or limit) the config no longer has
  int64_t refused_full = 0;     // load: no room in the store
  int64_t written_at_ms = 0;    // when the state was saved
};

// Thread-safe.
class Snapshots {
 public:
  virtual ~Snapshots() = default;
  // Writes the whole state atomically to `path` (a crash mid-write leaves
  // the previous file whole). Blocking, for a background thread: decisions
  // go on meanwhile.
  virtual Result<StateFigures> Save(const std::string& path) = 0;
  // Loads what Save wrote, skipping what has expired since; before the
  // store answers anything. NOT_FOUND without a file; INVALID_ARGUMENT,
  // and nothing loaded, for a file that is damaged or not a snapshot.
  virtual Result<StateFigures> Load(const std::string& path) = 0;
};

}  // namespace floodgate::store
