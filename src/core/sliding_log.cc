// sliding_log: see sliding_log.h.
#include "core/sliding_log.h"

#include <algorithm>

namespace floodgate::core {

SlidingLog::SlidingLog(int num_limits) : cursors_(num_limits) {}

void SlidingLog::Advance(std::span<const LimitParams> limits, int64_t now_ms) {
  const uint64_t end_seq = first_seq_ + size_;
  uint64_t oldest_needed = end_seq;
  for (size_t i = 0; i < limits.size(); ++i) {
    Cursor& c = cursors_[i];
    // An event at t still counts while now < t + P.
    while (c.seq < end_seq && At(c.seq).t_ms + limits[i].period_ms <= now_ms) {
      c.sum -= At(c.seq).units;
      ++c.seq;
    }
    oldest_needed = std::min(oldest_needed, c.seq);
  }
  // Drop what no window covers any more.
  while (first_seq_ < oldest_needed) {
    head_ = (head_ + 1) % ring_.size();
    ++first_seq_;
    --size_;
  }
}

void SlidingLog::Append(int64_t now_ms, int64_t units) {
  for (Cursor& c : cursors_) c.sum += units;
  if (size_ > 0) {
    Event& newest = ring_[(head_ + size_ - 1) % ring_.size()];
    // Same instant: one event, so the log stays small. Not when a cursor has
    // already passed that event (it aged out of a short window before the
    // clock stepped back to its instant): that cursor would count the merged
    // units but never subtract them.
    const uint64_t newest_seq = first_seq_ + size_ - 1;
    const bool covered = std::all_of(cursors_.begin(), cursors_.end(),
                                     [&](const Cursor& c) { return c.seq <= newest_seq; });
    if (newest.t_ms == now_ms && covered) {
      newest.units += units;
      return;
    }
  }
  if (size_ == ring_.size()) {  // grow: unroll the ring into a larger one
    std::vector<Event> bigger(std::max<size_t>(4, ring_.size() * 2));
    for (size_t i = 0; i < size_; ++i) bigger[i] = ring_[(head_ + i) % ring_.size()];
    ring_ = std::move(bigger);
    head_ = 0;
  }
  ring_[(head_ + size_) % ring_.size()] = {now_ms, units};
  ++size_;
}

int64_t SlidingLog::RetryAfter(const LimitParams& p, const Cursor& c, int64_t now_ms,
                               int64_t cost) const {
  // Walk from the oldest counted event until enough units have aged out.
  int64_t still_counted = c.sum;
  const uint64_t end_seq = first_seq_ + size_;
  for (uint64_t seq = c.seq; seq < end_seq; ++seq) {
    still_counted -= At(seq).units;
    if (still_counted + cost <= p.count) return At(seq).t_ms + p.period_ms - now_ms;
  }
  return 0;  // unreachable while the caller found no room
}

bool SlidingLog::Apply(std::span<const LimitParams> limits, int64_t now_ms, int64_t cost,
                       std::span<Outcome> out) {
  if (size_ > 0) {
    const int64_t newest = ring_[(head_ + size_ - 1) % ring_.size()].t_ms;
    now_ms = std::max(now_ms, newest);  // a clock step back refunds nothing
  }
  Advance(limits, now_ms);

  bool admitted = true;
  for (size_t i = 0; i < limits.size(); ++i) {
    const LimitParams& p = limits[i];
    LimitStatus& st = out[i].status;
    st = LimitStatus{};
    st.limit = p.count;
    if (cost > p.count) {
      st.retry_after_ms = -1;
    } else if (cursors_[i].sum + cost <= p.count) {
      st.allowed = true;
    } else {
      st.retry_after_ms = RetryAfter(p, cursors_[i], now_ms, cost);
    }
    admitted = admitted && st.allowed;
  }
  if (admitted && cost > 0) Append(now_ms, cost);

  int64_t newest = 0;
  if (size_ > 0) newest = ring_[(head_ + size_ - 1) % ring_.size()].t_ms;
  int64_t longest = 0;
  for (size_t i = 0; i < limits.size(); ++i) {
    LimitStatus& st = out[i].status;
    const int64_t sum = cursors_[i].sum;
    st.remaining = limits[i].count > sum ? limits[i].count - sum : 0;
    st.reset_after_ms = sum > 0 ? newest + limits[i].period_ms - now_ms : 0;
    longest = std::max(longest, limits[i].period_ms);
  }
  const int64_t expires = size_ > 0 ? newest + longest : 0;
  for (size_t i = 0; i < limits.size(); ++i) out[i].expires_at_ms = expires;
  return admitted;
}

}  // namespace floodgate::core
