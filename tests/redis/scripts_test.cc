// The Lua scripts on a real redis-server, through script_call's builder and
// decoder and hiredis's blocking API: the golden vectors, random sequences
// compared field by field with core::EvaluateRule, Redis's own clock, clock
// skew on calendar windows, fingerprints, expiry, and CL.THROTTLE against
// the embedded Limiter.
//
// Explicit instants (the vectors' `t`) run far ahead of or behind the real
// clock, while a key's TTL counts real milliseconds: a state written at t=0
// with 1 ms to live could vanish before the next step at t=0. So tests with
// explicit instants run each script call in a MULTI/EXEC with PTTL (checked:
// every key has an expiry) and a PEXPIRE that stretches it (Redis does not
// expire keys while a transaction runs), and let the scripts judge staleness
// from the state itself, as they must anyway. The TIME tests check real
// expiry without stretching.
#include <gtest/gtest.h>
#include <hiredis/hiredis.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "api/open_services.h"
#include "core/rule_eval.h"
#include "floodgate/limiter.h"
#include "redis/script_call.h"
#include "redis/scripts.h"
#include "redis/wrong_type.h"
#include "service/limiter/blocking.h"
#include "service/limiter/limiter_core.h"
#include "testing/redis_server.h"
#include "testing/rules.h"
#include "testing/vectors.h"

namespace floodgate::redis {
namespace {

struct ReplyFree {
  void operator()(redisReply* r) const {
    if (r != nullptr) freeReplyObject(r);
  }
};
using Reply = std::unique_ptr<redisReply, ReplyFree>;

int64_t WallMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// One blocking connection plus the EVALSHA -> EVAL fallback.
class Conn {
 public:
  explicit Conn(int port) : c_(redisConnect("127.0.0.1", port)) {}
  ~Conn() {
    if (c_ != nullptr) redisFree(c_);
  }
  bool ok() const { return c_ != nullptr && c_->err == 0; }

  Reply Command(const std::vector<std::string>& argv) {
    std::vector<const char*> ptrs;
    std::vector<size_t> lens;
    for (const auto& a : argv) {
      ptrs.push_back(a.data());
      lens.push_back(a.size());
    }
    return Reply(static_cast<redisReply*>(
        redisCommandArgv(c_, static_cast<int>(argv.size()), ptrs.data(), lens.data())));
  }

  int64_t Integer(const std::vector<std::string>& argv) {
    Reply r = Command(argv);
    EXPECT_TRUE(r != nullptr && r->type == REDIS_REPLY_INTEGER) << argv[0];
    return r != nullptr && r->type == REDIS_REPLY_INTEGER ? r->integer : INT64_MIN;
  }

  // Runs one script call built by `build(mode, &argv)`: by SHA-1 first, by
  // source when Redis lacks it. With `hold`, the call runs in a MULTI/EXEC
  // followed by PTTL and a PEXPIRE of a day on `key` (see the file comment);
  // *pttl receives the PTTL (-2: no key). Returns the script's reply, or
  // null (with a test failure) when the transaction itself failed.
  template <typename Build>
  const redisReply* Run(Build build, const std::string& key, bool hold, int64_t* pttl) {
    for (ScriptCall mode : {ScriptCall::kEvalSha, ScriptCall::kEval}) {
      std::vector<std::string> argv;
      build(mode, &argv);
      if (!hold) {
        last_ = Command(argv);
        if (last_ == nullptr) return nullptr;
        if (mode == ScriptCall::kEvalSha && IsNoScript(*last_)) {
          ++fallbacks_;
          continue;
        }
        return last_.get();
      }
      Append({"MULTI"});
      Append(argv);
      Append({"PTTL", key});
      Append({"PEXPIRE", key, "86400000"});
      Append({"EXEC"});
      for (int i = 0; i < 5; ++i) {
        void* r = nullptr;
        if (redisGetReply(c_, &r) != REDIS_OK) {
          ADD_FAILURE() << "connection lost";
          return nullptr;
        }
        last_ = Reply(static_cast<redisReply*>(r));
      }
      if (last_ == nullptr || last_->type != REDIS_REPLY_ARRAY || last_->elements != 3 ||
          last_->element[1]->type != REDIS_REPLY_INTEGER) {
        ADD_FAILURE() << "MULTI/EXEC failed";
        return nullptr;
      }
      const redisReply* script = last_->element[0];
      if (mode == ScriptCall::kEvalSha && IsNoScript(*script)) {
        ++fallbacks_;
        continue;
      }
      const int64_t ttl = last_->element[1]->integer;
      // Every key has an expiry or does not exist (seed 002/004): PTTL is
      // never -1. It may be 0: a 1 ms TTL whose millisecond real time has
      // used up while the transaction keeps the key.
      EXPECT_TRUE(ttl == -2 || ttl >= 0) << key << " has PTTL " << ttl;
      if (pttl != nullptr) *pttl = ttl;
      return script;
    }
    return nullptr;
  }

  // One decision; `now_ms` explicit (held, see Run) or nullopt (Redis's TIME).
  Status Decide(const core::CompiledRule& rule, const std::string& fingerprint,
                const std::string& key, int64_t cost, std::optional<int64_t> now_ms,
                int64_t clock_ms, Decision* d, int64_t* script_now = nullptr,
                int64_t* pttl = nullptr, core::AlertOutcome* alerts = nullptr) {
    const redisReply* r = Run(
        [&](ScriptCall mode, std::vector<std::string>* argv) {
          AppendCheckCall(mode, rule, fingerprint, key, cost, now_ms, clock_ms, argv);
        },
        key, now_ms.has_value() && hold_, pttl);
    if (r == nullptr) return UnavailableError("no reply");
    return DecodeCheckReply(rule, *r, d, script_now, alerts);
  }

  // A refund of `cost` units at an explicit instant (held, see Run): the
  // peek after it, and what each limit gave back.
  Status Refund(const core::CompiledRule& rule, const std::string& fingerprint,
                const std::string& key, int64_t cost, int64_t now_ms, core::RefundResult* result,
                int64_t* script_now = nullptr, core::AlertOutcome* alerts = nullptr,
                int64_t* pttl = nullptr) {
    const redisReply* r = Run(
        [&](ScriptCall mode, std::vector<std::string>* argv) {
          AppendRefundCall(mode, rule, fingerprint, key, cost, now_ms, now_ms, argv);
        },
        key, hold_, pttl);
    if (r == nullptr) return UnavailableError("no reply");
    return DecodeRefundReply(rule, *r, result, script_now, alerts);
  }

