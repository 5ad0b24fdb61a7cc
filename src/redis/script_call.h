// Calling the Redis store's scripts: state keys, definition fingerprints,
// the EVALSHA/EVAL arguments of one decision, and decoding the script's
// reply into the same Decision (or CL.THROTTLE result) the embedded store
// produces. No I/O: the connection code sends what this builds.
//
// Argument and reply layouts are documented at the top of each script
// (src/redis/scripts/<algorithm>.lua). In short, one call makes k decisions
// of one rule, one per key, in order: KEYS are the k state keys and ARGV is
//   fingerprint, now_ms ('' = the script reads TIME), n (or "nAm" for a rule with m alert
//   thresholds), then per limit
//   fixed_window:   count, period_ms (0 = calendar), b0, b1, b2, b3
//   sliding_window: count, period_ms
//   sliding_log:    count, period_ms
//   token_bucket:   count, period_ms, capacity
//   gcra:           emission_us, limit (max_burst + 1)
// then, with alerts, per limit period_ms and the m usages that reach the thresholds, then the k
// costs (or one, when all k are the same). The reply is {now_ms, then per decision a string of
// little-endian doubles: admitted, then per limit allowed, limit, remaining, retry_after,
// reset_after[, window_start_ms, window_end_ms]} (the window pair for fixed_window and
// sliding_window; gcra's durations in microseconds, the others' in ms), then with alerts per limit
// the bits of the thresholds fired and the alert window's start and end (a refund's decision: then
// per limit the units it gave back); or an error in place of
// a decision that could not be made (fixed_window's clock skew; a key of
// another type than a string, "WRONGTYPE floodgate: ...", redis/wrong_type.h).
//
// Every function here is thread-safe (no shared mutable state).
#pragma once

#include <hiredis/hiredis.h>

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/rule_eval.h"
#include "floodgate/decision.h"
#include "floodgate/status.h"

