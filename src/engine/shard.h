// Shard: one independently locked table of MemoryStore entries, and the
// hashing that finds an entry by (variant, key) without building one.
//
// Private to src/engine/.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <mutex>
#include <string_view>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/hash/hash.h"
#include "engine/entry.h"

namespace floodgate::engine {

// The one hash of an entry's identity. Used both to pick the shard (high
// bits) and inside the shard's table, so it is computed once per lookup.
inline size_t HashEntryKey(uint16_t variant, std::string_view key) {
  // Debian's abseil has its own string_view type and hashes std::string_view
  // through std::hash; its own type takes abseil's faster path.
  return absl::HashOf(variant, absl::string_view(key.data(), key.size()));
}

// A lookup key: what Update/Erase know before an entry exists, with its hash
// already computed.
struct EntryKey {
  uint16_t variant;
  std::string_view key;
  size_t hash;  // HashEntryKey(variant, key)
};

// Transparent hash and equality so the table, which stores only Entry*, can
// be probed with an EntryKey. Identity is the full (variant, key): two keys
// with the same hash are still different entries.
struct EntryHash {
  using is_transparent = void;
  size_t operator()(const EntryKey& k) const { return k.hash; }
  size_t operator()(const Entry* e) const { return HashEntryKey(e->variant(), e->key()); }
};

struct EntryEq {
  using is_transparent = void;
  bool operator()(const Entry* a, const Entry* b) const {
    return a->variant() == b->variant() && a->key() == b->key();
  }
  bool operator()(const Entry* a, const EntryKey& b) const {
    return a->variant() == b.variant && a->key() == b.key;
  }
  bool operator()(const EntryKey& a, const Entry* b) const { return (*this)(b, a); }
};

// The table holds one 8-byte pointer per entry (plus a control byte): the
// entry's key and state live in the entry's own blob.
using EntrySet = absl::flat_hash_set<Entry*, EntryHash, EntryEq>;

// Heap bytes of a table of `capacity` slots in this Abseil version: one
// control byte per slot plus a sentinel and Group::kWidth - 1 cloned bytes,
// padded to 8, then the slots; rounded as a malloc chunk. An estimate.
inline size_t EntrySetHeapBytes(size_t capacity) {
  if (capacity == 0) return 0;
  const size_t ctrl = (capacity + 16 + 7) & ~size_t{7};
  return Entry::MallocChunkSize(ctrl + capacity * sizeof(Entry*));
}

// Thread-safe through `mu`: every field below and every entry in `entries`
// is read and written only with `mu` held. Cache-line aligned so that two
// shards' mutexes never share a line.
//
// Why std::mutex rather than absl::Mutex: the distribution's Abseil is not
// built with ThreadSanitizer, so TSan could not see absl::Mutex's
// happens-before edges; pthread mutexes it intercepts.
struct alignas(64) Shard {
  std::mutex mu;
  EntrySet entries ABSL_GUARDED_BY(mu);
  // Sum of Entry::MallocChunkSize over `entries`, for ApproximateMemoryBytes.
  size_t entry_bytes ABSL_GUARDED_BY(mu) = 0;
  // The second (now_ms / 1000) of the last full scan for expired entries made
  // because the store was full. Expiry has one-second precision, so another
  // scan in the same second would free nothing new: skipping it stops a
  // flood of new keys at a full store from rescanning the shard per request.
  int64_t last_full_scan_s ABSL_GUARDED_BY(mu) = std::numeric_limits<int64_t>::min();
};

}  // namespace floodgate::engine
