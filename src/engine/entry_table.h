// EntryTable: the open-addressing table of one shard, mapping (variant, key)
// to its Entry*, and the hash it is indexed by.
//
// Private to src/engine/.
//
// Why not absl::flat_hash_set: a lookup there touches the control bytes, the
// slot array and the entry, three dependent cache misses, fully exposed
// whenever the caller's path stalls the core between lookups (the Limiter's
// clock read does). Here a slot carries a hash tag beside the pointer, so a
// lookup reads one slot line and dereferences only the entry whose tag
// matches: two misses, and the slot line's can be started early (Prefetch).
//
// Layout: a power-of-two array of 8-byte slots, 64-byte aligned. A slot is
//
//   bits 63..48  tag: bits 47..32 of the entry's hash
//   bits 47..0   the Entry* (user-space pointers fit in 48 bits)
//
// and an empty slot is the all-zero word (an entry pointer is never null, so
// a full slot is never zero whatever its tag). Linear probing from
// hash & (capacity - 1), at most 3/4 full (then the array doubles), deletion
// by backward shift: no tombstones, so a probe always ends at the first empty
// slot and a table that saw many deletions stays as fast as a fresh one.
//
// The hash bits are split three ways so none of the uses correlate: the
// shard takes the top bits (at most 16), the tag bits 47..32, the probe start
// the low bits (capacities stay far below 2^32).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "absl/functional/function_ref.h"
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
// already computed. Identity is the full (variant, key): two keys with the
// same hash are still different entries.
struct EntryKey {
  uint16_t variant;
  std::string_view key;
  size_t hash;  // HashEntryKey(variant, key)
};

// Not thread-safe, except Prefetch: the owning shard's mutex guards every
// other member function. The table stores pointers only; the entries belong
// to its owner, which frees them (the table never does).
class EntryTable {
 public:
  // Returned by Find when the key is absent.
  static constexpr size_t kNotFound = ~size_t{0};
  // The smallest array: 8 slots, one cache line.
  static constexpr size_t kMinCapacity = 8;

  EntryTable() = default;
  ~EntryTable();  // frees the slot array, not the entries
  EntryTable(const EntryTable&) = delete;
  EntryTable& operator=(const EntryTable&) = delete;

  // Whether `e` can be stored in a slot: its address must fit in 48 bits.
  // Always true for glibc's malloc on x86-64 and AArch64 Linux; checked so
  // that a platform with tagged or 57-bit pointers fails cleanly instead.
  static bool Storable(const Entry* e) {
    return (reinterpret_cast<uintptr_t>(e) >> kTagShift) == 0;
  }

  // Thread-safe, and safe to run concurrently with any other member function,
  // including a resize: starts loading the slot where a lookup of `hash`
  // begins. Reads only the published word, never the array: the array may
  // already be freed, and a prefetch of a freed or stale address is harmless
  // (it never faults, it only warms a cache line). Call it before taking the
  // owner's lock: a prefetch is not ordered by the lock's fence, so the slot
  // line's miss overlaps the lock instead of following it.
  void Prefetch(size_t hash) const {
    const uintptr_t word = published_.load(std::memory_order_relaxed);
    if (word == 0) return;  // no array yet
    // Integer arithmetic: the array may be gone, so form no pointer into it.
    const uintptr_t slot =
        (word & ~kLog2Mask) + (hash & ((size_t{1} << (word & kLog2Mask)) - 1)) * sizeof(uint64_t);
    __builtin_prefetch(reinterpret_cast<const void*>(slot));
  }

  // The slot holding (variant, key) or kNotFound. The slot index stays valid
  // until the next Insert, EraseAt, RemoveIf, Shrink or Clear.
  size_t Find(const EntryKey& key) const;

  // The entry in slot `slot` (a Find result).
  Entry* EntryAt(size_t slot) const { return EntryOf(array().slots[slot]); }

