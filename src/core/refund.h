// Refunds: giving back the units of a request that was admitted but failed
// upstream, as pure functions of (params, state, now, cost), one per
// algorithm (each defined beside its Apply; sliding_log's is
// SlidingLog::Refund). core::RefundRule (rule_eval.h) applies them to every
// limit of a rule.
//
// Contract shared by every Refund():
//  - It never reads a clock; `now_ms` is the refund's instant. A `now_ms`
//    earlier than the state's own time is treated as that time, as Apply
//    does (a clock step back neither consumes nor refunds more).
//  - It gives back up to `cost` units of what the state counts at now_ms,
//    never going below nothing used: a refund larger than what is counted
//    empties the limit, and what is left over is dropped (it is not kept as
//    credit for later requests).
//  - A zero state (a subject never seen, or fully expired) and a state that
//    counts nothing at now_ms are left exactly as they are: a refund never
//    creates state. A state it does change is written in the form Apply
//    would write at now_ms, so it holds nothing longer than it did (its
//    expiry, expires_at_ms of a peek, never moves later).
//  - Only the algorithm's words change; alert bits (core/alerts.h) are not
//    the algorithms' and stay set.
//  - cost is in [1, kMaxLimitCount]; callers check.
//
// What a unit given back means, per algorithm:
//  - fixed_window: the count of the window holding now_ms drops by
//    min(cost, used); a count kept from an earlier window is not touched
//    (that window is over: nothing it counted limits a request now).
//  - sliding_window: units come off the current bucket first, then off the
//    previous one, neither below zero. A unit taken from the previous bucket
//    lowers the estimate by only its weight (the part of that bucket the
//    window still covers), as it counted.
//  - token_bucket: tokens += cost, capped at the capacity (the burst).
//  - gcra: TAT -= cost x emission interval, not below now_ms (so never more
//    than a full burst is available, as after a long idle spell).
//  - sliding_log: the `cost` most recent units still in the log are removed
//    (events are trimmed from the newest back), so each limit's sum drops by
//    the removed units inside its own window.
// Not thread-safe: callers serialise access to a state.
#pragma once

#include <cstdint>

#include "core/algorithms.h"
#include "core/limit_params.h"

namespace floodgate::core {

void RefundFixedWindow(const LimitParams& p, FixedWindowState& s, int64_t now_ms, int64_t cost);
void RefundSlidingWindow(const LimitParams& p, SlidingWindowState& s, int64_t now_ms, int64_t cost);
void RefundTokenBucket(const LimitParams& p, TokenBucketState& s, int64_t now_ms, int64_t cost);
void RefundGcra(const LimitParams& p, GcraState& s, int64_t now_ms, int64_t cost);

}  // namespace floodgate::core
