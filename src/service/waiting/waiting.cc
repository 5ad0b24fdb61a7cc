// Waiting: see waiting.h.
#include <algorithm>
#include <memory>
#include <string>
#include <utility>

#include "service/waiting/waiting.h"

namespace floodgate::service {
namespace {

// A held request re-tries a lease this often at least: a lease released
// through another server sharing the store frees room no timer here knows.
// The room holds it to its deadline, with a last try there.
constexpr int64_t kLeasePollMs = 100;

// A check held in the room: owns its arguments.
class CheckWaiter final : public HeldRequest {
 public:
  CheckWaiter(const Clock& clock, LimiterCore& limiter, const LimiterCore::CheckArgs& args,
              LimiterCore::CheckCallback done)
      : clock_(clock),
        limiter_(limiter),
        rule_(args.rule),
        key_(args.key),
        tier_(args.tier),
        priority_(args.priority),
        cost_(args.cost),
        done_(std::move(done)) {}

  void Denied(const Decision& d) {
    last_ = d;
    last_at_ms_ = clock_.NowMs();
    tried_ = true;
  }

  void Try(AttemptDone attempt) override {
    limiter_.CheckAsync(Args(), [this, attempt = std::make_shared<AttemptDone>(std::move(attempt))](
                                    const Status& s, const Decision& d) mutable {
      if (!s.ok() || d.allowed || d.fallback != Fallback::kNone) {
        done_(s, d);
        (*attempt)({true, 0});
        return;
      }
      Denied(d);
      (*attempt)({false, d.retry_after_ms});
    });
  }

  void GiveUp(int64_t now_ms) override {
    if (!tried_) {
      // It waited behind others and never had its turn: a decision now.
      limiter_.CheckAsync(Args(), std::move(done_));
      return;
    }
    Decision d = last_;
    // The last denial's times, as of now.
    const int64_t passed = std::max<int64_t>(0, now_ms - last_at_ms_);
    if (d.retry_after_ms > 0) d.retry_after_ms = std::max<int64_t>(1, d.retry_after_ms - passed);
    if (d.reset_after_ms > 0) d.reset_after_ms = std::max<int64_t>(0, d.reset_after_ms - passed);
    done_(Status::Ok(), d);
  }

 private:
  LimiterCore::CheckArgs Args() const {
    LimiterCore::CheckArgs args{rule_, key_, cost_, tier_};
    args.priority = priority_;
    return args;
  }

  const Clock& clock_;
  LimiterCore& limiter_;
  const std::string rule_;
  const std::string key_;
  const std::string tier_;
  const std::string priority_;
  const int64_t cost_;
  LimiterCore::CheckCallback done_;
  Decision last_;
  int64_t last_at_ms_ = 0;
  bool tried_ = false;
};

// An acquire held in the room.
class AcquireWaiter final : public HeldRequest {
 public:
  AcquireWaiter(const Clock& clock, Leases& leases, const Leases::LeaseArgs& args,
                store::Done<Leases::LeaseAnswer> done)
      : clock_(clock),
        leases_(leases),
        rule_(args.rule),
        key_(args.key),
        tier_(args.tier),
        ttl_ms_(args.ttl_ms),
        done_(std::move(done)) {}

  void Denied(const Leases::LeaseAnswer& a) {
    last_ = a;
    last_at_ms_ = clock_.NowMs();
    tried_ = true;
  }

  void Try(AttemptDone attempt) override {
    Leases::LeaseArgs args{rule_, key_, tier_, {}, ttl_ms_};
    leases_.Acquire(args, [this, attempt = std::move(attempt)](
                              const Status& s, const Leases::LeaseAnswer& a) mutable {
      if (!s.ok() || a.ok || a.fallback != Fallback::kNone) {
        done_(s, a);
        attempt({true, 0});
        return;
      }
      Denied(a);
      attempt(AttemptOf(a));
    });
  }

  void GiveUp(int64_t now_ms) override {
    if (!tried_) {
      leases_.Acquire({rule_, key_, tier_, {}, ttl_ms_}, std::move(done_));
      return;
    }
    Leases::LeaseAnswer a = last_;
    const int64_t passed = std::max<int64_t>(0, now_ms - last_at_ms_);
    if (a.ms > 0) a.ms = std::max<int64_t>(1, a.ms - passed);
    done_(Status::Ok(), a);
  }

  // What a refusal says of the wait: room comes at the expiry that frees
  // it, or sooner, unannounced (a release elsewhere: polled for); a block
  // ends when it says, and a limit of 0 never.
  static HeldRequest::Attempt AttemptOf(const Leases::LeaseAnswer& a) {
    return {false, a.ms, a.ms < 0 || a.blocked ? 0 : kLeasePollMs};
  }

