// TopSubjects: the window edges of each window on a manual now_ms, buckets
// that expire with no traffic, counts that never double through the
// bucket levels, the bound on a Zipf stream (one server, and two merged
// through their serialized snapshots), the memory bound, the rule cap, and
// threads recording while another queries (for TSan).
#include "service/top/top_subjects.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "testing/zipf.h"

namespace floodgate::service {
namespace {

// An instant on a 5 min boundary, so also on every 1 min and 10 s one.
constexpr int64_t kT0 = 5'666'667LL * 300'000;
constexpr int64_t kSec = 1000;
constexpr int64_t kMin = 60 * kSec;
constexpr TopWindow kWindows[] = {TopWindow::k1m, TopWindow::k15m, TopWindow::k1h};

int64_t CountOf(const TopSubjects& top, TopWindow window, int64_t now_ms,
                const std::string& key = "k", TopBy by = TopBy::kDenied) {
  for (const TopEntry& e : top.Query("r", by, window, 100, now_ms)) {
    if (e.key == key) return e.count;
  }
  return 0;
}

TEST(TopSubjectsTest, NamesParseBothWays) {
  for (TopWindow w : kWindows) {
    Result<TopWindow> back = ParseTopWindow(TopWindowName(w));
    ASSERT_TRUE(back.ok());
    EXPECT_EQ(*back, w);
  }
  EXPECT_EQ(TopWindowName(TopWindow::k15m), "15m");
  EXPECT_EQ(TopWindowMs(TopWindow::k1m), 60'000);
  EXPECT_EQ(TopWindowMs(TopWindow::k15m), 900'000);
  EXPECT_EQ(TopWindowMs(TopWindow::k1h), 3'600'000);
  EXPECT_EQ(ParseTopWindow("5m").status().message(), "window must be 1m, 15m or 1h");
  EXPECT_FALSE(ParseTopWindow("1H").ok());
  EXPECT_EQ(*ParseTopBy("denied"), TopBy::kDenied);
  EXPECT_EQ(*ParseTopBy("admitted"), TopBy::kAdmitted);
  EXPECT_EQ(TopByName(TopBy::kAdmitted), "admitted");
  EXPECT_EQ(ParseTopBy("allowed").status().code(), StatusCode::kInvalidArgument);
}

// A unit at t is in a window of length L and bucket width w asked at now
// iff floor(t / w) * w >= floor(now / w) * w - L.
TEST(TopSubjectsTest, EachWindowHasExactEdges) {
  const struct {
    TopWindow window;
    int64_t last_in;  // now - t of the last instant that still sees a unit recorded at kT0
  } kCases[] = {
      {TopWindow::k1m, 70 * kSec - 1},
      {TopWindow::k15m, 16 * kMin - 1},
      {TopWindow::k1h, 65 * kMin - 1},
  };
  for (const auto& c : kCases) {
    TopSubjects top;
    top.Record("r", "k", 3, true, kT0);
    EXPECT_EQ(CountOf(top, c.window, kT0), 3) << TopWindowName(c.window);
    EXPECT_EQ(CountOf(top, c.window, kT0 + c.last_in), 3) << TopWindowName(c.window);
    EXPECT_EQ(CountOf(top, c.window, kT0 + c.last_in + 1), 0) << TopWindowName(c.window);
  }
}

// Whatever the phase in the bucket: within L ago always in, L + w ago never.
TEST(TopSubjectsTest, WindowsCoverAtLeastTheirLengthAndLessThanOneBucketMore) {
  const struct {
    TopWindow window;
    int64_t in, out;
  } kCases[] = {
      {TopWindow::k1m, 59 * kSec, 71 * kSec},  {TopWindow::k1m, 60 * kSec, 70 * kSec},
      {TopWindow::k15m, 14 * kMin, 16 * kMin}, {TopWindow::k15m, 15 * kMin, 16 * kMin},
      {TopWindow::k1h, 59 * kMin, 65 * kMin},  {TopWindow::k1h, 60 * kMin, 65 * kMin},
  };
  for (const auto& c : kCases) {
    for (int64_t phase : {int64_t{0}, int64_t{1}, 4'321 * int64_t{1}, 9'999 * int64_t{1},
                          59'999 * int64_t{1}, 299'999 * int64_t{1}}) {
      TopSubjects top;
      const int64_t now = kT0 + 2 * 3600 * kSec + phase;
      top.Record("r", "out", 1, true, now - c.out);
      top.Record("r", "in", 1, true, now - c.in);
      EXPECT_EQ(CountOf(top, c.window, now, "in"), 1) << TopWindowName(c.window) << " " << phase;
      EXPECT_EQ(CountOf(top, c.window, now, "out"), 0) << TopWindowName(c.window) << " " << phase;
    }
  }
}

// One unit every 10 s for two hours, each queried at every step: each
// window holds exactly the units of its buckets, never one twice, however
// the 10 s, 1 min and 5 min buckets were made.
TEST(TopSubjectsTest, WindowsCountEachUnitOnceThroughTheLevels) {
  TopSubjects top;
  std::vector<int64_t> times;
  for (int64_t now = kT0 + 3 * kSec; now < kT0 + 2 * 3600 * kSec; now += 7 * kSec) {
    top.Record("r", "k", 1, true, now);
    top.Record("r", "k", 2, false, now);
    times.push_back(now);
    if (times.size() % 11 != 0) continue;  // query at irregular steps
    for (TopWindow w : kWindows) {
      const int64_t width = w == TopWindow::k1m    ? 10 * kSec
                            : w == TopWindow::k15m ? kMin
                                                   : 5 * kMin;
      const int64_t from = (now / width) * width - TopWindowMs(w);
      const int64_t want = std::count_if(times.begin(), times.end(),
                                         [&](int64_t t) { return (t / width) * width >= from; });
      ASSERT_EQ(CountOf(top, w, now), want) << TopWindowName(w) << " at " << now - kT0;
      ASSERT_EQ(CountOf(top, w, now, "k", TopBy::kAdmitted), 2 * want) << TopWindowName(w);
    }
  }
}

TEST(TopSubjectsTest, BucketsExpireWithNoTraffic) {
  TopSubjects top;
  for (int i = 0; i < 3600; ++i) {
    top.Record("r", "k" + std::to_string(i % 500), 1, true, kT0 + i * kSec);
  }
  const int64_t end = kT0 + 3600 * kSec;
  const size_t busy = top.MemoryBytes();
  EXPECT_EQ(top.Snapshot("r", TopBy::kDenied, TopWindow::k1h, end).total(), 3600);
  // Silence: each window empties on time, and the buckets go.
  EXPECT_EQ(top.Snapshot("r", TopBy::kDenied, TopWindow::k1m, end + 70 * kSec).total(), 0);
  EXPECT_GT(top.Snapshot("r", TopBy::kDenied, TopWindow::k15m, end + 70 * kSec).total(), 0);
  EXPECT_EQ(top.Snapshot("r", TopBy::kDenied, TopWindow::k15m, end + 16 * kMin).total(), 0);
  EXPECT_GT(top.Snapshot("r", TopBy::kDenied, TopWindow::k1h, end + 16 * kMin).total(), 0);
  EXPECT_EQ(top.Snapshot("r", TopBy::kDenied, TopWindow::k1h, end + 65 * kMin).total(), 0);
  EXPECT_TRUE(top.Query("r", TopBy::kDenied, TopWindow::k1h, 10, end + 65 * kMin).empty());
  const size_t idle = top.MemoryBytes();
  EXPECT_LT(idle, busy / 4) << busy;
  // A fresh TopSubjects with one rule that has seen one event, all expired:
  // the same memory, nothing left behind.
  TopSubjects fresh;
  fresh.Record("r", "k", 1, true, kT0);
  fresh.Query("r", TopBy::kDenied, TopWindow::k1h, 10, end + 65 * kMin);
  EXPECT_LE(idle, fresh.MemoryBytes() + 64 * 1024);
}

TEST(TopSubjectsTest, AClockStepBackCountsInTheLatestBucket) {
  TopSubjects top;
  top.Record("r", "k", 1, true, kT0 + 30 * kMin);
  top.Record("r", "k", 2, true, kT0);  // 30 min earlier: taken as now
  EXPECT_EQ(CountOf(top, TopWindow::k1m, kT0 + 30 * kMin), 3);
  EXPECT_EQ(CountOf(top, TopWindow::k1m, kT0), 3);  // an earlier query too
}

TEST(TopSubjectsTest, UnknownRulesAndSeriesAreEmpty) {
  TopSubjects top;
  top.Record("r", "k", 1, true, kT0);
  top.Record("r", "k", 0, false, kT0);  // no units: nothing
  EXPECT_TRUE(top.Query("other", TopBy::kDenied, TopWindow::k1m, 10, kT0).empty());
  EXPECT_TRUE(top.Query("r", TopBy::kAdmitted, TopWindow::k1m, 10, kT0).empty());
  const SpaceSaving none = top.Snapshot("other", TopBy::kDenied, TopWindow::k1h, kT0);
  EXPECT_EQ(none.size(), 0u);
  EXPECT_EQ(none.capacity(), top.options().finished_capacity);
  EXPECT_EQ(top.Rules(), std::vector<std::string>{"r"});
}

TEST(TopSubjectsTest, RulesPastTheCapAreIgnoredAndCounted) {
  TopSubjects top(TopSubjectsOptions{.capacity = 8, .finished_capacity = 4, .max_rules = 2});
  top.Record("b", "k", 1, true, kT0);
  top.Record("a", "k", 1, false, kT0);
  top.Record("c", "k", 1, true, kT0);
  top.Record("c", "k", 1, true, kT0);
  top.Record(std::string(kMaxSketchKeyBytes + 1, 'r'), "k", 1, true, kT0);
  top.Record("a", "k", 1, true, kT0);  // a tracked rule goes on
  EXPECT_EQ(top.Rules(), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(top.ignored(), 3);
  EXPECT_TRUE(top.Query("c", TopBy::kDenied, TopWindow::k1m, 10, kT0).empty());
  EXPECT_EQ(top.Query("a", TopBy::kDenied, TopWindow::k1m, 10, kT0).size(), 1u);
  EXPECT_LE(top.MemoryBytes(), TopSubjects::MemoryBound(top.options()));
}

// The Zipf stream of the space_saving tests, spread over 10 minutes of one
// rule's denials.
class TopSubjectsZipfTest : public ::testing::Test {
 protected:
  static constexpr int64_t kSpanMs = 10 * kMin;
  static void SetUpTestSuite() {
    stream_ = new std::vector<uint32_t>(testing::ZipfStream(1'000'000, 100'000, 1.1, 20240601));
  }
  static void TearDownTestSuite() {
    delete stream_;
    stream_ = nullptr;
  }
  static std::string Key(uint32_t rank) { return "subject:" + std::to_string(rank); }
  static int64_t At(size_t i) {
    return kT0 + 7 * kSec + static_cast<int64_t>(i) * kSpanMs / 1'000'000;
  }
  static constexpr int64_t kEnd = kT0 + 7 * kSec + kSpanMs;

  // True counts per key over the units `window` covers at kEnd.
  static absl::flat_hash_map<std::string, int64_t> Truth(TopWindow window) {
    const int64_t width = window == TopWindow::k1m    ? 10 * kSec
                          : window == TopWindow::k15m ? kMin
                                                      : 5 * kMin;
    const int64_t from = (kEnd / width) * width - TopWindowMs(window);
    absl::flat_hash_map<std::string, int64_t> truth;
    for (size_t i = 0; i < stream_->size(); ++i) {
      if ((At(i) / width) * width >= from) ++truth[Key((*stream_)[i])];
    }
    return truth;
  }

  // The true top 10 are the reported top 10; every reported count brackets
  // the true one, and its error is within floor <= total / capacity.
  static void ExpectTopTen(const std::vector<TopEntry>& top, const SpaceSaving& sketch,
                           const absl::flat_hash_map<std::string, int64_t>& truth) {
    std::vector<std::pair<int64_t, std::string>> all;
    for (const auto& [k, c] : truth) all.emplace_back(-c, k);
    std::sort(all.begin(), all.end());
    std::vector<std::string> want, got;
    for (size_t i = 0; i < 10; ++i) want.push_back(all[i].second);
    for (const TopEntry& e : top) got.push_back(e.key);
    std::sort(want.begin(), want.end());
    std::sort(got.begin(), got.end());
    EXPECT_EQ(got, want);
    const int64_t bound = sketch.total() / static_cast<int64_t>(sketch.capacity());
    EXPECT_LE(sketch.floor(), bound);
    for (const TopEntry& e : sketch.Top(sketch.size())) {
      auto it = truth.find(e.key);
      const int64_t t = it == truth.end() ? 0 : it->second;
      EXPECT_LE(e.count - e.error, t) << e.key;
      EXPECT_GE(e.count, t) << e.key;
      EXPECT_LE(e.error, sketch.floor()) << e.key;
    }
  }

  static std::vector<uint32_t>* stream_;
};
std::vector<uint32_t>* TopSubjectsZipfTest::stream_ = nullptr;

TEST_F(TopSubjectsZipfTest, TopTenOfEachWindowWithinTheBound) {
  TopSubjects top;
  for (size_t i = 0; i < stream_->size(); ++i) top.Record("r", Key((*stream_)[i]), 1, true, At(i));
  for (TopWindow w : kWindows) {
    SCOPED_TRACE(TopWindowName(w));
    const auto truth = Truth(w);
    const SpaceSaving sketch = top.Snapshot("r", TopBy::kDenied, w, kEnd);
    int64_t units = 0;
    for (const auto& [k, c] : truth) units += c;
    EXPECT_EQ(sketch.total(), units);
    ExpectTopTen(top.Query("r", TopBy::kDenied, w, 10, kEnd), sketch, truth);
  }
  EXPECT_EQ(top.Snapshot("r", TopBy::kDenied, TopWindow::k1h, kEnd).total(), 1'000'000);
  EXPECT_TRUE(top.Query("r", TopBy::kAdmitted, TopWindow::k1h, 10, kEnd).empty());
  // One rule's worth of the bound: the bound for max_rules = 1.
  TopSubjectsOptions one_rule = top.options();
  one_rule.max_rules = 1;
  EXPECT_LE(top.MemoryBytes(), TopSubjects::MemoryBound(one_rule));
}

TEST_F(TopSubjectsZipfTest, TwoServersMergedMatchOneSeeingBoth) {
  TopSubjects a, b, both;
  std::mt19937_64 split(11);
  for (size_t i = 0; i < stream_->size(); ++i) {
    const std::string key = Key((*stream_)[i]);
    (split() & 1 ? a : b).Record("r", key, 1, true, At(i));
    both.Record("r", key, 1, true, At(i));
  }
  for (TopWindow w : kWindows) {
    SCOPED_TRACE(TopWindowName(w));
    // As published: serialized, then read back by the server answering.
    Result<SpaceSaving> remote =
        SpaceSaving::Parse(b.Snapshot("r", TopBy::kDenied, w, kEnd).Serialize());
    ASSERT_TRUE(remote.ok()) << remote.status().ToString();
    const std::vector<SpaceSaving> snapshots = {a.Snapshot("r", TopBy::kDenied, w, kEnd), *remote};
    const std::vector<TopEntry> merged_top = MergeTop(snapshots, 10);
    SpaceSaving merged = snapshots[0];
    merged.Merge(snapshots[1]);
    EXPECT_EQ(merged.Top(10), merged_top);
    std::vector<std::string> got, want;
    for (const TopEntry& e : merged_top) got.push_back(e.key);
    for (const TopEntry& e : both.Query("r", TopBy::kDenied, w, 10, kEnd)) want.push_back(e.key);
    std::sort(got.begin(), got.end());
    std::sort(want.begin(), want.end());
    EXPECT_EQ(got, want);
    ExpectTopTen(merged_top, merged, Truth(w));
  }
  EXPECT_TRUE(MergeTop({}, 10).empty());
}

// Threads record into shards of their own; a query adds them up, for the
// live bucket and for the finished ones alike.
TEST(TopSubjectsTest, ThreadsShardsAddUpExactly) {
  TopSubjects top;
  std::vector<std::thread> threads;
  for (int t = 0; t < 3; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 1000; ++i) top.Record("r", "k", 1, true, kT0 + i * 10);
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(CountOf(top, TopWindow::k1m, kT0 + 9 * kSec), 3000);   // live
  EXPECT_EQ(CountOf(top, TopWindow::k1m, kT0 + 20 * kSec), 3000);  // finished
  EXPECT_EQ(CountOf(top, TopWindow::k1h, kT0 + 20 * kMin), 3000);  // merged up
}

TEST(TopSubjectsTest, ThreadsRecordWhileAnotherQueries) {
  TopSubjects top(TopSubjectsOptions{.capacity = 64, .finished_capacity = 16, .max_rules = 8});
  constexpr int kThreads = 4;
  constexpr int kPerThread = 20'000;
  std::atomic<int64_t> clock{kT0};
  std::atomic<bool> done{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937_64 rng(t);
      for (int i = 0; i < kPerThread; ++i) {
        // Time runs on (a bucket every few hundred records), shared by all.
        const int64_t now = clock.fetch_add(37, std::memory_order_relaxed);
        const std::string rule = "rule" + std::to_string(rng() % 3);
        top.Record(rule, "k" + std::to_string(rng() % 200), 1, rng() & 1, now);
      }
    });
  }
  std::thread reader([&] {
    while (!done.load()) {
      const int64_t now = clock.load(std::memory_order_relaxed);
      for (const std::string& rule : top.Rules()) {
        top.Query(rule, TopBy::kDenied, TopWindow::k1m, 5, now);
        top.Snapshot(rule, TopBy::kAdmitted, TopWindow::k1h, now).Serialize();
      }
      top.MemoryBytes();
    }
  });
  for (auto& t : threads) t.join();
  done.store(true);
  reader.join();
  // Every unit is in the hour (the run spans under an hour).
  const int64_t end = clock.load();
  ASSERT_LT(end - kT0, 3600 * kSec);
  int64_t total = 0;
  for (const std::string& rule : top.Rules()) {
    for (TopBy by : {TopBy::kDenied, TopBy::kAdmitted}) {
      total += top.Snapshot(rule, by, TopWindow::k1h, end).total();
    }
  }
  EXPECT_EQ(total, kThreads * kPerThread);
  EXPECT_EQ(top.Rules().size(), 3u);
}

}  // namespace
}  // namespace floodgate::service
