// FakeStore: a store::Store (store/store.h) with neither the engine nor
// Redis behind it, for tests that prove a layer works on the store
// interfaces alone; opened as store::Rooms (RoomsOf) as the real stores
// are. Decisions run the real algorithms (core::EvaluateRule) on states
// kept in a map under one mutex, so their figures are exact.
//
// A subject that holds "later:" is answered later, from the fake's
// own thread (as a remote store's I/O thread answers): the fronts' path for
// an answer that comes after the request's round (decisions, leases and
// reservations). Every other operation answers now. Leases run
// core/concurrency.h on a table of their own per (rule, subject);
// reservations are records as the real ledgers keep them
// (store/reservations.h; the golden reservation vectors pass). Expiring
// sets and OTP are not kept: they answer UNAVAILABLE; so do control
// records, unless a test gives a control store of its own
// (GiveControlStore). No alert log, no sketch board, no snapshots.
#pragma once

#include <algorithm>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "core/concurrency.h"
#include "core/rule_eval.h"
#include "floodgate/clock.h"
#include "store/rooms.h"

namespace floodgate::testing {

class FakeStore final : public store::Store,
                        public store::Backend,
                        public store::LeaseStore,
                        public store::SetStore,
                        public store::OtpStore,
                        public store::ReservationLedger {
 public:
  explicit FakeStore(const Clock& clock) : clock_(clock), worker_([this] { AnswerLater(); }) {}

  // The fake with its rooms, which own it (keep a pointer to reach it).
  static store::Rooms RoomsOf(std::unique_ptr<FakeStore> fake) {
    store::Rooms rooms;
    rooms.backend = fake.get();
    rooms.leases = fake.get();
    rooms.sets = fake.get();
    rooms.otp = fake.get();
    rooms.reservations = fake.get();
    FakeStore* raw = fake.get();
    rooms.control = [raw](const store::ControlStoreOptions&) { return raw->OpenControlStore(); };
    rooms.store = std::move(fake);
    return rooms;
  }
  ~FakeStore() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
    }
    wake_.notify_all();
    worker_.join();
    for (auto& [subject, kept] : states_) core::ReleaseRuleState(kept.algorithm, kept.words.data());
  }

  // Decisions made, and how many of them were answered later.
  int64_t checks() const {
    std::lock_guard<std::mutex> lock(mu_);
    return checks_;
  }
  int64_t later_checks() const {
    std::lock_guard<std::mutex> lock(mu_);
    return later_checks_;
  }

  Result<std::string> Describe(const core::CompiledRule& rule, uint32_t id) override {
    return "fake:" + std::to_string(id);
  }

  store::Answer Check(const store::CheckOp& op, Decision* decision, Status* status,
                      store::CheckLater later, store::Batch*) override {
    const int64_t now_ms = op.at_ms != nullptr ? *op.at_ms : clock_.NowMs();
    std::unique_lock<std::mutex> lock(mu_);
    ++checks_;
    Decision made;
    Kept& kept = states_[{op.variant.id, std::string(op.subject)}];
    kept.algorithm = op.variant.rule->algorithm;
    kept.words.resize(static_cast<size_t>(op.variant.rule->state_words));
    core::EvaluateRule(*op.variant.rule, kept.words.data(), now_ms, op.cost, &made);
    if (op.subject.find("later:") == std::string_view::npos) {
      *decision = made;
      *status = Status::Ok();
      return store::Answer::kNow;
    }
    ++later_checks_;
    queue_.push_back([done = later(), made]() mutable { done(Status::Ok(), made, nullptr); });
    lock.unlock();
    wake_.notify_one();
    return store::Answer::kLater;
  }
  size_t Prefetch(uint32_t, std::string_view) override { return 0; }
  std::unique_ptr<store::Batch> NewBatch(int) override {
    return std::make_unique<store::ImmediateBatch>();
  }

  store::Answer Throttle(const store::ThrottleOp&, ThrottleResult*, Status* status,
                         store::Later<ThrottleResult>) override {
    return Unavailable(status);
  }
  store::Answer Reset(const store::ResetOp& op, Status* status, store::Later<>) override {
    std::lock_guard<std::mutex> lock(mu_);
    for (const uint32_t id : op.ids) {
      const auto it = states_.find({id, std::string(op.subject)});
      if (it == states_.end()) continue;
      core::ReleaseRuleState(it->second.algorithm, it->second.words.data());
      states_.erase(it);
    }
    *status = Status::Ok();
    return store::Answer::kNow;
  }

  // Answers now, even for "later:" subjects.
  store::Answer Refund(const store::RefundOp& op, core::RefundResult* result, Status* status,
                       store::Later<core::RefundResult>) override {
    const int64_t now_ms = op.at_ms != nullptr ? *op.at_ms : clock_.NowMs();
    std::lock_guard<std::mutex> lock(mu_);
    ++refunds_;
    const auto it = states_.find({op.variant.id, std::string(op.subject)});
    if (it == states_.end()) {
      // Nothing to give back, and nothing is kept: a peek of an empty state.
      std::vector<int64_t> empty(static_cast<size_t>(op.variant.rule->state_words), 0);
      core::EvaluateRule(*op.variant.rule, empty.data(), now_ms, 0, &result->after);
      result->refunded.fill(0);
    } else {
      core::RefundRuleAndPeek(*op.variant.rule, it->second.words.data(), now_ms, op.cost, result);
    }
    *status = Status::Ok();
    return store::Answer::kNow;
  }
  int64_t refunds() const {
    std::lock_guard<std::mutex> lock(mu_);
    return refunds_;
  }

  store::Answer Lease(const store::LeaseOp& op, store::LeaseResult* result, Status* status,
                      store::Later<store::LeaseResult> later) override {
    const int64_t now_ms = op.at_ms != nullptr ? *op.at_ms : clock_.NowMs();
    std::unique_lock<std::mutex> lock(mu_);
    ++leases_made_;
    const std::pair<std::string, std::string> name(op.rule, op.subject);
    auto it = leases_.find(name);
    LeaseTable empty;
    LeaseTable& table = it != leases_.end() ? it->second : empty;
    core::LeaseOutcome out;
    switch (op.kind) {
      case store::LeaseOpKind::kAcquire:
        out = core::AcquireLease(table, op.lease, now_ms, op.ttl_ms, op.max_in_flight);
        break;
      case store::LeaseOpKind::kRelease:
        out = core::ReleaseLease(table, op.lease, now_ms);
        break;
      case store::LeaseOpKind::kRenew:
        out = core::RenewLease(table, op.lease, now_ms, op.ttl_ms);
        break;
    }
    // Kept while it holds a lease, like the real stores' tables.
    if (it == leases_.end() && table.size() > 0) {
      leases_.emplace(name, std::move(table));
    } else if (it != leases_.end() && table.size() == 0) {
      leases_.erase(it);
    }
    store::LeaseResult made{out.ok, out.in_flight, out.ms, now_ms};
    return AnswerMade(op.subject, made, result, status, later, lock);
  }
  int64_t leases_made() const {
    std::lock_guard<std::mutex> lock(mu_);
    return leases_made_;
  }

  // The reservations, with the real ledgers' answers but no checks of
  // their arguments (the service makes them) and no memory bound.
  store::Answer Hold(const store::HoldOp& op, Status* status, store::Later<> later) override {
    const int64_t now_ms = op.at_ms != nullptr ? *op.at_ms : clock_.NowMs();
    std::unique_lock<std::mutex> lock(mu_);
    ++reservation_calls_;
    Reservation& r =
        reservations_[{std::string(op.rule), std::string(op.subject), std::string(op.id)}];
    Status made;
    if (r.expires_at_ms > now_ms) {
      made = AlreadyExistsError("a reservation of this id is held already");
    } else {
      r = Reservation{now_ms + op.ttl_ms, false, op.estimate, std::string(op.tier)};
    }
    if (op.subject.find("later:") == std::string_view::npos) {
      *status = made;
      return store::Answer::kNow;
    }
    queue_.push_back([done = later(), made]() mutable { done(made); });
    lock.unlock();
    wake_.notify_one();
    return store::Answer::kLater;
  }
  store::Answer Take(const store::TakeOp& op, store::TakeResult* result, Status* status,
                     store::Later<store::TakeResult> later) override {
    const int64_t now_ms = op.at_ms != nullptr ? *op.at_ms : clock_.NowMs();
    std::unique_lock<std::mutex> lock(mu_);
    ++reservation_calls_;
    store::TakeResult made;
    const auto it = reservations_.find(
        std::make_tuple(std::string(op.rule), std::string(op.subject), std::string(op.id)));
    if (it != reservations_.end() && it->second.expires_at_ms <= now_ms) {
      reservations_.erase(it);  // past its TTL: gone
    } else if (it != reservations_.end() && it->second.settled) {
      made.outcome = store::TakeOutcome::kSettled;
    } else if (it != reservations_.end()) {
      made = store::TakeResult{store::TakeOutcome::kTaken, it->second.estimate, it->second.tier};
      it->second = Reservation{it->second.expires_at_ms, true, 0, ""};  // the marker
    }
    return AnswerMade(op.subject, made, result, status, later, lock);
  }
  int64_t reservation_calls() const {
    std::lock_guard<std::mutex> lock(mu_);
    return reservation_calls_;
  }

  store::Answer Run(const SetRequest&, int64_t, SetReply*, Status* status,
                    store::Later<SetReply>) override {
    return Unavailable(status);
  }
  store::Answer Issue(std::string_view, std::string_view, std::string_view, const OtpPolicy&,
                      OtpIssueOutcome*, Status* status, store::Later<OtpIssueOutcome>) override {
    return Unavailable(status);
  }
  store::Answer Attempt(std::string_view, std::string_view, const OtpPolicy&, OtpAttemptOutcome*,
                        Status* status, store::Later<OtpAttemptOutcome>) override {
    return Unavailable(status);
  }
  store::Answer Consume(std::string_view, std::string_view, bool*, Status* status,
                        store::Later<bool>) override {
    return Unavailable(status);
  }

  Status BlockingAllowed() const override {
    return std::this_thread::get_id() == worker_.get_id()
               ? Status(StatusCode::kInternal, "the fake store's thread cannot wait for itself")
               : Status::Ok();
  }
  Result<std::unique_ptr<LoopDriver>> NewLoopDriver() override {
    return std::unique_ptr<LoopDriver>();
  }
  Status Health() const override { return Status::Ok(); }
  std::vector<store::NodeHealth> ProbeNodes() override { return {}; }
  int64_t SweepExpired(int64_t) override { return 0; }
  Usage GetUsage() const override {
    std::lock_guard<std::mutex> lock(mu_);
    Usage usage;
    usage.kind = "fake";
    usage.entries = static_cast<int64_t>(states_.size());
    return usage;
  }
  std::vector<store::Metric> Metrics() const override {
    return {{"floodgate_fake_store_checks_total", "counter", "Decisions the fake store made.",
             checks()}};
  }
  // The control store the next open (Rooms::control) hands out (a test's
  // own, to drive the control plane); without one it answers UNAVAILABLE.
  void GiveControlStore(std::unique_ptr<store::ControlStore> control) {
    std::lock_guard<std::mutex> lock(mu_);
    control_ = std::move(control);
  }

 private:
  Result<std::unique_ptr<store::ControlStore>> OpenControlStore() {
    std::lock_guard<std::mutex> lock(mu_);
    if (control_ != nullptr) return std::move(control_);
    return UnavailableError("the fake store keeps no control records");
  }

  // `made` for a subject: now, or from the fake's thread for a "later:"
  // one (then `lock`, which guards the queue, is released here).
  template <typename T>
  store::Answer AnswerMade(std::string_view subject, const T& made, T* result, Status* status,
                           store::Later<T> later, std::unique_lock<std::mutex>& lock) {
    if (subject.find("later:") == std::string_view::npos) {
      *result = made;
      *status = Status::Ok();
      return store::Answer::kNow;
    }
    queue_.push_back([done = later(), made]() mutable { done(Status::Ok(), made); });
    lock.unlock();
    wake_.notify_one();
    return store::Answer::kLater;
  }

  static store::Answer Unavailable(Status* status) {
    *status = Status(StatusCode::kUnavailable, "the fake store keeps decisions only");
    return store::Answer::kNow;
  }

  // The fake's thread: gives the answers that come later, in order.
  void AnswerLater() {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      wake_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, and every answer given
      auto answer = std::move(queue_.front());
      queue_.pop_front();
      lock.unlock();
      answer();
      lock.lock();
    }
  }

  // The leases of one (rule, subject): id -> expiry, the table
  // core/concurrency.h runs on.
  struct LeaseTable {
    std::map<std::string, int64_t, std::less<>> expiry;
    size_t Prune(int64_t now_ms) {
      return std::erase_if(expiry, [&](const auto& e) { return e.second <= now_ms; });
    }
    bool Upsert(std::string_view id, int64_t expires_at_ms) {
      auto [it, added] = expiry.try_emplace(std::string(id), expires_at_ms);
      it->second = expires_at_ms;
      return added;
    }
    bool Erase(std::string_view id) {
      const auto it = expiry.find(id);
      if (it == expiry.end()) return false;
      expiry.erase(it);
      return true;
    }
    int64_t ExpiryOf(std::string_view id) const {
      const auto it = expiry.find(id);
      return it == expiry.end() ? 0 : it->second;
    }
    int64_t NthExpiry(size_t index) const {
      std::vector<int64_t> sorted;
      for (const auto& e : expiry) sorted.push_back(e.second);
      std::sort(sorted.begin(), sorted.end());
      return index < sorted.size() ? sorted[index] : 0;
    }
    size_t size() const { return expiry.size(); }
    int64_t LastExpiry() const { return size() == 0 ? 0 : NthExpiry(size() - 1); }
  };

  // A reservation of (rule, subject, id): held, or settled (a marker, which
  // holds nothing else).
  struct Reservation {
    int64_t expires_at_ms = 0;
    bool settled = false;
    int64_t estimate = 0;
    std::string tier;
  };

  // A subject's state under one variant (the algorithm: to release it).
  struct Kept {
    Algorithm algorithm = Algorithm::kFixedWindow;
    std::vector<int64_t> words;
  };

  const Clock& clock_;
  mutable std::mutex mu_;
  std::condition_variable wake_;
  std::map<std::pair<uint32_t, std::string>, Kept> states_;
  std::map<std::pair<std::string, std::string>, LeaseTable> leases_;
  // Kept until taken past their expiry (a fake's tests are short).
  std::map<std::tuple<std::string, std::string, std::string>, Reservation> reservations_;
  std::deque<absl::AnyInvocable<void()>> queue_;
  int64_t checks_ = 0;
  int64_t later_checks_ = 0;
  int64_t refunds_ = 0;
  int64_t leases_made_ = 0;
  int64_t reservation_calls_ = 0;
  std::unique_ptr<store::ControlStore> control_;  // GiveControlStore's, until handed out
  bool stopping_ = false;
  std::thread worker_;  // last: started once the rest is ready
};

}  // namespace floodgate::testing
