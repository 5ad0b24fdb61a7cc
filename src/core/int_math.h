// Integer helpers for the algorithms: floor/ceil division that is right for
// negative numerators (times before 1970 exist in tests and in clock steps).
#pragma once

#include <cstdint>

namespace floodgate::core {

// Requires d > 0.
constexpr int64_t FloorDiv(int64_t n, int64_t d) {
  const int64_t q = n / d;
  return (n % d != 0 && n < 0) ? q - 1 : q;
}

// Requires d > 0.
constexpr int64_t CeilDiv(int64_t n, int64_t d) {
  const int64_t q = n / d;
  return (n % d != 0 && n > 0) ? q + 1 : q;
}

// Start of the epoch-aligned window of length len containing t.
constexpr int64_t AlignDown(int64_t t, int64_t len) { return FloorDiv(t, len) * len; }

}  // namespace floodgate::core
