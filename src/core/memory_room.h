// MemoryRoom: what a state that owns heap memory beside its store entry
// asks before it allocates more, so that the store keeping it can bound
// every byte it holds (the embedded store's engine.max_memory); and how
// those bytes are counted (MallocChunkSize).
#pragma once

#include <cstddef>

namespace floodgate::core {

// Heap bytes glibc uses for a malloc of `request` bytes on a 64-bit system:
// the request plus an 8-byte size word, rounded up to 16, at least 32. An
// estimate of what an allocation costs, not a promise.
constexpr size_t MallocChunkSize(size_t request) {
  const size_t chunk = (request + sizeof(size_t) + 15) & ~size_t{15};
  return chunk < 32 ? 32 : chunk;
}

// The room a store gives one step on one state. Before the step allocates
// memory that the state will own, it claims those bytes (as MallocChunkSize
// counts them). A refused claim means the step does not happen: it must
// leave the state as it found it (apart from what had aged out anyway), and
// the store answers it as full, whatever the step returned. What a step
// frees needs no call: the store measures what the state owns before and
// after the step (the embedded store: VariantLayout::owned_bytes) and counts
// the difference.
//
// Not thread-safe: one step's, under the store's lock.
class MemoryRoom {
 public:
  // Whether `bytes` more fit. After a refusal, refused() is true.
  bool Claim(size_t bytes) {
    if (Grant(bytes)) return true;
    refused_ = true;
    return false;
  }
  // Whether a claim was refused in this step.
  bool refused() const { return refused_; }

 protected:
  MemoryRoom() = default;
  ~MemoryRoom() = default;
  // Takes `bytes` from the bound, or says there is no room for them.
  virtual bool Grant(size_t bytes) = 0;

 private:
  bool refused_ = false;
};

// Claims `bytes` from `room`; a null room is no bound (a caller that keeps
// the state without one: tests, a store whose states own nothing).
inline bool Claim(MemoryRoom* room, size_t bytes) { return room == nullptr || room->Claim(bytes); }

}  // namespace floodgate::core
