// StateKeeper: keeps the embedded store's state across restarts
// (data_dir, docs/operations.md "State across restarts"): loads
// <data_dir>/state.snapshot at start, writes it every snapshot_interval from
// a thread of its own and once more at shutdown, and counts both for
// /metrics. Only for a store whose state is the process's own, which has
// store::Snapshots (store/snapshots.h); a Redis store's state outlives the
// process anyway.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>

#include "absl/base/thread_annotations.h"
#include "common/thread_stopper.h"
#include "floodgate/clock.h"
#include "floodgate/status.h"
#include "store/snapshots.h"

namespace floodgate::service {

// Thread-safe.
class StateKeeper {
 public:
  // The file in `data_dir`.
  static std::string SnapshotPath(const std::string& data_dir);

  // `snapshots` and `clock` must outlive this. interval_ms 0: only at Stop.
  StateKeeper(store::Snapshots& snapshots, std::string data_dir, int64_t interval_ms,
              const Clock& clock);
  // Ends the periodic writes without a final one (a process that failed
  // to start must not replace the file it could not load).
  ~StateKeeper();

  // Loads the saved state, before the store answers anything. No file (a
  // first start) is OK. A damaged or foreign file is an error naming the
  // file, unless `start_empty`: then it is left as it is (the next save
  // replaces it) and the store starts empty, with a warning.
  Status Load(bool start_empty);
  // Starts the periodic writes.
  void Start();
  // Ends the periodic writes and writes once more: call after the last
  // decision (the server has drained). Returns that write's outcome.
  // Idempotent: later calls return the first's.
  Status Stop();
  // Writes now (the periodic thread's step). Refused until Load succeeded:
  // an empty store must never replace a snapshot nobody loaded.
  Status SaveNow();

  struct Stats {
    store::StateFigures last_save;  // the last successful write
    int64_t saves = 0;
    int64_t save_failures = 0;
    store::StateFigures load;  // what Load found
    bool loaded = false;       // a snapshot was loaded
  };
  Stats GetStats() const;
  const std::string& path() const { return path_; }

 private:
  void Run();

  store::Snapshots& snapshots_;
  const std::string path_;
  const int64_t interval_ms_;
  const Clock& clock_;
  std::mutex save_mu_;  // one write at a time (periodic, final)
  mutable std::mutex mu_;
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
  bool ready_ ABSL_GUARDED_BY(mu_) = false;  // Load succeeded
  Status final_ ABSL_GUARDED_BY(mu_);
  Stats stats_ ABSL_GUARDED_BY(mu_);
  ThreadStopper saver_;  // last: Run uses the members above
};

}  // namespace floodgate::service
