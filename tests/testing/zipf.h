// A Zipf-distributed stream of ranks from a fixed seed, the same with any
// standard library: the draw uses std::mt19937_64's raw bits only (the
// standard's distributions are not portable).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

namespace floodgate::testing {

// `events` ranks in [0, subjects), rank r drawn with weight 1 / (r + 1)^s.
inline std::vector<uint32_t> ZipfStream(size_t events, size_t subjects, double s, uint64_t seed) {
  std::vector<double> cdf(subjects);
  double sum = 0;
  for (size_t i = 0; i < subjects; ++i) {
    sum += 1.0 / std::pow(static_cast<double>(i + 1), s);
    cdf[i] = sum;
  }
  std::mt19937_64 rng(seed);
  std::vector<uint32_t> out;
  out.reserve(events);
  for (size_t i = 0; i < events; ++i) {
    const double u = static_cast<double>(rng() >> 11) * 0x1.0p-53 * sum;
    const size_t rank = std::upper_bound(cdf.begin(), cdf.end(), u) - cdf.begin();
    out.push_back(static_cast<uint32_t>(std::min(rank, subjects - 1)));
  }
  return out;
}

}  // namespace floodgate::testing
