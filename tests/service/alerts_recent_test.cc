// The alerts' recent list (GET /v1/alerts/recent, InsertRecent): newest
// first, and one window's thresholds in the order they were crossed even
// when two loops emit them the other way round (both decided in the same
// instant).
#include <gtest/gtest.h>

#include <deque>
#include <string>
#include <vector>

#include "service/alerts/alerts_impl.h"

namespace floodgate {
namespace {

using service::InsertRecent;

AlertRecord Event(const std::string& key, int threshold, int64_t window_start, int64_t at) {
  AlertRecord r;
  r.event.event_id = key + "/" + std::to_string(threshold) + "/" + std::to_string(window_start);
  r.event.rule = "quota";
  r.event.key = key;
  r.event.threshold = threshold;
  r.event.used = threshold;
  r.event.window_start_ms = window_start;
  r.event.at_ms = at;
  return r;
}

std::vector<std::string> Ids(const std::deque<AlertRecord>& records) {
  std::vector<std::string> ids;
  for (const AlertRecord& r : records) ids.push_back(r.event.event_id);
  return ids;
}

TEST(AlertsRecentTest, AWindowsThresholdsReadInTheOrderTheyWereCrossed) {
  std::deque<AlertRecord> recent;
  // The 100 % event reaches the list before the 80 % one.
  InsertRecent(&recent, Event("user:1", 100, 0, 5), 100);
  InsertRecent(&recent, Event("user:1", 80, 0, 5), 100);
  EXPECT_EQ(Ids(recent), (std::vector<std::string>{"user:1/100/0", "user:1/80/0"}));
}

TEST(AlertsRecentTest, OtherSubjectsAndWindowsStayNewestFirst) {
  std::deque<AlertRecord> recent;
  InsertRecent(&recent, Event("user:1", 100, 0, 5), 100);
  InsertRecent(&recent, Event("user:2", 80, 0, 6), 100);     // another subject: newest
  InsertRecent(&recent, Event("user:1", 80, 1000, 7), 100);  // user:1's next window: newest
  EXPECT_EQ(Ids(recent),
            (std::vector<std::string>{"user:1/80/1000", "user:2/80/0", "user:1/100/0"}));
}

TEST(AlertsRecentTest, TheListKeepsItsLength) {
  std::deque<AlertRecord> recent;
  for (int i = 0; i < 5; ++i)
    InsertRecent(&recent, Event("user:" + std::to_string(i), 80, 0, i), 3);
  EXPECT_EQ(Ids(recent), (std::vector<std::string>{"user:4/80/0", "user:3/80/0", "user:2/80/0"}));
}

}  // namespace
}  // namespace floodgate
