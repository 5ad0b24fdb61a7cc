// Zone::Load and Zone::WindowAt: epoch alignment of sub-day windows, local
// calendar boundaries (DST days of 23 and 25 hours, skipped and repeated
// midnights), multiples, instants before 1970, and the names Load accepts.
//
// Expected instants are written as UTC civil times, worked out by hand from
// the zones' offsets, so the tests do not reuse the code under test.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "absl/time/civil_time.h"
#include "absl/time/time.h"
#include "core/calendar.h"

namespace floodgate::core {
namespace {

constexpr int64_t kMinuteMs = 60'000;
constexpr int64_t kHourMs = 3'600'000;
constexpr int64_t kDayMs = 86'400'000;

std::shared_ptr<const Zone> LoadZone(std::string_view name) {
  Result<std::shared_ptr<const Zone>> zone = Zone::Load(name);
  EXPECT_TRUE(zone.ok()) << name << ": " << zone.status().ToString();
  return zone.ok() ? *zone : nullptr;
}

// Unix ms of a UTC civil time.
int64_t Utc(int64_t y, int m, int d, int hh = 0, int mm = 0, int ss = 0, int ms = 0) {
  return absl::ToUnixMillis(
             absl::FromCivil(absl::CivilSecond(y, m, d, hh, mm, ss), absl::UTCTimeZone())) +
         ms;
}

void ExpectWindow(const Zone& zone, TimeUnit unit, int64_t multiplier, int64_t now_ms,
                  int64_t start_ms, int64_t end_ms) {
  const Window w = zone.WindowAt(unit, multiplier, now_ms);
  EXPECT_EQ(w.start_ms, start_ms) << zone.name() << " now=" << now_ms << " start off by "
                                  << (w.start_ms - start_ms) << " ms";
  EXPECT_EQ(w.end_ms, end_ms) << zone.name() << " now=" << now_ms << " end off by "
                              << (w.end_ms - end_ms) << " ms";
}

// --- Sub-day windows: epoch-aligned in UTC, whatever the zone. ---

TEST(CalendarTest, SecondWindowEdgesAt999And1000Ms) {
  const auto utc = LoadZone("UTC");
  ExpectWindow(*utc, TimeUnit::kSecond, 1, 0, 0, 1000);
  ExpectWindow(*utc, TimeUnit::kSecond, 1, 999, 0, 1000);
  ExpectWindow(*utc, TimeUnit::kSecond, 1, 1000, 1000, 2000);
  ExpectWindow(*utc, TimeUnit::kSecond, 1, 1999, 1000, 2000);
  ExpectWindow(*utc, TimeUnit::kMillisecond, 1, 999, 999, 1000);
  ExpectWindow(*utc, TimeUnit::kMillisecond, 250, 999, 750, 1000);
  ExpectWindow(*utc, TimeUnit::kMillisecond, 250, 1000, 1000, 1250);
}

TEST(CalendarTest, MinuteAndHourAlignToTheEpoch) {
  const auto utc = LoadZone("UTC");
  const int64_t now = Utc(2024, 5, 17, 13, 45, 30, 250);
  ExpectWindow(*utc, TimeUnit::kMinute, 1, now, Utc(2024, 5, 17, 13, 45), Utc(2024, 5, 17, 13, 46));
  ExpectWindow(*utc, TimeUnit::kHour, 1, now, Utc(2024, 5, 17, 13), Utc(2024, 5, 17, 14));
  // 5-minute windows count from the epoch: :45 is a multiple of 5.
  ExpectWindow(*utc, TimeUnit::kMinute, 5, now, Utc(2024, 5, 17, 13, 45), Utc(2024, 5, 17, 13, 50));
  // 7-minute windows also count from the epoch, so they need not start on the hour.
  const int64_t seven = 7 * kMinuteMs;
  ExpectWindow(*utc, TimeUnit::kMinute, 7, now, now / seven * seven, now / seven * seven + seven);
  // 12-hour windows: midnight and noon UTC.
  ExpectWindow(*utc, TimeUnit::kHour, 12, now, Utc(2024, 5, 17, 12), Utc(2024, 5, 18));
  // Edges: the last ms of a minute is in it, the next ms is not.
  const int64_t edge = Utc(2024, 5, 17, 13, 46);
  ExpectWindow(*utc, TimeUnit::kMinute, 1, edge - 1, edge - kMinuteMs, edge);
  ExpectWindow(*utc, TimeUnit::kMinute, 1, edge, edge, edge + kMinuteMs);
}

TEST(CalendarTest, SubDayWindowsIgnoreTheZone) {
  const int64_t now = Utc(2024, 5, 17, 13, 45, 30);
  for (const char* name : {"Asia/Kolkata", "+05:30", "America/New_York", "-03:30"}) {
    const auto zone = LoadZone(name);
    // Kolkata's local hours start at :30 UTC; hour windows still start at :00 UTC.
    ExpectWindow(*zone, TimeUnit::kHour, 1, now, Utc(2024, 5, 17, 13), Utc(2024, 5, 17, 14));
    ExpectWindow(*zone, TimeUnit::kMinute, 1, now, Utc(2024, 5, 17, 13, 45),
                 Utc(2024, 5, 17, 13, 46));
  }
}

TEST(CalendarTest, NegativeNowUsesFloorDivision) {
  const auto utc = LoadZone("UTC");
  ExpectWindow(*utc, TimeUnit::kSecond, 1, -1, -1000, 0);
  ExpectWindow(*utc, TimeUnit::kSecond, 1, -1000, -1000, 0);
  ExpectWindow(*utc, TimeUnit::kSecond, 1, -1001, -2000, -1000);
  ExpectWindow(*utc, TimeUnit::kMinute, 1, -1, -kMinuteMs, 0);
  ExpectWindow(*utc, TimeUnit::kHour, 1, -1, -kHourMs, 0);
  ExpectWindow(*utc, TimeUnit::kDay, 1, -1, -kDayMs, 0);
  ExpectWindow(*utc, TimeUnit::kDay, 1, -kDayMs, -kDayMs, 0);
  ExpectWindow(*utc, TimeUnit::kWeek, 1, -1, Utc(1969, 12, 29), Utc(1970, 1, 5));
  ExpectWindow(*utc, TimeUnit::kMonth, 1, -1, Utc(1969, 12, 1), Utc(1970, 1, 1));
  ExpectWindow(*utc, TimeUnit::kYear, 1, -1, Utc(1969, 1, 1), Utc(1970, 1, 1));
  // 1900 is not a leap year (divisible by 100, not by 400); 2000 is.
  ExpectWindow(*utc, TimeUnit::kMonth, 1, Utc(1900, 2, 28, 12), Utc(1900, 2, 1), Utc(1900, 3, 1));
  ExpectWindow(*utc, TimeUnit::kMonth, 1, Utc(2000, 2, 29, 12), Utc(2000, 2, 1), Utc(2000, 3, 1));
  ExpectWindow(*utc, TimeUnit::kYear, 1, Utc(1900, 6, 1), Utc(1900, 1, 1), Utc(1901, 1, 1));
  // A New York day before 1970 (EST, UTC-5).
  const auto ny = LoadZone("America/New_York");
  ExpectWindow(*ny, TimeUnit::kDay, 1, Utc(1969, 12, 31, 12), Utc(1969, 12, 31, 5),
               Utc(1970, 1, 1, 5));
}

// --- Days ---

TEST(CalendarTest, DayInUtc) {
  const auto utc = LoadZone("UTC");
  const int64_t midnight = Utc(2024, 5, 17);
  ExpectWindow(*utc, TimeUnit::kDay, 1, midnight, midnight, midnight + kDayMs);
  ExpectWindow(*utc, TimeUnit::kDay, 1, midnight + kDayMs - 1, midnight, midnight + kDayMs);
  ExpectWindow(*utc, TimeUnit::kDay, 1, midnight - 1, midnight - kDayMs, midnight);
}

TEST(CalendarTest, DayInKolkataStartsAt1830Utc) {
  for (const char* name : {"Asia/Kolkata", "+05:30", "UTC+5:30", "UTC+05:30", "+0530"}) {
    const auto zone = LoadZone(name);
    const int64_t start = Utc(2024, 5, 16, 18, 30);
    ExpectWindow(*zone, TimeUnit::kDay, 1, start, start, start + kDayMs);
    ExpectWindow(*zone, TimeUnit::kDay, 1, Utc(2024, 5, 17, 18, 29, 59, 999), start,
                 start + kDayMs);
    ExpectWindow(*zone, TimeUnit::kDay, 1, Utc(2024, 5, 17, 18, 30), start + kDayMs,
                 start + 2 * kDayMs);
    ExpectWindow(*zone, TimeUnit::kDay, 1, start - 1, start - kDayMs, start);
  }
}

TEST(CalendarTest, NewYorkSpringForwardDayLasts23Hours) {
  const auto ny = LoadZone("America/New_York");
  const int64_t start = Utc(2024, 3, 10, 5);  // 00:00 EST
  const int64_t end = Utc(2024, 3, 11, 4);    // 00:00 EDT
  EXPECT_EQ(end - start, 23 * kHourMs);
  for (int64_t now : {start, Utc(2024, 3, 10, 6, 59, 59, 999), Utc(2024, 3, 10, 7),
                      Utc(2024, 3, 10, 12), end - 1}) {
    ExpectWindow(*ny, TimeUnit::kDay, 1, now, start, end);
  }
  ExpectWindow(*ny, TimeUnit::kDay, 1, start - 1, start - kDayMs, start);
  ExpectWindow(*ny, TimeUnit::kDay, 1, end, end, end + kDayMs);
}

TEST(CalendarTest, NewYorkFallBackDayLasts25Hours) {
  const auto ny = LoadZone("America/New_York");
  const int64_t start = Utc(2024, 11, 3, 4);  // 00:00 EDT
  const int64_t end = Utc(2024, 11, 4, 5);    // 00:00 EST
  EXPECT_EQ(end - start, 25 * kHourMs);
  // 05:30 and 06:30 UTC are both 01:30 local (the repeated hour).
  for (int64_t now : {start, Utc(2024, 11, 3, 5, 30), Utc(2024, 11, 3, 6, 30), end - 1}) {
    ExpectWindow(*ny, TimeUnit::kDay, 1, now, start, end);
  }
  ExpectWindow(*ny, TimeUnit::kDay, 1, start - 1, start - kDayMs, start);
  ExpectWindow(*ny, TimeUnit::kDay, 1, end, end, end + kDayMs);
}

TEST(CalendarTest, SkippedLocalMidnightStartsAtTheTransition) {
  // Sao Paulo, 2018-11-04: clocks went from 00:00 to 01:00 (-03 -> -02), so
  // local midnight never happened; the day starts at the jump.
  const auto sp = LoadZone("America/Sao_Paulo");
  ExpectWindow(*sp, TimeUnit::kDay, 1, Utc(2018, 11, 4, 3), Utc(2018, 11, 4, 3),
               Utc(2018, 11, 5, 2));
  ExpectWindow(*sp, TimeUnit::kDay, 1, Utc(2018, 11, 4, 2, 59, 59, 999), Utc(2018, 11, 3, 3),
               Utc(2018, 11, 4, 3));
  // Santiago, 2024-09-08: the same at 00:00 -> 01:00 (-04 -> -03).
  const auto scl = LoadZone("America/Santiago");
  ExpectWindow(*scl, TimeUnit::kDay, 1, Utc(2024, 9, 8, 4), Utc(2024, 9, 8, 4), Utc(2024, 9, 9, 3));
  ExpectWindow(*scl, TimeUnit::kDay, 1, Utc(2024, 9, 8, 3, 59), Utc(2024, 9, 7, 4),
               Utc(2024, 9, 8, 4));
  // Toronto, 1919-03-30 23:30 EST jumped to 1919-03-31 00:30 EDT: midnight
  // fell inside the gap, and the 31st starts at the jump (04:30 UTC), not at
  // midnight computed with either offset.
  const auto yyz = LoadZone("America/Toronto");
  ExpectWindow(*yyz, TimeUnit::kDay, 1, Utc(1919, 3, 31, 4, 30), Utc(1919, 3, 31, 4, 30),
               Utc(1919, 4, 1, 4));
  ExpectWindow(*yyz, TimeUnit::kDay, 1, Utc(1919, 3, 31, 4, 29, 59, 999), Utc(1919, 3, 30, 5),
               Utc(1919, 3, 31, 4, 30));
}

TEST(CalendarTest, RepeatedHourAcrossMidnightStaysInThePreviousDay) {
  // Santiago, 2024-04-07 00:00 -03 fell back to 2024-04-06 23:00 -04: the
  // 6th lasts 25 hours and the 7th starts at the second local midnight.
  const auto scl = LoadZone("America/Santiago");
  const int64_t start = Utc(2024, 4, 6, 3);
  const int64_t end = Utc(2024, 4, 7, 4);
  for (int64_t now :
       {start, Utc(2024, 4, 7, 2, 59), Utc(2024, 4, 7, 3), Utc(2024, 4, 7, 3, 30), end - 1}) {
    ExpectWindow(*scl, TimeUnit::kDay, 1, now, start, end);
  }
  ExpectWindow(*scl, TimeUnit::kDay, 1, end, end, Utc(2024, 4, 8, 4));
  // Tehran, 2021-09-22 00:00 +0430 fell back to 2021-09-21 23:00 +0330.
  const auto thr = LoadZone("Asia/Tehran");
  ExpectWindow(*thr, TimeUnit::kDay, 1, Utc(2021, 9, 21, 20), Utc(2021, 9, 20, 19, 30),
               Utc(2021, 9, 21, 20, 30));
  ExpectWindow(*thr, TimeUnit::kDay, 1, Utc(2021, 9, 21, 20, 30), Utc(2021, 9, 21, 20, 30),
               Utc(2021, 9, 22, 20, 30));
}

TEST(CalendarTest, FallBackPastMidnightBelongsToTheNewDay) {
  // St. John's, 2010-11-07 00:01 NDT (-02:30) fell back to 2010-11-06 23:01
  // NST (-03:30): for an hour the local date reads the 6th again. A day's
  // window runs from the first instant its date is shown to the first
  // instant the next date is shown, so that hour belongs to the 7th.
  const auto nl = LoadZone("America/St_Johns");
  const int64_t seventh = Utc(2010, 11, 7, 2, 30);
  const int64_t eighth = Utc(2010, 11, 8, 3, 30);
  ExpectWindow(*nl, TimeUnit::kDay, 1, seventh - 1, Utc(2010, 11, 6, 2, 30), seventh);
  for (int64_t now : {seventh, Utc(2010, 11, 7, 2, 31), Utc(2010, 11, 7, 3), eighth - 1}) {
    ExpectWindow(*nl, TimeUnit::kDay, 1, now, seventh, eighth);
  }
}

TEST(CalendarTest, SkippedLocalDay) {
  // Samoa skipped 2011-12-30 entirely: the 29th (-10) is followed by the 31st (+14).
  const auto apia = LoadZone("Pacific/Apia");
  ExpectWindow(*apia, TimeUnit::kDay, 1, Utc(2011, 12, 30, 9, 59), Utc(2011, 12, 29, 10),
               Utc(2011, 12, 30, 10));
  ExpectWindow(*apia, TimeUnit::kDay, 1, Utc(2011, 12, 30, 10), Utc(2011, 12, 30, 10),
               Utc(2011, 12, 31, 10));
}

// --- Weeks, months, years ---

TEST(CalendarTest, WeeksStartOnMonday) {
  const auto utc = LoadZone("UTC");
  const int64_t monday = Utc(2024, 5, 13);
  const int64_t next = Utc(2024, 5, 20);
  ExpectWindow(*utc, TimeUnit::kWeek, 1, Utc(2024, 5, 15, 12), monday, next);  // Wednesday
  ExpectWindow(*utc, TimeUnit::kWeek, 1, monday, monday, next);
  ExpectWindow(*utc, TimeUnit::kWeek, 1, next - 1, monday, next);  // Sunday 23:59:59.999
  ExpectWindow(*utc, TimeUnit::kWeek, 1, next, next, next + 7 * kDayMs);
  // The week of 1970-01-01 (a Thursday) starts on Monday 1969-12-29.
  ExpectWindow(*utc, TimeUnit::kWeek, 1, 0, Utc(1969, 12, 29), Utc(1970, 1, 5));
  // Local Mondays: in Berlin the week starts at Sunday 22:00 UTC in summer.
  const auto berlin = LoadZone("Europe/Berlin");
  ExpectWindow(*berlin, TimeUnit::kWeek, 1, Utc(2024, 5, 15), Utc(2024, 5, 12, 22),
               Utc(2024, 5, 19, 22));
}

TEST(CalendarTest, MultiplesOfWeeksCountFromMonday19691229) {
  const auto utc = LoadZone("UTC");
  // Weeks since 1969-12-29 of 2024-05-13: 19856 days + 3 = 19859 / 7 = 2837 -> even pairs
  // start at week 2836, Monday 2024-05-06.
  ExpectWindow(*utc, TimeUnit::kWeek, 2, Utc(2024, 5, 15), Utc(2024, 5, 6), Utc(2024, 5, 20));
  ExpectWindow(*utc, TimeUnit::kWeek, 2, Utc(2024, 5, 20), Utc(2024, 5, 20), Utc(2024, 6, 3));
  ExpectWindow(*utc, TimeUnit::kWeek, 2, 0, Utc(1969, 12, 29), Utc(1970, 1, 12));
}

TEST(CalendarTest, SevenDayMultiplesAreFixedBlocksFromTheEpoch) {
  const auto utc = LoadZone("UTC");
  // "100/7d": day 19858 (2024-05-15) floors to 19852 (Thursday 2024-05-09).
  ExpectWindow(*utc, TimeUnit::kDay, 7, Utc(2024, 5, 15, 12), Utc(2024, 5, 9), Utc(2024, 5, 16));
  ExpectWindow(*utc, TimeUnit::kDay, 7, Utc(2024, 5, 16), Utc(2024, 5, 16), Utc(2024, 5, 23));
  ExpectWindow(*utc, TimeUnit::kDay, 7, 0, 0, 7 * kDayMs);
  ExpectWindow(*utc, TimeUnit::kDay, 7, -1, -7 * kDayMs, 0);
  // In a zone the blocks count local days from local 1970-01-01.
  const auto kolkata = LoadZone("Asia/Kolkata");
  ExpectWindow(*kolkata, TimeUnit::kDay, 7, Utc(2024, 5, 15, 12), Utc(2024, 5, 8, 18, 30),
               Utc(2024, 5, 15, 18, 30));
}

TEST(CalendarTest, MonthEnds) {
  const auto utc = LoadZone("UTC");
  // January 31 -> February 1.
  ExpectWindow(*utc, TimeUnit::kMonth, 1, Utc(2024, 1, 31, 23, 59, 59, 999), Utc(2024, 1, 1),
               Utc(2024, 2, 1));
  ExpectWindow(*utc, TimeUnit::kMonth, 1, Utc(2024, 2, 1), Utc(2024, 2, 1), Utc(2024, 3, 1));
  // February has 29 days in 2024, 28 in 2023.
  const Window feb2024 = utc->WindowAt(TimeUnit::kMonth, 1, Utc(2024, 2, 29, 12));
  EXPECT_EQ(feb2024.start_ms, Utc(2024, 2, 1));
  EXPECT_EQ(feb2024.end_ms - feb2024.start_ms, 29 * kDayMs);
  const Window feb2023 = utc->WindowAt(TimeUnit::kMonth, 1, Utc(2023, 2, 28, 23, 59, 59, 999));
  EXPECT_EQ(feb2023.start_ms, Utc(2023, 2, 1));
  EXPECT_EQ(feb2023.end_ms, Utc(2023, 3, 1));
  EXPECT_EQ(feb2023.end_ms - feb2023.start_ms, 28 * kDayMs);
  ExpectWindow(*utc, TimeUnit::kMonth, 1, Utc(2023, 3, 1), Utc(2023, 3, 1), Utc(2023, 4, 1));
  // December 31 -> January 1 of the next year.
  ExpectWindow(*utc, TimeUnit::kMonth, 1, Utc(2023, 12, 31, 23, 59, 59, 999), Utc(2023, 12, 1),
               Utc(2024, 1, 1));
  ExpectWindow(*utc, TimeUnit::kMonth, 1, Utc(2024, 1, 1), Utc(2024, 1, 1), Utc(2024, 2, 1));
}

TEST(CalendarTest, MonthInBerlinFollowsLocalMidnightAndDst) {
  const auto berlin = LoadZone("Europe/Berlin");
  // March 2024 starts in CET (+1) and ends in CEST (+2): 31 days minus an hour.
  const Window march = berlin->WindowAt(TimeUnit::kMonth, 1, Utc(2024, 3, 15));
  EXPECT_EQ(march.start_ms, Utc(2024, 2, 29, 23));
  EXPECT_EQ(march.end_ms, Utc(2024, 3, 31, 22));
  EXPECT_EQ(march.end_ms - march.start_ms, 31 * kDayMs - kHourMs);
  // 23:30 UTC on Feb 29 is already March 1 in Berlin.
  ExpectWindow(*berlin, TimeUnit::kMonth, 1, Utc(2024, 2, 29, 23, 30), march.start_ms,
               march.end_ms);
  ExpectWindow(*berlin, TimeUnit::kMonth, 1, Utc(2024, 2, 29, 22, 59, 59, 999),
               Utc(2024, 1, 31, 23), Utc(2024, 2, 29, 23));
}

TEST(CalendarTest, MultiplesOfMonthsCountFromJanuary1970) {
  const auto utc = LoadZone("UTC");
  // "2/month": Jan-Feb, Mar-Apr, ...
  ExpectWindow(*utc, TimeUnit::kMonth, 2, Utc(2024, 2, 15), Utc(2024, 1, 1), Utc(2024, 3, 1));
  ExpectWindow(*utc, TimeUnit::kMonth, 2, Utc(2024, 3, 1), Utc(2024, 3, 1), Utc(2024, 5, 1));
  ExpectWindow(*utc, TimeUnit::kMonth, 2, Utc(2024, 12, 31), Utc(2024, 11, 1), Utc(2025, 1, 1));
  // 3 months: quarters. 2024-01 is month 648 since 1970-01, a multiple of 3.
  ExpectWindow(*utc, TimeUnit::kMonth, 3, Utc(2024, 5, 17), Utc(2024, 4, 1), Utc(2024, 7, 1));
  // 5 months: 648 floors to 645, 2023-10.
  ExpectWindow(*utc, TimeUnit::kMonth, 5, Utc(2024, 1, 15), Utc(2023, 10, 1), Utc(2024, 3, 1));
  // Before 1970: month -1 (1969-12) floors to -2 (1969-11).
  ExpectWindow(*utc, TimeUnit::kMonth, 2, -1, Utc(1969, 11, 1), Utc(1970, 1, 1));
}

TEST(CalendarTest, Years) {
  const auto utc = LoadZone("UTC");
  const Window y2024 = utc->WindowAt(TimeUnit::kYear, 1, Utc(2024, 7, 1));
  EXPECT_EQ(y2024.start_ms, Utc(2024, 1, 1));
  EXPECT_EQ(y2024.end_ms, Utc(2025, 1, 1));
  EXPECT_EQ(y2024.end_ms - y2024.start_ms, 366 * kDayMs);
  const Window y2023 = utc->WindowAt(TimeUnit::kYear, 1, Utc(2023, 12, 31, 23, 59, 59, 999));
  EXPECT_EQ(y2023.end_ms - y2023.start_ms, 365 * kDayMs);
  ExpectWindow(*utc, TimeUnit::kYear, 1, Utc(2025, 1, 1), Utc(2025, 1, 1), Utc(2026, 1, 1));
  // "1/2y": 2024 is 54 years after 1970, even: 2024-2025.
  ExpectWindow(*utc, TimeUnit::kYear, 2, Utc(2025, 6, 1), Utc(2024, 1, 1), Utc(2026, 1, 1));
  // New Year in Tokyo is 15:00 UTC on December 31.
  const auto tokyo = LoadZone("Asia/Tokyo");
  ExpectWindow(*tokyo, TimeUnit::kYear, 1, Utc(2023, 12, 31, 15), Utc(2023, 12, 31, 15),
               Utc(2024, 12, 31, 15));
}

TEST(CalendarTest, FixedOffsets) {
  struct Case {
    const char* name;
    const char* canonical;
    int64_t offset_ms;
  };
  const Case cases[] = {
      {"+05:30", "+05:30", 5 * kHourMs + 30 * kMinuteMs},
      {"-08:00", "-08:00", -8 * kHourMs},
      {"+5", "+05:00", 5 * kHourMs},
      {"+05", "+05:00", 5 * kHourMs},
      {"-0330", "-03:30", -(3 * kHourMs + 30 * kMinuteMs)},
      {"UTC+5", "+05:00", 5 * kHourMs},
      {"UTC-03:30", "-03:30", -(3 * kHourMs + 30 * kMinuteMs)},
      {"utc+14", "+14:00", 14 * kHourMs},
      {"+18:00", "+18:00", 18 * kHourMs},
      {"-18:00", "-18:00", -18 * kHourMs},
      {"+00:00", "UTC", 0},
      {"UTC-0", "UTC", 0},
  };
  for (const Case& c : cases) {
    const auto zone = LoadZone(c.name);
    ASSERT_NE(zone, nullptr) << c.name;
    EXPECT_EQ(zone->name(), c.canonical) << c.name;
    const int64_t local_midnight = Utc(2024, 5, 17) - c.offset_ms;
    ExpectWindow(*zone, TimeUnit::kDay, 1, local_midnight, local_midnight, local_midnight + kDayMs);
    ExpectWindow(*zone, TimeUnit::kDay, 1, local_midnight - 1, local_midnight - kDayMs,
                 local_midnight);
    ExpectWindow(*zone, TimeUnit::kMonth, 1, local_midnight, Utc(2024, 5, 1) - c.offset_ms,
                 Utc(2024, 6, 1) - c.offset_ms);
  }
}

TEST(CalendarTest, ZoneNames) {
  for (const char* utc : {"UTC", "", "Z", "utc", "z"}) {
    const auto zone = LoadZone(utc);
    ASSERT_NE(zone, nullptr);
    EXPECT_EQ(zone->name(), "UTC") << utc;
  }
  EXPECT_EQ(LoadZone("Europe/Berlin")->name(), "Europe/Berlin");
  EXPECT_EQ(LoadZone("America/Argentina/Buenos_Aires")->name(), "America/Argentina/Buenos_Aires");
  // A tz-database zone without transitions behaves as a fixed offset
  // (Etc/GMT-5 is UTC+5: POSIX signs are inverted).
  const auto gmt5 = LoadZone("Etc/GMT-5");
  EXPECT_EQ(gmt5->name(), "Etc/GMT-5");
  ExpectWindow(*gmt5, TimeUnit::kDay, 1, Utc(2024, 5, 17, 12), Utc(2024, 5, 16, 19),
               Utc(2024, 5, 17, 19));
}

TEST(CalendarTest, UnknownZonesAreRefusedWithTheNameQuoted) {
  auto refusal = [](std::string_view name) {
    Result<std::shared_ptr<const Zone>> zone = Zone::Load(name);
    if (zone.ok()) return std::string("(accepted)");
    EXPECT_EQ(zone.status().code(), StatusCode::kInvalidArgument);
    return zone.status().message();
  };
  EXPECT_EQ(refusal("Mars/Olympus"), "unknown time zone \"Mars/Olympus\"");
  EXPECT_EQ(refusal("europe/berlin"), "unknown time zone \"europe/berlin\"");
  EXPECT_EQ(refusal("Europe/Berlin "), "unknown time zone \"Europe/Berlin \"");
  // Nothing outside the tz database is read, and not the host's own zone.
  EXPECT_EQ(refusal("../../../etc/passwd"), "unknown time zone \"../../../etc/passwd\"");
  EXPECT_EQ(refusal("/etc/localtime"), "unknown time zone \"/etc/localtime\"");
  EXPECT_EQ(refusal("localtime"), "unknown time zone \"localtime\"");
  EXPECT_EQ(refusal("libc:Europe/Berlin"), "unknown time zone \"libc:Europe/Berlin\"");
  EXPECT_EQ(refusal(std::string_view("UTC\0x", 5)), "unknown time zone \"UTC\\x00x\"");
  EXPECT_EQ(refusal("+18:01"),
            "time zone \"+18:01\": UTC offset must be between -18:00 and +18:00");
  EXPECT_EQ(refusal("-19"), "time zone \"-19\": UTC offset must be between -18:00 and +18:00");
  for (const char* malformed : {"+5:3", "+05:60", "+123", "UTC+", "+", "+05:30:00", "+5h"}) {
    EXPECT_EQ(refusal(malformed), "time zone \"" + std::string(malformed) +
                                      "\": malformed UTC offset (expected +HH:MM or -HH:MM)");
  }
}

// --- Invariants over long sweeps ---

// Every instant is in its window, and windows tile time without gaps or
// overlaps, across every transition these zones had in two years.
TEST(CalendarTest, WindowsContainNowAndTileTime) {
  struct Sweep {
    const char* zone;
    int64_t from_ms;
  };
  const Sweep sweeps[] = {
      {"UTC", Utc(2023, 6, 1)},
      {"+05:30", Utc(2023, 6, 1)},
      {"America/New_York", Utc(2023, 6, 1)},
      {"Europe/Berlin", Utc(2023, 6, 1)},
      {"America/Santiago", Utc(2023, 6, 1)},
      {"Australia/Lord_Howe", Utc(2023, 6, 1)},  // 30-minute DST
      {"Africa/Casablanca", Utc(2023, 6, 1)},    // DST suspended for Ramadan
      {"America/Sao_Paulo", Utc(2017, 6, 1)},    // skipped midnights
      {"Asia/Tehran", Utc(2020, 6, 1)},          // fall-back at midnight
      {"America/St_Johns", Utc(2009, 6, 1)},     // fall-back from 00:01 to 23:01
      {"Pacific/Apia", Utc(2010, 12, 1)},        // a skipped day
  };
  struct Unit {
    TimeUnit unit;
    int64_t multiplier;
  };
  const Unit units[] = {{TimeUnit::kHour, 1}, {TimeUnit::kDay, 1},   {TimeUnit::kDay, 3},
                        {TimeUnit::kWeek, 1}, {TimeUnit::kMonth, 1}, {TimeUnit::kMonth, 2},
                        {TimeUnit::kYear, 1}};
  // 97 minutes is prime to hours and days, so the probes drift through every
  // time of day; transitions are additionally probed one ms either side.
  constexpr int64_t kStep = 97 * kMinuteMs;
  constexpr int64_t kSpan = 2 * 366 * kDayMs;
  for (const Sweep& s : sweeps) {
    const auto zone = LoadZone(s.zone);
    ASSERT_NE(zone, nullptr);
    std::vector<int64_t> probes;
    for (int64_t t = s.from_ms; t < s.from_ms + kSpan; t += kStep) probes.push_back(t);
    absl::TimeZone tz;
    if (absl::LoadTimeZone(s.zone, &tz)) {  // not for "+05:30": it has no transitions
      absl::TimeZone::CivilTransition tr;
      absl::Time at = absl::FromUnixMillis(s.from_ms);
      while (tz.NextTransition(at, &tr)) {
        const absl::TimeZone::TimeInfo info = tz.At(tr.to);
        at = info.kind == absl::TimeZone::TimeInfo::UNIQUE ? info.pre : info.trans;
        const int64_t ms = absl::ToUnixMillis(at);
        if (ms >= s.from_ms + kSpan) break;
        for (int64_t d : {-kHourMs, int64_t{-1}, int64_t{0}, int64_t{1}, kHourMs}) {
          probes.push_back(ms + d);
        }
      }
    }
    std::sort(probes.begin(), probes.end());
    for (const Unit& u : units) {
      for (int64_t now : probes) {
        const Window w = zone->WindowAt(u.unit, u.multiplier, now);
        const std::string where = std::string(s.zone) + " unit " +
                                  std::to_string(static_cast<int>(u.unit)) + "x" +
                                  std::to_string(u.multiplier) + " now " + std::to_string(now);
        ASSERT_LE(w.start_ms, now) << where;
        ASSERT_LT(now, w.end_ms) << where;
        // Tiling: the window after this one starts where it ends, and the
        // one before ends where it starts.
        ASSERT_EQ(zone->WindowAt(u.unit, u.multiplier, w.end_ms).start_ms, w.end_ms) << where;
        ASSERT_EQ(zone->WindowAt(u.unit, u.multiplier, w.start_ms - 1).end_ms, w.start_ms) << where;
      }
    }
  }
}

TEST(CalendarTest, ExtremeInstantsAndMultipliersDoNotOverflow) {
  const int64_t kMin = std::numeric_limits<int64_t>::min();
  const int64_t kMax = std::numeric_limits<int64_t>::max();
  for (const char* name : {"UTC", "-18:00", "+18:00", "America/New_York"}) {
    const auto zone = LoadZone(name);
    for (int unit = 0; unit <= static_cast<int>(TimeUnit::kYear); ++unit) {
      for (int64_t multiplier : {int64_t{1}, int64_t{7}, int64_t{0}, int64_t{-5}, kMax}) {
        for (int64_t now : {kMin, kMin + 1, int64_t{-9'000'000'000'000'000}, int64_t{-1},
                            int64_t{0}, int64_t{9'000'000'000'000'000}, kMax - 1}) {
          const Window w = zone->WindowAt(static_cast<TimeUnit>(unit), multiplier, now);
          EXPECT_LE(w.start_ms, now) << name << " " << unit << "x" << multiplier << " " << now;
          // At the very ends of int64 the window saturates; short of them it contains now.
          if (now > kMin + 400 * 366 * kDayMs && now < kMax - 400 * 366 * kDayMs) {
            EXPECT_LT(now, w.end_ms) << name << " " << unit << "x" << multiplier << " " << now;
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace floodgate::core
