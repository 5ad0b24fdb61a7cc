// TopSampler: which of one loop's decisions the top-subjects sketch counts,
// and how many decisions each one counted stands for.
//
// Why: recording a decision in the sketch (a queue append with the key's
// bytes, then on the recorder's thread a rule lookup, a shard lock, a hash
// lookup and on a new key an eviction) costs a few hundred nanoseconds of
// CPU, as much as a fifth of a pipelined decision on a long-tail key. The
// sketch is for the heavy subjects, and those a sample finds as well.
//
// How: time is cut into ticks of kTopSampleTickMs. While a loop makes at most
// kTopExactPerTick decisions a tick (20,000 a second), every decision is
// counted, with weight 1: the counts are what the sketch's own bound says.
// Past that, the next tick counts each decision with probability 1/stride,
// where stride is the last tick's decisions over kTopExactPerTick rounded up,
// and a decision counted stands for `stride` decisions (its units times
// stride). The count of every subject is then an unbiased estimate
// (Horvitz-Thompson) whose standard deviation is about
// sqrt(count * stride) units: 1 % of a subject's count once it holds
// 10,000 * stride units, so the heavy subjects rank as they would unsampled.
// A decision not counted costs a counter and a random draw: no lock, no copy.
//
// The draw is random (xorshift64*, seeded per loop), not every stride-th
// decision, so that a client cycling through keys in step with the stride
// can neither hide a key nor make one look heavier.
//
// One loop's: not thread-safe. Pure but for its state: the time is passed in.
#pragma once

#include <cstdint>

namespace floodgate::server {

// A tick's length, and the decisions in one that are all counted (20,000
// a second).
inline constexpr int64_t kTopSampleTickMs = 100;
inline constexpr int64_t kTopExactPerTick = 2000;

class TopSampler {
 public:
  explicit TopSampler(uint64_t seed) : random_(seed * 0x9E3779B97F4A7C15ull | 1) {}

  // The weight of a decision made at `now_ms`: 0 when it is not counted,
  // else how many decisions it stands for (1 under the threshold).
  int64_t Weigh(int64_t now_ms) {
    if (now_ms >= tick_start_ms_ + kTopSampleTickMs || now_ms < tick_start_ms_) NextTick(now_ms);
    ++seen_;
    if (stride_ == 1) return 1;
    // 1 in stride_: the draw's top 32 bits scaled to [0, stride_).
    const uint64_t draw = (Next() >> 32) * static_cast<uint64_t>(stride_) >> 32;
    if (draw != 0) {
      ++skipped_;
      return 0;
    }
    return stride_;
  }

  // The stride of the current tick (1: every decision counted).
  int64_t stride() const { return stride_; }
  // Decisions not counted so far.
  int64_t skipped() const { return skipped_; }

 private:
  // A new tick from `now_ms`; its stride from the decisions per tick since
  // the last one began (a tick after an idle spell sees a lower rate).
  void NextTick(int64_t now_ms) {
    const int64_t elapsed = now_ms - tick_start_ms_;
    int64_t per_tick = seen_;
    if (elapsed > kTopSampleTickMs) per_tick = seen_ * kTopSampleTickMs / elapsed;
    stride_ =
        per_tick > kTopExactPerTick ? (per_tick + kTopExactPerTick - 1) / kTopExactPerTick : 1;
    tick_start_ms_ = now_ms;
    seen_ = 0;
  }
  uint64_t Next() {
    random_ ^= random_ >> 12;
    random_ ^= random_ << 25;
    random_ ^= random_ >> 27;
    return random_ * 0x2545F4914F6CDD1Dull;
  }

  uint64_t random_;
  int64_t tick_start_ms_ = INT64_MIN / 2;
  int64_t seen_ = 0;
  int64_t stride_ = 1;
  int64_t skipped_ = 0;
};

}  // namespace floodgate::server
