// TopSampler: exact under the threshold, a weighted sample past it whose
// weights add up to the decisions made, back to exact after an idle
// spell; and the top subjects of a Zipf and a uniform stream, sampled
// under load, against their exact counts within the documented bound
// (4 * sqrt(count * stride), plus the sketch's own error).
#include "server/observability/top_sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "service/top/top_subjects.h"
#include "testing/zipf.h"

namespace floodgate::server {
namespace {

// An instant on a 5 min boundary (as in the TopSubjects tests).
constexpr int64_t kT0 = 5'666'667LL * 300'000;

// Feeds `per_tick` decisions into each of `ticks` ticks; returns the sum
// of their weights and how many were counted.
std::pair<int64_t, int64_t> Feed(TopSampler& s, int64_t from_ms, int ticks, int64_t per_tick) {
  int64_t weights = 0, counted = 0;
  for (int t = 0; t < ticks; ++t) {
    for (int64_t i = 0; i < per_tick; ++i) {
      const int64_t now = from_ms + t * kTopSampleTickMs + i * kTopSampleTickMs / per_tick;
      const int64_t w = s.Weigh(now);
      EXPECT_GE(w, 0);
      weights += w;
      counted += w > 0 ? 1 : 0;
    }
  }
  return {weights, counted};
}

TEST(TopSamplerTest, UnderTheThresholdEveryDecisionCountsOnce) {
  TopSampler s(1);
  const auto [weights, counted] = Feed(s, kT0, 20, kTopExactPerTick);
  EXPECT_EQ(counted, 20 * kTopExactPerTick);
  EXPECT_EQ(weights, counted);
  EXPECT_EQ(s.stride(), 1);
  EXPECT_EQ(s.skipped(), 0);
}

TEST(TopSamplerTest, PastTheThresholdASampleStandsForEveryDecision) {
  TopSampler s(2);
  // The first tick is counted whole (nothing said the load was high yet).
  const int64_t per_tick = 10 * kTopExactPerTick;
  Feed(s, kT0, 1, per_tick);
  const auto [weights, counted] = Feed(s, kT0 + kTopSampleTickMs, 50, per_tick);
  EXPECT_EQ(s.stride(), 10);
  const double made = 50.0 * static_cast<double>(per_tick);
  // A binomial sample of 1/10: its weights add up to the decisions within
  // a few standard deviations (sqrt(made * 9) / made = 0.3 %).
  EXPECT_NEAR(static_cast<double>(weights) / made, 1.0, 0.015);
  EXPECT_NEAR(static_cast<double>(counted) / made, 0.1, 0.0015);
  EXPECT_EQ(s.skipped(), static_cast<int64_t>(made) - counted);
}

TEST(TopSamplerTest, AnIdleSpellBringsBackExactCounts) {
  TopSampler s(3);
  Feed(s, kT0, 3, 20 * kTopExactPerTick);
  EXPECT_GT(s.stride(), 1);
  // Ten seconds later a few decisions: counted each.
  int64_t weights = 0;
  for (int i = 0; i < 100; ++i) weights += s.Weigh(kT0 + 10'000 + i);
  EXPECT_EQ(s.stride(), 1);
  EXPECT_EQ(weights, 100);
}

TEST(TopSamplerTest, AClockStepBackStartsANewTick) {
  TopSampler s(4);
  Feed(s, kT0, 2, 30 * kTopExactPerTick);
  EXPECT_EQ(s.stride(), 30);
  // A step back ends the tick; its rate (the decisions seen) carries over.
  EXPECT_GE(s.Weigh(kT0 - 60'000), 0);
  EXPECT_EQ(s.stride(), 30);
}

// A stream of ranks recorded through a sampler into TopSubjects at `rate`
// decisions per tick: every reported top-10 count within 4 sigma of the
// sample (sqrt(count * stride)) plus the sketch's error of its truth.
void ExpectTopWithinBound(const std::vector<uint32_t>& stream, int64_t per_tick, size_t same_top) {
  service::TopSubjects top;
  TopSampler sampler(7);
  absl::flat_hash_map<std::string, int64_t> truth;
  int64_t stride = 1;
  for (size_t i = 0; i < stream.size(); ++i) {
    const std::string key = "subject:" + std::to_string(stream[i]);
    ++truth[key];
    const int64_t now = kT0 + static_cast<int64_t>(i) * kTopSampleTickMs / per_tick;
    const int64_t w = sampler.Weigh(now);
    stride = std::max(stride, sampler.stride());
    if (w > 0) top.Record("r", key, w, true, now);
  }
  ASSERT_GT(stride, 1) << "the stream must run past the threshold";
  const int64_t end = kT0 + static_cast<int64_t>(stream.size()) * kTopSampleTickMs / per_tick;
  const service::SpaceSaving sketch =
      top.Snapshot("r", service::TopBy::kDenied, service::TopWindow::k15m, end);
  std::vector<std::pair<int64_t, std::string>> all;
  for (const auto& [k, c] : truth) all.emplace_back(-c, k);
  std::sort(all.begin(), all.end());
  const std::vector<service::TopEntry> got =
      top.Query("r", service::TopBy::kDenied, service::TopWindow::k15m, 10, end);
  ASSERT_EQ(got.size(), 10u);
  for (const service::TopEntry& e : got) {
    const int64_t t = truth[e.key];
    const double sigma = std::sqrt(static_cast<double>(std::max<int64_t>(t, 1) * stride));
    EXPECT_LE(std::abs(static_cast<double>(e.count) - static_cast<double>(t)),
              4 * sigma + static_cast<double>(sketch.floor()))
        << e.key << " true " << t << " reported " << e.count << " stride " << stride;
  }
  // The heaviest subjects are found as they are: the first `same_top` of
  // the truth are all listed.
  for (size_t i = 0; i < same_top; ++i) {
    EXPECT_TRUE(std::any_of(got.begin(), got.end(),
                            [&](const service::TopEntry& e) { return e.key == all[i].second; }))
        << all[i].second << " (" << -all[i].first << ") is not listed";
  }
  // The sample stands for every decision: the units add up within 1 %.
  EXPECT_NEAR(static_cast<double>(sketch.total()) / static_cast<double>(stream.size()), 1.0, 0.01);
}

TEST(TopSamplerTest, ZipfUnderLoadFindsTheHeavySubjectsWithinTheBound) {
  // 1M decisions over 10 s at 10,000 a tick: stride 5.
  ExpectTopWithinBound(testing::ZipfStream(1'000'000, 100'000, 1.1, 20240601), 10'000, 5);
}

TEST(TopSamplerTest, UniformUnderLoadReportsNoSubjectBeyondTheBound) {
  // 100,000 subjects, 1M decisions, stride 10: every subject holds about
  // 10 units, and no estimate strays past the bound.
  std::vector<uint32_t> stream;
  stream.reserve(1'000'000);
  uint64_t x = 88172645463325252ull;
  for (int i = 0; i < 1'000'000; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    stream.push_back(static_cast<uint32_t>(x % 100'000));
  }
  ExpectTopWithinBound(stream, 20'000, 0);
}

}  // namespace
}  // namespace floodgate::server
