// Time zones and fixed_window's calendar windows.
//
// Two Zone implementations:
//  - FixedOffsetZone: UTC and "+05:30"-style offsets. WindowAt is integer
//    arithmetic only (Howard Hinnant's days-from-civil), because it runs on
//    every fixed_window decision.
//  - TzZone: an IANA zone through absl::TimeZone. Lookups there are lock-free
//    and allocation-free once the zone is loaded; zones whose tz data has no
//    transitions at all (Etc/GMT-5, GMT) are turned into FixedOffsetZone.
//
// Both first turn now_ms into a local day number (days since local
// 1970-01-01), pick the window's first and last-plus-one local day with the
// same integer rules (LocalDays), then turn those days back into instants.
// Intermediate values use __int128 and saturate, so no now_ms can overflow.
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "absl/time/civil_time.h"
#include "absl/time/time.h"
#include "common/enum_table.h"
#include "common/text.h"
#include "core/calendar.h"
#include "core/int_math.h"

namespace floodgate::core {

using text::EqualsIgnoreCase;
using text::QuoteForMessage;

namespace {

constexpr int64_t kDayMs = 86'400'000;
constexpr int64_t kMaxOffsetSeconds = 18 * 3600;
// 1970-01-01 is a Thursday: the Monday that starts its week is day -3.
constexpr int64_t kFirstMondayDay = -3;

// FloorDiv (core/int_math.h) for values that may not fit int64.
constexpr __int128 FloorDiv128(__int128 a, __int128 b) {  // b > 0
  const __int128 q = a / b;
  return (a % b != 0 && a < 0) ? q - 1 : q;
}

constexpr int64_t Saturate(__int128 v) {
  if (v > INT64_MAX) return INT64_MAX;
  if (v < INT64_MIN) return INT64_MIN;
  return static_cast<int64_t>(v);
}

constexpr EnumRow<TimeUnit, int64_t> kUnitMs[] = {
    {TimeUnit::kMillisecond, 1},     {TimeUnit::kSecond, 1000},      {TimeUnit::kMinute, 60'000},
    {TimeUnit::kHour, 3'600'000},    {TimeUnit::kDay, kDayMs},       {TimeUnit::kWeek, 7 * kDayMs},
    {TimeUnit::kMonth, 30 * kDayMs}, {TimeUnit::kYear, 365 * kDayMs}};

int64_t UnitMs(TimeUnit unit) { return ValueIn(kUnitMs, unit, 1); }

// A valid limit never has a multiplier beyond kMaxPeriodMs / unit; clamping
// to that keeps every product below in range whatever a caller passes.
int64_t ClampMultiplier(TimeUnit unit, int64_t multiplier) {
  const int64_t max = kMaxPeriodMs / UnitMs(unit);
  if (multiplier < 1) return 1;
  return multiplier > max ? max : multiplier;
}

// ms, s, m, h: epoch-aligned in UTC whatever the zone.
Window EpochWindow(TimeUnit unit, int64_t multiplier, int64_t now_ms) {
  const int64_t len = UnitMs(unit) * multiplier;
  // Every real clock reading takes the 64-bit path (128-bit division costs
  // several ns on each decision); the bounds keep start + len in range.
  constexpr int64_t kFast = int64_t{1} << 61;
  if (now_ms > -kFast && now_ms < kFast && len < kFast) {
    const int64_t q = now_ms / len - ((now_ms % len != 0 && now_ms < 0) ? 1 : 0);
    return {q * len, q * len + len};
  }
  const __int128 start = FloorDiv128(now_ms, len) * len;
  return {Saturate(start), Saturate(start + len)};
}

// Proleptic Gregorian conversions (days since 1970-01-01), valid for every
// int64 year this file can produce (|year| < 10^12).
int64_t DaysFromCivil(int64_t y, int64_t m, int64_t d) {
  y -= m <= 2;
  const int64_t era = FloorDiv(y, 400);
  const int64_t yoe = y - era * 400;                                   // [0, 399]
  const int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;  // [0, 365]
  const int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;           // [0, 146096]
  return era * 146097 + doe - 719468;
}

struct YearMonth {
  int64_t year;
  int64_t month;  // 1..12
};

YearMonth YearMonthFromDays(int64_t days) {
  const int64_t z = days + 719468;
  const int64_t era = FloorDiv(z, 146097);
  const int64_t doe = z - era * 146097;
  const int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  const int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  const int64_t mp = (5 * doy + 2) / 153;
  const int64_t month = mp < 10 ? mp + 3 : mp - 9;
  return {yoe + era * 400 + (month <= 2), month};
}

// Local days [first, last) of the window containing local day `day`.
struct DayRange {
  int64_t first;
  int64_t last;
};

// Month index counts months from local 1970-01; windows of a multiple floor
// to it, so 2/month windows are Jan-Feb, Mar-Apr, ...
int64_t DaysFromMonthIndex(int64_t index) {
  return DaysFromCivil(1970 + FloorDiv(index, 12), index - FloorDiv(index, 12) * 12 + 1, 1);
}

DayRange LocalDays(TimeUnit unit, int64_t multiplier, int64_t day) {
  switch (unit) {
    case TimeUnit::kWeek: {
      const int64_t week = FloorDiv(day - kFirstMondayDay, 7);
      const int64_t first = FloorDiv(week, multiplier) * multiplier;
      return {first * 7 + kFirstMondayDay, (first + multiplier) * 7 + kFirstMondayDay};
    }
    case TimeUnit::kMonth: {
      const YearMonth ym = YearMonthFromDays(day);
      const int64_t index = (ym.year - 1970) * 12 + (ym.month - 1);
      const int64_t first = FloorDiv(index, multiplier) * multiplier;
      return {DaysFromMonthIndex(first), DaysFromMonthIndex(first + multiplier)};
    }
    case TimeUnit::kYear: {
      const int64_t year = YearMonthFromDays(day).year - 1970;
      const int64_t first = FloorDiv(year, multiplier) * multiplier;
      return {DaysFromCivil(1970 + first, 1, 1), DaysFromCivil(1970 + first + multiplier, 1, 1)};
    }
    default: {  // kDay
      const int64_t first = FloorDiv(day, multiplier) * multiplier;
      return {first, first + multiplier};
    }
  }
}

bool IsSubDay(TimeUnit unit) { return unit < TimeUnit::kDay; }

// A calendar window where local time is now + offset and every day is 24 h.
Window FixedOffsetCalendarWindow(int64_t offset_ms, TimeUnit unit, int64_t multiplier,
                                 int64_t now_ms) {
  // |now_ms| / kDayMs < 1.1e14, so the day number and the local days are
  // small; only the conversion back to ms needs the wide type.
  const int64_t day = static_cast<int64_t>(FloorDiv128(__int128{now_ms} + offset_ms, kDayMs));
  const DayRange r = LocalDays(unit, multiplier, day);
  return {Saturate(__int128{r.first} * kDayMs - offset_ms),
          Saturate(__int128{r.last} * kDayMs - offset_ms)};
}

// UTC and fixed offsets.
class FixedOffsetZone final : public Zone {
 public:
  FixedOffsetZone(std::string name, int64_t offset_seconds)
      : Zone(std::move(name)), offset_ms_(offset_seconds * 1000) {}

  Window WindowAt(TimeUnit unit, int64_t multiplier, int64_t now_ms) const override {
    multiplier = ClampMultiplier(unit, multiplier);
    if (IsSubDay(unit)) return EpochWindow(unit, multiplier, now_ms);
    return FixedOffsetCalendarWindow(offset_ms_, unit, multiplier, now_ms);
  }

 private:
  int64_t offset_ms_;
};

// An IANA zone: local days last 23, 24 or 25 hours (or other lengths), and
// some local midnights are skipped or repeated.
class TzZone final : public Zone {
 public:
  TzZone(std::string name, absl::TimeZone tz) : Zone(std::move(name)), tz_(tz) {}

  Window WindowAt(TimeUnit unit, int64_t multiplier, int64_t now_ms) const override {
    multiplier = ClampMultiplier(unit, multiplier);
    if (IsSubDay(unit)) return EpochWindow(unit, multiplier, now_ms);
    const absl::Time now = absl::FromUnixMillis(now_ms);
    const int64_t day = absl::ToCivilDay(now, tz_) - kEpochDay;
    DayRange r = LocalDays(unit, multiplier, day);
    Window w{Boundary(r.first), Boundary(r.last)};
    // Boundaries are monotonic in the local day, so they partition time; but
    // after a fall-back across midnight the local date of `now` can lag the
    // partition cell it sits in by a day. Step to the neighbouring cell.
    for (int i = 0; i < 4 && (now_ms < w.start_ms || now_ms >= w.end_ms); ++i) {
      r = LocalDays(unit, multiplier, now_ms < w.start_ms ? r.first - 1 : r.last);
      w = {Boundary(r.first), Boundary(r.last)};
    }
    if (now_ms < w.start_ms || now_ms >= w.end_ms) {
      // Unreachable with real tz data; keep the contract anyway with the
      // zone's current offset.
      return FixedOffsetCalendarWindow(int64_t{tz_.At(now).offset} * 1000, unit, multiplier,
                                       now_ms);
    }
    return w;
  }

 private:
  // The first instant whose local time is at or after local midnight of
  // `day`: the midnight itself, its first occurrence when repeated, or the
  // transition that skipped it. Monotonic in `day`.
  int64_t Boundary(int64_t day) const {
    const absl::TimeZone::TimeInfo info = tz_.At(absl::CivilSecond(kEpochDay + day));
    const absl::Time t = info.kind == absl::TimeZone::TimeInfo::SKIPPED ? info.trans : info.pre;
    return absl::ToUnixMillis(t);
  }

  static constexpr absl::CivilDay kEpochDay{1970, 1, 1};
  absl::TimeZone tz_;
};

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

std::string OffsetName(int64_t offset_seconds) {
  const char sign = offset_seconds < 0 ? '-' : '+';
  const int64_t abs_minutes = (offset_seconds < 0 ? -offset_seconds : offset_seconds) / 60;
  const int64_t h = abs_minutes / 60, m = abs_minutes % 60;
  std::string out(1, sign);
  out += static_cast<char>('0' + h / 10);
  out += static_cast<char>('0' + h % 10);
  out += ':';
  out += static_cast<char>('0' + m / 10);
  out += static_cast<char>('0' + m % 10);
  return out;
}

enum class OffsetParse { kNotAnOffset, kMalformed, kOutOfRange, kOk };

// "+HH:MM", "+HHMM", "+HH", "+H", each optionally after "UTC" ("UTC+5",
// "UTC-03:30"). Sign as in ISO 8601: "+05:30" is east of Greenwich. (POSIX
// "GMT+5" means the opposite, so "GMT" offsets are left to the tz database,
// whose Etc/GMT+5 follows POSIX.)
OffsetParse ParseOffset(std::string_view s, int64_t* offset_seconds) {
  if (s.size() > 3 && EqualsIgnoreCase(s.substr(0, 3), "utc")) s.remove_prefix(3);
  if (s.empty() || (s[0] != '+' && s[0] != '-')) return OffsetParse::kNotAnOffset;
  const bool negative = s[0] == '-';
  s.remove_prefix(1);
  size_t n = 0;
  while (n < s.size() && IsDigit(s[n])) ++n;
  int64_t hours = 0, minutes = 0;
  if (n == 1 || n == 2) {
    for (size_t i = 0; i < n; ++i) hours = hours * 10 + (s[i] - '0');
    s.remove_prefix(n);
    if (!s.empty()) {
      if (s.size() != 3 || s[0] != ':' || !IsDigit(s[1]) || !IsDigit(s[2])) {
        return OffsetParse::kMalformed;
      }
      minutes = (s[1] - '0') * 10 + (s[2] - '0');
    }
  } else if (n == 4 && s.size() == 4) {
    hours = (s[0] - '0') * 10 + (s[1] - '0');
    minutes = (s[2] - '0') * 10 + (s[3] - '0');
  } else {
    return OffsetParse::kMalformed;
  }
  if (minutes >= 60) return OffsetParse::kMalformed;
  const int64_t total = hours * 3600 + minutes * 60;
  if (total > kMaxOffsetSeconds) return OffsetParse::kOutOfRange;
  *offset_seconds = negative ? -total : total;
  return OffsetParse::kOk;
}

// IANA names are short words of [A-Za-z0-9_+-] joined by '/'. Refusing
// anything else before asking absl keeps a config from pointing the loader
// at arbitrary files ("/dev/stdin", "../../etc/passwd") or at the host's
// "localtime", which would make a config mean different things per machine.
bool LooksLikeIanaName(std::string_view name) {
  if (name.empty() || name.size() > 64 || name == "localtime") return false;
  if (name.front() == '/' || name.back() == '/') return false;
  char prev = '/';
  for (char c : name) {
    const bool ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || IsDigit(c) || c == '_' ||
                    c == '-' || c == '+' || c == '/' || c == '.';
    if (!ok) return false;
    if (c == '.' && (prev == '/' || prev == '.')) return false;  // no "..", no hidden files
    if (c == '/' && prev == '/') return false;
    prev = c;
  }
  return true;
}

Status UnknownZone(std::string_view name) {
  return InvalidArgumentError("unknown time zone " + QuoteForMessage(name));
}

}  // namespace

Result<std::shared_ptr<const Zone>> Zone::Load(std::string_view name) {
  if (name.empty() || EqualsIgnoreCase(name, "utc") || EqualsIgnoreCase(name, "z")) {
    return std::shared_ptr<const Zone>(std::make_shared<FixedOffsetZone>("UTC", 0));
  }
  int64_t offset_seconds = 0;
  switch (ParseOffset(name, &offset_seconds)) {
    case OffsetParse::kOk:
      return std::shared_ptr<const Zone>(std::make_shared<FixedOffsetZone>(
          offset_seconds == 0 ? "UTC" : OffsetName(offset_seconds), offset_seconds));
    case OffsetParse::kMalformed:
      return InvalidArgumentError("time zone " + QuoteForMessage(name) +
                                  ": malformed UTC offset (expected +HH:MM or -HH:MM)");
    case OffsetParse::kOutOfRange:
      return InvalidArgumentError("time zone " + QuoteForMessage(name) +
                                  ": UTC offset must be between -18:00 and +18:00");
    case OffsetParse::kNotAnOffset:
      break;
  }
  if (!LooksLikeIanaName(name)) return UnknownZone(name);
  absl::TimeZone tz;
  if (!absl::LoadTimeZone(std::string(name), &tz)) return UnknownZone(name);
  absl::TimeZone::CivilTransition transition;
  if (!tz.NextTransition(absl::InfinitePast(), &transition)) {
    // No transitions ever: a fixed offset under another name.
    return std::shared_ptr<const Zone>(
        std::make_shared<FixedOffsetZone>(std::string(name), tz.At(absl::UnixEpoch()).offset));
  }
  return std::shared_ptr<const Zone>(std::make_shared<TzZone>(std::string(name), tz));
}

}  // namespace floodgate::core
