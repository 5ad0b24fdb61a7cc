// The Limiter's waiting forms: a request that would be denied but could
// succeed within its wait is held in the WaitRoom (service/wait_room.h)
// and decided again when it could, rather than denied. See
// LimiterCore::CheckWaiting in limiter_core.h.
//
// A request first goes as any other (in the caller's batch), unless
// others already wait for the same subject: then it queues behind them
// without trying, so that the subject's waiters are served in arrival
// order. A denial that names a retry time within the wait is held; the
// room tries it again at that time, with no batch (sent at once).
#include <algorithm>
#include <memory>
#include <string>
#include <utility>

#include "service/limiter_core.h"

namespace floodgate::service {
namespace {

// A held request re-tries a lease this often at least: a lease released
// through another server sharing the store frees room no timer here knows.
// The room holds it to its deadline, with a last try there.
constexpr int64_t kLeasePollMs = 100;

// A check held in the room: owns its arguments.
class CheckWaiter final : public HeldRequest {
 public:
  CheckWaiter(LimiterCore& limiter, const LimiterCore::CheckArgs& args,
              LimiterCore::CheckCallback done)
      : limiter_(limiter),
        rule_(args.rule),
        key_(args.key),
        tier_(args.tier),
        cost_(args.cost),
        done_(std::move(done)) {}

  void Denied(const Decision& d) {
    last_ = d;
    last_at_ms_ = limiter_.NowMs();
    tried_ = true;
  }

