// SlicedStore: quota slices (docs/slices.md). A store (store/store.h) put
// in front of a shared one (Redis) that decides a rule with `slices` from
// units taken ahead, so that one hot subject costs the shared store a call
// per slice instead of one per decision, and the fleet never admits more
// than the limit: the units a server takes are counted in the subject's
// shared state when they are taken (a check of `want` units), so the shared
// count is what was admitted plus what is out in slices.
//
//   take:    a decision finds no units left: a Check of the next slice's
//            size (slice_sizing.h) goes to the shared store; refused for
//            want but with r units left, a second Check takes r. The
//            answer fills the slice and answers the decisions that waited.
//   decide:  a decision with units left spends them here: no store call.
//   return:  units unused after the rule's idle_return, and at shutdown,
//            are given back with a Refund (the shared count drops); those
//            still held when their window ends are the window's (counted,
//            never used: "stranded").
//   exhausted: the shared store had nothing left: denials are answered
//            here until the window ends, asking again every
//            kExhaustedRecheckMs in case others gave units back.
//
// Each thread holds slices of its own: an answer must come back on the
// thread that asked (a loop's own store I/O), so the decisions waiting for
// a take are always that thread's. A server's "slice" is its threads'.
//
// What is not a plain decision of a sliced rule goes to the shared store as
// it is: peeks (cost 0, the shared count: FG.STATE), decisions at an
// explicit instant, shadow rules, a cost above the smallest limit, rules
// without slices, and everything that is not a decision. A refund goes to
// the shared store too (the units come back to the whole fleet); a reset
// also drops the subject's slices here. Overrides and tiers are variants
// of their own, so slices of their own. Alerts fire on the shared count,
// as a slice is taken: a threshold is reported once, up to one slice early.
//
// Thread-safe.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "common/thread_stopper.h"
#include "floodgate/clock.h"
#include "store/slices.h"
#include "store/store.h"

namespace floodgate::service {

// Asked again at most this often while the shared store says a subject has
// nothing left.
inline constexpr int64_t kExhaustedRecheckMs = 100;
// Slices one thread holds at most; past it a subject is decided by the
// shared store per decision.
inline constexpr size_t kMaxSlicesPerThread = 65'536;

class SlicedStore final : public store::Store, public store::SliceView {
 public:
  // Decides in front of `shared`, which it owns; `clock` is the one
  // `shared` was made with.
  SlicedStore(std::unique_ptr<store::Store> shared, const Clock& clock);
  // Gives every held unit back (waiting up to the shared store's answers,
  // a few seconds at most), then closes `shared`.
  ~SlicedStore() override;

  Result<std::string> Describe(const core::CompiledRule& rule, uint32_t id) override {
    return shared_->Describe(rule, id);
  }
  store::Answer Check(const store::CheckOp& op, Decision* decision, Status* status,
                      store::CheckLater later, store::Batch* batch) override;
  size_t Prefetch(uint32_t id, std::string_view subject) override {
    return shared_->Prefetch(id, subject);
  }
  std::unique_ptr<store::Batch> NewBatch(int max_calls_in_flight) override {
    return shared_->NewBatch(max_calls_in_flight);
  }
  store::Answer Throttle(const store::ThrottleOp& op, ThrottleResult* result, Status* status,
                         store::Later<ThrottleResult> later) override {
    return shared_->Throttle(op, result, status, later);
  }
  store::Answer Reset(const store::ResetOp& op, Status* status, store::Later<> later) override;
  store::Answer Refund(const store::RefundOp& op, core::RefundResult* result, Status* status,
                       store::Later<core::RefundResult> later) override {
    return shared_->Refund(op, result, status, later);
  }
  int64_t SweepExpired(int64_t now_ms) override { return shared_->SweepExpired(now_ms); }
  Usage GetUsage() const override { return shared_->GetUsage(); }
  // The shared store's, and the slices'.
  std::vector<store::Metric> Metrics() const override;

  // --- store::SliceView ---
  store::SliceHolding HeldFor(uint32_t id, std::string_view subject) const override;

  // The counters (Metrics) as numbers, for tests and the stats.
  struct Counters {
    int64_t slices_taken = 0;     // takes that granted units
    int64_t units_taken = 0;      // units those granted
    int64_t units_returned = 0;   // units given back (idle, shutdown)
    int64_t units_stranded = 0;   // units still held when their window ended
    int64_t units_held = 0;       // units held now (gauge)
    int64_t local_decisions = 0;  // decisions answered from a slice
    int64_t take_calls = 0;       // Checks sent to the shared store for slices
    int64_t take_failures = 0;    // of those, failed (the waiting decisions' fallback)
  };
  Counters GetCounters() const;

  // The sweeper's round, at monotonic `now_ms`: gives back what was idle for
  // its rule's idle_return, counts and forgets what its window ended.
  // Public for tests; the sweeper thread calls it every kSweepIntervalMs
  // while any slice exists, and sleeps until the next one is made
  // otherwise (an idle server never wakes for it). Whether any is left.
  bool Sweep(int64_t now_ms);

  struct Table;  // one thread's slices
  struct Slice;

 private:
  // The calling thread's table (made and registered on its first use).
  Table& MyTable();
  // Sends a take of `want` units for the slice at `key` of `table` (the
  // table not locked; the slice marked taking), in `batch` if any; the
  // answer, now or later, goes to Settle. `alerts` receives what the take
  // fired when answered now (null: the rule has none, or nobody to tell).
  void SendTake(Table& table, const std::string& key, core::AlertOutcome* alerts, int64_t want,
                store::Batch* batch);
  // A take's answer: fills the slice, answers the waiters it can (the
  // caller's own, still inside Check, is marked resolved for it to
  // collect), and sends the next take if some still wait.
  void Settle(Table& table, const std::string& key, int64_t want, const Status& status,
              const Decision& d, const core::AlertOutcome* fired);
  // Gives `units` of `slice` back to the shared store (its table locked by
  // the caller): they leave the slice at once.
  void GiveBack(Slice& slice, std::string_view subject, int64_t units);
  int64_t NowMs() const { return clock_.MonotonicNs() / 1'000'000; }

  std::unique_ptr<store::Store> shared_;
  const Clock& clock_;
  const uint64_t serial_;  // tells this store's tables from another's in a thread's cache

  mutable std::mutex tables_mu_;
  std::vector<std::unique_ptr<Table>> tables_;

  std::atomic<int64_t> slices_taken_{0}, units_taken_{0}, units_returned_{0}, units_stranded_{0},
      local_decisions_{0}, take_calls_{0}, take_failures_{0};
  std::atomic<int64_t> returns_in_flight_{0};

  // False while the sweeper sleeps for want of slices: a new slice wakes it.
  std::atomic<bool> sweeping_{false};
  ThreadStopper sweeper_;
};

}  // namespace floodgate::service