  // Adds `e`, which must not be present and must be Storable; `hash` is
  // HashEntryKey of its identity. Grows the array when the table would be
  // over 3/4 full. Returns false, changing nothing, when growing fails for
  // want of memory.
  bool Insert(Entry* e, size_t hash);

  // Unlinks the entry in slot `slot` (a Find result); the caller frees it.
  void EraseAt(size_t slot);

  // Calls `remove` once on every entry; unlinks those it returns true for.
  // `remove` takes ownership of the entries it accepts (it may free them at
  // once: the table does not read them again) and must not use the table.
  // Returns how many were unlinked. Never reallocates.
  size_t RemoveIf(absl::FunctionRef<bool(Entry*)> remove);

  // Calls `fn` on every entry, in slot order.
  void ForEach(absl::FunctionRef<void(Entry*)> fn) const;

  // Gives memory back after a flood of deletions: frees the array when the
  // table is empty, halves it (or more) when it is less than 1/4 full, to at
  // most 1/2 full, so that a shrink is never followed by an immediate growth.
  // Keeps the array if the smaller one cannot be allocated.
  void Shrink();

  // Unlinks every entry (the caller frees them) and frees the array.
  void Clear();

  size_t size() const { return size_; }
  size_t capacity() const { return Capacity(published_.load(std::memory_order_relaxed)); }

  // Heap bytes of the slot array as glibc counts them; an estimate.
  size_t HeapBytes() const;
  // How much HeapBytes would grow if Insert were called now: the growth of
  // the slot array when the insertion makes it double, else 0. Lets the
  // owner charge a memory bound before it inserts.
  size_t InsertGrowthBytes() const;

 private:
  static constexpr int kTagShift = 48;
  static constexpr uintptr_t kPointerMask = (uintptr_t{1} << kTagShift) - 1;
  // The array's log2(capacity) lives in the low bits of the published word,
  // which the array's 64-byte alignment leaves free.
  static constexpr uintptr_t kLog2Mask = 63;
  static constexpr size_t kAlignment = 64;

  static uint64_t TagOf(size_t hash) { return (hash >> 32) & 0xFFFF; }
  static uint64_t SlotWord(Entry* e, size_t hash) {
    return (TagOf(hash) << kTagShift) | reinterpret_cast<uintptr_t>(e);
  }
  static Entry* EntryOf(uint64_t word) { return reinterpret_cast<Entry*>(word & kPointerMask); }
  static size_t Capacity(uintptr_t word) { return word == 0 ? 0 : size_t{1} << (word & kLog2Mask); }
  // The slot where a probe for the entry in slot word `word` starts. Reads
  // the entry and rehashes its key: the slot keeps only 16 hash bits.
  static size_t HomeOf(uint64_t word, size_t mask) {
    const Entry* e = EntryOf(word);
    return HashEntryKey(e->variant(), e->key()) & mask;
  }

  // The array and its index mask (capacity - 1), decoded from one read of
  // the word that Prefetch reads: one source of truth for both sides, and
  // two words fewer in the shard's first cache line. {nullptr, 0} when there
  // is no array.
  struct Array {
    uint64_t* slots;
    size_t mask;
  };
  Array array() const {
    const uintptr_t word = published_.load(std::memory_order_relaxed);
    return {reinterpret_cast<uint64_t*>(word & ~kLog2Mask), Capacity(word) - (word != 0)};
  }

  // Moves every entry into a new zeroed array of `new_capacity` slots (a
  // power of two >= kMinCapacity, or 0 to free the array) and publishes it.
  // Returns false, changing nothing, when the allocation fails.
  bool Resize(size_t new_capacity);

  // The array and its log2(capacity), or 0 when there is no array. Written
  // only by the owner, under its lock, at each resize; read without the lock
  // by Prefetch. Relaxed: Prefetch needs no ordering, since it only warms a
  // line and never reads through the pointer.
  std::atomic<uintptr_t> published_{0};
  size_t size_ = 0;  // entries in the table
};

}  // namespace floodgate::engine
