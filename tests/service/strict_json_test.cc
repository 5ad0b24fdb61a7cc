// Strict JSON objects: a name named twice at any depth, the depth bound at
// its edge, where a syntax error is, and values of every JSON type.
#include "service/subjects/strict_json.h"

#include <gtest/gtest.h>

#include <string>

namespace floodgate::service {
namespace {

std::string Error(std::string_view text) {
  Result<nlohmann::json> parsed = ParseJsonObject(text);
  return parsed.ok() ? "ok" : parsed.status().message();
}

TEST(StrictJsonTest, BuildsTheDocument) {
  Result<nlohmann::json> parsed =
      ParseJsonObject(R"({"s":"x","i":-3,"u":18446744073709551615,"f":1.5,"b":true,"n":null,)"
                      R"("a":[1,[2,{"k":"v"}],{}],"o":{"p":{"q":[]}}})");
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  EXPECT_EQ(*parsed, nlohmann::json::parse(
                         R"({"s":"x","i":-3,"u":18446744073709551615,"f":1.5,"b":true,"n":null,)"
                         R"("a":[1,[2,{"k":"v"}],{}],"o":{"p":{"q":[]}}})"));
  EXPECT_TRUE((*parsed)["u"].is_number_unsigned());
  EXPECT_EQ(Error("{}"), "ok");
}

TEST(StrictJsonTest, RefusesANameNamedTwiceAtAnyDepth) {
  EXPECT_EQ(Error(R"({"sub":"ana","sub":"bob"})"), R"(names "sub" twice)");
  EXPECT_EQ(Error(R"({"a":{"k":1,"k":2}})"), R"(names "k" twice)");
  EXPECT_EQ(Error(R"({"a":[{"k":1},{"k":1,"k":1}]})"), R"(names "k" twice)");
  // The same name in sibling objects, or at two depths, is not a duplicate.
  EXPECT_EQ(Error(R"({"k":{"k":{"k":1}},"a":[{"k":1},{"k":2}]})"), "ok");
  // Names are compared as decoded: "\u0073ub" is "sub".
  EXPECT_EQ(Error(R"({"sub":1,"\u0073ub":2})"), R"(names "sub" twice)");
}

TEST(StrictJsonTest, DepthBoundAtItsEdge) {
  auto nested = [](size_t depth) {
    std::string text = "{\"a\":";
    for (size_t i = 1; i < depth; ++i) text += "[";
    text += "1";
    for (size_t i = 1; i < depth; ++i) text += "]";
    return text + "}";
  };
  EXPECT_EQ(Error(nested(kMaxJsonDepth)), "ok");
  EXPECT_EQ(Error(nested(kMaxJsonDepth + 1)), "nested deeper than 32");
  EXPECT_EQ(Error(std::string(100000, '[')), "nested deeper than 32");
}

TEST(StrictJsonTest, SaysWhereTheTextStopsBeingJson) {
  EXPECT_EQ(Error(""), "not JSON (it ends too early)");
  EXPECT_EQ(Error(R"({"a":1)"), "not JSON (it ends too early)");
  EXPECT_EQ(Error(R"({"a":"x)"), "not JSON (it ends too early)");
  EXPECT_EQ(Error("x"), "not JSON (syntax error at byte 1)");
  EXPECT_EQ(Error(R"({"a":1,})"), "not JSON (syntax error at byte 8)");
  EXPECT_EQ(Error(R"({"a":1} x)"), "not JSON (syntax error at byte 9)");
  EXPECT_EQ(Error("{\"a\":\"\xff\"}"), "not JSON (syntax error at byte 7)");
  EXPECT_EQ(Error(R"({"a":1e999})"), "not JSON (syntax error at byte 10)");
  EXPECT_EQ(Error("{\"a\":1}\n"), "ok");
}

TEST(StrictJsonTest, OnlyAnObject) {
  EXPECT_EQ(Error("[]"), "not a JSON object");
  EXPECT_EQ(Error("\"x\""), "not a JSON object");
  EXPECT_EQ(Error("1"), "not a JSON object");
  EXPECT_EQ(Error("null"), "not a JSON object");
}

}  // namespace
}  // namespace floodgate::service
