// TopSubjects: per rule, the subjects with the most denied units and the
// most admitted units over the last minute, 15 minutes and hour, in bounded
// memory; what GET /v1/admin/top reports. Fed by every decision.
//
// Windows. Time is cut into epoch-aligned buckets of width w: 10 s for
// 1m, 1 min for 15m, 5 min for 1h. A window of length L, asked at now_ms,
// covers [floor(now_ms / w) * w - L, now_ms]: the bucket now_ms falls in and
// the L / w whole buckets before it. So it covers at least L and less than
// L + w: 1m covers between 60 and 70 s, 15m between 15 and 16 min, 1h
// between 60 and 65 min. A unit recorded at t is in the window iff
// floor(t / w) * w >= floor(now_ms / w) * w - L. Buckets that leave every
// window are dropped at the next Record or Query of their rule and TopBy
// (queries see them gone in any case). A now_ms earlier than one already
// seen for a rule and TopBy is taken as that one: a clock step back moves
// no unit between buckets.
//
// Accuracy. The live 10 s bucket is `shards` SpaceSavings of `capacity`
// counters (one per recording thread); when it ends they are merged into
// one of `finished_capacity` entries, and finished buckets are merged up
// into the 1 min and 5 min ones. A window's
// sketch (Query, Snapshot) is the merge of its buckets, at
// finished_capacity: every reported count is within its error of the true
// count, and every error, like the true count of any subject not reported,
// is at most floor() <= (units in the window) / finished_capacity
// (SpaceSaving's bound, kept by Compacted and Merge). Merging several
// servers' snapshots keeps it, over their summed units.
//
// Memory. Per rule and TopBy: the live bucket (`shards` times
// SpaceSaving::MemoryBound of `capacity`) and at most 6 + 15 + 12 = 33
// finished buckets, each holding at most finished_capacity entries and no
// index. At most max_rules rules
// are tracked; Records of any other rule, or of a rule name longer than
// kMaxSketchKeyBytes, are dropped and counted (ignored()). MemoryBytes()
// <= MemoryBound(options) between calls; a Query or a bucket's end holds a
// few sketches more while it runs. With the defaults the bound is 3.9 MB
// per rule (every key 256 bytes, every bucket full), 996 MB for 256 rules;
// a rule whose every bucket and shard is full holds about 0.7 MB with keys
// of up to 15 bytes (kept inside std::string), 1.2 MB with 16-byte keys
// (docs/design.md, "Top subjects").
//
// Thread-safe. Record takes the mutex of its thread's shard of the rule's
// denied or admitted series for one SpaceSaving::Add (and, once per 10 s,
// the series' to finish the bucket); rules are found without a lock (they
// are only ever added). A Query holds the series' mutexes only to copy the
// live shards and take the finished buckets, and merges outside them.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "floodgate/status.h"
#include "service/top/space_saving.h"

namespace floodgate::service {

struct TopSubjectsOptions {
  // Counters of each shard of the live (current 10 s) bucket of each rule
  // and TopBy, in [1, kMaxSketchCapacity] (clamped into it).
  size_t capacity = 256;
  // Shards of the live bucket. A recording thread takes one (threads are
  // numbered on first use, modulo this), so that event loops recording into
  // one rule do not contend: as many as the event loops is best. Rounded
  // up to a power of two, at most 64.
  size_t shards = 4;
  // Entries kept of each finished bucket, and of a window's sketch: the
  // most a Query can list. At most `capacity` (lowered to it).
  size_t finished_capacity = 128;
  // Rules tracked at most.
  size_t max_rules = 256;
};

enum class TopWindow { k1m, k15m, k1h };
enum class TopBy { kDenied, kAdmitted };

// "1m", "15m", "1h"; anything else is INVALID_ARGUMENT.
Result<TopWindow> ParseTopWindow(std::string_view text);
std::string_view TopWindowName(TopWindow window);
// The window's length L, in milliseconds.
int64_t TopWindowMs(TopWindow window);
// "denied", "admitted"; anything else is INVALID_ARGUMENT.
Result<TopBy> ParseTopBy(std::string_view text);
std::string_view TopByName(TopBy by);

class TopSubjects {
 public:
  explicit TopSubjects(TopSubjectsOptions options = {});
  ~TopSubjects();
  TopSubjects(const TopSubjects&) = delete;
  TopSubjects& operator=(const TopSubjects&) = delete;

  // Counts `units` for `key` (cut to kMaxSketchKeyBytes) in the denied or
  // admitted series of `rule` at `now_ms`. The rule is tracked from its
  // first Record, while fewer than max_rules are. units <= 0: nothing.
  void Record(std::string_view rule, std::string_view key, int64_t units, bool denied,
              int64_t now_ms);

  // The `limit` (at most finished_capacity) heaviest subjects of `rule`
  // over `window` as of `now_ms`, by count descending then key ascending.
  // Empty for a rule never recorded.
  std::vector<TopEntry> Query(std::string_view rule, TopBy by, TopWindow window, size_t limit,
                              int64_t now_ms) const;

  // This server's sketch of `rule` over `window` as of `now_ms`, of
  // capacity finished_capacity (empty for a rule never recorded): what a
  // server publishes for the others to merge (MergeTop).
  SpaceSaving Snapshot(std::string_view rule, TopBy by, TopWindow window, int64_t now_ms) const;

  // The rules tracked, sorted.
  std::vector<std::string> Rules() const;

  // Bytes held now (an upper bound), and the most they can be.
  size_t MemoryBytes() const;
  static size_t MemoryBound(const TopSubjectsOptions& options);

  // Records dropped: their rule was past max_rules or its name too long.
  int64_t ignored() const { return ignored_.load(std::memory_order_relaxed); }
  const TopSubjectsOptions& options() const { return options_; }

 private:
  struct Series;
  struct Rule;

  // Lock-free: rules are only added, and published with release stores.
  Rule* Find(std::string_view rule) const;
  Rule* FindOrAdd(std::string_view rule);

  const TopSubjectsOptions options_;
  // Open addressing, at most half full; a slot, once set, never changes.
  const size_t table_mask_;
  const std::unique_ptr<std::atomic<Rule*>[]> table_;
  mutable std::mutex rules_mu_;  // serialises adding rules
  std::vector<std::unique_ptr<Rule>> rules_ ABSL_GUARDED_BY(rules_mu_);
  std::atomic<int64_t> ignored_{0};
};

// Merges the snapshots of several servers (this one's and others', parsed)
// into one sketch, at the smallest of their capacities, and returns its
// `limit` heaviest entries. The bound of TopSubjects holds over the
// servers' summed units.
std::vector<TopEntry> MergeTop(std::span<const SpaceSaving> snapshots, size_t limit);

}  // namespace floodgate::service
