// TopSubjects: see top_subjects.h.
//
// Each (rule, TopBy) is a Series: the live 10 s bucket, as `shards` full
// SpaceSavings, and three levels of finished buckets (10 s, 1 min, 5 min),
// each as many as its window needs. A bucket is finished lazily, by the
// first Record or Query past its end: the shards' live sketches are merged
// into level 0, and a level's bucket that has ended is made from the level
// below it, merging the buckets that fall inside it, before anything is
// dropped. A window then takes the whole of its own level and, below it,
// only what is in the level's current bucket, so no unit is counted twice.
//
// Why shards by thread: two event loops recording into one rule (the usual
// case: one busy rule) through one mutex and one sketch took longer per
// Record together than one loop alone (bench/top_subjects_bench), the
// mutex's and the counters' cache lines moving between cores at every call.
// A thread records into its own shard (threads numbered on first use,
// modulo the shard count), whose lines stay in its core's cache. The shards
// are sketches of the same capacity over parts of one stream, so their
// merge keeps the bound; their keys need not be disjoint.
//
// Finished buckets are immutable and shared (shared_ptr): a Query copies the
// live shards and takes references to the rest under the series' mutexes,
// then merges with them released, so that a query of an hour does not
// stall the event loops recording into that rule.
//
// The rule table is read on every decision. Rules are only ever added, so
// it is an open-addressing array of pointers that a lookup reads without a
// lock; adding takes rules_mu_ and publishes the new Rule with a release
// store after building it.
#include "service/top/top_subjects.h"

#include <algorithm>
#include <bit>
#include <limits>
#include <utility>

#include "absl/hash/hash.h"
#include "absl/strings/string_view.h"
#include "common/enum_table.h"

namespace floodgate::service {
namespace {

constexpr int64_t kNever = std::numeric_limits<int64_t>::min();

struct LevelSpec {
  int64_t width_ms;   // bucket width
  int64_t window_ms;  // the window it serves; window_ms / width_ms buckets kept
};
constexpr int kLevels = 3;
constexpr LevelSpec kLevelSpecs[kLevels] = {
    {10'000, 60'000},      // 1m
    {60'000, 900'000},     // 15m
    {300'000, 3'600'000},  // 1h
};
constexpr int64_t kLiveMs = kLevelSpecs[0].width_ms;

int LevelOf(TopWindow window) {
  switch (window) {
    case TopWindow::k1m:
      return 0;
    case TopWindow::k15m:
      return 1;
    case TopWindow::k1h:
      return 2;
  }
  return 0;
}

// Floor division: the start of the bucket of width `w` holding `t`, also
// for a t before the epoch.
int64_t BucketStart(int64_t t, int64_t w) {
  const int64_t r = t % w;
  return r < 0 ? t - r - w : t - r;
}

// The shards of a series: a power of two (a mask picks one), at most 64.
size_t ShardCount(size_t asked) { return std::bit_ceil(std::clamp<size_t>(asked, 1, 64)); }

// This thread's number, given on its first Record: it picks the thread's
// shard of every series.
size_t ThreadNumber() {
  static std::atomic<size_t> next{0};
  thread_local const size_t number = next.fetch_add(1, std::memory_order_relaxed);
  return number;
}

// Allocator overhead per block, as SpaceSaving counts it.
constexpr size_t kAllocOverhead = 32;
// A make_shared block's control part.
constexpr size_t kSharedOverhead = 16 + kAllocOverhead;

}  // namespace

constexpr EnumName<TopWindow> kTopWindowNames[] = {
    {TopWindow::k1m, "1m"}, {TopWindow::k15m, "15m"}, {TopWindow::k1h, "1h"}};

Result<TopWindow> ParseTopWindow(std::string_view text) {
  if (std::optional<TopWindow> w = KeyIn(kTopWindowNames, text)) return *w;
  return InvalidArgumentError("window must be 1m, 15m or 1h");
}

std::string_view TopWindowName(TopWindow window) { return ValueIn(kTopWindowNames, window, "1m"); }

int64_t TopWindowMs(TopWindow window) { return kLevelSpecs[LevelOf(window)].window_ms; }

Result<TopBy> ParseTopBy(std::string_view text) {
  if (text == "denied") return TopBy::kDenied;
  if (text == "admitted") return TopBy::kAdmitted;
  return InvalidArgumentError("by must be denied or admitted");
}

std::string_view TopByName(TopBy by) { return by == TopBy::kDenied ? "denied" : "admitted"; }

struct TopSubjects::Series {
  struct Bucket {
    int64_t start_ms;
    std::shared_ptr<const SpaceSaving> sketch;
  };
  struct Level {
    std::vector<Bucket> buckets;  // oldest first
    // Start of the level's current bucket (not yet made); kNever before the
    // first roll. Unused for level 0, whose current bucket is `live`.
    int64_t open_ms = kNever;
  };

