// EntryTable: probing, insertion with growth, backward-shift deletion, bulk
// removal for the sweep, and shrinking.
#include "engine/entry_table.h"

#include <cstdlib>
#include <cstring>

namespace floodgate::engine {
namespace {

static_assert(sizeof(uintptr_t) == 8 && sizeof(size_t) == 8, "slots pack a 48-bit pointer");

// Slots at most 3/4 full: linear probing's expected probe lengths grow as
// 1 / (1 - load)^2, and at 3/4 an unsuccessful probe still reads about 8
// slots, 64 bytes, usually one cache line.
size_t MaxSize(size_t capacity) { return capacity - capacity / 4; }

// The smallest capacity that holds `size` entries at most 1/2 full: where a
// shrink lands, halfway between the shrink bound (1/4) and the growth bound
// (3/4), so neither follows the other at once.
size_t CapacityAtHalfLoad(size_t size) {
  size_t capacity = EntryTable::kMinCapacity;
  while (capacity / 2 < size) capacity *= 2;
  return capacity;
}

int Log2(size_t power_of_two) { return __builtin_ctzll(power_of_two); }

// Cyclic distance from slot `from` forward to slot `to`.
size_t Distance(size_t from, size_t to, size_t mask) { return (to - from) & mask; }

}  // namespace

EntryTable::~EntryTable() { std::free(array().slots); }

size_t EntryTable::Find(const EntryKey& key) const {
  if (size_ == 0) return kNotFound;  // also covers "no array"
  const auto [slots, mask] = array();
  const uint64_t tag = TagOf(key.hash);
  // Ends: the table is never full, so an empty slot is always ahead.
  for (size_t i = key.hash & mask;; i = (i + 1) & mask) {
    const uint64_t word = slots[i];
    if (word == 0) return kNotFound;
    // Only a matching tag (1 in 65536 for a stranger) costs a read of the
    // entry, the lookup's second and last cache miss.
    if ((word >> kTagShift) == tag) {
      const Entry* e = EntryOf(word);
      if (e->variant() == key.variant && e->key() == key.key) return i;
    }
  }
}

bool EntryTable::Insert(Entry* e, size_t hash) {
  if (size_ + 1 > MaxSize(capacity())) {
    const size_t capacity = this->capacity();
    if (!Resize(capacity == 0 ? kMinCapacity : capacity * 2)) return false;
  }
  const auto [slots, mask] = array();
  size_t i = hash & mask;
  while (slots[i] != 0) i = (i + 1) & mask;
  slots[i] = SlotWord(e, hash);
  ++size_;
  return true;
}

void EntryTable::EraseAt(size_t slot) {
  const auto [slots, mask] = array();
  // Backward shift: walk the rest of the probe run after the hole; an entry
  // whose home is not between the hole and itself would be cut off from its
  // home by the hole, so it moves into the hole and leaves a new one behind.
  size_t hole = slot;
  for (size_t i = (slot + 1) & mask; slots[i] != 0; i = (i + 1) & mask) {
    if (Distance(HomeOf(slots[i], mask), i, mask) >= Distance(hole, i, mask)) {
      slots[hole] = slots[i];
      hole = i;
    }
  }
  slots[hole] = 0;
  --size_;
}

size_t EntryTable::RemoveIf(absl::FunctionRef<bool(Entry*)> remove) {
  if (size_ == 0) return 0;
  const auto [slots, mask] = array();
  // One pass, starting just after an empty slot so that no run of occupied
  // slots (a cluster) wraps past the start. Removals leave holes only at or
  // behind the walk, so a slot ahead of it is as it was: an empty one there
  // ends a cluster. An entry behind a hole in its cluster is reinserted from
  // its home, which puts it in the first hole it may use, or back where it
  // was; entries before the first hole of a cluster stay put without being
  // rehashed. Each entry is visited once, as each slot is.
  size_t start = 0;
  while (slots[start] != 0) ++start;  // exists: the table is at most 3/4 full
  size_t removed = 0;
  bool cluster_has_hole = false;
  for (size_t n = 1; n <= mask + 1; ++n) {
    const size_t i = (start + n) & mask;
    const uint64_t word = slots[i];
    if (word == 0) {
      cluster_has_hole = false;
      continue;
    }
    if (remove(EntryOf(word))) {  // may free the entry: do not read it again
      slots[i] = 0;
      ++removed;
      cluster_has_hole = true;
    } else if (cluster_has_hole) {
      slots[i] = 0;
      size_t j = HomeOf(word, mask);
      while (slots[j] != 0) j = (j + 1) & mask;  // stops at i at the latest
      slots[j] = word;
    }
  }
  size_ -= removed;
  return removed;
}

void EntryTable::ForEach(absl::FunctionRef<void(Entry*)> fn) const {
  if (size_ == 0) return;
  const auto [slots, mask] = array();
  for (size_t i = 0; i <= mask; ++i) {
    if (slots[i] != 0) fn(EntryOf(slots[i]));
  }
}

void EntryTable::Shrink() {
  const size_t capacity = this->capacity();
  if (size_ == 0) {
    if (capacity != 0) Resize(0);
  } else if (capacity > kMinCapacity && size_ * 4 < capacity) {
    Resize(CapacityAtHalfLoad(size_));  // on failure the old array still serves
  }
}

void EntryTable::Clear() {
  size_ = 0;
  Resize(0);
}

size_t EntryTable::HeapBytes() const {
  const size_t capacity = this->capacity();
  // aligned_alloc gives the alignment slack back to the heap, so what stays
  // in use is the array's own chunk.
  return capacity == 0 ? 0 : Entry::MallocChunkSize(capacity * sizeof(uint64_t));
}

size_t EntryTable::InsertGrowthBytes() const {
  const size_t capacity = this->capacity();
  if (size_ + 1 <= MaxSize(capacity)) return 0;
  const size_t grown = capacity == 0 ? kMinCapacity : capacity * 2;
  return Entry::MallocChunkSize(grown * sizeof(uint64_t)) - HeapBytes();
}

bool EntryTable::Resize(size_t new_capacity) {
  const auto [old_slots, old_mask] = array();
  const size_t old_capacity = old_slots == nullptr ? 0 : old_mask + 1;
  uint64_t* new_slots = nullptr;
  if (new_capacity != 0) {
    const size_t bytes = new_capacity * sizeof(uint64_t);  // a multiple of 64
    new_slots = static_cast<uint64_t*>(std::aligned_alloc(kAlignment, bytes));
    if (new_slots == nullptr) return false;
    std::memset(new_slots, 0, bytes);
    const size_t mask = new_capacity - 1;
    for (size_t i = 0; i < old_capacity; ++i) {
      const uint64_t word = old_slots[i];
      if (word == 0) continue;
      size_t j = HomeOf(word, mask);
      while (new_slots[j] != 0) j = (j + 1) & mask;
      new_slots[j] = word;  // same entry, same hash: same tag
    }
  }
  // Published before the old array is freed; a Prefetch that read the old
  // word may still warm a line of the freed array, which is harmless.
  published_.store(new_slots == nullptr ? 0
                                        : reinterpret_cast<uintptr_t>(new_slots) |
                                              static_cast<uintptr_t>(Log2(new_capacity)),
                   std::memory_order_relaxed);
  std::free(old_slots);
  return true;
}

}  // namespace floodgate::engine
