// How the parser fuzzers split an input into reads: whole (seed 0), one byte
// at a time (seed 1), or sizes drawn from the seed (mostly small, sometimes
// large), so every parser sees its input cut at arbitrary places.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

namespace floodgate::fuzz {

// Not thread-safe; one per feed.
class ChunkSizer {
 public:
  explicit ChunkSizer(uint64_t seed) : seed_(seed), rng_(seed) {}

  // The size of the next read, at most `remaining` (and at least 1 when
  // remaining > 0).
  size_t Next(size_t remaining) {
    if (seed_ == 0) return remaining;
    if (seed_ == 1) return std::min<size_t>(remaining, 1);
    const uint64_t r = SplitMix64();
    const size_t want = (r & 3) == 0 ? (r >> 8) % 512 : (r >> 8) % 8;
    return std::min(remaining, want + 1);
  }

 private:
  uint64_t SplitMix64() {
    uint64_t z = (rng_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }

  const uint64_t seed_;
  uint64_t rng_;
};

}  // namespace floodgate::fuzz