  void Try(AttemptDone attempt) override {
    LimiterCore::CheckArgs args{rule_, key_, cost_, tier_};
    limiter_.CheckAsync(args, [this, attempt = std::make_shared<AttemptDone>(std::move(attempt))](
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
      limiter_.CheckAsync({rule_, key_, cost_, tier_}, std::move(done_));
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
  LimiterCore& limiter_;
  const std::string rule_;
  const std::string key_;
  const std::string tier_;
  const int64_t cost_;
  LimiterCore::CheckCallback done_;
  Decision last_;
  int64_t last_at_ms_ = 0;
  bool tried_ = false;
};

// An acquire held in the room.
class AcquireWaiter final : public HeldRequest {
 public:
  AcquireWaiter(LimiterCore& limiter, const LimiterCore::LeaseArgs& args,
                store::Done<LimiterCore::LeaseAnswer> done)
      : limiter_(limiter),
        rule_(args.rule),
        key_(args.key),
        tier_(args.tier),
        ttl_ms_(args.ttl_ms),
        done_(std::move(done)) {}

  void Denied(const LimiterCore::LeaseAnswer& a) {
    last_ = a;
    last_at_ms_ = limiter_.NowMs();
    tried_ = true;
  }

  void Try(AttemptDone attempt) override {
    LimiterCore::LeaseArgs args{rule_, key_, tier_, {}, ttl_ms_};
    limiter_.Acquire(args, [this, attempt = std::move(attempt)](
                               const Status& s, const LimiterCore::LeaseAnswer& a) mutable {
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
      limiter_.Acquire({rule_, key_, tier_, {}, ttl_ms_}, std::move(done_));
      return;
    }
    LimiterCore::LeaseAnswer a = last_;
    const int64_t passed = std::max<int64_t>(0, now_ms - last_at_ms_);
    if (a.ms > 0) a.ms = std::max<int64_t>(1, a.ms - passed);
    done_(Status::Ok(), a);
  }

  // What a refusal says of the wait: room comes at the expiry that frees
  // it, or sooner, unannounced (a release elsewhere: polled for); a block
  // ends when it says, and a limit of 0 never.
  static HeldRequest::Attempt AttemptOf(const LimiterCore::LeaseAnswer& a) {
    return {false, a.ms, a.ms < 0 || a.blocked ? 0 : kLeasePollMs};
  }

 private:
  LimiterCore& limiter_;
  const std::string rule_;
  const std::string key_;
  const std::string tier_;
  const int64_t ttl_ms_;
  store::Done<LimiterCore::LeaseAnswer> done_;
  LimiterCore::LeaseAnswer last_;
  int64_t last_at_ms_ = 0;
  bool tried_ = false;
};

}  // namespace

void LimiterCore::CheckWaiting(const CheckArgs& args, const WaitArgs& wait, CheckCallback done,
                               store::Batch* batch) {
  const int64_t max_waiters = wait.wait_ms > 0 ? MaxWaiters(args.rule) : -1;
  if (max_waiters < 0) return CheckAsync(args, std::move(done), batch);  // errors as usual
  const int64_t deadline = NowMs() + wait.wait_ms;
  std::string subject = CheckWaitSubject(args.rule, args.tier, args.key);
  if (room().Busy(subject)) {
    // Behind those already waiting: tried when they are answered.
    if (room().Hold(args.rule, max_waiters, subject, wait.owner, deadline, 0,
                    std::make_unique<CheckWaiter>(*this, args, done))) {
      return;
    }
    return CheckAsync(args, std::move(done), batch);  // the room is full: decided now
  }
  // The first try as any decision; a denial that could turn within the
  // wait is held. The arguments are copied: the answer may come later.
  CheckAsync(
      args,
      [this, rule = std::string(args.rule), key = std::string(args.key),
       tier = std::string(args.tier), cost = args.cost, subject = std::move(subject), max_waiters,
       deadline, owner = wait.owner, done](const Status& s, const Decision& d) mutable {
        const int64_t left = deadline - NowMs();
        if (!s.ok() || d.allowed || d.fallback != Fallback::kNone || d.retry_after_ms < 0 ||
            d.retry_after_ms > left) {
          return done(s, d);
        }
        auto waiter = std::make_unique<CheckWaiter>(*this, CheckArgs{rule, key, cost, tier}, done);
        waiter->Denied(d);
        if (!room().Hold(rule, max_waiters, std::move(subject), owner, deadline, d.retry_after_ms,
                         std::move(waiter))) {
          done(s, d);
        }
      },
      batch);
}

void LimiterCore::AcquireWaiting(const LeaseArgs& args, const WaitArgs& wait,
                                 store::Done<LeaseAnswer> done) {
  const int64_t max_waiters = wait.wait_ms > 0 ? MaxWaiters(args.rule) : -1;
  if (max_waiters < 0) return Acquire(args, std::move(done));
  const int64_t deadline = NowMs() + wait.wait_ms;
  std::string subject = LeaseWaitSubject(args.rule, args.key);
  // The callback is shared: the first try's, then (when held) the room's.
  auto shared = std::make_shared<store::Done<LeaseAnswer>>(std::move(done));
  auto forward = [shared](const Status& s, const LeaseAnswer& a) { (*shared)(s, a); };
  if (room().Busy(subject)) {
    auto waiter = std::make_unique<AcquireWaiter>(*this, args, forward);
    if (room().Hold(args.rule, max_waiters, subject, wait.owner, deadline, 0, std::move(waiter))) {
      return;
    }
    return Acquire(args, forward);
  }
  Acquire(args, [this, args_rule = std::string(args.rule), key = std::string(args.key),
                 tier = std::string(args.tier), ttl = args.ttl_ms, subject = std::move(subject),
                 max_waiters, deadline, owner = wait.owner,
                 forward](const Status& s, const LeaseAnswer& a) mutable {
    // A lease may be released any moment: worth waiting for unless the
    // limit is 0, or a block outlasts the wait.
    const HeldRequest::Attempt attempt = AcquireWaiter::AttemptOf(a);
    if (!s.ok() || a.ok || a.fallback != Fallback::kNone ||
        !attempt.MayTurnWithin(deadline - NowMs())) {
      return forward(s, a);
    }
    LeaseArgs again{args_rule, key, tier, {}, ttl};
    auto waiter = std::make_unique<AcquireWaiter>(*this, again, forward);
    waiter->Denied(a);
    if (!room().Hold(args_rule, max_waiters, std::move(subject), owner, deadline,
                     attempt.NextTryInMs(), std::move(waiter))) {
      forward(s, a);
    }
  });
}

}  // namespace floodgate::service