  // One recording thread's part of the live bucket, on cache lines of its
  // own.
  struct alignas(64) Shard {
    explicit Shard(size_t capacity) : live(capacity) {}
    std::mutex mu;
    // A copy of the series' live_end_ms, read by Record under mu alone.
    int64_t live_end_ms ABSL_GUARDED_BY(mu) = kNever;
    SpaceSaving live ABSL_GUARDED_BY(mu);
  };

  Series(size_t shard_count, size_t capacity) {
    shards.reserve(shard_count);
    for (size_t i = 0; i < shard_count; ++i) shards.push_back(std::make_unique<Shard>(capacity));
  }

  // Finishes the buckets that ended before now_ms and drops those out of
  // every window. Cheap when now_ms is still in the live bucket. Takes
  // each shard's mutex in turn.
  void Roll(int64_t now_ms, size_t finished_capacity) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);

  // Lock order: mu, then the shards' mutexes in index order. Record takes
  // one shard's alone, and never mu while holding it.
  std::mutex mu;
  int64_t live_end_ms ABSL_GUARDED_BY(mu) = kNever;
  Level levels[kLevels] ABSL_GUARDED_BY(mu);
  std::vector<std::unique_ptr<Shard>> shards;  // fixed at construction
};

struct TopSubjects::Rule {
  Rule(std::string_view n, size_t shards, size_t capacity)
      : name(n), series{Series(shards, capacity), Series(shards, capacity)} {}
  const std::string name;
  Series series[2];  // indexed by TopBy
};

void TopSubjects::Series::Roll(int64_t now_ms, size_t finished_capacity) {
  if (now_ms < live_end_ms) return;
  const int64_t end = BucketStart(now_ms, kLiveMs) + kLiveMs;
  // The live bucket has ended: its shards (each of at least
  // finished_capacity, so the merge keeps the bound) make level 0's newest.
  SpaceSaving finished(finished_capacity);
  for (const auto& shard : shards) {
    std::lock_guard<std::mutex> lock(shard->mu);
    if (shard->live.total() > 0) finished.Merge(shard->live);
    shard->live.Clear();
    shard->live_end_ms = end;
  }
  if (finished.total() > 0) {
    levels[0].buckets.push_back(
        {live_end_ms - kLiveMs, std::make_shared<const SpaceSaving>(std::move(finished))});
  }
  live_end_ms = end;
  // Make each level's bucket that has ended from the one below, lowest
  // level first (a 5 min bucket is made of 1 min ones, the last of which may
  // have just been made), and before anything is dropped.
  for (int lv = 1; lv < kLevels; ++lv) {
    Level& level = levels[lv];
    const int64_t width = kLevelSpecs[lv].width_ms;
    const int64_t open = BucketStart(now_ms, width);
    if (level.open_ms != kNever && level.open_ms < open) {
      SpaceSaving merged(finished_capacity);
      bool any = false;
      for (const Bucket& b : levels[lv - 1].buckets) {
        if (b.start_ms < level.open_ms || b.start_ms >= level.open_ms + width) continue;
        merged.Merge(*b.sketch);
        any = true;
      }
      if (any) {
        level.buckets.push_back({level.open_ms, std::make_shared<const SpaceSaving>(merged)});
      }
    }
    level.open_ms = open;
  }
  for (int lv = 0; lv < kLevels; ++lv) {
    const int64_t cutoff =
        BucketStart(now_ms, kLevelSpecs[lv].width_ms) - kLevelSpecs[lv].window_ms;
    auto& buckets = levels[lv].buckets;
    auto keep = std::find_if(buckets.begin(), buckets.end(),
                             [&](const Bucket& b) { return b.start_ms >= cutoff; });
    buckets.erase(buckets.begin(), keep);
  }
}

TopSubjects::TopSubjects(TopSubjectsOptions options)
    : options_([&] {
        options.capacity = std::clamp<size_t>(options.capacity, 1, kMaxSketchCapacity);
        options.finished_capacity =
            std::clamp<size_t>(options.finished_capacity, 1, options.capacity);
        options.max_rules = std::max<size_t>(options.max_rules, 1);
        options.shards = ShardCount(options.shards);
        return options;
      }()),
      table_mask_(std::bit_ceil(std::max<size_t>(16, 2 * options_.max_rules)) - 1),
      table_(new std::atomic<Rule*>[table_mask_ + 1]) {
  for (size_t i = 0; i <= table_mask_; ++i) table_[i].store(nullptr, std::memory_order_relaxed);
}

TopSubjects::~TopSubjects() = default;

TopSubjects::Rule* TopSubjects::Find(std::string_view rule) const {
  size_t i = absl::HashOf(absl::string_view(rule.data(), rule.size())) & table_mask_;
  while (true) {
    Rule* r = table_[i].load(std::memory_order_acquire);
    if (r == nullptr || r->name == rule) return r;
    i = (i + 1) & table_mask_;
  }
}

TopSubjects::Rule* TopSubjects::FindOrAdd(std::string_view rule) {
  if (Rule* r = Find(rule)) return r;
  if (rule.size() > kMaxSketchKeyBytes) return nullptr;
  std::lock_guard<std::mutex> lock(rules_mu_);
  if (Rule* r = Find(rule)) return r;  // added meanwhile
  if (rules_.size() >= options_.max_rules) return nullptr;
  rules_.push_back(std::make_unique<Rule>(rule, options_.shards, options_.capacity));
  Rule* r = rules_.back().get();
  // Half full at most, so an empty slot is always found.
  size_t i = absl::HashOf(absl::string_view(rule.data(), rule.size())) & table_mask_;
  while (table_[i].load(std::memory_order_relaxed) != nullptr) i = (i + 1) & table_mask_;
  table_[i].store(r, std::memory_order_release);
  return r;
}

void TopSubjects::Record(std::string_view rule, std::string_view key, int64_t units, bool denied,
                         int64_t now_ms) {
  if (units <= 0) return;
  Rule* r = FindOrAdd(rule);
  if (r == nullptr) {
    ignored_.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  Series& s =
      r->series[denied ? static_cast<int>(TopBy::kDenied) : static_cast<int>(TopBy::kAdmitted)];
  Series::Shard& shard = *s.shards[ThreadNumber() & (s.shards.size() - 1)];
  {
    std::lock_guard<std::mutex> lock(shard.mu);
    if (now_ms < shard.live_end_ms) {
      shard.live.Add(key, units);
      return;
    }
  }
  // The live bucket has ended (or never began): roll the series, then
  // count in the new one (or in a later one, if another thread rolled
  // further meanwhile: now_ms is then taken as that one's time).
  {
    std::lock_guard<std::mutex> lock(s.mu);
    s.Roll(now_ms, options_.finished_capacity);
  }
  std::lock_guard<std::mutex> lock(shard.mu);
  shard.live.Add(key, units);
}

SpaceSaving TopSubjects::Snapshot(std::string_view rule, TopBy by, TopWindow window,
                                  int64_t now_ms) const {
  SpaceSaving out(options_.finished_capacity);
  Rule* r = Find(rule);
  if (r == nullptr) return out;
  Series& s = r->series[static_cast<int>(by)];
  const int top = LevelOf(window);
  std::vector<std::shared_ptr<const SpaceSaving>> finished;
  std::vector<SpaceSaving> live;
  {
    std::lock_guard<std::mutex> lock(s.mu);
    s.Roll(now_ms, options_.finished_capacity);
    live.reserve(s.shards.size());
    for (const auto& shard : s.shards) {
      std::lock_guard<std::mutex> shard_lock(shard->mu);
      live.push_back(shard->live);  // entries only: cheap next to merging under the lock
    }
    // The window's own level whole; below it, only what lies in the
    // current bucket of the level above (the rest is in that level).
    for (int lv = 0; lv <= top; ++lv) {
      const int64_t from = lv < top ? s.levels[lv + 1].open_ms : kNever;
      for (const Series::Bucket& b : s.levels[lv].buckets) {
        if (b.start_ms >= from) finished.push_back(b.sketch);
      }
    }
  }
  for (const SpaceSaving& sketch : live) out.Merge(sketch);
  for (const auto& sketch : finished) out.Merge(*sketch);
  return out;
}

std::vector<TopEntry> TopSubjects::Query(std::string_view rule, TopBy by, TopWindow window,
                                         size_t limit, int64_t now_ms) const {
  return Snapshot(rule, by, window, now_ms).Top(limit);
}

std::vector<std::string> TopSubjects::Rules() const {
  std::vector<std::string> names;
  {
    std::lock_guard<std::mutex> lock(rules_mu_);
    names.reserve(rules_.size());
    for (const auto& r : rules_) names.push_back(r->name);
  }
  std::sort(names.begin(), names.end());
  return names;
}

size_t TopSubjects::MemoryBytes() const {
  size_t bytes = sizeof(*this) + (table_mask_ + 1) * sizeof(std::atomic<Rule*>) + kAllocOverhead;
  std::lock_guard<std::mutex> lock(rules_mu_);
  bytes += rules_.capacity() * sizeof(std::unique_ptr<Rule>) + kAllocOverhead;
  for (const auto& r : rules_) {
    bytes += sizeof(Rule) + kAllocOverhead;
    if (r->name.capacity() > std::string().capacity()) {
      bytes += r->name.capacity() + 1 + kAllocOverhead;
    }
    for (Series& s : r->series) {
      std::lock_guard<std::mutex> series_lock(s.mu);
      bytes += s.shards.capacity() * sizeof(s.shards[0]) + kAllocOverhead;
      for (const auto& shard : s.shards) {
        std::lock_guard<std::mutex> shard_lock(shard->mu);
        // The sketch's own object is in its MemoryBytes.
        bytes += sizeof(Series::Shard) - sizeof(SpaceSaving) + kAllocOverhead +
                 shard->live.MemoryBytes();
      }
      for (const Series::Level& level : s.levels) {
        if (level.buckets.capacity() > 0) {
          bytes += level.buckets.capacity() * sizeof(Series::Bucket) + kAllocOverhead;
        }
        for (const Series::Bucket& b : level.buckets) {
          bytes += kSharedOverhead + b.sketch->MemoryBytes();
        }
      }
    }
  }
  return bytes;
}

size_t TopSubjects::MemoryBound(const TopSubjectsOptions& options_in) {
  TopSubjectsOptions options = options_in;
  options.capacity = std::clamp<size_t>(options.capacity, 1, kMaxSketchCapacity);
  options.finished_capacity = std::clamp<size_t>(options.finished_capacity, 1, options.capacity);
  options.max_rules = std::max<size_t>(options.max_rules, 1);
  const size_t table = std::bit_ceil(std::max<size_t>(16, 2 * options.max_rules));
  const size_t shards = ShardCount(options.shards);
  size_t series =
      kAllocOverhead + shards * (sizeof(void*) + sizeof(Series::Shard) - sizeof(SpaceSaving) +
                                 kAllocOverhead + SpaceSaving::MemoryBound(options.capacity));
  for (const LevelSpec& spec : kLevelSpecs) {
    const size_t kept = static_cast<size_t>(spec.window_ms / spec.width_ms);
    // The vector may have grown to twice what it keeps (one over, before a
    // drop, doubles it).
    series += std::bit_ceil(kept + 1) * sizeof(Series::Bucket) + kAllocOverhead;
    series += kept * (kSharedOverhead + SpaceSaving::MemoryBound(options.finished_capacity, false));
  }
  const size_t rule =
      sizeof(Rule) + kAllocOverhead + kMaxSketchKeyBytes + 1 + kAllocOverhead + 2 * series;
  return sizeof(TopSubjects) + table * sizeof(std::atomic<Rule*>) + kAllocOverhead +
         std::bit_ceil(options.max_rules) * sizeof(std::unique_ptr<Rule>) + kAllocOverhead +
         options.max_rules * rule;
}

std::vector<TopEntry> MergeTop(std::span<const SpaceSaving> snapshots, size_t limit) {
  if (snapshots.empty()) return {};
  SpaceSaving merged = snapshots[0];
  for (size_t i = 1; i < snapshots.size(); ++i) merged.Merge(snapshots[i]);
  return merged.Top(limit);
}

}  // namespace floodgate::service
