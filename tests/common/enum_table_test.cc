// EnumTable: the lookups both ways, and every table the tree names an enum
// with: each value has its row (a missing row would answer the table's
// `otherwise`, which a switch's -Wswitch used to catch), and a name reads
// back into its value where the enum is parsed.
#include "common/enum_table.h"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <string_view>

#include "common/store_url.h"
#include "config/envoy_ratelimit.h"
#include "floodgate/alerts.h"
#include "floodgate/expiring_sets.h"
#include "floodgate/rule.h"
#include "floodgate/status.h"
#include "server/net/connection_timers.h"
#include "service/top/top_subjects.h"

namespace floodgate {
namespace {

enum class Colour { kRed, kGreen, kBlue };
constexpr EnumName<Colour> kColours[] = {{Colour::kRed, "red"}, {Colour::kGreen, "green"}};

TEST(EnumTableTest, LooksUpBothWays) {
  static_assert(ValueIn(kColours, Colour::kGreen, "none") == "green");
  EXPECT_EQ(ValueIn(kColours, Colour::kRed, "none"), "red");
  EXPECT_EQ(ValueIn(kColours, Colour::kBlue, "none"), "none");
  EXPECT_EQ(KeyIn(kColours, std::string_view("green")), Colour::kGreen);
  EXPECT_FALSE(KeyIn(kColours, std::string_view("blue")).has_value());
  EXPECT_FALSE(KeyIn(kColours, std::string_view("")).has_value());
}

// Each of `values` has a name of its own, none of them `otherwise`.
template <typename E, typename Name>
void ExpectDistinctNames(std::initializer_list<E> values, Name name, std::string_view otherwise) {
  std::set<std::string> seen;
  for (E v : values) {
    const std::string n(name(v));
    EXPECT_NE(n, otherwise) << static_cast<int>(v);
    EXPECT_FALSE(n.empty()) << static_cast<int>(v);
    EXPECT_TRUE(seen.insert(n).second) << n;
  }
}

TEST(EnumTableTest, EveryAlgorithmHasANameThatParsesBack) {
  for (Algorithm a : {Algorithm::kFixedWindow, Algorithm::kSlidingWindow, Algorithm::kSlidingLog,
                      Algorithm::kTokenBucket, Algorithm::kGcra, Algorithm::kConcurrency}) {
    EXPECT_EQ(ParseAlgorithm(AlgorithmName(a)), a) << AlgorithmName(a);
  }
  EXPECT_EQ(AlgorithmName(Algorithm::kGcra), "gcra");
  EXPECT_FALSE(ParseAlgorithm("unknown").has_value());
  EXPECT_FALSE(ParseAlgorithm("GCRA").has_value());
}

TEST(EnumTableTest, EveryTopWindowHasANameThatParsesBack) {
  using service::TopWindow;
  for (TopWindow w : {TopWindow::k1m, TopWindow::k15m, TopWindow::k1h}) {
    Result<TopWindow> parsed = service::ParseTopWindow(service::TopWindowName(w));
    ASSERT_TRUE(parsed.ok()) << service::TopWindowName(w);
    EXPECT_EQ(*parsed, w);
  }
  EXPECT_FALSE(service::ParseTopWindow("5m").ok());
}

TEST(EnumTableTest, EveryStatusCodeHasItsName) {
  ExpectDistinctNames({StatusCode::kOk, StatusCode::kInvalidArgument, StatusCode::kNotFound,
                       StatusCode::kResourceExhausted, StatusCode::kUnavailable,
                       StatusCode::kDeadlineExceeded, StatusCode::kInternal},
                      StatusCodeName, "UNKNOWN");
  EXPECT_STREQ(StatusCodeName(StatusCode::kResourceExhausted), "RESOURCE_EXHAUSTED");
  EXPECT_EQ(InternalError("x").ToString(), "INTERNAL: x");
}

TEST(EnumTableTest, EveryOtherEnumHasItsName) {
  ExpectDistinctNames({StoreMode::kStandalone, StoreMode::kCluster, StoreMode::kProxy},
                      StoreModeName, "");
  EXPECT_STREQ(StoreModeName(StoreMode::kProxy), "proxy");
  ExpectDistinctNames(
      {AlertStatus::kPending, AlertStatus::kQueued, AlertStatus::kDelivered, AlertStatus::kDropped},
      AlertStatusName, "");
  ExpectDistinctNames(
      {SetOp::kAdd, SetOp::kRemove, SetOp::kContains, SetOp::kCount, SetOp::kMembers}, SetOpName,
      "unknown");
  ExpectDistinctNames({envoy::Unit::kSecond, envoy::Unit::kMinute, envoy::Unit::kHour,
                       envoy::Unit::kDay, envoy::Unit::kMonth, envoy::Unit::kYear},
                      envoy::UnitName, "unknown");
  EXPECT_EQ(envoy::UnitName(envoy::Unit::kUnknown), "unknown");
  for (int i = 0; i < server::kNumCloseReasons; ++i) {
    EXPECT_NE(server::CloseReasonName(static_cast<server::CloseReason>(i)), "none") << i;
  }
  EXPECT_EQ(server::CloseReasonName(server::CloseReason::kOversized), "oversized");
  EXPECT_EQ(server::CloseReasonName(server::CloseReason::kNone), "none");
}

}  // namespace
}  // namespace floodgate