  // CL.THROTTLE at an explicit instant (held, see Run).
  Status Throttle(const std::string& key, int64_t max_burst, int64_t count, int64_t period_s,
                  int64_t quantity, int64_t now_ms, ThrottleResult* out) {
    Status args;
    const redisReply* r = Run(
        [&](ScriptCall mode, std::vector<std::string>* argv) {
          args = AppendThrottleCall(mode, ThrottleKey(key), max_burst, count, period_s, quantity,
                                    now_ms, argv);
        },
        ThrottleKey(key), /*hold=*/true, nullptr);
    if (!args.ok()) return args;
    if (r == nullptr) return UnavailableError("no reply");
    return DecodeThrottleReply(*r, out, nullptr);
  }

  int fallbacks() const { return fallbacks_; }
  // Whether calls with an explicit instant are held (see Run); default yes.
  void set_hold(bool hold) { hold_ = hold; }

 private:
  void Append(const std::vector<std::string>& argv) {
    std::vector<const char*> ptrs;
    std::vector<size_t> lens;
    for (const auto& a : argv) {
      ptrs.push_back(a.data());
      lens.push_back(a.size());
    }
    redisAppendCommandArgv(c_, static_cast<int>(argv.size()), ptrs.data(), lens.data());
  }

  redisContext* c_;
  Reply last_;  // owns the reply Run returns a part of
  bool hold_ = true;
  int fallbacks_ = 0;
};

class ScriptsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    server_ = new testing::RedisServer();
    ASSERT_TRUE(server_->Start()) << server_->error();
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  void SetUp() override {
    ASSERT_NE(server_, nullptr);
    ASSERT_GT(server_->pid(), 0) << "redis-server did not start";
    conn_ = std::make_unique<Conn>(server_->port());
    ASSERT_TRUE(conn_->ok());
    Reply r = conn_->Command({"FLUSHALL"});
    ASSERT_TRUE(r != nullptr && r->type == REDIS_REPLY_STATUS);
  }

  // Random rules and sequences on the script and on core::EvaluateRule side
  // by side, field by field; with `refunds`, a quarter of the steps are
  // refunds (core::RefundRuleAndPeek against the script's refund).
  void Differential(bool refunds);

  static testing::RedisServer* server_;
  std::unique_ptr<Conn> conn_;
};
testing::RedisServer* ScriptsTest::server_ = nullptr;

// The bytes of `path`; false when it cannot be read.
bool ReadFile(const std::string& path, std::string* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in.good()) return false;
  std::stringstream bytes;
  bytes << in.rdbuf();
  *out = bytes.str();
  return true;
}

constexpr std::string_view kIncludeLine = "--! include ";

// src/redis/scripts/<name>.lua as cmake/embed_lua.cmake embeds it: each line
// `--! include <file>` (with its newline) replaced by the bytes of
// include/<file>. Empty when a file is missing.
std::string ExpandedScriptFile(std::string_view name) {
  const std::string dir = FLOODGATE_REDIS_SCRIPTS_DIR;
  std::string source, out;
  if (!ReadFile(dir + "/" + std::string(name) + ".lua", &source)) return "";
  for (size_t pos = 0; pos < source.size();) {
    size_t end = source.find('\n', pos);
    end = end == std::string::npos ? source.size() : end + 1;
    std::string_view line(source.data() + pos, end - pos);
    if (line.starts_with(kIncludeLine)) {
      line.remove_prefix(kIncludeLine.size());
      if (line.ends_with('\n')) line.remove_suffix(1);
      std::string included;
      if (!ReadFile(dir + "/include/" + std::string(line), &included)) return "";
      out += included;
    } else {
      out += line;
    }
    pos = end;
  }
  return out;
}

// Field-by-field difference between two decisions; empty when identical.
std::string Diff(const Decision& want, const Decision& got) {
  std::ostringstream out;
  auto field = [&](const std::string& name, int64_t w, int64_t g) {
    if (w != g) out << name << ": want " << w << ", got " << g << "; ";
  };
  field("allowed", want.allowed, got.allowed);
  field("shadow_denied", want.shadow_denied, got.shadow_denied);
  field("limit", want.limit, got.limit);
  field("remaining", want.remaining, got.remaining);
  field("retry_after_ms", want.retry_after_ms, got.retry_after_ms);
  field("reset_after_ms", want.reset_after_ms, got.reset_after_ms);
  field("binding", want.binding, got.binding);
  field("num_limits", want.num_limits, got.num_limits);
  for (int i = 0; i < want.num_limits && i < got.num_limits; ++i) {
    const LimitStatus& w = want.limits[i];
    const LimitStatus& g = got.limits[i];
    const std::string p = "limits[" + std::to_string(i) + "].";
    field(p + "allowed", w.allowed, g.allowed);
    field(p + "limit", w.limit, g.limit);
    field(p + "remaining", w.remaining, g.remaining);
    field(p + "retry_after_ms", w.retry_after_ms, g.retry_after_ms);
    field(p + "reset_after_ms", w.reset_after_ms, g.reset_after_ms);
    field(p + "window_start_ms", w.window_start_ms, g.window_start_ms);
    field(p + "window_end_ms", w.window_end_ms, g.window_end_ms);
    field(p + "period_ms", w.period_ms, g.period_ms);
  }
  return out.str();
}

TEST_F(ScriptsTest, EmbeddedScriptsAreTheFilesAndRedisAgreesOnTheirDigests) {
  ASSERT_EQ(AllScripts().size(), 5u);
  ASSERT_EQ(FeatureScripts().size(), 7u);
  std::vector<const Script*> scripts;
  for (const Script& s : AllScripts()) {
    EXPECT_EQ(&ScriptFor(s.algorithm), &s);
    EXPECT_EQ(s.name, AlgorithmName(s.algorithm));
    scripts.push_back(&s);
  }
  // The feature scripts include files too (include/prelude.lua, ...).
  for (const Script& s : FeatureScripts()) scripts.push_back(&s);
  for (const Script* script : scripts) {
    const Script& s = *script;
    SCOPED_TRACE(std::string(s.name));
    const std::string file = ExpandedScriptFile(s.name);
    ASSERT_FALSE(file.empty()) << "cannot read the script or a file it includes";
    EXPECT_EQ(s.source, file) << "rebuild: the embedded copy is stale";
    // Redis gets self-contained scripts: no include line is left unexpanded.
    EXPECT_FALSE(s.source.starts_with(kIncludeLine));
    EXPECT_EQ(s.source.find("\n" + std::string(kIncludeLine)), std::string_view::npos);
    Reply r = conn_->Command({"SCRIPT", "LOAD", std::string(s.source)});
    ASSERT_TRUE(r != nullptr && r->type == REDIS_REPLY_STRING);
    EXPECT_EQ(std::string(r->str, r->len), s.sha1);
  }
}

