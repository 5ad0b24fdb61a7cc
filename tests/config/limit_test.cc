// ParseLimit, Limit::PeriodMs/ToString and the algorithm names: every unit
// spelling, the bounds, the refusals and their messages.
#include <gtest/gtest.h>

#include <cctype>
#include <set>
#include <string>
#include <vector>

#include "floodgate/rule.h"

namespace floodgate {
namespace {

constexpr int64_t kSecondMs = 1000;
constexpr int64_t kMinuteMs = 60 * kSecondMs;
constexpr int64_t kHourMs = 60 * kMinuteMs;
constexpr int64_t kDayMs = 24 * kHourMs;

Limit Parsed(std::string_view text) {
  Result<Limit> r = ParseLimit(text);
  EXPECT_TRUE(r.ok()) << text << ": " << r.status().ToString();
  return r.ok() ? *r : Limit{};
}

// The message of a refusal, or "" when the text was accepted.
std::string Refusal(std::string_view text) {
  Result<Limit> r = ParseLimit(text);
  if (r.ok()) return "";
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << text;
  return r.status().message();
}

TEST(AlgorithmTest, NamesRoundTrip) {
  for (Algorithm a : {Algorithm::kFixedWindow, Algorithm::kSlidingWindow, Algorithm::kSlidingLog,
                      Algorithm::kTokenBucket, Algorithm::kGcra}) {
    std::optional<Algorithm> parsed = ParseAlgorithm(AlgorithmName(a));
    ASSERT_TRUE(parsed.has_value()) << AlgorithmName(a);
    EXPECT_EQ(*parsed, a);
  }
  EXPECT_EQ(AlgorithmName(Algorithm::kFixedWindow), "fixed_window");
  EXPECT_EQ(AlgorithmName(Algorithm::kSlidingWindow), "sliding_window");
  EXPECT_EQ(AlgorithmName(Algorithm::kSlidingLog), "sliding_log");
  EXPECT_EQ(AlgorithmName(Algorithm::kTokenBucket), "token_bucket");
  EXPECT_EQ(AlgorithmName(Algorithm::kGcra), "gcra");
}

TEST(AlgorithmTest, UnknownNamesAreRefused) {
  EXPECT_FALSE(ParseAlgorithm("").has_value());
  EXPECT_FALSE(ParseAlgorithm("leaky_bucket").has_value());
  EXPECT_FALSE(ParseAlgorithm("fixed-window").has_value());
  EXPECT_FALSE(ParseAlgorithm("gcra ").has_value());
}

struct UnitCase {
  const char* spelling;
  TimeUnit unit;
};

TEST(ParseLimitTest, EveryUnitSpelling) {
  const std::vector<UnitCase> cases = {
      {"ms", TimeUnit::kMillisecond},                                  //
      {"s", TimeUnit::kSecond},       {"sec", TimeUnit::kSecond},      //
      {"second", TimeUnit::kSecond},  {"seconds", TimeUnit::kSecond},  //
      {"m", TimeUnit::kMinute},       {"min", TimeUnit::kMinute},      //
      {"minute", TimeUnit::kMinute},  {"minutes", TimeUnit::kMinute},  //
      {"h", TimeUnit::kHour},         {"hr", TimeUnit::kHour},         //
      {"hour", TimeUnit::kHour},      {"hours", TimeUnit::kHour},      //
      {"d", TimeUnit::kDay},          {"day", TimeUnit::kDay},         //
      {"days", TimeUnit::kDay},                                        //
      {"w", TimeUnit::kWeek},         {"wk", TimeUnit::kWeek},         //
      {"week", TimeUnit::kWeek},      {"weeks", TimeUnit::kWeek},      //
      {"mo", TimeUnit::kMonth},       {"month", TimeUnit::kMonth},     //
      {"months", TimeUnit::kMonth},                                    //
      {"y", TimeUnit::kYear},         {"yr", TimeUnit::kYear},         //
      {"year", TimeUnit::kYear},      {"years", TimeUnit::kYear},      //
  };
  for (const UnitCase& c : cases) {
    const std::string text = std::string("7/") + c.spelling;
    EXPECT_EQ(Parsed(text), (Limit{7, 1, c.unit})) << text;
    std::string upper = text;
    for (char& ch : upper) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
    EXPECT_EQ(Parsed(upper), (Limit{7, 1, c.unit})) << upper;
  }
  // The refusal of an unknown unit names every spelling (a plural by its
  // singular).
  const std::string refusal = Refusal("7/fortnight");
  std::set<std::string> named;
  std::string word;
  for (char ch : refusal.substr(refusal.find("(expected"))) {
    if (std::isalpha(static_cast<unsigned char>(ch))) {
      word += ch;
    } else if (!word.empty()) {
      named.insert(word);
      word.clear();
    }
  }
  for (const UnitCase& c : cases) {
    const std::string spelling = c.spelling;
    const bool plural = spelling.size() > 3 && spelling.back() == 's';
    EXPECT_TRUE(named.contains(plural ? spelling.substr(0, spelling.size() - 1) : spelling))
        << spelling << " is not named in: " << refusal;
  }
}

TEST(ParseLimitTest, CaseInsensitiveMixedCase) {
  EXPECT_EQ(Parsed("60/Minute"), (Limit{60, 1, TimeUnit::kMinute}));
  EXPECT_EQ(Parsed("1/mS"), (Limit{1, 1, TimeUnit::kMillisecond}));
  EXPECT_EQ(Parsed("1/MO"), (Limit{1, 1, TimeUnit::kMonth}));
  // Case-insensitive means "M" is minute, never month.
  EXPECT_EQ(Parsed("1/M"), (Limit{1, 1, TimeUnit::kMinute}));
}

TEST(ParseLimitTest, Multipliers) {
  EXPECT_EQ(Parsed("3/5m"), (Limit{3, 5, TimeUnit::kMinute}));
  EXPECT_EQ(Parsed("100/7d"), (Limit{100, 7, TimeUnit::kDay}));
  EXPECT_EQ(Parsed("2/3month"), (Limit{2, 3, TimeUnit::kMonth}));
  EXPECT_EQ(Parsed("2/3mo"), (Limit{2, 3, TimeUnit::kMonth}));
  EXPECT_EQ(Parsed("10/250ms"), (Limit{10, 250, TimeUnit::kMillisecond}));
  EXPECT_EQ(Parsed("1/15minutes"), (Limit{1, 15, TimeUnit::kMinute}));
  EXPECT_EQ(Parsed("1/2y"), (Limit{1, 2, TimeUnit::kYear}));
  // An explicit 1 is the same limit as none.
  EXPECT_EQ(Parsed("5/1m"), Parsed("5/minute"));
  // Leading zeros are just decimal digits.
  EXPECT_EQ(Parsed("007/05s"), (Limit{7, 5, TimeUnit::kSecond}));
}

TEST(ParseLimitTest, SurroundingWhitespaceIsAllowed) {
  EXPECT_EQ(Parsed("  60/minute "), (Limit{60, 1, TimeUnit::kMinute}));
  EXPECT_EQ(Parsed("\t10/s\n"), (Limit{10, 1, TimeUnit::kSecond}));
}

TEST(ParseLimitTest, CountBounds) {
  EXPECT_EQ(Parsed("1/s").count, 1);
  EXPECT_EQ(Parsed("1000000000000000/s").count, kMaxLimitCount);
  EXPECT_EQ(Refusal("1000000000000001/s"),
            "limit \"1000000000000001/s\": count must be at most 1000000000000000");
  EXPECT_EQ(Refusal("99999999999999999999/s"),
            "limit \"99999999999999999999/s\": count must be at most 1000000000000000");
  EXPECT_EQ(Refusal("9223372036854775808/s"),
            "limit \"9223372036854775808/s\": count must be at most 1000000000000000");
}

TEST(ParseLimitTest, PeriodBounds) {
  // kMaxPeriodMs is exactly 36600 days.
  EXPECT_EQ(Parsed("1/36600d").PeriodMs(), kMaxPeriodMs);
  EXPECT_EQ(Parsed("1/3162240000000ms").PeriodMs(), kMaxPeriodMs);
  const std::string too_long = ": period must be at most 36600 days";
  EXPECT_EQ(Refusal("1/36601d"), "limit \"1/36601d\"" + too_long);
  EXPECT_EQ(Refusal("1/3162240000001ms"), "limit \"1/3162240000001ms\"" + too_long);
  // 365-day years: 100 fit (36500 d), 101 do not (36865 d).
  EXPECT_EQ(Parsed("1/100y").PeriodMs(), 100 * 365 * kDayMs);
  EXPECT_EQ(Refusal("1/101y"), "limit \"1/101y\"" + too_long);
  EXPECT_EQ(Parsed("1/1220month").PeriodMs(), 1220 * 30 * kDayMs);
  EXPECT_EQ(Refusal("1/1221month"), "limit \"1/1221month\"" + too_long);
  // Multipliers that would overflow int64 once multiplied, or on their own.
  EXPECT_EQ(Refusal("1/9223372036854775807ms"), "limit \"1/9223372036854775807ms\"" + too_long);
  EXPECT_EQ(Refusal("1/99999999999y"), "limit \"1/99999999999y\"" + too_long);
  EXPECT_EQ(Refusal("1/9223372036854775807y"), "limit \"1/9223372036854775807y\"" + too_long);
  EXPECT_EQ(Refusal("1/99999999999999999999999999w"),
            "limit \"1/99999999999999999999999999w\"" + too_long);
}

TEST(ParseLimitTest, RefusalsQuoteTheTextAndSayWhatIsWrong) {
  EXPECT_EQ(Refusal("0/minute"), "limit \"0/minute\": count must be a positive integer");
  EXPECT_EQ(Refusal("-1/m"), "limit \"-1/m\": count must be a positive integer");
  EXPECT_EQ(Refusal("+1/m"), "limit \"+1/m\": count must be a positive integer");
  EXPECT_EQ(Refusal("1.5/s"), "limit \"1.5/s\": count must be a positive integer");
  EXPECT_EQ(Refusal("/s"), "limit \"/s\": count must be a positive integer");
  EXPECT_EQ(Refusal("1e3/s"), "limit \"1e3/s\": count must be a positive integer");
  EXPECT_EQ(Refusal("5/0s"), "limit \"5/0s\": multiplier must be a positive integer");
  EXPECT_EQ(Refusal("5/-1s"), "limit \"5/-1s\": multiplier must be a positive integer");
  EXPECT_EQ(Refusal("5/1.5s"), "limit \"5/1.5s\": multiplier must be a positive integer");
  EXPECT_EQ(Refusal("5/+2s"), "limit \"5/+2s\": multiplier must be a positive integer");
  // The message names every unit, with each spelling it accepts.
  constexpr std::string_view kUnits =
      " (expected ms, s (sec, second), m (min, minute), h (hr, hour), d (day), w (wk, week), "
      "mo (month) or y (yr, year); plurals accepted)";
  EXPECT_EQ(Refusal("10/fortnight"),
            "limit \"10/fortnight\": unknown unit \"fortnight\"" + std::string(kUnits));
  EXPECT_EQ(Refusal("10/5fortnights"),
            "limit \"10/5fortnights\": unknown unit \"fortnights\"" + std::string(kUnits));
  EXPECT_EQ(Refusal("10/m5"), "limit \"10/m5\": unknown unit \"m5\"" + std::string(kUnits));
  EXPECT_EQ(Refusal("10/2mon"), "limit \"10/2mon\": unknown unit \"mon\"" + std::string(kUnits));
  EXPECT_EQ(Refusal("10"), "limit \"10\": expected N/period, e.g. 60/minute");
  EXPECT_EQ(Refusal("10/"), "limit \"10/\": missing period after '/'");
  EXPECT_EQ(Refusal("10/5"),
            "limit \"10/5\": missing unit after the multiplier" + std::string(kUnits));
  EXPECT_EQ(Refusal(""), "limit \"\": empty; expected N/period, e.g. 60/minute");
  EXPECT_EQ(Refusal("   "), "limit \"   \": empty; expected N/period, e.g. 60/minute");
  EXPECT_EQ(Refusal("10 /s"), "limit \"10 /s\": no spaces allowed inside a limit");
  EXPECT_EQ(Refusal("10/ s"), "limit \"10/ s\": no spaces allowed inside a limit");
  EXPECT_EQ(Refusal("1 0/s"), "limit \"1 0/s\": no spaces allowed inside a limit");
  EXPECT_EQ(Refusal("10/5 m"), "limit \"10/5 m\": no spaces allowed inside a limit");
  EXPECT_NE(Refusal("10/s/s"), "");
  EXPECT_NE(Refusal("10/seconds2"), "");
  EXPECT_NE(Refusal("10/secs"), "");
  EXPECT_NE(Refusal("ten/s"), "");
}

TEST(ParseLimitTest, MessagesEscapeAndTruncateHostileText) {
  EXPECT_EQ(Refusal("1\"/\x01"), "limit \"1\\\"/\\x01\": count must be a positive integer");
  const std::string long_text(1000, '9');
  const std::string message = Refusal(long_text);
  EXPECT_LT(message.size(), 200u);
  EXPECT_NE(message.find("...\""), std::string::npos) << message;
}

TEST(LimitTest, PeriodMsOfEveryUnit) {
  EXPECT_EQ((Limit{1, 1, TimeUnit::kMillisecond}).PeriodMs(), 1);
  EXPECT_EQ((Limit{1, 1, TimeUnit::kSecond}).PeriodMs(), 1000);
  EXPECT_EQ((Limit{1, 1, TimeUnit::kMinute}).PeriodMs(), 60'000);
  EXPECT_EQ((Limit{1, 1, TimeUnit::kHour}).PeriodMs(), 3'600'000);
  EXPECT_EQ((Limit{1, 1, TimeUnit::kDay}).PeriodMs(), 86'400'000);
  EXPECT_EQ((Limit{1, 1, TimeUnit::kWeek}).PeriodMs(), 7 * 86'400'000LL);
  EXPECT_EQ((Limit{1, 1, TimeUnit::kMonth}).PeriodMs(), 30 * 86'400'000LL);
  EXPECT_EQ((Limit{1, 1, TimeUnit::kYear}).PeriodMs(), 365 * 86'400'000LL);
  EXPECT_EQ(Parsed("3/5m").PeriodMs(), 5 * kMinuteMs);
  EXPECT_EQ(Parsed("100/7d").PeriodMs(), 7 * kDayMs);
  EXPECT_EQ(Parsed("10/250ms").PeriodMs(), 250);
  EXPECT_EQ(Parsed("1/2month").PeriodMs(), 60 * kDayMs);
}

TEST(LimitTest, PeriodMsOfAHandBuiltHugeLimitSaturates) {
  EXPECT_EQ((Limit{1, INT64_MAX, TimeUnit::kYear}).PeriodMs(), INT64_MAX);
}

TEST(LimitTest, IsCalendar) {
  EXPECT_FALSE(Parsed("1/ms").IsCalendar());
  EXPECT_FALSE(Parsed("1/h").IsCalendar());
  EXPECT_TRUE(Parsed("1/d").IsCalendar());
  EXPECT_TRUE(Parsed("1/w").IsCalendar());
  EXPECT_TRUE(Parsed("1/month").IsCalendar());
  EXPECT_TRUE(Parsed("1/y").IsCalendar());
}

TEST(LimitTest, ToStringIsCanonical) {
  EXPECT_EQ(Parsed("60/min").ToString(), "60/minute");
  EXPECT_EQ(Parsed("60/1m").ToString(), "60/minute");
  EXPECT_EQ(Parsed("10/S").ToString(), "10/second");
  EXPECT_EQ(Parsed("10/ms").ToString(), "10/ms");
  EXPECT_EQ(Parsed("1/hr").ToString(), "1/hour");
  EXPECT_EQ(Parsed("5000/days").ToString(), "5000/day");
  EXPECT_EQ(Parsed("1/wk").ToString(), "1/week");
  EXPECT_EQ(Parsed("1000/mo").ToString(), "1000/month");
  EXPECT_EQ(Parsed("1/yr").ToString(), "1/year");
  EXPECT_EQ(Parsed("3/5minutes").ToString(), "3/5m");
  EXPECT_EQ(Parsed("100/7days").ToString(), "100/7d");
  EXPECT_EQ(Parsed("2/3mo").ToString(), "2/3month");
  EXPECT_EQ(Parsed("10/250ms").ToString(), "10/250ms");
  EXPECT_EQ(Parsed("1/2seconds").ToString(), "1/2s");
  EXPECT_EQ(Parsed("1/12hours").ToString(), "1/12h");
  EXPECT_EQ(Parsed("1/2weeks").ToString(), "1/2w");
  EXPECT_EQ(Parsed("1/2years").ToString(), "1/2y");
}

TEST(LimitTest, ToStringRoundTripsThroughParseLimit) {
  for (int unit = 0; unit <= static_cast<int>(TimeUnit::kYear); ++unit) {
    for (int64_t multiplier : {1, 2, 5, 7, 12, 100}) {
      for (int64_t count : {int64_t{1}, int64_t{3}, int64_t{60}, kMaxLimitCount}) {
        const Limit limit{count, multiplier, static_cast<TimeUnit>(unit)};
        const std::string text = limit.ToString();
        Result<Limit> back = ParseLimit(text);
        ASSERT_TRUE(back.ok()) << text << ": " << back.status().ToString();
        EXPECT_EQ(*back, limit) << text;
      }
    }
  }
}

}  // namespace
}  // namespace floodgate
