// Limits and algorithm names: parsing "N/period" text and printing it back.
//
// The parser is strict on purpose: a limit is a promise made to operators, so
// anything ambiguous ("1.5/s", "10 / m", "+5/s") is refused with a message
// that quotes the text rather than guessed at. Every bound is checked before
// the arithmetic it protects, so hostile input cannot overflow.
#include <array>
#include <charconv>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "common/enum_table.h"
#include "common/text.h"
#include "floodgate/rule.h"

namespace floodgate {
namespace {

constexpr int64_t kDayMs = 86'400'000;

struct UnitInfo {
  TimeUnit unit;
  int64_t ms;
  std::string_view word;    // canonical spelling when multiplier == 1
  std::string_view short_;  // canonical spelling after a multiplier
};

// Indexed by TimeUnit. "month" doubles as its own short form because "m" is
// minute and "mo" reads poorly next to a number ("2/3mo").
constexpr std::array<UnitInfo, 8> kUnits = {{
    {TimeUnit::kMillisecond, 1, "ms", "ms"},
    {TimeUnit::kSecond, 1000, "second", "s"},
    {TimeUnit::kMinute, 60'000, "minute", "m"},
    {TimeUnit::kHour, 3'600'000, "hour", "h"},
    {TimeUnit::kDay, kDayMs, "day", "d"},
    {TimeUnit::kWeek, 7 * kDayMs, "week", "w"},
    {TimeUnit::kMonth, 30 * kDayMs, "month", "month"},
    {TimeUnit::kYear, 365 * kDayMs, "year", "y"},
}};

struct UnitAlias {
  std::string_view text;
  TimeUnit unit;
};

constexpr UnitAlias kUnitAliases[] = {
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

// Every spelling kUnitAliases accepts (plurals of the words too).
constexpr std::string_view kExpectedUnits =
    "expected ms, s (sec, second), m (min, minute), h (hr, hour), d (day), w (wk, week), "
    "mo (month) or y (yr, year); plurals accepted";

const UnitInfo& Info(TimeUnit unit) { return kUnits[static_cast<size_t>(unit)]; }

bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsAlpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
bool IsSpace(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

Status LimitError(std::string_view text, std::string_view what) {
  return InvalidArgumentError("limit " + text::QuoteForMessage(text) + ": " + std::string(what));
}

// Parses a run of decimal digits. Returns nullopt when the value exceeds
// `max`; the check happens before each multiply, so any length is safe.
std::optional<int64_t> ParseDigits(std::string_view digits, int64_t max) {
  int64_t value = 0;
  for (char c : digits) {
    const int d = c - '0';
    if (value > (max - d) / 10) return std::nullopt;
    value = value * 10 + d;
  }
  return value;
}

bool AllDigits(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (!IsDigit(c)) return false;
  }
  return true;
}

}  // namespace

constexpr EnumName<Algorithm> kAlgorithmNames[] = {{Algorithm::kFixedWindow, "fixed_window"},
                                                   {Algorithm::kSlidingWindow, "sliding_window"},
                                                   {Algorithm::kSlidingLog, "sliding_log"},
                                                   {Algorithm::kTokenBucket, "token_bucket"},
                                                   {Algorithm::kGcra, "gcra"},
                                                   {Algorithm::kConcurrency, "concurrency"}};

std::string_view AlgorithmName(Algorithm algorithm) {
  return ValueIn(kAlgorithmNames, algorithm, "unknown");
}

std::optional<Algorithm> ParseAlgorithm(std::string_view name) {
  return KeyIn(kAlgorithmNames, name);
}

int64_t Limit::PeriodMs() const {
  const auto index = static_cast<size_t>(unit);
  if (index >= kUnits.size()) return 0;
  const int64_t unit_ms = kUnits[index].ms;
  // Parsed limits are bounded far below overflow; a hand-built one saturates
  // instead of wrapping.
  if (multiplier > INT64_MAX / unit_ms) return INT64_MAX;
  return multiplier * unit_ms;
}

std::string Limit::ToString() const {
  const auto index = static_cast<size_t>(unit);
  if (index >= kUnits.size()) return std::to_string(count) + "/?";
  const UnitInfo& info = kUnits[index];
  if (multiplier == 1) return std::to_string(count) + "/" + std::string(info.word);
  return std::to_string(count) + "/" + std::to_string(multiplier) + std::string(info.short_);
}

Result<Limit> ParseLimit(std::string_view text) {
  std::string_view s = text;
  while (!s.empty() && IsSpace(s.front())) s.remove_prefix(1);
  while (!s.empty() && IsSpace(s.back())) s.remove_suffix(1);
  if (s.empty()) return LimitError(text, "empty; expected N/period, e.g. 60/minute");
  for (char c : s) {
    if (IsSpace(c)) return LimitError(text, "no spaces allowed inside a limit");
  }

  const size_t slash = s.find('/');
  if (slash == std::string_view::npos) {
    return LimitError(text, "expected N/period, e.g. 60/minute");
  }
  const std::string_view count_text = s.substr(0, slash);
  const std::string_view period_text = s.substr(slash + 1);

  Limit limit;
  if (!AllDigits(count_text)) return LimitError(text, "count must be a positive integer");
  const std::optional<int64_t> count = ParseDigits(count_text, kMaxLimitCount);
  if (!count) {
    return LimitError(text, "count must be at most " + std::to_string(kMaxLimitCount));
  }
  if (*count == 0) return LimitError(text, "count must be a positive integer");
  limit.count = *count;

  if (period_text.empty()) return LimitError(text, "missing period after '/'");
  size_t digits_end = 0;
  while (digits_end < period_text.size() && IsDigit(period_text[digits_end])) ++digits_end;
  const std::string_view multiplier_text = period_text.substr(0, digits_end);
  const std::string_view unit_text = period_text.substr(digits_end);

  auto unknown_unit = [&] {
    return LimitError(text, "unknown unit " + text::QuoteForMessage(unit_text) + " (" +
                                std::string(kExpectedUnits) + ")");
  };
  // Anything but letters after the digits ("1.5s", "-5m", "5/m/s") means the
  // multiplier itself is malformed, not the unit.
  bool unit_is_word = true;
  for (char c : unit_text) unit_is_word = unit_is_word && IsAlpha(c);
  if (!unit_is_word) {
    if (!multiplier_text.empty() || !IsAlpha(unit_text.front())) {
      return LimitError(text, "multiplier must be a positive integer");
    }
    return unknown_unit();
  }
  if (unit_text.empty()) {
    return LimitError(text,
                      "missing unit after the multiplier (" + std::string(kExpectedUnits) + ")");
  }

  std::optional<TimeUnit> unit;
  for (const UnitAlias& alias : kUnitAliases) {
    if (text::EqualsIgnoreCase(alias.text, unit_text)) {
      unit = alias.unit;
      break;
    }
  }
  if (!unit) return unknown_unit();
  limit.unit = *unit;

  auto too_long = [&] {
    return LimitError(text,
                      "period must be at most " + std::to_string(kMaxPeriodMs / kDayMs) + " days");
  };
  if (!multiplier_text.empty()) {
    // Bounding the multiplier by the period limit first keeps the multiply
    // below safe: unit_ms * (kMaxPeriodMs / unit_ms) <= kMaxPeriodMs.
    const std::optional<int64_t> multiplier = ParseDigits(multiplier_text, kMaxPeriodMs);
    if (!multiplier) return too_long();
    if (*multiplier == 0) return LimitError(text, "multiplier must be a positive integer");
    limit.multiplier = *multiplier;
  }
  const int64_t unit_ms = Info(limit.unit).ms;
  if (limit.multiplier > kMaxPeriodMs / unit_ms) return too_long();
  return limit;
}

Result<Limit> ParseLimitOf(const Rule& rule, std::string_view text) {
  if (!rule.is_concurrency()) return ParseLimit(text);
  int64_t n = -1;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
  if (ec != std::errc() || end != text.data() + text.size() || text.empty() || n < 0 ||
      n > kMaxInFlight) {
    return InvalidArgumentError("\"" + std::string(text) + "\" is not a max_in_flight: rule '" +
                                rule.name + "' is a concurrency rule, whose limit is an integer " +
                                "from 0 to " + std::to_string(kMaxInFlight));
  }
  return ConcurrencyLimit(n, rule.lease_ttl_ms());
}

std::string LimitTextOf(const Rule& rule, const Limit& limit) {
  return rule.is_concurrency() ? std::to_string(limit.count) : limit.ToString();
}

}  // namespace floodgate
