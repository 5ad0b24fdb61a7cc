// sliding_log: the exact algorithm. Every admitted request is logged as
// (time, units); a unit admitted at t counts against a limit of period P for
// requests strictly before t + P.
//
// All limits of a rule share one log (an admitted request consumes every
// limit at the same instant); each limit keeps a cursor to the first event
// inside its window and the sum from there, so a decision is amortised O(1)
// per limit. The log is bounded: it never holds more events than the count
// of the longest-period limit (config caps that at 100000), because every
// logged unit was admitted by that limit.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/limit_params.h"
#include "core/memory_room.h"

namespace floodgate::core {

// Not thread-safe.
class SlidingLog {
 public:
  explicit SlidingLog(int num_limits);

  // Decides for every limit at once: admitted iff each has room for `cost`;
  // only then is the event logged. `out` receives one Outcome per limit
  // (limits.size() of them, all with the same expires_at_ms: the log's).
  // Returns whether admitted. When logging the event needs a larger ring
  // and `room` (null: no bound) refuses its bytes, nothing is logged and
  // Apply returns false, the limits' figures describing the log as it stays
  // (room->refused() says why). (`out` is a pointer rather than a span so
  // that the arguments fit in registers: a span's size word spilled the
  // loop's registers, 18 instructions a decision.)
  bool Apply(std::span<const LimitParams> limits, int64_t now_ms, int64_t cost, Outcome* out,
             MemoryRoom* room = nullptr);

  // Gives back `cost` units (core/refund.h's contract): at now_ms (not
  // before the newest event), after the events no window covers any more
  // are dropped, removes the `cost` most recent units logged, trimming
  // events from the newest back; each limit's sum drops by the units removed
  // inside its own window: refunded[i] (limits.size() of them) receives
  // that drop of limit i. An empty log is left as it is.
  void Refund(std::span<const LimitParams> limits, int64_t now_ms, int64_t cost,
              std::span<int64_t> refunded);

  size_t size() const { return size_; }

  // Heap bytes the log holds, as MallocChunkSize counts them: the object
  // (when allocated on its own, as a rule's state keeps it), its ring and
  // its cursors. Inline and cheap: the embedded store reads it around every
  // decision on a known subject.
  size_t HeapBytes() const {
    // Events and cursors are 16 bytes, so an array of n >= 1 of them is a
    // chunk of exactly 16 n + 16 bytes (MallocChunkSize): no rounding to
    // compute. Every log has a cursor; a ring only once it logged.
    static_assert(sizeof(Event) == 16 && sizeof(Cursor) == 16);
    const size_t ring = ring_.capacity() * sizeof(Event);
    return MallocChunkSize(sizeof(SlidingLog)) + (ring > 0 ? ring + 16 : 0) +
           cursors_.capacity() * sizeof(Cursor) + 16;
  }

  // The log as bytes, for a snapshot of the embedded store: its events,
  // oldest first, and each limit's cursor. Host byte order (the snapshot
  // file records it).
  void Encode(std::string* out) const;
  // The log Encode wrote, for a rule of `num_limits` limits (0: as many as
  // the bytes say, at most kMaxLimitsPerRule); null for bytes
  // that are not such a log (a count that does not match, a cursor outside
  // the events, sums that do not add up).
  static std::unique_ptr<SlidingLog> Decode(std::string_view in, int num_limits);

 private:
  struct Event {
    int64_t t_ms;
    int64_t units;
  };
  struct Cursor {
    uint64_t seq = 0;  // sequence number of the first event inside the window
    int64_t sum = 0;   // units from there to the newest event
  };

  const Event& At(uint64_t seq) const { return ring_[(head_ + (seq - first_seq_)) % ring_.size()]; }
  void Advance(std::span<const LimitParams> limits, int64_t now_ms);
  // Logs `units` at now_ms; false (nothing logged) when the ring must grow
  // and `room` refuses the bytes.
  bool Append(int64_t now_ms, int64_t units, MemoryRoom* room);
  // Unrolls the full ring into one twice as large (at least 4 events);
  // false, changing nothing, when `room` refuses the new ring's bytes. Out
  // of line: rare, and kept off the path of every other admission.
  [[gnu::noinline]] bool Grow(MemoryRoom* room);
  int64_t RetryAfter(const LimitParams& p, const Cursor& c, int64_t now_ms, int64_t cost) const;

  std::vector<Event> ring_;
  size_t head_ = 0;
  size_t size_ = 0;
  uint64_t first_seq_ = 0;  // sequence number of ring_[head_]
  std::vector<Cursor> cursors_;
};

}  // namespace floodgate::core
