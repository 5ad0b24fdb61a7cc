// How large a server's next slice of a subject's quota is (docs/slices.md):
// pure arithmetic, no clock read, so that it is tested on its own.
//
// A slice should last about kSliceHorizonMs at the rate its holder spent
// the previous one: long enough that the store is asked at most a few
// times a second per hot subject (a call per hundreds of decisions at any
// rate worth slicing), short enough that units a holder keeps when demand
// stops, or when the window ends, are a small part of the limit. Never more
// than max_share of the limit, never less than the decision's cost.
#pragma once

#include <algorithm>
#include <cstdint>

#include "floodgate/rule.h"

namespace floodgate::service {

inline constexpr int64_t kSliceHorizonMs = 500;
// A first slice (no demand seen yet) is this fraction of the largest.
inline constexpr int64_t kFirstSliceDivisor = 16;

// The largest slice of `limit` that max_share (in ppm) allows: at least 1.
inline int64_t MaxSliceUnits(int64_t limit, int64_t max_share_ppm) {
  const __int128 units = static_cast<__int128>(limit) * max_share_ppm / kSliceShareScale;
  return std::max<int64_t>(1, static_cast<int64_t>(units));
}

// The units to ask for, for a decision of `cost`, when the previous slice
// (`previous` units, 0 for none) had `spent` of them used over `elapsed_ms`.
// A cost above the largest slice asks for exactly the cost (the decision
// stays all-or-nothing); `limit` bounds everything.
inline int64_t NextSliceUnits(int64_t cost, int64_t limit, int64_t max_share_ppm, int64_t previous,
                              int64_t spent, int64_t elapsed_ms) {
  const int64_t largest = MaxSliceUnits(limit, max_share_ppm);
  if (cost >= largest) return std::min(cost, limit);
  int64_t want = largest / kFirstSliceDivisor;
  if (previous > 0) {
    const __int128 rate_units =
        static_cast<__int128>(spent) * kSliceHorizonMs / std::max<int64_t>(1, elapsed_ms);
    want = static_cast<int64_t>(std::min<__int128>(rate_units, largest));
  }
  return std::clamp<int64_t>(want, std::max<int64_t>(cost, 1), largest);
}

}  // namespace floodgate::service
