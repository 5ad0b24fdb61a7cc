// SlicedStore: see sliced_store.h.
#include "service/slices/sliced_store.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <deque>
#include <optional>
#include <thread>
#include <utility>

#include "absl/container/node_hash_map.h"
#include "core/alerts.h"
#include "core/rule_eval.h"
#include "service/slices/slice_sizing.h"

namespace floodgate::service {
namespace {

// The sweeper's round: often enough that an idle_return of 100 ms is kept
// within a tenth of it, rarely enough to cost nothing measurable.
constexpr int64_t kSweepIntervalMs = 20;
// With no slice at all the sweeper sleeps this long, or until woken.
constexpr int64_t kIdleSleepNs = int64_t{3600} * 1'000'000'000;
// How long shutdown waits for the units it gives back to be answered.
constexpr int64_t kShutdownReturnWaitMs = 3000;

std::atomic<uint64_t> g_next_serial{1};

// The smallest limit of a rule: what a slice is a share of.
int64_t SmallestLimit(const core::CompiledRule& rule) {
  int64_t smallest = INT64_MAX;
  for (const core::LimitParams& l : rule.limits) smallest = std::min(smallest, l.count);
  return smallest;
}

// The least any limit of `d` has left: what one more take could still get.
int64_t LeastRemaining(const Decision& d) {
  int64_t least = d.num_limits > 0 ? INT64_MAX : 0;
  for (int i = 0; i < d.num_limits; ++i) least = std::min(least, d.limits[i].remaining);
  return std::max<int64_t>(0, least);
}

// The soonest window end of `d`'s limits, in ms after its instant: how long
// the units a take gave stay in their window (0: none known).
int64_t SoonestReset(const Decision& d) {
  int64_t soonest = 0;
  for (int i = 0; i < d.num_limits; ++i) {
    const int64_t r = d.limits[i].reset_after_ms;
    if (r > 0 && (soonest == 0 || r < soonest)) soonest = r;
  }
  return soonest;
}

// Which windows `d`'s limits count: the same sum means the same windows.
int64_t WindowsOf(const Decision& d) {
  int64_t sum = 0;
  for (int i = 0; i < d.num_limits; ++i) sum += d.limits[i].window_start_ms;
  return sum;
}

// `d` (a decision the shared store made `elapsed_ms` ago) as of now: waits
// shortened by the time passed, remaining raised by `held` units this
// server still holds (they are out in its slice, not spent).
void AgeDecision(Decision* d, int64_t elapsed_ms, int64_t held) {
  auto age = [elapsed_ms](int64_t ms) {
    return ms <= 0 ? ms : std::max<int64_t>(1, ms - elapsed_ms);
  };
  for (int i = 0; i < d->num_limits; ++i) {
    LimitStatus& l = d->limits[i];
    l.retry_after_ms = age(l.retry_after_ms);
    l.reset_after_ms = age(l.reset_after_ms);
    l.remaining += held;
  }
  d->retry_after_ms = age(d->retry_after_ms);
  d->reset_after_ms = age(d->reset_after_ms);
  d->remaining += held;
}

// What an admission from a slice answers: the last grant's figures, with
// every limit allowing.
void AdmitFrom(const Decision& grant, int64_t elapsed_ms, int64_t held, Decision* d) {
  *d = grant;
  AgeDecision(d, elapsed_ms, held);
  d->allowed = true;
  d->retry_after_ms = 0;
  for (int i = 0; i < d->num_limits; ++i) {
    d->limits[i].allowed = true;
    d->limits[i].retry_after_ms = 0;
  }
}

}  // namespace

// A decision waiting for a take. The caller's own (`done` empty) is
// answered into status, decision and fired (`resolved`) when the take's
// answer comes before the caller returned (see Check).
struct Waiter {
  uint64_t serial = 0;
  int64_t cost = 0;
  store::CheckDone done;
  bool resolved = false;
  Status status;
  Decision decision;
  std::optional<core::AlertOutcome> fired;
};

struct SlicedStore::Slice {
  // The rule as it was when the slice began: a reload may free the
  // variant, and units still have to be given back under it.
  std::shared_ptr<const core::CompiledRule> rule;
  // What the store said of it (VariantRef::tag). Shared, because a take or
  // a refund held in a batch views it until answered.
  std::shared_ptr<const std::string> tag;
  uint32_t id = 0;
  int64_t limit = 0;  // the smallest limit's count

