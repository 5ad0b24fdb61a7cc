// Shard: one independently locked table of MemoryStore entries.
//
// Private to src/engine/.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <mutex>

#include "absl/base/thread_annotations.h"
#include "engine/entry_table.h"

namespace floodgate::engine {

// Thread-safe through `mu`: every field below and every entry in `table` is
// read and written only with `mu` held, except PrefetchSlot, which reads
// only the table's published word. Cache-line aligned so that two shards'
// mutexes never share a line. The fields a lookup touches (the mutex, the
// table's published word and size) fill the first line; the pre-lock load
// of the published word brings that line in for the lock.
//
// Why std::mutex rather than absl::Mutex: the distribution's Abseil is not
// built with ThreadSanitizer, so TSan could not see absl::Mutex's
// happens-before edges; pthread mutexes it intercepts.
struct alignas(64) Shard {
  // Thread-safe without `mu`: warms the cache line of the slot where a
  // lookup of `hash` begins (EntryTable::Prefetch). Call before locking.
  void PrefetchSlot(size_t hash) const ABSL_NO_THREAD_SAFETY_ANALYSIS { table.Prefetch(hash); }

  std::mutex mu;
  EntryTable table ABSL_GUARDED_BY(mu);
  // The second (now_ms / 1000) of the last full scan for expired entries made
  // because the store was full. Expiry has one-second precision, so another
  // scan in the same second would free nothing new: skipping it stops a
  // flood of new keys at a full store from rescanning the shard per request.
  int64_t last_full_scan_s ABSL_GUARDED_BY(mu) = std::numeric_limits<int64_t>::min();
};

}  // namespace floodgate::engine
