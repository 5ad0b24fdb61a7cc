// WaitRoom: see wait_room.h. One mutex guards every queue; attempts and
// answers run outside it, since an attempt answered at once (the embedded
// store) comes straight back into the room.
#include "service/waiting/wait_room.h"

#include <algorithm>
#include <chrono>
#include <utility>

namespace floodgate::service {

struct WaitRoom::Held {
  std::string rule;
  std::string subject;
  uint64_t owner = 0;
  int64_t deadline_ms = 0;
  std::unique_ptr<HeldRequest> waiter;
  bool cancelled = false;
};

struct WaitRoom::Queue {
  // Arrival order; the front is the one tried.
  std::deque<std::unique_ptr<Held>> held;
  bool trying = false;  // an attempt of the front is in flight
  // Woken while an attempt was in flight: room may have come after the
  // attempt looked, so a denial is tried again at once.
  bool woken = false;
  int64_t next_try_ms = 0;  // when the front is to be tried
};

namespace {

absl::string_view View(std::string_view s) { return absl::string_view(s.data(), s.size()); }

}  // namespace

int64_t HeldRequest::Attempt::NextTryInMs() const {
  if (poll_ms > 0 && (retry_ms < 0 || poll_ms < retry_ms)) return poll_ms;
  return std::max<int64_t>(0, retry_ms);
}

bool HeldRequest::Attempt::MayTurnWithin(int64_t left_ms) const {
  return poll_ms > 0 || (retry_ms >= 0 && retry_ms <= left_ms);
}

WaitRoom::WaitRoom(const Clock& clock) : clock_(clock) {
  thread_ = std::thread([this] { Run(); });
}

WaitRoom::~WaitRoom() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
  // Attempts still in flight come back into the room: wait for them (a
  // store answers within its timeout).
  std::vector<std::unique_ptr<Held>> left;
  {
    std::unique_lock<std::mutex> lock(mu_);
    wake_.wait(lock, [&] {
      for (const auto& [subject, q] : queues_) {
        if (q->trying) return false;
      }
      return true;
    });
    for (auto& [subject, q] : queues_) {
      for (auto& h : q->held) {
        if (!h->cancelled) left.push_back(std::move(h));
      }
    }
    queues_.clear();
  }
  const int64_t now = clock_.NowMs();
  for (auto& h : left) h->waiter->GiveUp(now);
}

bool WaitRoom::Hold(std::string_view rule, int64_t max_waiters, std::string subject, uint64_t owner,
                    int64_t deadline_ms, int64_t retry_ms, std::unique_ptr<HeldRequest> waiter) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    RuleStats& stats = stats_[View(rule)];
    if (stopping_ || stats.waiting >= max_waiters) {
      ++stats.full;
      return false;
    }
    ++stats.waiting;
    ++stats.held;
    waiting_.fetch_add(1, std::memory_order_relaxed);
    std::unique_ptr<Queue>& q = queues_[subject];
    if (q == nullptr) q = std::make_unique<Queue>();
    auto h = std::make_unique<Held>();
    h->rule.assign(rule);
    h->subject = subject;
    h->owner = owner;
    deadline_ms = std::min(deadline_ms, end_by_ms_);
    h->deadline_ms = deadline_ms;
    h->waiter = std::move(waiter);
    const int64_t now = clock_.NowMs();
    // A first try due after the deadline is made at it: a wait that polls
    // (a lease's) is held that long, and ends with a last look.
    if (q->held.empty()) {
      q->next_try_ms = std::min(now + std::max<int64_t>(0, retry_ms), deadline_ms);
    }
    q->held.push_back(std::move(h));
    if (owner != 0) owners_[owner].push_back(subject);
    Arm(subject, q->held.size() == 1 ? std::min(q->next_try_ms, deadline_ms) : deadline_ms);
  }
  wake_.notify_all();
  return true;
}

bool WaitRoom::Busy(std::string_view subject) const {
  if (waiting_.load(std::memory_order_relaxed) == 0) return false;
  std::lock_guard<std::mutex> lock(mu_);
  return queues_.contains(View(subject));
}