// The argument checks live in the prelude the five scripts share; each
// error still names its own script, for a count of fields that does not
// match ARGV[3] and for a cost that is not a number.
TEST_F(ScriptsTest, BadArgumentsAreRefusedInTheScriptsOwnName) {
  // Each algorithm with its ARGV fields per limit.
  const std::pair<std::string_view, int> algorithms[] = {{"fixed_window", 6},
                                                         {"sliding_window", 2},
                                                         {"sliding_log", 2},
                                                         {"token_bucket", 3},
                                                         {"gcra", 2}};
  for (const auto& [name, fields] : algorithms) {
    SCOPED_TRACE(std::string(name));
    const Script* script = nullptr;
    for (const Script& s : AllScripts()) {
      if (s.name == name) script = &s;
    }
    ASSERT_NE(script, nullptr);
    const std::string want = "ERR floodgate: bad " + std::string(name) + " arguments";
    auto expect_refused = [&](const std::vector<std::string>& argv) {
      Reply r = conn_->Command(argv);
      ASSERT_TRUE(r != nullptr && r->type == REDIS_REPLY_ERROR);
      EXPECT_EQ(std::string(r->str, r->len), want);
    };
    // One limit announced, none of its fields given.
    const std::string source(script->source);
    std::vector<std::string> argv = {"EVAL", source, "1", "k", "", "1000", "1"};
    expect_refused(argv);
    // Every field of the limit, then a cost that is no number.
    argv.insert(argv.end(), fields, "1000");
    argv.push_back("x");
    expect_refused(argv);
    EXPECT_EQ(conn_->Integer({"EXISTS", "k"}), 0);
  }
}

TEST_F(ScriptsTest, GoldenVectorsThroughEvalsha) {
  // Start with an empty script cache: the first call of each script gets
  // NOSCRIPT and goes through EVAL, the rest through EVALSHA.
  Reply flushed = conn_->Command({"SCRIPT", "FLUSH"});
  ASSERT_TRUE(flushed != nullptr && flushed->type == REDIS_REPLY_STATUS);

  const auto cases = testing::LoadVectors(testing::VectorsDir());
  ASSERT_GE(cases.size(), 10u);
  int steps = 0, alert_steps = 0;
  for (const auto& vc : cases) {
    SCOPED_TRACE(vc.file + ": " + vc.name);
    ASSERT_TRUE(conn_->Command({"FLUSHALL"}) != nullptr);
    if (vc.rule.alerts.enabled()) alert_steps += static_cast<int>(vc.steps.size());
    for (size_t i = 0; i < vc.steps.size(); ++i) {
      SCOPED_TRACE("step " + std::to_string(i));
      const auto& step = vc.steps[i];
      const std::vector<Limit>& limits =
          step.tier.empty() ? vc.rule.limits : vc.rule.tiers.at(step.tier);
      auto rule = core::CompileRule(vc.rule, step.tier, limits);
      ASSERT_TRUE(rule.ok()) << rule.status().ToString();
      const std::string key = StateKey(vc.rule.name, step.tier, step.key);
      core::RefundResult r;
      Decision& d = r.after;
      int64_t script_now = 0;
      core::AlertOutcome alerts;
      const Status s = step.refund > 0
                           ? conn_->Refund(*rule, Fingerprint(*rule), key, step.refund, step.t_ms,
                                           &r, &script_now, &alerts)
                           : conn_->Decide(*rule, Fingerprint(*rule), key, step.cost, step.t_ms,
                                           step.t_ms, &d, &script_now, nullptr, &alerts);
      ASSERT_TRUE(s.ok()) << s.ToString();
      EXPECT_EQ(script_now, step.t_ms);
      testing::ExpectMatches(step, d);
      if (step.refund > 0) testing::ExpectRefunded(step, r);
      testing::ExpectAlerts(step, testing::Fired(*rule, alerts));
      ++steps;
    }
  }
  EXPECT_GE(steps, 60);
  EXPECT_GE(conn_->fallbacks(), 1);
  EXPECT_LE(conn_->fallbacks(), 5);  // once per script, then EVALSHA finds it
  EXPECT_GE(alert_steps, 30);
}

// One random rule for the differential test, or nullopt when it does not
// compile (a limit out of an algorithm's bounds).
std::optional<core::CompiledRule> RandomRule(std::mt19937_64& rng, bool* big) {
  static const char* const kSmall[] = {"1/ms", "3/10ms", "2/s",   "5/s",     "10/minute",
                                       "3/5m", "4/hour", "2/day", "3/week",  "1/month",
                                       "5/2d", "7/year", "6/7d",  "2/3month"};
  static const char* const kBig[] = {"100000000/day", "1000000000/s", "999999937/hour",
                                     "150119987579/minute", "100000/ms"};
  static const Algorithm kAlgorithms[] = {Algorithm::kFixedWindow, Algorithm::kSlidingWindow,
                                          Algorithm::kSlidingLog, Algorithm::kTokenBucket,
                                          Algorithm::kGcra};
  static const char* const kZones[] = {"UTC", "America/New_York", "Asia/Kolkata", "+05:45"};
  Rule rule;
  rule.name = "rand";
  rule.algorithm = kAlgorithms[rng() % 5];
  // Counts near the exactness bounds: sliding_log is capped far lower.
  *big = rule.algorithm != Algorithm::kSlidingLog && rng() % 5 == 0;
  const int n = 1 + static_cast<int>(rng() % 3);
  for (int i = 0; i < n; ++i) {
    const char* text = *big ? kBig[rng() % std::size(kBig)] : kSmall[rng() % std::size(kSmall)];
    rule.limits.push_back(*ParseLimit(text));
  }
  if ((rule.algorithm == Algorithm::kTokenBucket || rule.algorithm == Algorithm::kGcra) &&
      rng() % 2 == 0) {
    for (int i = 0; i < n; ++i) {
      const int64_t c = rule.limits[i].count;
      rule.burst.push_back(rule.algorithm == Algorithm::kGcra
                               ? static_cast<int64_t>(rng() % (c + 3))
                               : 1 + static_cast<int64_t>(rng() % (2 * c)));
    }
  }
  rule.timezone = kZones[rng() % std::size(kZones)];
  rule.shadow = rng() % 6 == 0;
  // Half the rules alert, at one to four of these thresholds.
  if (rng() % 2 == 0) {
    static const int kPercents[] = {1, 10, 34, 50, 80, 90, 99, 100};
    for (int p : kPercents) {
      if (rng() % 3 == 0 && rule.alerts.thresholds.size() < 4) rule.alerts.thresholds.push_back(p);
    }
    if (rule.alerts.thresholds.empty()) rule.alerts.thresholds.push_back(80);
    rule.alerts.webhook = "http://127.0.0.1:9/hook";
  }
  auto compiled = core::CompileRule(rule, "", rule.limits);
  if (!compiled.ok()) return std::nullopt;
  return *compiled;
}

