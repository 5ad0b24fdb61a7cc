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
//    credit for later requests). It returns the units it gave back, in
//    [0, cost]: 1 when one unit was used and 100 are refunded.
//  - A zero state (a subject never seen, or fully expired) and a state that
//    counts nothing at now_ms are left exactly as they are: a refund never
//    creates state. A state it does change is written in the form Apply
//    would write at now_ms, so it holds nothing longer than it did (its
//    expiry, expires_at_ms of a peek, never moves later).
//  - Only the algorithm's words change; alert bits (core/alerts.h) are not
//    the algorithms' and stay set.
//  - cost is in [1, kMaxLimitCount]; callers check.
//
// What a unit given back means, per algorithm, and what the step returns:
//  - fixed_window: the count of the window holding now_ms drops by
//    min(cost, used), which it returns; a count kept from an earlier window
//    is not touched (that window is over: nothing it counted limits a
//    request now).
//  - sliding_window: units come off the current bucket first, then off the
//    previous one, neither below zero; it returns the units taken off both.
//    A unit taken from the previous bucket lowers the estimate by only its
//    weight (the part of that bucket the window still covers), as it
//    counted.
//  - token_bucket: tokens += cost, capped at the capacity (the burst); it
//    returns min(cost, the tokens missing rounded up), which is what the
//    bucket's remaining grows by.
//  - gcra: TAT -= cost x emission interval, not below now_ms (so never more
//    than a full burst is available, as after a long idle spell); it returns
//    min(cost, how many emission intervals the TAT was ahead, rounded up),
//    which is what the remaining grows by.
//  - sliding_log: the `cost` most recent units still in the log are removed
//    (events are trimmed from the newest back), so each limit's sum drops by
//    the removed units inside its own window: that drop is each limit's
//    figure (SlidingLog::Refund).
// Not thread-safe: callers serialise access to a state.
#pragma once

#include <cstdint>

#include "core/algorithms.h"
#include "core/limit_params.h"

namespace floodgate::core {

int64_t RefundFixedWindow(const LimitParams& p, FixedWindowState& s, int64_t now_ms, int64_t cost);
int64_t RefundSlidingWindow(const LimitParams& p, SlidingWindowState& s, int64_t now_ms,
                            int64_t cost);
int64_t RefundTokenBucket(const LimitParams& p, TokenBucketState& s, int64_t now_ms, int64_t cost);
int64_t RefundGcra(const LimitParams& p, GcraState& s, int64_t now_ms, int64_t cost);

}  // namespace floodgate::core