void WaitRoom::Wake(std::string_view subject) {
  if (waiting_.load(std::memory_order_relaxed) == 0) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = queues_.find(View(subject));
    if (it == queues_.end()) return;
    if (it->second->trying) {
      it->second->woken = true;
      return;
    }
    const int64_t now = clock_.NowMs();
    it->second->next_try_ms = now;
    Arm(it->first, now);
  }
  wake_.notify_all();
}

void WaitRoom::Cancel(uint64_t owner) {
  if (owner == 0) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto o = owners_.find(owner);
    if (o == owners_.end()) return;
    std::vector<std::string> subjects = std::move(o->second);
    owners_.erase(o);
    const int64_t now = clock_.NowMs();
    for (const std::string& subject : subjects) {
      auto it = queues_.find(subject);
      if (it == queues_.end()) continue;
      for (auto& h : it->second->held) {
        if (h->owner != owner || h->cancelled) continue;
        h->cancelled = true;
        RuleStats& stats = stats_[h->rule];
        --stats.waiting;
        ++stats.cancelled;
        waiting_.fetch_sub(1, std::memory_order_relaxed);
      }
      // The next step drops them (an attempt in flight keeps its own until
      // it comes back).
      Arm(subject, now);
    }
  }
  wake_.notify_all();
}

void WaitRoom::EndBy(int64_t at_ms) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    end_by_ms_ = std::min(end_by_ms_, at_ms);
    for (auto& [subject, q] : queues_) {
      for (auto& h : q->held) h->deadline_ms = std::min(h->deadline_ms, end_by_ms_);
      // Its next step gives up on them then (a front being tried, once its
      // attempt is back).
      Arm(subject, end_by_ms_);
    }
  }
  wake_.notify_all();
}

void WaitRoom::SetTick(int64_t every_ms, absl::AnyInvocable<void(int64_t now_ms)> fn) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    tick_every_ms_ = every_ms;
    tick_ = std::move(fn);
    next_tick_ms_ = clock_.NowMs() + every_ms;
  }
  wake_.notify_all();  // it may be asleep with nothing to wake it for
}

std::vector<std::pair<std::string, WaitRoom::RuleStats>> WaitRoom::Stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::pair<std::string, RuleStats>> out(stats_.begin(), stats_.end());
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  return out;
}

void WaitRoom::Arm(const std::string& subject, int64_t at_ms) {
  timers_.push(Timer{at_ms, ++seq_, subject});
}

void WaitRoom::Finish(Held& held, int64_t RuleStats::*outcome) {
  RuleStats& stats = stats_[held.rule];
  --stats.waiting;
  ++(stats.*outcome);
  waiting_.fetch_sub(1, std::memory_order_relaxed);
  if (held.owner == 0) return;
  auto o = owners_.find(held.owner);
  if (o == owners_.end()) return;
  // Any one entry of the subject: an owner's entries of one subject are
  // interchangeable.
  auto it = std::find(o->second.begin(), o->second.end(), held.subject);
  if (it != o->second.end()) o->second.erase(it);
  if (o->second.empty()) owners_.erase(o);
}

void WaitRoom::Step(const std::string& subject, int64_t now_ms,
                    std::vector<std::unique_ptr<Held>>* out) {
  auto it = queues_.find(subject);
  if (it == queues_.end()) return;
  Queue& q = *it->second;
  // Drop the cancelled, give up on the expired: all but a front being tried,
  // and a front whose try fell due by its deadline (it is made now, late as
  // this step may be; its answer ends the wait).
  auto& held = q.held;
  int64_t next_deadline = INT64_MAX;
  for (size_t i = q.trying ? 1 : 0; i < held.size();) {
    Held& h = *held[i];
    if (h.cancelled) {
      held.erase(held.begin() + static_cast<ptrdiff_t>(i));
      if (i == 0) q.next_try_ms = now_ms;
      continue;
    }
    const bool try_due = i == 0 && q.next_try_ms <= h.deadline_ms;
    if (h.deadline_ms <= now_ms && !try_due) {
      Finish(h, &RuleStats::timed_out);
      out->push_back(std::move(held[i]));
      held.erase(held.begin() + static_cast<ptrdiff_t>(i));
      if (i == 0) q.next_try_ms = now_ms;  // the next in line goes now
      continue;
    }
    next_deadline = std::min(next_deadline, h.deadline_ms);
    ++i;
  }
  if (held.empty()) {
    queues_.erase(it);
    return;
  }
  if (q.trying) return;                 // the attempt's answer steps again
  if (q.next_try_ms <= now_ms) return;  // the caller tries the front
  Arm(subject, std::min(q.next_try_ms, next_deadline));
}

