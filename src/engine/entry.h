// Entry: one MemoryStore entry as a single heap blob (header, key bytes,
// state words), plus the coarse-expiry arithmetic it uses.
//
// Private to src/engine/.
//
// Layout, for a key of K bytes and a state of W words:
//
//   offset 0   uint32 expiry_s    expiry in whole seconds since the epoch, rounded up
//   offset 4   uint16 variant
//   offset 6   uint16 key_len
//   offset 8   key bytes (K)
//              padding to a multiple of 8
//   StateOffset(K)   W x int64 state
//
// With a 16-byte key and a 2-word state that is 8 + 16 + 16 = 40 bytes, which
// glibc serves from a 48-byte chunk: the whole entry costs 48 bytes of heap.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <new>
#include <string_view>

#include "core/memory_room.h"

namespace floodgate::engine {

// Converts an expiry in ms to the stored whole seconds, rounded *up* and
// clamped to [0, UINT32_MAX] (UINT32_MAX s is in 2106: "never" in practice).
//
// Why seconds are enough: the stored expiry only decides when the entry's
// memory may be freed. The algorithms keep their own timestamps in the state
// and treat stale state correctly (a window that has passed counts as empty),
// so an entry that lives a little longer than asked changes no decision.
// Why rounding up: freeing an entry *early* would drop usage that is still
// within its window (a refund), so the stored expiry is never earlier than
// the requested one; the entry lives at most 999 ms longer.
inline uint32_t ExpiryMsToStoredSeconds(int64_t expiry_ms) {
  constexpr int64_t kMaxSeconds = std::numeric_limits<uint32_t>::max();
  if (expiry_ms <= 0) return 0;
  if (expiry_ms > kMaxSeconds * 1000) return static_cast<uint32_t>(kMaxSeconds);
  return static_cast<uint32_t>((expiry_ms + 999) / 1000);
}

// Whether a stored expiry has passed at `now_ms`: the entry expires at the
// first millisecond of its stored second.
inline bool StoredSecondsExpired(uint32_t expiry_s, int64_t now_ms) {
  return static_cast<int64_t>(expiry_s) * 1000 <= now_ms;
}

// Not thread-safe: the owning shard's mutex guards every entry it holds.
class Entry {
 public:
  // Allocates an entry and copies `key` and `state_words` words of `state`
  // into it. Returns nullptr when memory is exhausted (never throws).
  // Requires key.size() <= 65535 and state_words in [0, 64].
  static Entry* Create(uint16_t variant, std::string_view key, int state_words, uint32_t expiry_s,
                       const int64_t* state) {
    void* mem = std::malloc(AllocSize(key.size(), state_words));
    if (mem == nullptr) return nullptr;
    Entry* e = new (mem) Entry(variant, static_cast<uint16_t>(key.size()), expiry_s);
    if (!key.empty()) std::memcpy(e->key_bytes(), key.data(), key.size());
    std::memcpy(e->state(), state, static_cast<size_t>(state_words) * sizeof(int64_t));
    return e;
  }

  // Frees the blob. The caller has already released the state.
  static void Destroy(Entry* e) {
    e->~Entry();
    std::free(e);
  }

  // Bytes requested from malloc for an entry.
  static constexpr size_t AllocSize(size_t key_len, int state_words) {
    return StateOffset(key_len) + static_cast<size_t>(state_words) * sizeof(int64_t);
  }

  // Heap bytes glibc really uses for an allocation of `request` bytes
  // (core::MallocChunkSize). An estimate for ApproximateMemoryBytes, not a
  // promise.
  static constexpr size_t MallocChunkSize(size_t request) { return core::MallocChunkSize(request); }

  uint16_t variant() const { return variant_; }
  std::string_view key() const { return std::string_view(key_bytes(), key_len_); }
  uint32_t expiry_s() const { return expiry_s_; }
  void set_expiry_s(uint32_t expiry_s) { expiry_s_ = expiry_s; }
  bool ExpiredAt(int64_t now_ms) const { return StoredSecondsExpired(expiry_s_, now_ms); }

  // The state words, 8-byte aligned (malloc returns 16-aligned memory and
  // StateOffset is a multiple of 8).
  int64_t* state() {
    return reinterpret_cast<int64_t*>(reinterpret_cast<char*>(this) + StateOffset(key_len_));
  }

 private:
  Entry(uint16_t variant, uint16_t key_len, uint32_t expiry_s)
      : expiry_s_(expiry_s), variant_(variant), key_len_(key_len) {}
  ~Entry() = default;

  static constexpr size_t StateOffset(size_t key_len) {
    return (sizeof(Entry) + key_len + 7) & ~size_t{7};
  }

  char* key_bytes() { return reinterpret_cast<char*>(this) + sizeof(Entry); }
  const char* key_bytes() const { return reinterpret_cast<const char*>(this) + sizeof(Entry); }

  uint32_t expiry_s_;
  uint16_t variant_;
  uint16_t key_len_;
};

static_assert(sizeof(Entry) == 8, "the entry header must stay 8 bytes");
static_assert(Entry::AllocSize(16, 2) == 40);
static_assert(Entry::MallocChunkSize(40) == 48);

}  // namespace floodgate::engine