 private:
  const Clock& clock_;
  Leases& leases_;
  const std::string rule_;
  const std::string key_;
  const std::string tier_;
  const int64_t ttl_ms_;
  store::Done<Leases::LeaseAnswer> done_;
  Leases::LeaseAnswer last_;
  int64_t last_at_ms_ = 0;
  bool tried_ = false;
};

}  // namespace

Waiting::Waiting(const Clock& clock, LimiterCore& core, Leases& leases)
    : clock_(clock), core_(core), leases_(leases), room_(std::make_shared<WaitRoom>(clock)) {
  room_->SetTick(100, [&leases](int64_t now_ms) { leases.Sweep(now_ms); });
  // A release may be answered on a store I/O thread after this is gone (a
  // server stopping): the room is woken only while it lives.
  leases.SetOnRelease(
      [room = std::weak_ptr<WaitRoom>(room_)](std::string_view rule, std::string_view key) {
        if (auto live = room.lock()) live->Wake(LeaseWaitSubject(rule, key));
      });
}

// Answers what it holds; its attempts use the core and the leases.
Waiting::~Waiting() = default;

int64_t Waiting::MaxWaiters(std::string_view rule) const {
  const RuleEntry* entry = core_.rules().Find(rule);
  return entry == nullptr ? -1 : entry->max_waiters;
}

void Waiting::Check(const LimiterCore::CheckArgs& args, const WaitArgs& wait,
                    LimiterCore::CheckCallback done, store::Batch* batch) {
  const int64_t max_waiters = wait.wait_ms > 0 ? MaxWaiters(args.rule) : -1;
  if (max_waiters < 0) return core_.CheckAsync(args, std::move(done), batch);  // errors as usual
  const int64_t deadline = clock_.NowMs() + wait.wait_ms;
  std::string subject = CheckWaitSubject(args.rule, args.tier, args.key);
  if (room_->Busy(subject)) {
    // Behind those already waiting: tried when they are answered.
    if (room_->Hold(args.rule, max_waiters, subject, wait.owner, deadline, 0,
                    std::make_unique<CheckWaiter>(clock_, core_, args, done))) {
      return;
    }
    return core_.CheckAsync(args, std::move(done), batch);  // the room is full: decided now
  }
  // The first try as any decision; a denial that could turn within the
  // wait is held. The arguments are copied: the answer may come later.
  core_.CheckAsync(
      args,
      [this, rule = std::string(args.rule), key = std::string(args.key),
       tier = std::string(args.tier), priority = std::string(args.priority), cost = args.cost,
       subject = std::move(subject), max_waiters, deadline, owner = wait.owner,
       done](const Status& s, const Decision& d) mutable {
        const int64_t left = deadline - clock_.NowMs();
        if (!s.ok() || d.allowed || d.fallback != Fallback::kNone || d.retry_after_ms < 0 ||
            d.retry_after_ms > left) {
          return done(s, d);
        }
        LimiterCore::CheckArgs again{rule, key, cost, tier};
        again.priority = priority;
        auto waiter = std::make_unique<CheckWaiter>(clock_, core_, again, done);
        waiter->Denied(d);
        if (!room_->Hold(rule, max_waiters, std::move(subject), owner, deadline, d.retry_after_ms,
                         std::move(waiter))) {
          done(s, d);
        }
      },
      batch);
}

void Waiting::Acquire(const Leases::LeaseArgs& args, const WaitArgs& wait,
                      store::Done<Leases::LeaseAnswer> done) {
  const int64_t max_waiters = wait.wait_ms > 0 ? MaxWaiters(args.rule) : -1;
  if (max_waiters < 0) return leases_.Acquire(args, std::move(done));
  const int64_t deadline = clock_.NowMs() + wait.wait_ms;
  std::string subject = LeaseWaitSubject(args.rule, args.key);
  // The callback is shared: the first try's, then (when held) the room's.
  auto shared = std::make_shared<store::Done<Leases::LeaseAnswer>>(std::move(done));
  auto forward = [shared](const Status& s, const Leases::LeaseAnswer& a) { (*shared)(s, a); };
  if (room_->Busy(subject)) {
    auto waiter = std::make_unique<AcquireWaiter>(clock_, leases_, args, forward);
    if (room_->Hold(args.rule, max_waiters, subject, wait.owner, deadline, 0, std::move(waiter))) {
      return;
    }
    return leases_.Acquire(args, forward);
  }
  leases_.Acquire(args, [this, args_rule = std::string(args.rule), key = std::string(args.key),
                         tier = std::string(args.tier), ttl = args.ttl_ms,
                         subject = std::move(subject), max_waiters, deadline, owner = wait.owner,
                         forward](const Status& s, const Leases::LeaseAnswer& a) mutable {
    // A lease may be released any moment: worth waiting for unless the
    // limit is 0, or a block outlasts the wait.
    const HeldRequest::Attempt attempt = AcquireWaiter::AttemptOf(a);
    if (!s.ok() || a.ok || a.fallback != Fallback::kNone ||
        !attempt.MayTurnWithin(deadline - clock_.NowMs())) {
      return forward(s, a);
    }
    Leases::LeaseArgs again{args_rule, key, tier, {}, ttl};
    auto waiter = std::make_unique<AcquireWaiter>(clock_, leases_, again, forward);
    waiter->Denied(a);
    if (!room_->Hold(args_rule, max_waiters, std::move(subject), owner, deadline,
                     attempt.NextTryInMs(), std::move(waiter))) {
      forward(s, a);
    }
  });
}

}  // namespace floodgate::service
