// fixed_window: one counter per window; windows come from the limit's Zone
// (epoch-aligned below a day, calendar-aligned from a day up).
#include <algorithm>
#include <cstdint>

#include "core/algorithms.h"
#include "core/refund.h"

namespace floodgate::core {
namespace {

// Whether now_ms (not before the state's window start) is still in the
// state's epoch-aligned window. That start came from WindowAt for this same
// limit (a changed definition gets a new variant, hence fresh state), so it
// is aligned, and the window is known without WindowAt's division.
bool SameEpochWindow(const LimitParams& p, const FixedWindowState& s, int64_t now_ms) {
  if (s.used <= 0 || p.epoch_window_ms <= 0) return false;
  if (s.window_start_ms > INT64_MAX - p.epoch_window_ms) return false;  // the end would not fit
  // Unsigned: now_ms >= the start, so this is the true distance even where
  // the signed difference would overflow.
  return static_cast<uint64_t>(now_ms) - static_cast<uint64_t>(s.window_start_ms) <
         static_cast<uint64_t>(p.epoch_window_ms);
}

}  // namespace

Outcome ApplyFixedWindow(const LimitParams& p, FixedWindowState& s, int64_t now_ms, int64_t cost) {
  // A clock step back stays in the window already counted: no refund.
  if (s.used > 0 && now_ms < s.window_start_ms) now_ms = s.window_start_ms;
  const Window w = SameEpochWindow(p, s, now_ms)
                       ? Window{s.window_start_ms, s.window_start_ms + p.epoch_window_ms}
                       : p.zone->WindowAt(p.unit, p.multiplier, now_ms);
  const int64_t used = (s.used > 0 && s.window_start_ms == w.start_ms) ? s.used : 0;

  Outcome out;
  LimitStatus& st = out.status;
  st.limit = p.count;
  st.window_start_ms = w.start_ms;
  st.window_end_ms = w.end_ms;

  int64_t used_after = used;
  if (cost > p.count) {
    st.allowed = false;
    st.retry_after_ms = -1;
  } else if (used + cost <= p.count) {  // no overflow: used <= count, cost <= count
    st.allowed = true;
    used_after = used + cost;
    if (cost > 0) s = {w.start_ms, used_after};
  } else {
    st.allowed = false;
    st.retry_after_ms = w.end_ms - now_ms;
  }
  st.remaining = p.count - used_after;
  st.reset_after_ms = used_after > 0 ? w.end_ms - now_ms : 0;
  out.expires_at_ms = used_after > 0 ? w.end_ms : 0;
  return out;
}

int64_t RefundFixedWindow(const LimitParams& p, FixedWindowState& s, int64_t now_ms, int64_t cost) {
  if (s.used <= 0) return 0;
  if (now_ms < s.window_start_ms) now_ms = s.window_start_ms;  // as Apply: the counted window
  // Only the window holding now limits anything: a count from an earlier
  // one is already spent, and giving it back would change nothing.
  const int64_t start = SameEpochWindow(p, s, now_ms)
                            ? s.window_start_ms
                            : p.zone->WindowAt(p.unit, p.multiplier, now_ms).start_ms;
  if (start != s.window_start_ms) return 0;
  const int64_t given = std::min(cost, s.used);
  s.used -= given;
  return given;
}

}  // namespace floodgate::core
