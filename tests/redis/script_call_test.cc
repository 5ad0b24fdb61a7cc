// The script call builder and reply decoder without a server: key names,
// fingerprints, the exact ARGV of each algorithm, and replies of every shape
// (well-formed, error, malformed) decoded without crashing.
#include "redis/script_call.h"

#include <gtest/gtest.h>

#include <bit>
#include <cstring>
#include <deque>
#include <limits>
#include <string>
#include <vector>

#include "api/open_services.h"
#include "redis/scripts.h"
#include "service/limiter/blocking.h"
#include "service/limiter/limiter_core.h"
#include "testing/rules.h"

namespace floodgate::redis {
namespace {

using testing::Compile;
using testing::MakeRule;

TEST(StateKeyTest, HashTagsTheRuleAndSubject) {
  EXPECT_EQ(StateKey("api", "", "user:42"), "fg:{api:user:42}");
  EXPECT_EQ(StateKey("api", "pro", "user:42"), "fg:{api:user:42}:pro");
  EXPECT_EQ(ThrottleKey("ip:1.2.3.4"), "fg:cl:{ip:1.2.3.4}");
  // Binary subjects are kept byte for byte.
  const std::string subject("a\0b", 3);
  EXPECT_EQ(StateKey("r", "", subject), std::string("fg:{r:a\0b}", 10));
}

TEST(StateKeyTest, RuleNamesWithColonsNeverCollideWithSubjects) {
  EXPECT_EQ(StateKey("a:b", "", "c"), "fg:{a%3Ab:c}");
  EXPECT_EQ(StateKey("a", "", "b:c"), "fg:{a:b:c}");
  EXPECT_NE(StateKey("a:b", "", "c"), StateKey("a", "", "b:c"));
  EXPECT_NE(StateKey("a:b", "t", "c"), StateKey("a", "t", "b:c"));
}

TEST(StateKeyTest, TiersShareTheSubjectsHashTag) {
  // Redis Cluster hashes what lies between the first '{' and the next '}'.
  auto tag = [](const std::string& key) {
    const size_t open = key.find('{');
    const size_t close = key.find('}', open + 1);
    return key.substr(open + 1, close - open - 1);
  };
  EXPECT_EQ(tag(StateKey("api", "", "u")), tag(StateKey("api", "pro", "u")));
  EXPECT_EQ(tag(StateKey("api", "", "u")), "api:u");
}

TEST(FingerprintTest, NamesTheStateRelevantDefinition) {
  const auto base = Compile(MakeRule(Algorithm::kTokenBucket, {"10/s", "100/minute"}, {20}));
  const std::string fp = Fingerprint(base);
  EXPECT_EQ(fp.size(), 16u);
  EXPECT_EQ(fp.find_first_not_of("0123456789abcdef"), std::string::npos);
  EXPECT_EQ(Fingerprint(Compile(MakeRule(Algorithm::kTokenBucket, {"10/s", "100/minute"}, {20}))),
            fp);
  // Shadow mode and the rule's name change no state.
  auto renamed = MakeRule(Algorithm::kTokenBucket, {"10/s", "100/minute"}, {20});
  renamed.name = "other";
  renamed.shadow = true;
  EXPECT_EQ(Fingerprint(Compile(renamed)), fp);

  const std::vector<core::CompiledRule> changed = {
      Compile(MakeRule(Algorithm::kTokenBucket, {"11/s", "100/minute"}, {20})),
      Compile(MakeRule(Algorithm::kTokenBucket, {"10/2s", "100/minute"}, {20})),
      Compile(MakeRule(Algorithm::kTokenBucket, {"10/ms", "100/minute"}, {20})),
      Compile(MakeRule(Algorithm::kTokenBucket, {"10/s", "100/minute"}, {21})),
      Compile(MakeRule(Algorithm::kTokenBucket, {"10/s"}, {20})),
      Compile(MakeRule(Algorithm::kGcra, {"10/s", "100/minute"}, {20})),
      Compile(MakeRule(Algorithm::kTokenBucket, {"10/s", "100/minute"}, {20}, "Asia/Kolkata")),
  };
  for (size_t i = 0; i < changed.size(); ++i) {
    EXPECT_NE(Fingerprint(changed[i]), fp) << i;
  }
}

std::vector<std::string> Call(const core::CompiledRule& rule, int64_t cost,
                              std::optional<int64_t> now_ms, int64_t clock_ms,
                              ScriptCall call = ScriptCall::kEvalSha) {
  std::vector<std::string> argv;
  AppendCheckCall(call, rule, "fp", "fg:{r:k}", cost, now_ms, clock_ms, &argv);
  return argv;
}

std::vector<std::string> Concat(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// The whole command of one decision on fg:{r:k}: head, limit fields, cost.
std::vector<std::string> Want(Algorithm algorithm, std::string now, std::string cost, std::string n,
                              const std::vector<std::string>& limits) {
  return Concat(
      Concat({"EVALSHA", std::string(ScriptFor(algorithm).sha1), "1", "fg:{r:k}", "fp", now, n},
             limits),
      {cost});
}

TEST(AppendCheckCallTest, ArgvOfEachAlgorithm) {
  const auto tb = Compile(MakeRule(Algorithm::kTokenBucket, {"10/s", "100/minute"}, {20, 150}));
  EXPECT_EQ(Call(tb, 3, 1000, 0), Want(Algorithm::kTokenBucket, "1000", "3", "2",
                                       {"10", "1000", "20", "100", "60000", "150"}));
  // gcra: 5 per minute is one unit per 12 s; limit = max_burst + 1 = count.
  const auto gcra = Compile(MakeRule(Algorithm::kGcra, {"5/minute"}));
  EXPECT_EQ(Call(gcra, 1, -5, 0), Want(Algorithm::kGcra, "-5", "1", "1", {"12000000", "5"}));
  const auto sw = Compile(MakeRule(Algorithm::kSlidingWindow, {"4/s"}));
  EXPECT_EQ(Call(sw, 0, 7, 0), Want(Algorithm::kSlidingWindow, "7", "0", "1", {"4", "1000"}));
  const auto sl = Compile(MakeRule(Algorithm::kSlidingLog, {"3/5m", "10/hour"}));
  EXPECT_EQ(Call(sl, 2, 1, 0),
            Want(Algorithm::kSlidingLog, "1", "2", "2", {"3", "300000", "10", "3600000"}));
}

TEST(AppendCheckCallTest, FixedWindowSendsCalendarWindowsAroundTheClock) {
  const auto fw = Compile(MakeRule(Algorithm::kFixedWindow, {"3/s", "2/day", "1/month"}));
  // 2024-02-29T23:59:59.999Z: the day before, this day and the next; January
  // to April for the month. Windows below a day are epoch-aligned: no bounds.
  const int64_t t = 1709251199999;
  const std::vector<std::string> limits = Concat(
      Concat(
          {"3", "1000", "0", "0", "0", "0"},                                                // 3/s
          {"2", "0", "1709078400000", "1709164800000", "1709251200000", "1709337600000"}),  // 2/day
      {"1", "0", "1704067200000", "1706745600000", "1709251200000", "1711929600000"});  // 1/month
  EXPECT_EQ(Call(fw, 1, t, 0), Want(Algorithm::kFixedWindow, std::to_string(t), "1", "3", limits));
  // Without an explicit instant the script reads TIME ("") and the windows
  // come from the caller's clock.
  EXPECT_EQ(Call(fw, 1, std::nullopt, t), Want(Algorithm::kFixedWindow, "", "1", "3", limits));
}

TEST(AppendCheckCallTest, ManyKeysAndOneCostWhenAllAreTheSame) {
  const auto sw = Compile(MakeRule(Algorithm::kSlidingWindow, {"4/s"}));
  const std::string keys[] = {"fg:{r:a}", "fg:{r:b}", "fg:{r:a}"};
  const std::string sha(ScriptFor(Algorithm::kSlidingWindow).sha1);
  std::vector<std::string> argv;
  const int64_t different[] = {1, 2, 1};
  AppendCheckCall(ScriptCall::kEvalSha, sw, "fp", keys, different, 7, 0, &argv);
  EXPECT_EQ(argv, (std::vector<std::string>{"EVALSHA", sha, "3", "fg:{r:a}", "fg:{r:b}", "fg:{r:a}",
                                            "fp", "7", "1", "4", "1000", "1", "2", "1"}));
  argv.clear();
  const int64_t same[] = {2, 2, 2};
  AppendCheckCall(ScriptCall::kEvalSha, sw, "fp", keys, same, 7, 0, &argv);
  EXPECT_EQ(argv, (std::vector<std::string>{"EVALSHA", sha, "3", "fg:{r:a}", "fg:{r:b}", "fg:{r:a}",
                                            "fp", "7", "1", "4", "1000", "2"}));
}

TEST(AppendCheckCallTest, EvalSendsTheSourceAndAppends) {
  const auto gcra = Compile(MakeRule(Algorithm::kGcra, {"5/minute"}));
  std::vector<std::string> argv = {"kept"};
  AppendCheckCall(ScriptCall::kEval, gcra, "", "k", 1, std::nullopt, 0, &argv);
  ASSERT_EQ(argv.size(), 11u);
  EXPECT_EQ(argv[0], "kept");
  EXPECT_EQ(argv[1], "EVAL");
  EXPECT_EQ(argv[2], ScriptFor(Algorithm::kGcra).source);
  EXPECT_EQ(argv[5], "");  // no fingerprint
  EXPECT_EQ(argv[6], "");  // TIME
}

TEST(AppendThrottleCallTest, ArgvAndTheLimitersChecks) {
  std::vector<std::string> argv;
  ASSERT_TRUE(
      AppendThrottleCall(ScriptCall::kEvalSha, "fg:cl:{k}", 15, 30, 60, 2, 1000, &argv).ok());
  // One key, no fingerprint, n = 1, the limit (emission, burst + 1), the quantity.
  const std::vector<std::string> want = {"EVALSHA", std::string(ScriptFor(Algorithm::kGcra).sha1),
                                         "1",       "fg:cl:{k}",
                                         "",        "1000",
                                         "1",       "2000000",
                                         "16",      "2"};
  EXPECT_EQ(argv, want);

  ManualClock clock;
  auto limiter_services = api::OpenServices(Config{}, clock);
  const int64_t t0 = 0;
  ASSERT_TRUE(limiter_services.ok());
  service::LimiterCore* const limiter = (*limiter_services)->core.get();
  struct Bad {
    int64_t max_burst, count, period_s, quantity;
  };
  for (const Bad& b : {Bad{-1, 1, 1, 1}, Bad{0, 0, 1, 1}, Bad{0, 1, 0, 1}, Bad{0, 1, 1, -1},
                       Bad{0, 2'000'000, 1, 1}, Bad{int64_t{1} << 40, 1, 100'000, 1}}) {
    std::vector<std::string> out;
    const Status s = AppendThrottleCall(ScriptCall::kEvalSha, "k", b.max_burst, b.count, b.period_s,
                                        b.quantity, std::nullopt, &out);
    const auto embedded = service::ThrottleAndWait(
        *limiter, {"k", b.max_burst, b.count, b.period_s, b.quantity, &t0});
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << b.max_burst << " " << b.count;
    EXPECT_EQ(s, embedded.status());
    EXPECT_TRUE(out.empty());
  }
}

// Hand-built hiredis replies. Elements live in a deque so pointers stay put.
class Replies {
 public:
  redisReply* Int(long long v) {
    redisReply& r = store_.emplace_back();
    r.type = REDIS_REPLY_INTEGER;
    r.integer = v;
    return &r;
  }
  redisReply* Text(int type, const char* s) {
    redisReply& r = store_.emplace_back();
    r.type = type;
    r.str = const_cast<char*>(s);
    r.len = std::strlen(s);
    return &r;
  }
  redisReply* Nil() {
    redisReply& r = store_.emplace_back();
    r.type = REDIS_REPLY_NIL;
    return &r;
  }
  redisReply* Array(std::vector<redisReply*> elements) {
    auto& e = arrays_.emplace_back(std::move(elements));
    redisReply& r = store_.emplace_back();
    r.type = REDIS_REPLY_ARRAY;
    r.elements = e.size();
    r.element = e.empty() ? nullptr : e.data();
    return &r;
  }
  redisReply* Ints(std::vector<long long> values) {
    std::vector<redisReply*> e;
    for (long long v : values) e.push_back(Int(v));
    return Array(std::move(e));
  }
  // A decision as the scripts send it: a string of little-endian doubles.
  redisReply* Packed(const std::vector<double>& values) {
    std::string& bytes = strings_.emplace_back();
    for (double v : values) {
      const auto bits = std::bit_cast<uint64_t>(v);
      for (int i = 0; i < 8; ++i) bytes.push_back(static_cast<char>(bits >> (8 * i)));
    }
    redisReply& r = store_.emplace_back();
    r.type = REDIS_REPLY_STRING;
    r.str = bytes.data();
    r.len = bytes.size();
    return &r;
  }
  // A whole reply of one decision: {now, packed values}.
  redisReply* One(long long now, const std::vector<double>& values) {
    return Array({Int(now), Packed(values)});
  }

 private:
  std::deque<redisReply> store_;
  std::deque<std::vector<redisReply*>> arrays_;
  std::deque<std::string> strings_;
};

TEST(DecodeCheckReplyTest, FillsTheDecisionAsTheEngineDoes) {
  Replies r;
  const auto fw = Compile(MakeRule(Algorithm::kFixedWindow, {"2/s", "3/minute"}));
  Decision d;
  int64_t now = 0;
  // Limit 0 denies (retry 1000), limit 1 had room.
  ASSERT_TRUE(
      DecodeCheckReply(
          fw, *r.One(42, {0, 0, 2, 0, 1000, 1000, 0, 1000, 1, 3, 1, 0, 60000, 0, 60000}), &d, &now)
          .ok());
  EXPECT_EQ(now, 42);
  EXPECT_FALSE(d.allowed);
  EXPECT_FALSE(d.shadow_denied);
  EXPECT_EQ(d.binding, 0);
  EXPECT_EQ(d.limit, 2);
  EXPECT_EQ(d.retry_after_ms, 1000);
  EXPECT_EQ(d.num_limits, 2);
  EXPECT_EQ(d.limits[0].period_ms, 1000);
  EXPECT_EQ(d.limits[1].period_ms, 60000);
  EXPECT_TRUE(d.limits[1].allowed);
  EXPECT_EQ(d.limits[1].remaining, 1);

  auto shadow_rule = MakeRule(Algorithm::kGcra, {"1/s"});
  shadow_rule.shadow = true;
  const auto shadow = Compile(shadow_rule);
  // gcra durations are microseconds, rounded up to ms.
  ASSERT_TRUE(DecodeCheckReply(shadow, *r.One(5, {0, 0, 1, 0, 1001, 999999}), &d, nullptr).ok());
  EXPECT_TRUE(d.allowed);
  EXPECT_TRUE(d.shadow_denied);
  EXPECT_EQ(d.retry_after_ms, 0);
  EXPECT_EQ(d.limits[0].retry_after_ms, 2);
  EXPECT_EQ(d.limits[0].reset_after_ms, 1000);
  EXPECT_EQ(d.limits[0].period_ms, 1000);  // no window: the nominal period
  ASSERT_TRUE(DecodeCheckReply(shadow, *r.One(5, {0, 0, 1, 0, -1, 0}), &d, nullptr).ok());
  EXPECT_EQ(d.limits[0].retry_after_ms, -1);
}

TEST(DecodeCheckReplyTest, RefusesEveryOtherShape) {
  Replies r;
  const auto gcra = Compile(MakeRule(Algorithm::kGcra, {"1/s"}));
  const auto fw = Compile(MakeRule(Algorithm::kFixedWindow, {"1/s"}));
  Decision d;
  int64_t now = -7;

  const Status err = DecodeCheckReply(
      gcra, *r.Text(REDIS_REPLY_ERROR, "ERR floodgate: clock skew: now 1"), &d, &now);
  EXPECT_EQ(err.code(), StatusCode::kUnavailable);
  EXPECT_NE(err.message().find("clock skew"), std::string::npos) << err.message();

  // The same error in place of one decision of a call: that decision fails.
  const redisReply* skewed =
      r.Array({r.Int(1), r.Packed({1, 1, 1, 1, 0, 0}),
               r.Text(REDIS_REPLY_ERROR, "ERR floodgate: clock skew: now 1")});
  ASSERT_TRUE(CheckReplyShape(Algorithm::kGcra, *skewed, 2).ok());
  EXPECT_TRUE(DecodeCheckReply(gcra, *skewed, 0, &d, &now).ok());
  EXPECT_EQ(now, 1);
  const Status one = DecodeCheckReply(gcra, *skewed, 1, &d, &now);
  EXPECT_EQ(one.code(), StatusCode::kUnavailable);
  EXPECT_NE(one.message().find("clock skew"), std::string::npos) << one.message();
  EXPECT_EQ(DecodeCheckReply(gcra, *skewed, 2, &d, &now).code(), StatusCode::kInternal);
  now = -7;

  const double nan = std::numeric_limits<double>::quiet_NaN();
  const std::vector<redisReply*> malformed = {
      r.Nil(),
      r.Int(1),
      r.Text(REDIS_REPLY_STRING, "1"),
      r.Text(REDIS_REPLY_STATUS, "OK"),
      r.Array({}),
      r.Array({r.Int(1)}),                            // no decision
      r.One(1, {1, 1, 1, 1, 0}),                      // one field short
      r.One(1, {1, 1, 1, 1, 0, 0, 0}),                // one field too many
      r.One(1, {1, 0, 1, 1, 0, 0}),                   // admitted, but its limit denied
      r.One(1, {0, 1, 1, 1, 0, 0}),                   // denied, but every limit allowed
      r.One(1, {2, 2, 1, 1, 0, 0}),                   // flags that are not 0/1
      r.One(1, {1, 1, 1, 1, 0.5, 0}),                 // not an integer
      r.One(1, {1, 1, 1, 1, nan, 0}),                 // not a number
      r.One(1, {1, 1, 1, 1, 9007199254740994.0, 0}),  // beyond 2^53
      r.Array({r.Int(1), r.Packed({1, 1, 1, 1, 0, 0}), r.Packed({1, 1, 1, 1, 0, 0})}),  // two
      r.Array({r.Text(REDIS_REPLY_STRING, "1"), r.Packed({1, 1, 1, 1, 0, 0})}),         // instant
      r.Array({r.Int(1), r.Nil()}),
      r.Array({r.Int(1), r.Ints({1, 1, 1, 1, 0, 0})}),  // the old, unpacked layout
      r.Array({r.Int(1), nullptr}),
  };
  for (size_t i = 0; i < malformed.size(); ++i) {
    const Status s = DecodeCheckReply(gcra, *malformed[i], &d, &now);
    EXPECT_EQ(s.code(), StatusCode::kInternal) << i << ": " << s.ToString();
  }
  // A gcra-shaped reply is not a fixed_window one (7 fields per limit).
  EXPECT_FALSE(DecodeCheckReply(fw, *r.One(1, {1, 1, 1, 1, 0, 0}), &d, &now).ok());
  // An array claiming elements it does not have.
  redisReply lying{};
  lying.type = REDIS_REPLY_ARRAY;
  lying.elements = 2;
  lying.element = nullptr;
  EXPECT_FALSE(DecodeCheckReply(gcra, lying, &d, &now).ok());
  EXPECT_EQ(now, -7);  // untouched on error
}

TEST(DecodeThrottleReplyTest, RedisCellRounding) {
  Replies r;
  ThrottleResult t;
  int64_t now = 0;
  // Allowed: retry -1 whatever the script says; reset 1.001 s rounds up to 2.
  ASSERT_TRUE(DecodeThrottleReply(*r.One(9, {1, 1, 16, 14, 0, 1'001'000}), &t, &now).ok());
  EXPECT_EQ(now, 9);
  EXPECT_FALSE(t.limited);
  EXPECT_EQ(t.limit, 16);
  EXPECT_EQ(t.remaining, 14);
  EXPECT_EQ(t.retry_after_s, -1);
  EXPECT_EQ(t.reset_after_s, 2);
  // Limited: under a millisecond past a second is cut off.
  ASSERT_TRUE(DecodeThrottleReply(*r.One(9, {0, 0, 16, 0, 1'000'999, 60'000'000}), &t, &now).ok());
  EXPECT_TRUE(t.limited);
  EXPECT_EQ(t.retry_after_s, 1);
  EXPECT_EQ(t.reset_after_s, 60);
  ASSERT_TRUE(DecodeThrottleReply(*r.One(9, {0, 0, 16, 0, -1, 0}), &t, &now).ok());
  EXPECT_EQ(t.retry_after_s, -1);

  EXPECT_EQ(DecodeThrottleReply(*r.Text(REDIS_REPLY_ERROR, "NOSCRIPT No matching script"), &t, &now)
                .code(),
            StatusCode::kUnavailable);
  EXPECT_FALSE(DecodeThrottleReply(*r.One(9, {1, 0, 16, 0, 0, 0}), &t, &now).ok());
  EXPECT_FALSE(DecodeThrottleReply(*r.One(9, {1, 1, 16, 0, 0}), &t, &now).ok());
  EXPECT_FALSE(DecodeThrottleReply(*r.Ints({9, 1, 1, 16, 0, 0, 0}), &t, &now).ok());
  EXPECT_FALSE(DecodeThrottleReply(*r.Nil(), &t, &now).ok());
}

TEST(IsNoScriptTest, OnlyTheNoScriptError) {
  Replies r;
  EXPECT_TRUE(IsNoScript(*r.Text(REDIS_REPLY_ERROR, "NOSCRIPT No matching script.")));
  EXPECT_FALSE(IsNoScript(*r.Text(REDIS_REPLY_ERROR, "ERR unknown")));
  EXPECT_FALSE(IsNoScript(*r.Text(REDIS_REPLY_STATUS, "NOSCRIPT")));
  EXPECT_FALSE(IsNoScript(*r.Text(REDIS_REPLY_ERROR, "NOSCR")));
  EXPECT_FALSE(IsNoScript(*r.Nil()));
}

}  // namespace
}  // namespace floodgate::redis