void ScriptsTest::Differential(bool refunds) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(3);
  int sequences = 0;
  int steps = 0;
  int denials = 0;
  int steps_back = 0;
  int refund_steps = 0;
  int64_t refunded_units = 0;
  int failures = 0;
  int alerts_fired = 0;
  int per_algorithm[5] = {};
  for (uint64_t seed = 1; std::chrono::steady_clock::now() < deadline && failures < 3; ++seed) {
    std::mt19937_64 rng(seed);
    bool big = false;
    auto rule = RandomRule(rng, &big);
    if (!rule) continue;
    SCOPED_TRACE("seed " + std::to_string(seed) + ", " +
                 std::string(AlgorithmName(rule->algorithm)));
    ++sequences;
    ++per_algorithm[static_cast<int>(rule->algorithm)];
    std::vector<int64_t> state(rule->state_words + 1, 0);
    const std::string fp = Fingerprint(*rule);
    const std::string key = StateKey(rule->name, "", "s" + std::to_string(seed));
    int64_t shortest = INT64_MAX, longest = 0, max_count = 0;
    for (const auto& l : rule->limits) {
      shortest = std::min(shortest, l.period_ms);
      longest = std::max(longest, l.period_ms);
      max_count = std::max(max_count, l.capacity);
    }
    // 2023-11-14 plus a random offset of up to ~3 years.
    int64_t t = 1'700'000'000'000 + static_cast<int64_t>(rng() % 100'000'000'000);
    bool failed = false;
    for (int i = 0; i < 40 && !failed; ++i) {
      const uint64_t kind = rng() % 20;
      if (kind < 11) {
        t += static_cast<int64_t>(rng() % (2 * static_cast<uint64_t>(shortest) + 1));
      } else if (kind < 14) {
        t += static_cast<int64_t>(rng() % (static_cast<uint64_t>(shortest) / 4 + 2));
      } else if (kind < 16) {
        t += static_cast<int64_t>(rng() % (static_cast<uint64_t>(longest) + 1));
      } else if (kind < 19) {
        t -= static_cast<int64_t>(rng() % (2 * static_cast<uint64_t>(shortest) + 1));
        ++steps_back;
      } else {
        t -= static_cast<int64_t>(rng() % (static_cast<uint64_t>(longest) + 1));
        ++steps_back;
      }
      int64_t cost;
      const uint64_t c = rng() % 10;
      if (c < 5) {
        cost = big ? static_cast<int64_t>(rng() % (static_cast<uint64_t>(max_count) / 3 + 1)) : 1;
      } else if (c < 7) {
        cost = 0;
      } else {
        cost = static_cast<int64_t>(rng() % (static_cast<uint64_t>(max_count) + 2));
      }

      core::RefundResult want_refund, got_refund;
      Decision& want = want_refund.after;
      core::AlertOutcome want_alerts, got_alerts;
      // Drawn only with refunds: the sequences without are those they always were.
      const bool refund = refunds && rng() % 4 == 0;
      if (refund) cost = std::max<int64_t>(cost, 1);
      const int64_t expires =
          refund ? core::RefundRuleAndPeek(*rule, state.data(), t, cost, &want_refund)
                 : core::EvaluateRuleWithAlerts(*rule, state.data(), t, cost, &want, &want_alerts);
      Decision& got = got_refund.after;
      int64_t pttl = 0;
      const Status s =
          refund ? conn_->Refund(*rule, fp, key, cost, t, &got_refund, nullptr, &got_alerts, &pttl)
                 : conn_->Decide(*rule, fp, key, cost, t, t, &got, nullptr, &pttl, &got_alerts);
      ++steps;
      if (refund) ++refund_steps;
      if (!s.ok()) {
        ADD_FAILURE() << "step " << i << " t=" << t << " cost=" << cost << ": " << s.ToString();
        failed = true;
        break;
      }
      const std::string diff = Diff(want, got);
      if (!diff.empty()) {
        ADD_FAILURE() << "step " << i << " t=" << t << " cost=" << cost << ": " << diff;
        failed = true;
        break;
      }
      if (refund && !std::equal(want_refund.refunded.begin(),
                                want_refund.refunded.begin() + rule->limits.size(),
                                got_refund.refunded.begin())) {
        ADD_FAILURE() << "step " << i << " t=" << t << " cost=" << cost
                      << ": units given back differ; the engine "
                      << ::testing::PrintToString(want_refund.refunded) << ", the script "
                      << ::testing::PrintToString(got_refund.refunded);
        failed = true;
        break;
      }
      if (refund) refunded_units += want_refund.most_refunded();
      const auto want_fired = testing::Fired(*rule, want_alerts);
      if (testing::Fired(*rule, got_alerts) != want_fired) {
        ADD_FAILURE() << "step " << i << " t=" << t << " cost=" << cost
                      << ": alerts differ; the engine fired "
                      << ::testing::PrintToString(want_fired) << ", the script "
                      << ::testing::PrintToString(testing::Fired(*rule, got_alerts));
        failed = true;
        break;
      }
      alerts_fired += static_cast<int>(want_fired.size());
      if (want.shadow_denied || !want.allowed) ++denials;
      // A write sets the TTL to the state's own expiry, relative to now.
      if (!refund && want.allowed && !want.shadow_denied && cost > 0) {
        const int64_t ttl = expires - t;
        EXPECT_GE(ttl, 1) << "step " << i;
        EXPECT_LE(pttl, ttl) << "step " << i;
        EXPECT_GE(pttl, std::max<int64_t>(0, ttl - 2000)) << "step " << i;
      }
    }
    core::ReleaseRuleState(rule->algorithm, state.data());
    if (failed) ++failures;
  }
  EXPECT_GE(sequences, 30);
  for (int a : per_algorithm) EXPECT_GE(a, 5);
  EXPECT_GE(denials, sequences);  // the limits were actually reached
  EXPECT_GE(steps_back, sequences / 2);
  EXPECT_GE(alerts_fired, sequences / 2);  // the alerting rules crossed thresholds
  if (refunds) {
    EXPECT_GE(refund_steps, steps / 8);
    EXPECT_GE(refunded_units, refund_steps / 4);  // refunds gave units back, not only nothing
  }
  std::printf(
      "differential: %d sequences, %d steps, %d denials, %d steps back, %d alerts, %d refunds\n",
      sequences, steps, denials, steps_back, alerts_fired, refund_steps);
}

TEST_F(ScriptsTest, RandomSequencesMatchTheEngineFieldByField) { Differential(false); }

TEST_F(ScriptsTest, RandomSequencesWithRefundsMatchTheEngineFieldByField) { Differential(true); }

