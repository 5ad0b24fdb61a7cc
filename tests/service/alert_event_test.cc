// Alert event ids, bodies and signatures.
#include "service/alerts/alert_event.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

namespace floodgate::service {
namespace {

TEST(AlertEventTest, IdsAreDeterministicAndDifferByEveryField) {
  const std::string id = AlertEventId("api", "", "user:42", 1, 80, 1709251200000);
  EXPECT_EQ(id.size(), 32u);
  EXPECT_EQ(id.find_first_not_of("0123456789abcdef"), std::string::npos);
  EXPECT_EQ(AlertEventId("api", "", "user:42", 1, 80, 1709251200000), id);
  const std::set<std::string> ids = {
      id,
      AlertEventId("api2", "", "user:42", 1, 80, 1709251200000),
      AlertEventId("api", "pro", "user:42", 1, 80, 1709251200000),
      AlertEventId("api", "", "user:43", 1, 80, 1709251200000),
      AlertEventId("api", "", "user:42", 0, 80, 1709251200000),
      AlertEventId("api", "", "user:42", 1, 100, 1709251200000),
      AlertEventId("api", "", "user:42", 1, 80, 1709337600000),
      // Field boundaries are part of the input: no two tuples share one.
      AlertEventId("api:", "", "user42", 1, 80, 1709251200000),
      AlertEventId("api", ":user", "42", 1, 80, 1709251200000),
  };
  EXPECT_EQ(ids.size(), 9u);
}

TEST(AlertEventTest, JsonHasEveryFieldInAFixedOrder) {
  AlertEvent e;
  e.event_id = "0123456789abcdef0123456789abcdef";
  e.rule = "api";
  e.key = "user \"42\"\n\xff";
  e.limit = "5000/day";
  e.limit_index = 1;
  e.capacity = 5000;
  e.threshold = 80;
  e.used = 4000;
  e.window_start_ms = 1709251200000;
  e.window_end_ms = 1709337600000;
  e.at_ms = 1709300000123;
  EXPECT_EQ(AlertEventJson(e),
            "{\"event_id\":\"0123456789abcdef0123456789abcdef\",\"rule\":\"api\",\"key\":\"user "
            "\\\"42\\\"\\n\\ufffd\",\"tier\":null,\"limit\":\"5000/day\",\"limit_index\":1,"
            "\"capacity\":5000,\"threshold\":80,\"used\":4000,\"window_start\":1709251200000,"
            "\"window_end\":1709337600000,\"at\":1709300000123}");
  e.tier = "pro";
  EXPECT_NE(AlertEventJson(e).find("\"tier\":\"pro\","), std::string::npos);
}

TEST(AlertEventTest, SignatureIsHmacSha256OfTheBody) {
  // RFC 4231, test case 2.
  EXPECT_EQ(AlertSignature("Jefe", "what do ya want for nothing?"),
            "sha256=5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  EXPECT_NE(AlertSignature("Jefe", "what do ya want for nothing!"),
            AlertSignature("Jefe", "what do ya want for nothing?"));
}

}  // namespace
}  // namespace floodgate::service