namespace floodgate::redis {

// The key holding one subject's state for a rule: fg:{rule:subject} for the
// rule's own limits, fg:{rule:subject}:tier for a tier. The hash tag keeps a
// subject's tiers on one Redis Cluster slot. A ':' in the rule name is
// written %3A (rule names cannot hold '%'), so the rule part ends at the
// first ':' and rule "a:b" with subject "c" never meets rule "a" with
// subject "b:c".
std::string StateKey(std::string_view rule, std::string_view tier, std::string_view subject);

// The key of CL.THROTTLE's state for `key`: fg:cl:{key}.
std::string ThrottleKey(std::string_view key);

// A short text (16 hex digits) naming the state-relevant definition of a
// compiled rule: algorithm, limits, burst (as capacities), time zone and the
// scripts' state layout. Scripts treat a state stored under another
// fingerprint as empty, so a rule changed by a reload starts fresh, as on
// the embedded store. Costs a SHA-1: compute it once per compiled rule.
std::string Fingerprint(const core::CompiledRule& rule);

enum class ScriptCall {
  kEvalSha,  // EVALSHA <sha1>: the normal case
  kEval,     // EVAL <source>: after a NOSCRIPT error (see IsNoScript)
};

// Appends the command for decisions of `rule`: "EVALSHA" and the script's
// SHA-1 (or "EVAL" and its source), the number of keys, `keys`, then ARGV.
// Decision i spends costs[i] on keys[i] (keys.size() == costs.size() >= 1);
// Redis makes them in order, each atomic on its own key. Equal costs are
// sent once.
//  - keys: StateKey(rule.name, rule.tier, subject) of each decision. In a
//    cluster or behind a proxy every key of one call must live on one node:
//    send one key per call there.
//  - fingerprint: Fingerprint(rule), or "" to skip the check.
//  - costs: in [0, kMaxLimitCount]; the caller checks, as for the embedded store.
//  - now_ms: the decisions' instant, or nullopt to let the script read
//    Redis's TIME (the production case: servers with skewed clocks agree).
//    Explicit instants must lie within years 1700..2255 (exact in a double).
//  - clock_ms: the caller's clock, used only when now_ms is nullopt: a
//    fixed_window calendar limit (day and longer) sends the windows before,
//    around and after it, and the script refuses a TIME outside them (clock
//    skew). With now_ms set, the windows are those around now_ms.
void AppendCheckCall(ScriptCall call, const core::CompiledRule& rule, std::string_view fingerprint,
                     std::span<const std::string> keys, std::span<const int64_t> costs,
                     std::optional<int64_t> now_ms, int64_t clock_ms,
                     std::vector<std::string>* argv);
// One decision: `cost` on `key`.
void AppendCheckCall(ScriptCall call, const core::CompiledRule& rule, std::string_view fingerprint,
                     std::string_view key, int64_t cost, std::optional<int64_t> now_ms,
                     int64_t clock_ms, std::vector<std::string>* argv);

// Appends the command for a refund (core/refund.h) of `cost` units (in [1,
// kMaxLimitCount]) to `key`'s state of `rule`: the rule's script with the
// cost negated, which each script takes as a refund (see their headers).
// Arguments as AppendCheckCall's for one decision. The reply is that of one
// decision, the peek at the state as refunded (it fires no alert), with
// each limit's units given back after it: DecodeRefundReply.
void AppendRefundCall(ScriptCall call, const core::CompiledRule& rule, std::string_view fingerprint,
                      std::string_view key, int64_t cost, std::optional<int64_t> now_ms,
                      int64_t clock_ms, std::vector<std::string>* argv);

// Checks the shape of the reply to a call of `decisions` decisions: an
// array of 1 + decisions elements starting with the script's instant. An
// error reply is UNAVAILABLE with Redis's message (a failed call: no
// decision was made); any other shape is INTERNAL.
Status CheckReplyShape(Algorithm algorithm, const redisReply& reply, size_t decisions);

// Turns decision `index` of a reply that passed CheckReplyShape into
// *decision, exactly as EvaluateRule fills it on the embedded store (binding
// limit, period_ms, shadow mode), and stores the script's instant in *now_ms
// (when not null). A decision the script refused (fixed_window's "ERR
// floodgate: clock skew …") is UNAVAILABLE with Redis's message; a
// malformed one is INTERNAL. *decision is unspecified on error. For a rule
// with alerts, *alerts (when not null) receives the thresholds the decision
// fired (core/alerts.h); otherwise its num_limits is 0.
Status DecodeCheckReply(const core::CompiledRule& rule, const redisReply& reply, size_t index,
                        Decision* decision, int64_t* now_ms, core::AlertOutcome* alerts = nullptr);
// The reply to a call of one decision: CheckReplyShape, then decision 0.
Status DecodeCheckReply(const core::CompiledRule& rule, const redisReply& reply, Decision* decision,
                        int64_t* now_ms, core::AlertOutcome* alerts = nullptr);
// The reply to AppendRefundCall's command, as DecodeCheckReply's: the peek
// into result->after, what each limit gave back (as the script computed it
// in the step that gave it back) into result->refunded.
Status DecodeRefundReply(const core::CompiledRule& rule, const redisReply& reply,
                         core::RefundResult* result, int64_t* now_ms,
                         core::AlertOutcome* alerts = nullptr);

// Appends the command for redis-cell's CL.THROTTLE on the gcra script:
// `count` per `period_s` seconds with `max_burst`, spending `quantity`, on
// ThrottleKey(key) (pass that as `throttle_key`). One state per key whatever
// the parameters (no fingerprint). INVALID_ARGUMENT, with the messages of
// Limiter::Throttle, for parameters it refuses; nothing is appended then.
Status AppendThrottleCall(ScriptCall call, std::string_view throttle_key, int64_t max_burst,
                          int64_t count, int64_t period_s, int64_t quantity,
                          std::optional<int64_t> now_ms, std::vector<std::string>* argv);

// Turns the gcra script's reply to AppendThrottleCall's command into what
// Limiter::Throttle returns on the embedded store (redis-cell's rounding).
// Errors as DecodeCheckReply.
Status DecodeThrottleReply(const redisReply& reply, ThrottleResult* result, int64_t* now_ms);

// True for Redis's "NOSCRIPT …" error: the server does not have the script
// (restarted, SCRIPT FLUSH, another node); send the same call with kEval.
bool IsNoScript(const redisReply& reply);

}  // namespace floodgate::redis