TEST_F(ScriptsTest, SlidingLogKeepsCursorsPastAStepBack) {
  // The engine's log never counts again an event a cursor has passed, even
  // when a later request comes with an earlier time; the script keeps the
  // cursors in the state to agree.
  const auto rule =
      testing::Compile(testing::MakeRule(Algorithm::kSlidingLog, {"1/s", "5/minute"}));
  testing::Subject engine(testing::MakeRule(Algorithm::kSlidingLog, {"1/s", "5/minute"}));
  const std::string key = StateKey("r", "", "k");
  const std::string fp = Fingerprint(rule);
  for (const auto& [t, cost] : std::vector<std::pair<int64_t, int64_t>>{
           {0, 1}, {1500, 0}, {800, 1}, {900, 1}, {2500, 0}, {2600, 1}}) {
    SCOPED_TRACE("t=" + std::to_string(t));
    const Decision want = engine.At(t, cost);
    Decision got;
    ASSERT_TRUE(conn_->Decide(rule, fp, key, cost, t, t, &got).ok());
    EXPECT_EQ(Diff(want, got), "");
  }
}

TEST_F(ScriptsTest, SlidingLogDoesNotLockOutAfterAStepBack) {
  // A request at the newest event's instant after a later peek moved the 1/s
  // cursor past that event. The script logs it as a new event, so the 1/s
  // limit counts it until it ages out, then has room again. (The engine
  // merges it into the passed event and keeps its unit in the 1/s sum for
  // good: remaining 0 and a negative reset from then on.)
  const auto rule =
      testing::Compile(testing::MakeRule(Algorithm::kSlidingLog, {"1/s", "5/minute"}));
  const std::string key = StateKey("r", "", "k");
  const std::string fp = Fingerprint(rule);
  Decision d;
  ASSERT_TRUE(conn_->Decide(rule, fp, key, 1, 0, 0, &d).ok());
  ASSERT_TRUE(conn_->Decide(rule, fp, key, 0, 1500, 1500, &d).ok());
  EXPECT_EQ(d.limits[0].remaining, 1);
  ASSERT_TRUE(conn_->Decide(rule, fp, key, 1, 0, 0, &d).ok());  // clamped to the newest event
  EXPECT_TRUE(d.allowed);
  EXPECT_EQ(d.limits[0].remaining, 0);
  EXPECT_EQ(d.limits[1].remaining, 3);
  ASSERT_TRUE(conn_->Decide(rule, fp, key, 0, 1500, 1500, &d).ok());
  EXPECT_EQ(d.limits[0].remaining, 1);
  EXPECT_EQ(d.limits[0].reset_after_ms, 0);
  EXPECT_EQ(d.limits[1].remaining, 3);
  EXPECT_EQ(d.limits[1].reset_after_ms, 58'500);
  ASSERT_TRUE(conn_->Decide(rule, fp, key, 1, 200'000, 200'000, &d).ok());
  EXPECT_TRUE(d.allowed);
  EXPECT_EQ(d.limits[0].reset_after_ms, 1000);
}

TEST_F(ScriptsTest, SlidingLogStaysBoundedAndIsDeletedWhenEmpty) {
  const auto rule =
      testing::Compile(testing::MakeRule(Algorithm::kSlidingLog, {"50/s", "200/minute"}));
  const std::string key = StateKey("r", "", "k");
  const std::string fp = Fingerprint(rule);
  // Events logged: 9 bytes each after the header (see sliding_log.lua).
  auto logged = [&]() {
    Reply r = conn_->Command({"EVAL",
                              "local s = redis.call('GET', KEYS[1]) if not s then return -1 end "
                              "local fl = string.byte(s, 1) local n = string.byte(s, 2 + fl) "
                              "return (#s - 2 - fl - 8 * n) / 9",
                              "1", key});
    return r != nullptr && r->type == REDIS_REPLY_INTEGER ? r->integer : -100;
  };
  int64_t t = 1'000'000;
  int admitted = 0;
  for (int i = 0; i < 600; ++i, t += 7) {
    Decision d;
    ASSERT_TRUE(conn_->Decide(rule, fp, key, 1, t, t, &d).ok());
    admitted += d.allowed;
    const int64_t events = logged();
    ASSERT_GE(events, 1);
    ASSERT_LE(events, 200) << "the log outgrew the longest limit's count";
  }
  EXPECT_EQ(admitted, 200);  // 600 requests over 4.2 s: the minute's 200
  // A peek after the longest window has passed finds nothing: the key goes.
  Decision d;
  ASSERT_TRUE(conn_->Decide(rule, fp, key, 0, t + 60'000, t + 60'000, &d).ok());
  EXPECT_EQ(d.remaining, 50);
  EXPECT_EQ(conn_->Integer({"EXISTS", key}), 0);
}

// One call deciding many keys (the store's batches on a standalone server):
// each decision is the engine's, made in KEYS order. `subjects` keys per
// rule; with `distinct`, no call names one twice, otherwise calls name some
// more than once (the later decision seeing the earlier one's write).
// Instants follow the wall clock, so the states' TTLs hold in real time
// without stretching.
struct ManyCounts {
  int calls = 0, decisions = 0, denials = 0, repeats = 0;
};
ManyCounts ManyDecisionsInOneCall(Conn& conn, int subjects, bool distinct) {
  ManyCounts n;
  for (uint64_t seed = 1; seed <= 60; ++seed) {
    std::mt19937_64 rng(seed);
    bool big = false;
    auto rule = RandomRule(rng, &big);
    if (!rule) continue;
    SCOPED_TRACE("seed " + std::to_string(seed) + ", " +
                 std::string(AlgorithmName(rule->algorithm)));
    const std::string fp = Fingerprint(*rule);
    std::vector<std::vector<int64_t>> states(subjects,
                                             std::vector<int64_t>(rule->state_words + 1, 0));
    int64_t max_count = 0;
    for (const auto& l : rule->limits) max_count = std::max(max_count, l.capacity);
    int64_t t = WallMs();
    bool failed = false;
    for (int round = 0; round < 6 && !failed; ++round, ++n.calls) {
      t += static_cast<int64_t>(rng() % 50);
      const size_t k = 1 + rng() % 40;
      // Distinct: the first k of the subjects in a random order (shuffled
      // only then, so the other shape draws the same numbers as before).
      std::vector<int> order(subjects);
      for (int i = 0; i < subjects; ++i) order[i] = i;
      if (distinct) std::shuffle(order.begin(), order.end(), rng);
      std::vector<std::string> keys;
      std::vector<int64_t> costs;
      std::vector<int> subject;
      std::vector<bool> seen(subjects, false);
      for (size_t j = 0; j < k; ++j) {
        subject.push_back(distinct ? order[j] : static_cast<int>(rng() % subjects));
        if (seen[subject.back()]) ++n.repeats;
        seen[subject.back()] = true;
        keys.push_back(StateKey(rule->name, "",
                                "m" + std::to_string(seed) + ":" + std::to_string(subject.back())));
        costs.push_back(rng() % 6 == 0 ? 0
                        : big          ? static_cast<int64_t>(rng() % (max_count / 4 + 1))
                                       : 1 + static_cast<int64_t>(rng() % 2));
      }
      // Every other call, one cost for all (sent once).
      if (round % 2 == 1) costs.assign(k, costs.front());
      std::vector<std::string> argv;
      AppendCheckCall(ScriptCall::kEval, *rule, fp, keys, costs, t, t, &argv);
      Reply reply = conn.Command(argv);
      EXPECT_TRUE(reply != nullptr);
      if (reply == nullptr) return n;
      const Status shape = CheckReplyShape(rule->algorithm, *reply, k);
      EXPECT_TRUE(shape.ok()) << shape.ToString();
      if (!shape.ok()) return n;
      for (size_t j = 0; j < k; ++j) {
        Decision want, got;
        core::AlertOutcome want_alerts, got_alerts;
        core::EvaluateRuleWithAlerts(*rule, states[subject[j]].data(), t, costs[j], &want,
                                     &want_alerts);
        int64_t now = 0;
        const Status s = DecodeCheckReply(*rule, *reply, j, &got, &now, &got_alerts);
        EXPECT_TRUE(s.ok()) << "decision " << j << ": " << s.ToString();
        if (!s.ok()) return n;
        EXPECT_EQ(now, t);
        const std::string diff = Diff(want, got);
        if (!diff.empty()) {
          ADD_FAILURE() << "decision " << j << " of " << k << " (subject " << subject[j]
                        << ", cost " << costs[j] << "): " << diff;
          failed = true;
          break;
        }
        EXPECT_EQ(testing::Fired(*rule, got_alerts), testing::Fired(*rule, want_alerts))
            << "decision " << j << " of " << k;
        ++n.decisions;
        if (!want.allowed) ++n.denials;
      }
    }
    for (auto& state : states) core::ReleaseRuleState(rule->algorithm, state.data());
  }
  return n;
}

TEST_F(ScriptsTest, ManyDecisionsInOneCallMatchTheEngineInOrder) {
  const ManyCounts n = ManyDecisionsInOneCall(*conn_, 5, /*distinct=*/false);
  EXPECT_GE(n.calls, 100);
  EXPECT_GE(n.decisions, 1000);
  EXPECT_GE(n.repeats, 500);  // subjects named more than once in a call
  EXPECT_GE(n.denials, 10);   // the limits were actually reached
}

// The same with no key named twice in a call (k of 40 subjects, most of
// them holding state from earlier calls): the shape of a busy server's
// batches, where each decision reads a state the call has not touched.
TEST_F(ScriptsTest, DistinctKeysInOneCallMatchTheEngine) {
  const ManyCounts n = ManyDecisionsInOneCall(*conn_, 40, /*distinct=*/true);
  EXPECT_GE(n.calls, 100);
  EXPECT_GE(n.decisions, 1000);
  EXPECT_EQ(n.repeats, 0);
  EXPECT_GE(n.denials, 10);
}

// Decisions on Redis's clock: the script's now is the wall clock, and the
// figures are the engine's at that instant.
TEST_F(ScriptsTest, TimeFromRedisMatchesTheEngineAtTheScriptsInstant) {
  const std::vector<Rule> rules = {
      testing::MakeRule(Algorithm::kFixedWindow, {"3/hour", "5/day"}, {}, "Asia/Kolkata"),
      testing::MakeRule(Algorithm::kSlidingWindow, {"3/minute"}),
      testing::MakeRule(Algorithm::kSlidingLog, {"3/minute", "4/hour"}),
      testing::MakeRule(Algorithm::kTokenBucket, {"3/minute"}),
      testing::MakeRule(Algorithm::kGcra, {"3/minute"}),
  };
  for (const Rule& r : rules) {
    SCOPED_TRACE(std::string(AlgorithmName(r.algorithm)));
    const auto rule = testing::Compile(r);
    std::vector<int64_t> state(rule.state_words + 1, 0);
    const std::string key = StateKey("r", "", AlgorithmName(r.algorithm));
    for (int i = 0; i < 5; ++i) {
      const int64_t before = WallMs();
      Decision got;
      int64_t now = 0;
      ASSERT_TRUE(
          conn_->Decide(rule, Fingerprint(rule), key, 1, std::nullopt, before, &got, &now).ok());
      const int64_t after = WallMs();
      EXPECT_GE(now, before - 5);  // same machine: Redis's TIME is our clock
      EXPECT_LE(now, after + 5);
      Decision want;
      const int64_t expires = core::EvaluateRule(rule, state.data(), now, 1, &want);
      EXPECT_EQ(Diff(want, got), "") << "call " << i;
      EXPECT_EQ(got.allowed, i < 3);
      const int64_t pttl = conn_->Integer({"PTTL", key});
      EXPECT_GT(pttl, 0);
      // fixed_window keeps the expiry of the windows' first write (SETRANGE),
      // whose SET PX counted from Redis's clock at the SET: up to 1 ms after
      // the TIME that script read.
      EXPECT_LE(pttl, expires - now + 1);
      EXPECT_GE(pttl, expires - now - 1000);
    }
    core::ReleaseRuleState(rule.algorithm, state.data());
  }
}

TEST_F(ScriptsTest, StatesExpireByThemselves) {
  // 2 per second: a state lives at most 2 s (sliding_window's two buckets)
  // on Redis's clock, then its key is gone. Seconds, not milliseconds, so
  // that a stall between a decision and its PTTL does not outlast the
  // state; the five wait out their expiry together.
  std::vector<std::string> keys;
  for (Algorithm a : {Algorithm::kFixedWindow, Algorithm::kSlidingWindow, Algorithm::kSlidingLog,
                      Algorithm::kTokenBucket, Algorithm::kGcra}) {
    SCOPED_TRACE(std::string(AlgorithmName(a)));
    const auto rule = testing::Compile(testing::MakeRule(a, {"2/s"}));
    const std::string key = StateKey("r", "", "expiring:" + std::string(AlgorithmName(a)));
    Decision d;
    ASSERT_TRUE(conn_->Decide(rule, Fingerprint(rule), key, 1, std::nullopt, WallMs(), &d).ok());
    ASSERT_TRUE(d.allowed);
    const int64_t pttl = conn_->Integer({"PTTL", key});
    EXPECT_GT(pttl, 0);
    EXPECT_LE(pttl, 2000);
    keys.push_back(key);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(2100));
  for (const std::string& key : keys) EXPECT_EQ(conn_->Integer({"EXISTS", key}), 0) << key;
}

TEST_F(ScriptsTest, CalendarWindowsRefuseARedisClockOutsideThem) {
  const auto rule =
      testing::Compile(testing::MakeRule(Algorithm::kFixedWindow, {"5/minute", "10/day"}));
  const std::string fp = Fingerprint(rule);
  const std::string key = StateKey("r", "", "skew");
  constexpr int64_t kDay = 86'400'000;
  // Our clock five days behind Redis's: the windows sent end two days before
  // Redis's now. The whole call fails, the minute limit included, and
  // nothing is written.
  Decision d;
  Status s = conn_->Decide(rule, fp, key, 1, std::nullopt, WallMs() - 5 * kDay, &d);
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  EXPECT_NE(s.message().find("ERR floodgate: clock skew"), std::string::npos) << s.message();
  EXPECT_EQ(conn_->Integer({"EXISTS", key}), 0);
  // Ahead by five days: refused too.
  s = conn_->Decide(rule, fp, key, 1, std::nullopt, WallMs() + 5 * kDay, &d);
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  // Within a day either way, the windows still hold Redis's now.
  int64_t now = 0;
  ASSERT_TRUE(
      conn_->Decide(rule, fp, key, 1, std::nullopt, WallMs() - kDay + 60'000, &d, &now).ok());
  EXPECT_TRUE(d.allowed);
  EXPECT_EQ(d.limits[1].remaining, 9);
  ASSERT_TRUE(conn_->Decide(rule, fp, key, 1, std::nullopt, WallMs() + kDay - 60'000, &d).ok());
  EXPECT_EQ(d.limits[1].remaining, 8);
  // Once the state counts today's window, it alone places Redis's now: a
  // skewed caller still gets exact answers for the window already counted.
  ASSERT_TRUE(conn_->Decide(rule, fp, key, 1, std::nullopt, WallMs() - 5 * kDay, &d).ok());
  EXPECT_EQ(d.limits[1].remaining, 7);
  EXPECT_EQ(d.limits[1].window_start_ms % kDay, 0);  // UTC midnight
}

TEST_F(ScriptsTest, AnotherFingerprintStartsFresh) {
  const auto two = testing::Compile(testing::MakeRule(Algorithm::kFixedWindow, {"2/minute"}));
  const auto three = testing::Compile(testing::MakeRule(Algorithm::kFixedWindow, {"3/minute"}));
  const auto pair =
      testing::Compile(testing::MakeRule(Algorithm::kFixedWindow, {"2/minute", "9/hour"}));
  const std::string key = StateKey("r", "", "k");
  Decision d;
  for (int i = 0; i < 2; ++i)
    ASSERT_TRUE(conn_->Decide(two, Fingerprint(two), key, 1, 0, 0, &d).ok());
  ASSERT_TRUE(conn_->Decide(two, Fingerprint(two), key, 1, 0, 0, &d).ok());
  EXPECT_FALSE(d.allowed);
  // The rule was reloaded as 3/minute: its subjects start fresh.
  ASSERT_TRUE(conn_->Decide(three, Fingerprint(three), key, 1, 1, 1, &d).ok());
  EXPECT_TRUE(d.allowed);
  EXPECT_EQ(d.remaining, 2);
  // And back again: 3/minute's state is not 2/minute's either.
  ASSERT_TRUE(conn_->Decide(two, Fingerprint(two), key, 1, 2, 2, &d).ok());
  EXPECT_TRUE(d.allowed);
  EXPECT_EQ(d.remaining, 1);
  // An empty fingerprint takes the state as it is (CL.THROTTLE's case)...
  ASSERT_TRUE(conn_->Decide(three, "", key, 0, 3, 3, &d).ok());
  EXPECT_EQ(d.remaining, 2);
  // ... unless its layout differs (another number of limits).
  ASSERT_TRUE(conn_->Decide(pair, "", key, 0, 3, 3, &d).ok());
  EXPECT_EQ(d.limits[0].remaining, 2);
  EXPECT_EQ(d.limits[1].remaining, 9);
}

TEST_F(ScriptsTest, DenialsAndPeeksWriteNothing) {
  conn_->set_hold(false);  // the TTL itself is what this test watches
  for (Algorithm a : {Algorithm::kFixedWindow, Algorithm::kSlidingWindow, Algorithm::kSlidingLog,
                      Algorithm::kTokenBucket, Algorithm::kGcra}) {
    SCOPED_TRACE(std::string(AlgorithmName(a)));
    const auto rule = testing::Compile(testing::MakeRule(a, {"1/hour"}));
    const std::string fp = Fingerprint(rule);
    const std::string key = StateKey("r", "", "quiet");
    Decision d;
    // A peek or a denial on a new subject creates no key.
    ASSERT_TRUE(conn_->Decide(rule, fp, key, 0, 1000, 1000, &d).ok());
    ASSERT_TRUE(conn_->Decide(rule, fp, key, 2, 1000, 1000, &d).ok());
    EXPECT_FALSE(d.allowed);
    EXPECT_EQ(d.retry_after_ms, -1);
    EXPECT_EQ(conn_->Integer({"EXISTS", key}), 0);
    ASSERT_TRUE(conn_->Decide(rule, fp, key, 1, 1000, 1000, &d).ok());
    Reply before = conn_->Command({"GET", key});
    ASSERT_TRUE(before != nullptr && before->type == REDIS_REPLY_STRING);
    conn_->Integer({"PEXPIRE", key, "5000000"});  // a mark a write would replace
    ASSERT_TRUE(conn_->Decide(rule, fp, key, 1, 2000, 2000, &d).ok());
    EXPECT_FALSE(d.allowed);
    ASSERT_TRUE(conn_->Decide(rule, fp, key, 0, 3000, 3000, &d).ok());
    Reply after = conn_->Command({"GET", key});
    ASSERT_TRUE(after != nullptr && after->type == REDIS_REPLY_STRING);
    EXPECT_EQ(std::string(before->str, before->len), std::string(after->str, after->len));
    EXPECT_GT(conn_->Integer({"PTTL", key}), 4'000'000);
    ASSERT_TRUE(conn_->Command({"DEL", key}) != nullptr);
  }
}

// A state key of another type (someone's LPUSH, HSET or SADD on it) fails
// its own decision, naming the type found, and is left as it was; the
// call's other decisions are made and written. For every algorithm, with
// and without alerts (fixed_window's fast path and its general one), on
// Redis's clock and at an explicit instant.
TEST_F(ScriptsTest, AKeyOfAnotherTypeFailsItsDecisionAloneAndIsLeftAlone) {
  std::vector<Rule> rules;
  for (Algorithm a : {Algorithm::kFixedWindow, Algorithm::kSlidingWindow, Algorithm::kSlidingLog,
                      Algorithm::kTokenBucket, Algorithm::kGcra}) {
    rules.push_back(testing::MakeRule(a, {"5/minute"}));
    rules.back().name = AlgorithmName(a);
    rules.push_back(testing::MakeRule(a, {"5/minute", "9/hour"}));
    rules.back().name = std::string(AlgorithmName(a)) + "_two";
    rules.back().alerts.thresholds = {50};
  }
  const std::vector<std::pair<std::string, std::vector<std::string>>> writes = {
      {"list", {"LPUSH", "", "x"}}, {"hash", {"HSET", "", "f", "v"}}, {"set", {"SADD", "", "m"}}};
  int checked = 0;
  for (const Rule& r : rules) {
    auto rule = core::CompileRule(r, "", r.limits);
    ASSERT_TRUE(rule.ok()) << rule.status().ToString();
    const std::string fp = Fingerprint(*rule);
    for (const auto& [type, write] : writes) {
      for (const std::optional<int64_t> at : {std::optional<int64_t>(), std::optional(WallMs())}) {
        SCOPED_TRACE(r.name + ", a " + type + (at ? ", explicit instant" : ", TIME"));
        const std::string bad = StateKey(r.name, "", "bad-" + type);
        std::vector<std::string> cmd = write;
        cmd[1] = bad;
        conn_->Command(cmd);
        const std::vector<std::string> keys = {StateKey(r.name, "", "a"), bad,
                                               StateKey(r.name, "", "b")};
        const std::vector<int64_t> costs = {1, 1, 1};
        std::vector<std::string> argv;
        AppendCheckCall(ScriptCall::kEval, *rule, fp, keys, costs, at, WallMs(), &argv);
        Reply reply = conn_->Command(argv);
        ASSERT_TRUE(reply != nullptr);
        ASSERT_TRUE(CheckReplyShape(rule->algorithm, *reply, 3).ok());
        Decision d;
        EXPECT_TRUE(DecodeCheckReply(*rule, *reply, 0, &d, nullptr).ok());
        EXPECT_TRUE(DecodeCheckReply(*rule, *reply, 2, &d, nullptr).ok());
        const Status s = DecodeCheckReply(*rule, *reply, 1, &d, nullptr);
        EXPECT_EQ(s.code(), StatusCode::kUnavailable);
        EXPECT_EQ(s.message(),
                  "redis: WRONGTYPE floodgate: the key holds a " + type + ", not a string");
        WrongType what;
        ASSERT_TRUE(ParseWrongType(s.message(), &what));
        EXPECT_EQ(what.found, type);
        EXPECT_EQ(what.expected, "string");
        EXPECT_EQ(ExpectedType(bad), "string");
        // Written: the good ones. Untouched: the bad one (its type, no TTL).
        EXPECT_GT(conn_->Integer({"PTTL", keys[0]}), 0);
        EXPECT_GT(conn_->Integer({"PTTL", keys[2]}), 0);
        EXPECT_EQ(conn_->Integer({"PTTL", bad}), -1);
        Reply t = conn_->Command({"TYPE", bad});
        ASSERT_TRUE(t != nullptr && t->type == REDIS_REPLY_STATUS);
        EXPECT_EQ(std::string(t->str, t->len), type);
        conn_->Command({"DEL", keys[0], bad, keys[2]});
        ++checked;
      }
    }
  }
  EXPECT_EQ(checked, 60);
  // CL.THROTTLE's key likewise.
  conn_->Command({"HSET", ThrottleKey("user"), "f", "v"});
  std::vector<std::string> argv;
  ASSERT_TRUE(
      AppendThrottleCall(ScriptCall::kEval, ThrottleKey("user"), 15, 30, 60, 1, std::nullopt, &argv)
          .ok());
  Reply reply = conn_->Command(argv);
  ASSERT_TRUE(reply != nullptr);
  ThrottleResult r;
  const Status s = DecodeThrottleReply(*reply, &r, nullptr);
  EXPECT_EQ(s.message(), "redis: WRONGTYPE floodgate: the key holds a hash, not a string");
}

TEST_F(ScriptsTest, ThrottleMatchesTheEmbeddedLimiter) {
  ManualClock clock;
  auto limiter_services = api::OpenServices(Config{}, clock);
  ASSERT_TRUE(limiter_services.ok()) << limiter_services.status().ToString();
  service::LimiterCore* const limiter = (*limiter_services)->core.get();
  std::mt19937_64 rng(7);
  int64_t t = 1'700'000'000'000;
  int limited = 0;
  for (int i = 0; i < 3000; ++i) {
    const std::string key = "k" + std::to_string(rng() % 3);
    // Parameters change between calls on one key, as redis-cell allows.
    const int64_t max_burst = static_cast<int64_t>(rng() % 15);
    const int64_t count = 1 + static_cast<int64_t>(rng() % 30);
    const int64_t period_s = 1 + static_cast<int64_t>(rng() % 90);
    const int64_t quantity = static_cast<int64_t>(rng() % 10 == 0 ? rng() % 25 : rng() % 3);
    // Time only moves forward here: the embedded store forgets a state once
    // it has expired, so a later step back would find it fresh there while
    // the held Redis key still counts it (the random test above covers steps
    // back against core::EvaluateRule).
    const uint64_t step = rng() % 10;
    if (step < 7) {
      t += static_cast<int64_t>(rng() % 3000);
    } else if (step < 9) {
      t += static_cast<int64_t>(rng() % 10);
    }
    SCOPED_TRACE("call " + std::to_string(i));
    auto want = service::ThrottleAndWait(*limiter, {key, max_burst, count, period_s, quantity, &t});
    ASSERT_TRUE(want.ok()) << want.status().ToString();
    ThrottleResult got;
    ASSERT_TRUE(conn_->Throttle(key, max_burst, count, period_s, quantity, t, &got).ok());
    ASSERT_EQ(got.limited, want->limited);
    ASSERT_EQ(got.limit, want->limit);
    ASSERT_EQ(got.remaining, want->remaining);
    ASSERT_EQ(got.retry_after_s, want->retry_after_s);
    ASSERT_EQ(got.reset_after_s, want->reset_after_s);
    limited += got.limited;
  }
  EXPECT_GT(limited, 100);
  EXPECT_LT(limited, 2900);
}

TEST_F(ScriptsTest, ThrottleOnRedisClock) {
  // redis-cell's first call: 15 burst, 30 per minute.
  ThrottleResult r;
  std::vector<std::string> argv;
  ASSERT_TRUE(
      AppendThrottleCall(ScriptCall::kEval, ThrottleKey("user"), 15, 30, 60, 1, std::nullopt, &argv)
          .ok());
  Reply reply = conn_->Command(argv);
  ASSERT_NE(reply, nullptr);
  int64_t now = 0;
  ASSERT_TRUE(DecodeThrottleReply(*reply, &r, &now).ok());
  EXPECT_NEAR(static_cast<double>(now), static_cast<double>(WallMs()), 1000);
  EXPECT_FALSE(r.limited);
  EXPECT_EQ(r.limit, 16);
  EXPECT_EQ(r.remaining, 15);
  EXPECT_EQ(r.retry_after_s, -1);
  EXPECT_EQ(r.reset_after_s, 2);
  const int64_t pttl = conn_->Integer({"PTTL", ThrottleKey("user")});
  EXPECT_GT(pttl, 1000);
  EXPECT_LE(pttl, 2000);
}

}  // namespace
}  // namespace floodgate::redis
