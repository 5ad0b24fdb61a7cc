// SpaceSaving: a bounded summary of the heaviest keys of a weighted stream
// (Metwally, Agrawal, El Abbadi, "Efficient computation of frequent and
// top-k elements in data streams", 2005), mergeable across servers
// (Agarwal et al., "Mergeable summaries", 2012), with a versioned binary form
// to publish it.
//
// Contract:
//  - At most capacity() keys are counted. A key's reported `count` is an
//    upper bound of the units really added for it, and `count - error` a
//    lower bound: true count in [count - error, count].
//  - floor() bounds every error, and the true count of any key not listed;
//    every count is at least floor(). It is the largest count a key lost
//    its counter with (or that a merged or compacted sketch carries): 0
//    while no key has been evicted, and counts are then exact.
//  - Error bound: floor() <= total() / capacity(), however the sketch was
//    built (Add, Merge, Compacted; Parse checks it of what it reads). It
//    holds through merges because a merge keeps the smaller capacity.
//  - Keys longer than kMaxSketchKeyBytes are cut to their first
//    kMaxSketchKeyBytes bytes: keys sharing that prefix are counted as one.
//  - Counts saturate at INT64_MAX rather than overflow.
//
// Not thread-safe: callers serialise access (TopSubjects does).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"
#include "floodgate/status.h"

namespace floodgate::service {

// Longest key a sketch keeps, in bytes; longer keys are cut to it.
inline constexpr size_t kMaxSketchKeyBytes = 256;
// Largest capacity a sketch may have (and Parse accepts).
inline constexpr size_t kMaxSketchCapacity = 1 << 16;

// One counted key. The key's true count is in [count - error, count].
struct TopEntry {
  std::string key;
  int64_t count = 0;
  int64_t error = 0;

  friend bool operator==(const TopEntry&, const TopEntry&) = default;
};

class SpaceSaving {
 public:
  // `capacity` in [1, kMaxSketchCapacity] (clamped into it). Allocates
  // nothing until keys arrive.
  explicit SpaceSaving(size_t capacity);

  // A copy holds the entries only; its lookup structures are rebuilt by the
  // first Add. Moves keep everything.
  SpaceSaving(const SpaceSaving& other);
  SpaceSaving& operator=(const SpaceSaving& other);
  SpaceSaving(SpaceSaving&&) noexcept = default;
  SpaceSaving& operator=(SpaceSaving&&) noexcept = default;

  // Counts `count` units for `key`. A new key takes a free counter, or, when
  // all are taken, the smallest one (whose count it inherits as its error).
  // O(log capacity). A count <= 0 is ignored.
  void Add(std::string_view key, int64_t count);

  // Adds `other`'s stream to this one (Agarwal et al.'s merge): per key, the
  // counts and the errors are summed, a key missing from one side taking
  // that side's floor() (at most its smallest count; 0 if it never evicted) as both
  // count and error; then the largest are kept (ties by key), as many as
  // the smaller of the two capacities, which becomes capacity(): a merge
  // knows no more keys than its coarser side, and keeping more would void
  // the bound. floor() becomes the larger of the two floors' sum and the
  // largest count dropped. total() is the sum: the bound is
  // floor() <= (total() + other.total()) / capacity() for the merged
  // stream. O((size() + other.size()) log).
  void Merge(const SpaceSaving& other);

  // This sketch cut to its `capacity` largest entries, as a sketch of that
  // capacity (at most this one's; floor() raised to the largest count
  // dropped). It holds the entries only, not the lookup structures an Add
  // needs (the first Add builds them): what a finished bucket keeps.
  SpaceSaving Compacted(size_t capacity) const;

  // The `n` largest entries, by count descending then key ascending.
  std::vector<TopEntry> Top(size_t n) const;

  // Forgets every key; keeps the capacity and the allocated memory.
  void Clear();

  int64_t total() const { return total_; }  // units added (saturating)
  int64_t floor() const { return floor_; }  // bounds errors and keys not listed
  size_t size() const { return slots_.size(); }
  size_t capacity() const { return capacity_; }

  // Heap and object bytes held now, key bytes included: an upper bound.
  size_t MemoryBytes() const;
  // The most MemoryBytes() can be for a sketch of `capacity`, whatever its
  // keys (each at most kMaxSketchKeyBytes). `indexed` false: for a sketch
  // that holds its entries only (from a copy, Merge, Compacted or Parse,
  // with no Add since), which keeps no lookup structures.
  static size_t MemoryBound(size_t capacity, bool indexed = true);

  // A compact binary form (format version 1, see space_saving.cc), entries
  // in Top() order, ending with a checksum. Equal sketches give equal bytes.
  std::string Serialize() const;
  // Reads what Serialize wrote. Anything else (truncated, corrupted, another
  // version, or entries that break the sketch's invariants) is
  // INVALID_ARGUMENT saying what is wrong; never more than the input's
  // worth of memory is allocated.
  static Result<SpaceSaving> Parse(std::string_view bytes);

 private:
  struct Slot {
    std::string key;
    int64_t count = 0;
    int64_t error = 0;
    uint32_t heap_pos = 0;
  };

  // Builds index_ and heap_ from slots_ (after a copy, Merge or Parse).
  void Reindex();
  void SiftDown(size_t pos);
  void SiftUp(size_t pos);
  void Swap(size_t a, size_t b);
  // Replaces the entries with `entries` (at most capacity_).
  void Assign(std::vector<TopEntry> entries);

  size_t capacity_;
  int64_t total_ = 0;
  int64_t floor_ = 0;
  std::vector<Slot> slots_;
  // Built on the first Add after a copy, Merge, Compacted or Parse: a
  // sketch that is only read (a finished bucket, a snapshot) keeps neither.
  bool indexed_ = true;
  // Key -> slot. The views point into slots_[i].key, so slots_ must not
  // reallocate while they are held (Add re-indexes when it grows slots_).
  absl::flat_hash_map<absl::string_view, uint32_t> index_;
  // Slot indices, a binary min-heap by count; slots_[i].heap_pos is i's place.
  std::vector<uint32_t> heap_;
  // Where the next eviction starts looking among the leaves (Add): not
  // part of the sketch's value.
  size_t leaf_cursor_ = 0;
};

}  // namespace floodgate::service
