// sliding_log: see sliding_log.h.
#include "core/sliding_log.h"

#include <algorithm>

#include "common/fixed_fields.h"

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

bool SlidingLog::Append(int64_t now_ms, int64_t units, MemoryRoom* room) {
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
      for (Cursor& c : cursors_) c.sum += units;
      newest.units += units;
      return true;
    }
  }
  if (size_ == ring_.size() && !Grow(room)) return false;
  for (Cursor& c : cursors_) c.sum += units;
  ring_[(head_ + size_) % ring_.size()] = {now_ms, units};
  ++size_;
  return true;
}

bool SlidingLog::Grow(MemoryRoom* room) {
  const size_t grown = std::max<size_t>(4, ring_.size() * 2);
  // The new ring is claimed whole: both are held while the events move.
  if (!Claim(room, MallocChunkSize(grown * sizeof(Event)))) return false;
  std::vector<Event> bigger(grown);
  for (size_t i = 0; i < size_; ++i) bigger[i] = ring_[(head_ + i) % ring_.size()];
  ring_ = std::move(bigger);
  head_ = 0;
  return true;
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
                       Outcome* out, MemoryRoom* room) {
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
  // No room for the event: nothing logged, so nothing admitted.
  if (admitted && cost > 0 && !Append(now_ms, cost, room)) admitted = false;

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

void SlidingLog::Refund(std::span<const LimitParams> limits, int64_t now_ms, int64_t cost,
                        std::span<int64_t> refunded) {
  std::fill(refunded.begin(), refunded.begin() + limits.size(), 0);
  if (size_ == 0) return;
  const int64_t newest = ring_[(head_ + size_ - 1) % ring_.size()].t_ms;
  Advance(limits, std::max(now_ms, newest));  // as Apply: a clock step back changes nothing
  while (cost > 0 && size_ > 0) {
    const uint64_t seq = first_seq_ + size_ - 1;
    Event& e = ring_[(head_ + size_ - 1) % ring_.size()];
    const int64_t take = std::min(cost, e.units);
    // Only the limits whose window still holds the event counted its units.
    for (size_t i = 0; i < cursors_.size(); ++i) {
      if (cursors_[i].seq > seq) continue;
      cursors_[i].sum -= take;
      refunded[i] += take;
    }
    e.units -= take;
    cost -= take;
    if (e.units == 0) {
      --size_;
      // A cursor past the dropped event (its window had let it go) now
      // points past the new newest one: it counts what comes next.
      for (Cursor& c : cursors_) c.seq = std::min(c.seq, seq);
    }
  }
}

void SlidingLog::Encode(std::string* out) const {
  fixed::Put<uint32_t>(out, static_cast<uint32_t>(cursors_.size()));
  fixed::Put<uint64_t>(out, size_);
  fixed::Put<uint64_t>(out, first_seq_);
  for (size_t i = 0; i < size_; ++i) {
    const Event& e = ring_[(head_ + i) % ring_.size()];
    fixed::Put<int64_t>(out, e.t_ms);
    fixed::Put<int64_t>(out, e.units);
  }
  for (const Cursor& c : cursors_) {
    fixed::Put<uint64_t>(out, c.seq);
    fixed::Put<int64_t>(out, c.sum);
  }
}

std::unique_ptr<SlidingLog> SlidingLog::Decode(std::string_view in, int num_limits) {
  uint32_t limits = 0;
  uint64_t size = 0, first_seq = 0;
  if (!fixed::Get(&in, &limits) || !fixed::Get(&in, &size) || !fixed::Get(&in, &first_seq))
    return nullptr;
  if (num_limits == 0) num_limits = static_cast<int>(std::min<uint32_t>(limits, kMaxLimitsPerRule));
  if (static_cast<int>(limits) != num_limits || num_limits <= 0) return nullptr;
  // Each event is 16 bytes: a count the bytes cannot hold is a corrupt one
  // (checked before allocating for it).
  if (size > in.size() / 16 || first_seq > UINT64_MAX - size) return nullptr;
  auto log = std::make_unique<SlidingLog>(num_limits);
  log->ring_.resize(std::max<size_t>(4, size));
  for (size_t i = 0; i < size; ++i) {
    Event& e = log->ring_[i];
    if (!fixed::Get(&in, &e.t_ms) || !fixed::Get(&in, &e.units) || e.units <= 0) return nullptr;
    if (i > 0 && e.t_ms < log->ring_[i - 1].t_ms) return nullptr;
  }
  log->size_ = size;
  log->first_seq_ = first_seq;
  for (Cursor& c : log->cursors_) {
    if (!fixed::Get(&in, &c.seq) || !fixed::Get(&in, &c.sum)) return nullptr;
    if (c.seq < first_seq || c.seq > first_seq + size) return nullptr;
    // The sum is the units from the cursor to the newest event.
    int64_t sum = 0;
    for (uint64_t q = c.seq; q < first_seq + size; ++q) {
      if (__builtin_add_overflow(sum, log->At(q).units, &sum)) return nullptr;
    }
    if (sum != c.sum) return nullptr;
  }
  if (!in.empty()) return nullptr;
  return log;
}

}  // namespace floodgate::core
