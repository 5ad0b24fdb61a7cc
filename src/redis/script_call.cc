// Script arguments and reply decoding: see script_call.h.
//
// Built on every call, so the argument builder formats numbers with
// to_chars into strings short enough for the small-string buffer (no
// allocation per number) and reserves the vector once. Replies carry each
// decision as one string of little-endian doubles (see the scripts).
#include "redis/script_call.h"

#include <openssl/evp.h>

#include <bit>
#include <charconv>
#include <cmath>
#include <cstring>

#include "common/enum_table.h"
#include "core/gcra.h"
#include "core/int_math.h"
#include "redis/scripts.h"

namespace floodgate::redis {
namespace {

// Bumped whenever a script's state layout changes, so that states written by
// older scripts are treated as empty rather than misread.
constexpr std::string_view kStateLayout = "state-layout-1";

// Fields per limit a rule with alerts adds to a decision's reply: the
// thresholds fired, the window's start and end.
constexpr int kAlertReplyFields = 3;

void AppendNumber(int64_t v, std::vector<std::string>* argv) {
  char buf[24];
  const auto r = std::to_chars(buf, buf + sizeof(buf), v);
  argv->emplace_back(buf, r.ptr);
}

// Fields per limit in a reply (see each script's header).
int ReplyStride(Algorithm algorithm) {
  return algorithm == Algorithm::kFixedWindow || algorithm == Algorithm::kSlidingWindow ? 7 : 5;
}

// Fields per limit in ARGV. A concurrency rule is never checked here
// (scripts/concurrency.lua has its leases).
constexpr EnumRow<Algorithm, int> kArgvStrides[] = {
    {Algorithm::kFixedWindow, 6}, {Algorithm::kTokenBucket, 3}, {Algorithm::kSlidingWindow, 2},
    {Algorithm::kSlidingLog, 2},  {Algorithm::kGcra, 2},        {Algorithm::kConcurrency, 2}};

int ArgvStride(Algorithm algorithm) { return ValueIn(kArgvStrides, algorithm, 2); }

void AppendHead(ScriptCall call, Algorithm algorithm, std::span<const std::string> keys,
                std::string_view fingerprint, std::optional<int64_t> now_ms, int num_limits,
                int num_thresholds, std::vector<std::string>* argv) {
  const Script& script = ScriptFor(algorithm);
  if (call == ScriptCall::kEvalSha) {
    argv->emplace_back("EVALSHA");
    argv->emplace_back(script.sha1);
  } else {
    argv->emplace_back("EVAL");
    argv->emplace_back(script.source);
  }
  AppendNumber(static_cast<int64_t>(keys.size()), argv);
  for (const std::string& key : keys) argv->push_back(key);
  argv->emplace_back(fingerprint);
  if (now_ms) {
    AppendNumber(*now_ms, argv);
  } else {
    argv->emplace_back();
  }
  if (num_thresholds == 0) {
    AppendNumber(num_limits, argv);
  } else {
    // "2a3": 2 limits, 3 alert thresholds (see the scripts' headers).
    AppendNumber(num_limits, argv);
    argv->back() += 'a';
    argv->back() += static_cast<char>('0' + num_thresholds);
  }
}

Status Malformed(std::string_view script, const std::string& what) {
  return InternalError("redis: unexpected reply from the " + std::string(script) +
                       " script: " + what);
}

Status ErrorReplyStatus(const redisReply& reply) {
  return UnavailableError("redis: " + std::string(reply.str != nullptr ? reply.str : "",
                                                  reply.str != nullptr ? reply.len : 0));
}

// A Lua number the script packed as a little-endian double, back to the
// integer it holds; false unless it is one (finite, whole, below 2^53).
bool PackedInteger(const char* p, int64_t* out) {
  uint64_t bits = 0;
  for (int i = 7; i >= 0; --i) bits = (bits << 8) | static_cast<unsigned char>(p[i]);
  const double d = std::bit_cast<double>(bits);
  constexpr double kMax = 9007199254740992.0;  // 2^53
  if (!(d >= -kMax && d <= kMax) || d != std::trunc(d)) return false;
  *out = static_cast<int64_t>(d);
  return true;
}

// Decision `index` of a reply that passed CheckReplyShape: its `expected`
// packed integers into out.
Status DecisionIntegers(const redisReply& reply, size_t index, size_t expected,
                        std::string_view script, int64_t* out) {
  if (reply.type != REDIS_REPLY_ARRAY || reply.element == nullptr || index + 1 >= reply.elements) {
    return Malformed(script, "no decision " + std::to_string(index));
  }
  const redisReply* e = reply.element[index + 1];
  if (e == nullptr) return Malformed(script, "no decision " + std::to_string(index));
  if (e->type == REDIS_REPLY_ERROR) return ErrorReplyStatus(*e);
  if (e->type != REDIS_REPLY_STRING || e->str == nullptr || e->len != 8 * expected) {
    return Malformed(script, "decision " + std::to_string(index) + " is not " +
                                 std::to_string(expected) + " packed numbers");
  }
  for (size_t i = 0; i < expected; ++i) {
    if (!PackedInteger(e->str + 8 * i, &out[i])) {
      return Malformed(script, "decision " + std::to_string(index) + ": field " +
                                   std::to_string(i) + " is not an integer");
    }
  }
  return Status::Ok();
}

bool IsFlag(int64_t v) { return v == 0 || v == 1; }

}  // namespace

std::string StateKey(std::string_view rule, std::string_view tier, std::string_view subject) {
  std::string key;
  key.reserve(6 + rule.size() + subject.size() + (tier.empty() ? 0 : 1 + tier.size()));
  key.append("fg:{");
  for (char c : rule) {
    if (c == ':') {
      key.append("%3A");
    } else {
      key.push_back(c);
    }
  }
  key.append(":").append(subject).append("}");
  if (!tier.empty()) key.append(":").append(tier);
  return key;
}

std::string ThrottleKey(std::string_view key) {
  std::string out;
  out.reserve(7 + key.size());
  out.append("fg:cl:{").append(key).append("}");
  return out;
}

std::string Fingerprint(const core::CompiledRule& rule) {
  std::string def(kStateLayout);
  def += '|';
  def += AlgorithmName(rule.algorithm);
  def += '|';
  def += rule.zone ? rule.zone->name() : std::string("UTC");
  for (const core::LimitParams& l : rule.limits) {
    def += '|';
    def += std::to_string(l.count) + '/' + std::to_string(l.multiplier) + 'x' +
           std::to_string(static_cast<int>(l.unit)) + '^' + std::to_string(l.capacity);
  }
  // The alert words follow the algorithm's and their bits index the
  // thresholds: other thresholds, another state. A rule without alerts
  // keeps the fingerprint it always had.
  for (int j = 0; j < rule.alerts.num_thresholds; ++j) {
    def += j == 0 ? "|alerts:" : ",";
    def += std::to_string(rule.alerts.percents[j]);
  }
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  if (EVP_Digest(def.data(), def.size(), digest, &size, EVP_sha1(), nullptr) != 1 || size < 8) {
    // Without a digest, fall back to the definition itself: longer, as exact.
    return def;
  }
  static constexpr char kHex[] = "0123456789abcdef";
  std::string hex(16, '0');
  for (int i = 0; i < 8; ++i) {
    hex[2 * i] = kHex[digest[i] >> 4];
    hex[2 * i + 1] = kHex[digest[i] & 0xf];
  }
  return hex;
}

void AppendCheckCall(ScriptCall call, const core::CompiledRule& rule, std::string_view fingerprint,
                     std::span<const std::string> keys, std::span<const int64_t> costs,
                     std::optional<int64_t> now_ms, int64_t clock_ms,
                     std::vector<std::string>* argv) {
  const int n = static_cast<int>(rule.limits.size());
  argv->reserve(argv->size() + 6 + 2 * keys.size() +
                static_cast<size_t>(n * ArgvStride(rule.algorithm)));
  const core::AlertPolicy& alerts = rule.alerts;
  AppendHead(call, rule.algorithm, keys, fingerprint, now_ms, n, alerts.num_thresholds, argv);
  const int64_t around_ms = now_ms ? *now_ms : clock_ms;
  for (const core::LimitParams& l : rule.limits) {
    switch (rule.algorithm) {
      case Algorithm::kFixedWindow:
        AppendNumber(l.count, argv);
        if (l.unit < TimeUnit::kDay || l.zone == nullptr) {
          // Below a day windows are epoch-aligned whatever the zone
          // (core/calendar.h): the script computes them.
          AppendNumber(l.period_ms, argv);
          for (int i = 0; i < 4; ++i) argv->emplace_back("0");
        } else {
          // The script cannot load time zones: send the windows before,
          // around and after the caller's clock, so that a Redis clock up
          // to a whole window away still finds its window.
          const core::Window w = l.zone->WindowAt(l.unit, l.multiplier, around_ms);
          const core::Window before = l.zone->WindowAt(l.unit, l.multiplier, w.start_ms - 1);
          const core::Window after = l.zone->WindowAt(l.unit, l.multiplier, w.end_ms);
          argv->emplace_back("0");
          AppendNumber(before.start_ms, argv);
          AppendNumber(w.start_ms, argv);
          AppendNumber(w.end_ms, argv);
          AppendNumber(after.end_ms, argv);
        }
        break;
      case Algorithm::kSlidingWindow:
      case Algorithm::kSlidingLog:
      // A concurrency rule is never checked (the service refuses, and leases
      // have a script of their own, redis/lease_store.h): sent as
      // sliding_log's would be.
      case Algorithm::kConcurrency:
        AppendNumber(l.count, argv);
        AppendNumber(l.period_ms, argv);
        break;
      case Algorithm::kTokenBucket:
        AppendNumber(l.count, argv);
        AppendNumber(l.period_ms, argv);
        AppendNumber(l.capacity, argv);
        break;
      case Algorithm::kGcra:
        AppendNumber(l.emission_us, argv);
        AppendNumber(l.capacity, argv);
        break;
    }
  }
  if (alerts.enabled()) {
    // Per limit the period of its alert windows and the usages that reach
    // the thresholds (computed here: capacity x percent can pass 2^53).
    for (int i = 0; i < n; ++i) {
      AppendNumber(rule.limits[i].period_ms, argv);
      for (int j = 0; j < alerts.num_thresholds; ++j) {
        AppendNumber(alerts.units[static_cast<size_t>(i * alerts.num_thresholds + j)], argv);
      }
    }
  }
  // One cost stands for all when every decision has it (the usual case):
  // k fewer arguments for Redis to parse and the script to read.
  bool same = true;
  for (const int64_t cost : costs) same = same && cost == costs.front();
  if (same) {
    AppendNumber(costs.front(), argv);
  } else {
    for (const int64_t cost : costs) AppendNumber(cost, argv);
  }
}

void AppendCheckCall(ScriptCall call, const core::CompiledRule& rule, std::string_view fingerprint,
                     std::string_view key, int64_t cost, std::optional<int64_t> now_ms,
                     int64_t clock_ms, std::vector<std::string>* argv) {
  const std::string keys[] = {std::string(key)};
  const int64_t costs[] = {cost};
  AppendCheckCall(call, rule, fingerprint, keys, costs, now_ms, clock_ms, argv);
}

void AppendRefundCall(ScriptCall call, const core::CompiledRule& rule, std::string_view fingerprint,
                      std::string_view key, int64_t cost, std::optional<int64_t> now_ms,
                      int64_t clock_ms, std::vector<std::string>* argv) {
  AppendCheckCall(call, rule, fingerprint, key, -cost, now_ms, clock_ms, argv);
}

Status CheckReplyShape(Algorithm algorithm, const redisReply& reply, size_t decisions) {
  if (reply.type == REDIS_REPLY_ERROR) return ErrorReplyStatus(reply);
  const std::string_view script = AlgorithmName(algorithm);
  if (reply.type != REDIS_REPLY_ARRAY) {
    return Malformed(script, "type " + std::to_string(reply.type) + ", not an array");
  }
  if (reply.elements != 1 + decisions || reply.element == nullptr) {
    return Malformed(
        script, std::to_string(reply.elements) + " elements, not " + std::to_string(1 + decisions));
  }
  if (reply.element[0] == nullptr || reply.element[0]->type != REDIS_REPLY_INTEGER) {
    return Malformed(script, "the instant is not an integer");
  }
  return Status::Ok();
}

namespace {

// Decision `index` of a reply that passed CheckReplyShape, as
// DecodeCheckReply: with `refunded` (a refund's reply), its element holds
// one more packed integer per limit after the decision's, each limit's
// units given back, which go to *refunded.
Status DecodeDecision(const core::CompiledRule& rule, const redisReply& reply, size_t index,
                      Decision* decision, int64_t* now_ms, core::AlertOutcome* alerts,
                      core::RefundedUnits* refunded) {
  const int n = static_cast<int>(rule.limits.size());
  const int stride = ReplyStride(rule.algorithm);
  const int alert_fields = rule.alerts.enabled() ? kAlertReplyFields : 0;
  int64_t v[1 + kMaxLimitsPerRule * (7 + kAlertReplyFields + 1)];
  if (n < 1 || n > kMaxLimitsPerRule) return InternalError("rule with no limits");
  const std::string_view script = AlgorithmName(rule.algorithm);
  const size_t fields = 1 + static_cast<size_t>(n * (stride + alert_fields));
  if (Status s = DecisionIntegers(reply, index, fields + (refunded != nullptr ? n : 0), script, v);
      !s.ok()) {
    return s;
  }
  if (refunded != nullptr) {
    refunded->fill(0);
    for (int i = 0; i < n; ++i) {
      const int64_t units = v[fields + i];
      if (units < 0) return Malformed(script, "a limit gave back fewer than no units");
      (*refunded)[i] = units;
    }
  }
  bool flags_ok = IsFlag(v[0]);
  bool all_allowed = true;
  decision->num_limits = n;
  for (int i = 0; i < n; ++i) {
    const int64_t* f = v + 1 + i * stride;
    LimitStatus& st = decision->limits[i];
    st = LimitStatus{};
    flags_ok = flags_ok && IsFlag(f[0]);
    st.allowed = f[0] == 1;
    st.limit = f[1];
    st.remaining = f[2];
    if (rule.algorithm == Algorithm::kGcra) {
      // Microseconds, rounded up to ms as core::ApplyGcra does.
      st.retry_after_ms = f[3] < 0 ? -1 : core::CeilDiv(f[3], 1000);
      st.reset_after_ms = core::CeilDiv(f[4], 1000);
    } else {
      st.retry_after_ms = f[3];
      st.reset_after_ms = f[4];
    }
    if (stride == 7) {
      st.window_start_ms = f[5];
      st.window_end_ms = f[6];
    }
    all_allowed = all_allowed && st.allowed;
  }
  // The script admits iff every limit had room: anything else is not its reply.
  const bool admitted = v[0] == 1;
  if (!flags_ok || admitted != all_allowed) {
    return Malformed(script, "admitted does not match its limits");
  }
  core::FinishDecision(rule, admitted, decision);
  if (alerts != nullptr) {
    alerts->num_limits = alert_fields > 0 ? n : 0;
    alerts->at_ms = reply.element[0]->integer;
    const int m = rule.alerts.num_thresholds;
    for (int i = 0; i < alerts->num_limits; ++i) {
      const int64_t* f = v + 1 + n * stride + i * kAlertReplyFields;
      // Only bits of configured thresholds, and only on an admission.
      if (f[0] < 0 || f[0] >= (int64_t{1} << m) || (f[0] != 0 && !admitted)) {
        return Malformed(script, "bad alert bits");
      }
      alerts->fired[i] = static_cast<uint32_t>(f[0]);
      alerts->used[i] = decision->limits[i].limit - decision->limits[i].remaining;
      alerts->window[i] = core::Window{f[1], f[2]};
    }
  }
  if (now_ms != nullptr) *now_ms = reply.element[0]->integer;
  return Status::Ok();
}

}  // namespace

Status DecodeCheckReply(const core::CompiledRule& rule, const redisReply& reply, size_t index,
                        Decision* decision, int64_t* now_ms, core::AlertOutcome* alerts) {
  return DecodeDecision(rule, reply, index, decision, now_ms, alerts, nullptr);
}

Status DecodeCheckReply(const core::CompiledRule& rule, const redisReply& reply, Decision* decision,
                        int64_t* now_ms, core::AlertOutcome* alerts) {
  if (Status s = CheckReplyShape(rule.algorithm, reply, 1); !s.ok()) return s;
  return DecodeCheckReply(rule, reply, 0, decision, now_ms, alerts);
}

Status DecodeRefundReply(const core::CompiledRule& rule, const redisReply& reply,
                         core::RefundResult* result, int64_t* now_ms, core::AlertOutcome* alerts) {
  if (Status s = CheckReplyShape(rule.algorithm, reply, 1); !s.ok()) return s;
  return DecodeDecision(rule, reply, 0, &result->after, now_ms, alerts, &result->refunded);
}

Status AppendThrottleCall(ScriptCall call, std::string_view throttle_key, int64_t max_burst,
                          int64_t count, int64_t period_s, int64_t quantity,
                          std::optional<int64_t> now_ms, std::vector<std::string>* argv) {
  // The checks and messages of Limiter::Throttle, so both stores refuse alike.
  auto p = core::ThrottleParams(max_burst, count, period_s, quantity);
  if (!p.ok()) return p.status();
  const int64_t capacity = p->capacity;
  const int64_t emission_us = p->emission_us;
  const std::string keys[] = {std::string(throttle_key)};
  argv->reserve(argv->size() + 10);
  AppendHead(call, Algorithm::kGcra, keys, /*fingerprint=*/"", now_ms, 1, 0, argv);
  AppendNumber(emission_us, argv);
  AppendNumber(capacity, argv);
  AppendNumber(quantity, argv);
  return Status::Ok();
}

Status DecodeThrottleReply(const redisReply& reply, ThrottleResult* result, int64_t* now_ms) {
  if (Status s = CheckReplyShape(Algorithm::kGcra, reply, 1); !s.ok()) return s;
  int64_t v[6];
  if (Status s = DecisionIntegers(reply, 0, 6, "gcra", v); !s.ok()) return s;
  if (!IsFlag(v[0]) || v[0] != v[1]) {
    return Malformed("gcra", "bad admitted flag");
  }
  const bool allowed = v[1] == 1;
  result->limited = !allowed;
  result->limit = v[2];
  result->remaining = v[3];
  // redis-cell reports -1 both for "not limited" and for "never".
  result->retry_after_s = allowed ? -1 : core::CellSeconds(v[4]);
  result->reset_after_s = core::CellSeconds(v[5]);
  if (now_ms != nullptr) *now_ms = reply.element[0]->integer;
  return Status::Ok();
}

bool IsNoScript(const redisReply& reply) {
  return reply.type == REDIS_REPLY_ERROR && reply.str != nullptr && reply.len >= 8 &&
         std::memcmp(reply.str, "NOSCRIPT", 8) == 0;
}

}  // namespace floodgate::redis