  int64_t units = 0;        // left to spend
  int64_t taken = 0;        // granted in the current window
  int64_t deadline_ms = 0;  // monotonic ms its window ends by (0: no window)
  int64_t windows = 0;      // WindowsOf the grant: which windows the units are of

  // Demand: the last slice's size, when it came and what was spent since.
  int64_t last_size = 0;
  int64_t last_take_ms = 0;
  int64_t spent = 0;
  int64_t last_use_ms = 0;

  // The shared store's last grant and last denial, and when they came.
  Decision grant;
  int64_t grant_at_ms = 0;
  bool exhausted = false;
  Decision denial;
  int64_t denial_at_ms = 0;
  int64_t recheck_ms = 0;

  bool taking = false;
  int64_t take_sent_ms = 0;
  std::deque<Waiter> waiters;
  uint64_t next_waiter = 1;
};

struct SlicedStore::Table {
  std::thread::id owner;
  std::mutex mu;
  // By 4 bytes of variant id, then the subject.
  absl::node_hash_map<std::string, Slice> slices;
};

namespace {

// A slice's key in its table: the variant id's 4 bytes, then the subject.
void MakeSliceKey(uint32_t id, std::string_view subject, std::string* key) {
  key->resize(sizeof(id));
  std::memcpy(key->data(), &id, sizeof(id));
  key->append(subject);
}

std::string SliceKey(uint32_t id, std::string_view subject) {
  std::string key;
  MakeSliceKey(id, subject, &key);
  return key;
}

std::string_view SubjectOf(std::string_view key) { return key.substr(sizeof(uint32_t)); }

// Ends the slice's window: what it held belongs to that window (returned,
// for the caller to count), and nothing of the window is kept.
int64_t EndWindow(SlicedStore::Slice& s) {
  const int64_t held = s.units;
  s.units = 0;
  s.taken = 0;
  s.deadline_ms = 0;
  s.exhausted = false;
  return held;
}

// EndWindow once the window has ended by `now_ms`: units counted there,
// never spent. 0 before.
int64_t EndWindowIfDue(SlicedStore::Slice& s, int64_t now_ms) {
  if (s.deadline_ms == 0 || now_ms < s.deadline_ms) return 0;
  return EndWindow(s);
}

}  // namespace

SlicedStore::SlicedStore(std::unique_ptr<store::Store> shared, const Clock& clock)
    : shared_(std::move(shared)), clock_(clock), serial_(g_next_serial.fetch_add(1)) {
  sweeper_.Start([this] {
    bool any = false;
    while (sweeper_.SleepFor(any ? kSweepIntervalMs * 1'000'000 : kIdleSleepNs)) {
      // Cleared before the round: a slice made after it wakes the sweeper
      // (Check), one made before it is seen by it.
      sweeping_.store(false);
      any = Sweep(NowMs());
      if (any) sweeping_.store(true);
    }
  });
}

SlicedStore::~SlicedStore() {
  sweeper_.Stop();
  {
    std::lock_guard<std::mutex> registry(tables_mu_);
    for (const std::unique_ptr<Table>& table : tables_) {
      std::lock_guard<std::mutex> lock(table->mu);
      const int64_t now = NowMs();
      for (auto& [key, slice] : table->slices) {
        if (slice.units > 0 && (slice.deadline_ms == 0 || now < slice.deadline_ms)) {
          GiveBack(slice, SubjectOf(key), slice.units);
        }
      }
    }
  }
  // Bounded in real time: it waits for I/O, which a ManualClock does not
  // move (a test's clock would otherwise never end the wait).
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(kShutdownReturnWaitMs);
  while (returns_in_flight_.load() > 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  // Answers what is still in flight (takes included), into the tables,
  // which are still here.
  shared_.reset();
}

SlicedStore::Table& SlicedStore::MyTable() {
  thread_local uint64_t t_serial = 0;
  thread_local Table* t_table = nullptr;
  if (t_serial == serial_) return *t_table;
  const std::thread::id me = std::this_thread::get_id();
  std::lock_guard<std::mutex> lock(tables_mu_);
  Table* mine = nullptr;
  for (const std::unique_ptr<Table>& table : tables_) {
    if (table->owner == me) mine = table.get();
  }
  if (mine == nullptr) {
    tables_.push_back(std::make_unique<Table>());
    mine = tables_.back().get();
    mine->owner = me;
  }
  t_serial = serial_;
  t_table = mine;
  return *mine;
}

// Called with table.mu held: the units go back to the shared store, and
// leave the slice at once (a decision can no longer spend them).
void SlicedStore::GiveBack(Slice& slice, std::string_view subject, int64_t units) {
  slice.units -= units;
  slice.taken -= units;
  returns_in_flight_.fetch_add(1);
  const store::RefundOp op{store::VariantRef{slice.rule.get(), slice.id, *slice.tag}, subject,
                           units, nullptr};
  auto finish = [this, units, rule = slice.rule, tag = slice.tag](const Status& s,
                                                                  const core::RefundResult& r) {
    int64_t back = 0;
    if (s.ok()) {
      back = units;
      for (int i = 0; i < r.after.num_limits; ++i) back = std::min(back, r.refunded[i]);
    }
    units_returned_.fetch_add(back);
    units_stranded_.fetch_add(units - back);  // its window ended first, or the store failed
    returns_in_flight_.fetch_sub(1);
  };
  core::RefundResult result;
  Status status;
  if (shared_->Refund(op, &result, &status, [&]() -> store::Done<core::RefundResult> {
        return finish;
      }) == store::Answer::kNow) {
    finish(status, result);
  }
}

store::Answer SlicedStore::Check(const store::CheckOp& op, Decision* decision, Status* status,
                                 store::CheckLater later, store::Batch* batch) {
  const core::CompiledRule& rule = *op.variant.rule;
  if (!rule.slices.enabled() || op.cost <= 0 || op.at_ms != nullptr || rule.shadow) {
    return shared_->Check(op, decision, status, later, batch);
  }
  const int64_t limit = SmallestLimit(rule);
  if (op.cost > limit) return shared_->Check(op, decision, status, later, batch);

  Table& table = MyTable();
  const int64_t now = NowMs();
  std::unique_lock<std::mutex> lock(table.mu);
  thread_local std::string t_key;
  MakeSliceKey(op.variant.id, op.subject, &t_key);
  auto it = table.slices.find(t_key);
  if (it == table.slices.end()) {
    if (table.slices.size() >= kMaxSlicesPerThread) {
      lock.unlock();
      return shared_->Check(op, decision, status, later, batch);
    }
    it = table.slices.try_emplace(t_key).first;
    if (!sweeping_.load()) sweeper_.Wake();
    Slice& fresh = it->second;
    fresh.rule = std::make_shared<const core::CompiledRule>(rule);
    fresh.tag = std::make_shared<const std::string>(op.variant.tag);
    fresh.id = op.variant.id;
    fresh.limit = limit;
  }
  Slice& s = it->second;
  if (s.rule->limits.size() != rule.limits.size()) {
    // The same id with other limits cannot happen (an id is a definition);
    // decided by the shared store should it ever.
    lock.unlock();
    return shared_->Check(op, decision, status, later, batch);
  }
  // A reload that changed only the option keeps the state (and its id):
  // the slice follows the new max_share and idle_return.
  if (s.rule->slices != rule.slices) s.rule = std::make_shared<const core::CompiledRule>(rule);
  units_stranded_.fetch_add(EndWindowIfDue(s, now), std::memory_order_relaxed);
  s.last_use_ms = now;
  if (s.units >= op.cost) {
    s.units -= op.cost;
    s.spent += op.cost;
    AdmitFrom(s.grant, now - s.grant_at_ms, s.units, decision);
    local_decisions_.fetch_add(1, std::memory_order_relaxed);
    *status = Status::Ok();
    return store::Answer::kNow;
  }
  // Exhausted: denied here until the recheck, unless this cost would fit
  // what the shared store said was left (a larger one was denied).
  if (s.exhausted && now < s.recheck_ms && op.cost - s.units > LeastRemaining(s.denial)) {
    *decision = s.denial;
    AgeDecision(decision, now - s.denial_at_ms, s.units);
    local_decisions_.fetch_add(1, std::memory_order_relaxed);
    *status = Status::Ok();
    return store::Answer::kNow;
  }
  // This decision waits for a take: its own (started here) or the one in
  // flight. It goes in the queue first, so that an answer coming on another
  // thread before this returns finds it (and resolves it for us).
  const uint64_t mine = s.next_waiter++;
  Waiter waiter;
  waiter.serial = mine;
  waiter.cost = op.cost;
  s.waiters.push_back(std::move(waiter));
  if (!s.taking) {
    s.taking = true;
    s.take_sent_ms = now;
    const int64_t want = NextSliceUnits(op.cost - s.units, s.limit, rule.slices.max_share_ppm,
                                        s.last_size, s.spent, now - s.last_take_ms);
    // A copy: an answer now runs callbacks that may decide again on this
    // thread, which reuses t_key.
    const std::string key = t_key;
    lock.unlock();
    SendTake(table, key, op.alerts, want, batch);
    lock.lock();
  }
  // Answered already (now, or on another thread)?
  auto w = std::find_if(s.waiters.begin(), s.waiters.end(),
                        [mine](const Waiter& x) { return x.serial == mine; });
  if (w == s.waiters.end()) {
    // Only this call removes its own waiter: a defect, answered as one
    // rather than left waiting for a callback nobody will call.
    *status = InternalError("slices: a decision's waiter was lost");
    return store::Answer::kNow;
  }
  if (!w->resolved) {
    w->done = later();
    return store::Answer::kLater;
  }
  *status = w->status;
  *decision = w->decision;
  if (w->fired.has_value() && op.alerts != nullptr) *op.alerts = *w->fired;
  s.waiters.erase(w);
  return store::Answer::kNow;
}

void SlicedStore::SendTake(Table& table, const std::string& key, core::AlertOutcome* alerts,
                           int64_t want, store::Batch* batch) {
  // What the take is of, read under the lock (a reload may replace the
  // rule); the slice itself is never erased while taking.
  std::shared_ptr<const core::CompiledRule> rule;
  std::shared_ptr<const std::string> tag;
  uint32_t id = 0;
  {
    std::lock_guard<std::mutex> lock(table.mu);
    const Slice& s = table.slices.find(key)->second;
    rule = s.rule;
    tag = s.tag;
    id = s.id;
  }
  take_calls_.fetch_add(1, std::memory_order_relaxed);
  core::AlertOutcome outcome;
  store::CheckOp op{store::VariantRef{rule.get(), id, *tag}, SubjectOf(key), want};
  if (rule->alerts.enabled()) op.alerts = alerts != nullptr ? alerts : &outcome;
  Decision d;
  Status st;
  const store::Answer answer = shared_->Check(
      op, &d, &st,
      [&]() -> store::CheckDone {
        // `rule` and `tag` kept alive until the answer: a held take views them.
        return [this, &table, key, want, rule, tag](const Status& status, const Decision& decision,
                                                    const core::AlertOutcome* fired) {
          Settle(table, key, want, status, decision, fired);
        };
      },
      batch);
  if (answer == store::Answer::kNow) Settle(table, key, want, st, d, op.alerts);
}

void SlicedStore::Settle(Table& table, const std::string& key, int64_t want, const Status& status,
                         const Decision& d, const core::AlertOutcome* fired) {
  struct Answered {
    store::CheckDone done;
    Status status;
    Decision decision;
    std::optional<core::AlertOutcome> fired;
  };
  std::vector<Answered> answered;
  int64_t again = 0;
  {
    std::lock_guard<std::mutex> lock(table.mu);
    Slice& s = table.slices.find(key)->second;
    const int64_t now = NowMs();
    s.taking = false;
    std::optional<core::AlertOutcome> to_first;
    if (fired != nullptr && fired->any()) to_first = *fired;
    bool failed = false;
    if (!status.ok()) {
      take_failures_.fetch_add(1, std::memory_order_relaxed);
      failed = true;
    } else if (d.allowed) {
      if (s.units > 0 && s.windows != WindowsOf(d)) {
        // The leftover is of a window the shared store has left.
        units_stranded_.fetch_add(EndWindow(s), std::memory_order_relaxed);
      }
      slices_taken_.fetch_add(1, std::memory_order_relaxed);
      units_taken_.fetch_add(want, std::memory_order_relaxed);
      s.units += want;
      s.taken += want;
      s.windows = WindowsOf(d);
      const int64_t reset = SoonestReset(d);
      s.deadline_ms = reset > 0 ? s.take_sent_ms + reset : now;
      s.grant = d;
      s.grant_at_ms = now;
      s.exhausted = false;
      s.last_size = want;
      s.last_take_ms = s.take_sent_ms;
      s.spent = 0;
    } else {
      const int64_t left = LeastRemaining(d);
      int64_t first_cost = 1;
      for (const Waiter& w : s.waiters) {
        if (!w.resolved) {
          first_cost = w.cost;
          break;
        }
      }
      if (left > 0 && left < want && s.units + left >= first_cost) {
        again = left;  // less than asked for is left: take that
      } else {
        s.exhausted = true;
        s.denial = d;
        s.denial_at_ms = now;
        s.recheck_ms = now + kExhaustedRecheckMs;
        const int64_t reset = SoonestReset(d);
        if (s.deadline_ms == 0 && reset > 0) s.deadline_ms = s.take_sent_ms + reset;
      }
    }
    // Answer the waiters in order while the slice has units for them; the
    // first it cannot serve waits for the next take.
    for (auto w = s.waiters.begin(); w != s.waiters.end() && again == 0;) {
      if (w->resolved) {  // the caller's own, answered already: it collects it
        ++w;
        continue;
      }
      Answered a;
      if (failed) {
        a.status = status;
      } else if (s.units >= w->cost) {
        s.units -= w->cost;
        s.spent += w->cost;
        AdmitFrom(s.grant, now - s.grant_at_ms, s.units, &a.decision);
        if (to_first.has_value()) {
          a.fired = std::move(to_first);
          to_first.reset();
        }
      } else if (s.exhausted) {
        a.decision = s.denial;
        AgeDecision(&a.decision, now - s.denial_at_ms, s.units);
      } else {
        again = NextSliceUnits(w->cost - s.units, s.limit, s.rule->slices.max_share_ppm,
                               s.last_size, s.spent, now - s.last_take_ms);
        break;
      }
      if (!w->done) {
        // The caller's own, still inside Check: it collects its answer.
        w->resolved = true;
        w->status = a.status;
        w->decision = a.decision;
        w->fired = std::move(a.fired);
        ++w;
        continue;
      }
      a.done = std::move(w->done);
      answered.push_back(std::move(a));
      w = s.waiters.erase(w);
    }
    if (again > 0) {
      s.taking = true;
      s.take_sent_ms = now;
    }
  }
  for (Answered& a : answered) {
    a.done(a.status, a.decision, a.fired.has_value() ? &*a.fired : nullptr);
  }
  if (again > 0) SendTake(table, key, nullptr, again, nullptr);
}

store::Answer SlicedStore::Reset(const store::ResetOp& op, Status* status, store::Later<> later) {
  std::vector<std::string> keys;
  for (uint32_t id : op.ids) keys.push_back(SliceKey(id, op.subject));
  {
    std::lock_guard<std::mutex> registry(tables_mu_);
    for (const std::unique_ptr<Table>& table : tables_) {
      std::lock_guard<std::mutex> lock(table->mu);
      for (const std::string& key : keys) {
        auto it = table->slices.find(key);
        if (it == table->slices.end()) continue;
        // The reset forgets the shared count, units out included, and
        // the slice starts again from a first one.
        EndWindow(it->second);
        it->second.last_size = 0;
      }
    }
  }
  return shared_->Reset(op, status, later);
}

bool SlicedStore::Sweep(int64_t now_ms) {
  bool any = false;
  std::vector<Table*> tables;
  {
    std::lock_guard<std::mutex> registry(tables_mu_);
    for (const std::unique_ptr<Table>& table : tables_) tables.push_back(table.get());
  }
  for (Table* table : tables) {
    std::lock_guard<std::mutex> lock(table->mu);
    for (auto it = table->slices.begin(); it != table->slices.end();) {
      Slice& s = it->second;
      units_stranded_.fetch_add(EndWindowIfDue(s, now_ms), std::memory_order_relaxed);
      const bool idle = now_ms - s.last_use_ms >= s.rule->slices.idle_return_ms;
      const bool busy = s.taking || !s.waiters.empty();
      if (idle && !busy && s.units > 0) {
        GiveBack(s, SubjectOf(it->first), s.units);
      }
      if (idle && !busy && s.units == 0 && (!s.exhausted || now_ms >= s.recheck_ms)) {
        table->slices.erase(it++);
      } else {
        any = true;
        ++it;
      }
    }
  }
  return any;
}

store::SliceHolding SlicedStore::HeldFor(uint32_t id, std::string_view subject) const {
  const std::string key = SliceKey(id, subject);
  store::SliceHolding held;
  std::lock_guard<std::mutex> registry(tables_mu_);
  const int64_t now = NowMs();
  for (const std::unique_ptr<Table>& table : tables_) {
    std::lock_guard<std::mutex> lock(table->mu);
    auto it = table->slices.find(key);
    if (it == table->slices.end()) continue;
    const Slice& s = it->second;
    if (s.deadline_ms != 0 && now >= s.deadline_ms) continue;  // its window ended
    held.held += s.units;
    held.taken += s.taken;
  }
  return held;
}

SlicedStore::Counters SlicedStore::GetCounters() const {
  Counters c;
  c.slices_taken = slices_taken_.load(std::memory_order_relaxed);
  c.units_taken = units_taken_.load(std::memory_order_relaxed);
  c.units_returned = units_returned_.load(std::memory_order_relaxed);
  c.units_stranded = units_stranded_.load(std::memory_order_relaxed);
  c.local_decisions = local_decisions_.load(std::memory_order_relaxed);
  c.take_calls = take_calls_.load(std::memory_order_relaxed);
  c.take_failures = take_failures_.load(std::memory_order_relaxed);
  std::lock_guard<std::mutex> registry(tables_mu_);
  const int64_t now = NowMs();
  for (const std::unique_ptr<Table>& table : tables_) {
    std::lock_guard<std::mutex> lock(table->mu);
    for (const auto& [key, s] : table->slices) {
      if (s.deadline_ms == 0 || now < s.deadline_ms) c.units_held += s.units;
    }
  }
  return c;
}

std::vector<store::Metric> SlicedStore::Metrics() const {
  std::vector<store::Metric> metrics = shared_->Metrics();
  const Counters c = GetCounters();
  // One table, as the stores' own (RemoteStore::Metrics).
  const store::Metric slices[] = {
      {"floodgate_slices_taken_total", "counter",
       "Quota slices this server took from the shared store (takes that granted units).",
       c.slices_taken},
      {"floodgate_slice_units_taken_total", "counter",
       "Units the slices this server took were granted.", c.units_taken},
      {"floodgate_slice_units_returned_total", "counter",
       "Units this server gave back from its slices (idle_return, shutdown).", c.units_returned},
      {"floodgate_slice_units_stranded_total", "counter",
       "Units still held in a slice when their window ended, or that could not be given back: "
       "counted by the shared store, never spent.",
       c.units_stranded},
      {"floodgate_slice_units_held", "gauge", "Units this server holds in slices now, unspent.",
       c.units_held},
      {"floodgate_slice_local_decisions_total", "counter",
       "Decisions of rules with slices answered from a slice, without a store call.",
       c.local_decisions},
      {"floodgate_slice_take_calls_total", "counter", "Calls to the shared store to take slices.",
       c.take_calls},
      {"floodgate_slice_take_failures_total", "counter",
       "Takes that failed (the decisions waiting for them got on_backend_error).", c.take_failures},
  };
  metrics.insert(metrics.end(), std::begin(slices), std::end(slices));
  return metrics;
}

}  // namespace floodgate::service