void WaitRoom::OnAttempt(const std::string& subject, Held* held,
                         const HeldRequest::Attempt& attempt) {
  std::vector<std::unique_ptr<Held>> give_up;
  std::unique_ptr<Held> done;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = queues_.find(subject);
    // The front stays in its queue while tried: it is there.
    Queue& q = *it->second;
    q.trying = false;
    const bool woken = std::exchange(q.woken, false);
    const int64_t now = clock_.NowMs();
    if (attempt.admitted) {
      // Answered by the attempt; the next in line may go at once.
      if (!held->cancelled) Finish(*held, &RuleStats::admitted);
      done = std::move(q.held.front());
      q.held.pop_front();
      q.next_try_ms = now;
    } else if (held->cancelled) {
      done = std::move(q.held.front());
      q.held.pop_front();
      q.next_try_ms = now;
    } else if (woken) {
      q.next_try_ms = now;  // room came while it was being tried
    } else if (now >= held->deadline_ms || !attempt.MayTurnWithin(held->deadline_ms - now)) {
      // Its deadline has come, or it cannot succeed in time: answered now
      // (in the second case rather than at the deadline).
      Finish(*held, &RuleStats::timed_out);
      give_up.push_back(std::move(q.held.front()));
      q.held.pop_front();
      q.next_try_ms = now;
    } else {
      // No later than the deadline: a wait that polls has a last try there.
      q.next_try_ms = std::min(now + attempt.NextTryInMs(), held->deadline_ms);
    }
    Step(subject, now, &give_up);
    // Due now: the room's thread tries it (never this one, which may be a
    // store's I/O thread).
    Arm(subject, now);
  }
  wake_.notify_all();
  const int64_t now = clock_.NowMs();
  for (auto& h : give_up) h->waiter->GiveUp(now);
}

void WaitRoom::Run() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopping_) {
    const int64_t now = clock_.NowMs();
    std::vector<std::unique_ptr<Held>> give_up;
    std::vector<std::pair<std::string, Held*>> tries;
    while (!timers_.empty() && timers_.top().at_ms <= now) {
      const std::string subject = timers_.top().subject;
      timers_.pop();
      Step(subject, now, &give_up);
      auto it = queues_.find(subject);
      if (it == queues_.end()) continue;
      Queue& q = *it->second;
      if (q.trying || q.held.empty() || q.next_try_ms > now) continue;
      q.trying = true;
      tries.emplace_back(it->first, q.held.front().get());
    }
    const bool tick = tick_ != nullptr && next_tick_ms_ <= now;
    if (tick) next_tick_ms_ = now + tick_every_ms_;
    if (!give_up.empty() || !tries.empty() || tick) {
      lock.unlock();
      for (auto& h : give_up) h->waiter->GiveUp(now);
      give_up.clear();
      if (tick) tick_(now);
      for (auto& entry : tries) {
        Held* held = entry.second;
        held->waiter->Try([this, subject = entry.first, held](const HeldRequest::Attempt& attempt) {
          OnAttempt(subject, held, attempt);
        });
      }
      lock.lock();
      continue;
    }
    int64_t until = INT64_MAX;
    if (!timers_.empty()) until = timers_.top().at_ms;
    if (tick_ != nullptr) until = std::min(until, next_tick_ms_);
    if (until == INT64_MAX) {
      wake_.wait(lock);
    } else {
      wake_.wait_for(lock, std::chrono::milliseconds(std::max<int64_t>(1, until - now)));
    }
  }
}

std::string CheckWaitSubject(std::string_view rule, std::string_view tier, std::string_view key) {
  std::string subject("c");
  subject.append(std::to_string(rule.size())).push_back(':');
  subject.append(rule).append(std::to_string(tier.size())).push_back(':');
  subject.append(tier).append(key);
  return subject;
}

std::string LeaseWaitSubject(std::string_view rule, std::string_view key) {
  std::string subject("l");
  subject.append(std::to_string(rule.size())).push_back(':');
  subject.append(rule).append(key);
  return subject;
}

}  // namespace floodgate::service
