// DecodeJsonFields: the accepted shapes, null as absent, and for each
// mistake the exact detail sentence.
#include "protocol/http/json_fields.h"

#include <gtest/gtest.h>

#include <string>

namespace floodgate::http {
namespace {

struct Decoded {
  bool ok = false;
  std::string error, member;
  int64_t ttl = -7;
  bool member_present = false, ttl_present = false;
};

Decoded Decode(std::string_view body, bool ttl_required = true) {
  Decoded d;
  JsonField fields[] = {
      {"member", JsonField::Kind::kString, true, &d.member, nullptr},
      {"ttl_ms", JsonField::Kind::kInteger, ttl_required, nullptr, &d.ttl},
  };
  d.ok = DecodeJsonFields(body, fields, "{\"member\":\"m\",\"ttl_ms\":1}", &d.error);
  d.member_present = fields[0].present;
  d.ttl_present = fields[1].present;
  return d;
}

TEST(JsonFieldsTest, AcceptsFlatObjectsInAnyOrder) {
  Decoded d = Decode(R"({"member":"m\u00e9\n","ttl_ms":60000})");
  ASSERT_TRUE(d.ok) << d.error;
  EXPECT_EQ(d.member, "m\xc3\xa9\n");
  EXPECT_EQ(d.ttl, 60000);
  d = Decode(" \r\n{ \"ttl_ms\" : -5 , \"member\" : \"\" } \n");
  ASSERT_TRUE(d.ok) << d.error;
  EXPECT_EQ(d.ttl, -5);  // range is the caller's to check
  EXPECT_TRUE(d.member_present);
  d = Decode(R"({"member":"m","ttl_ms":9223372036854775807})");
  ASSERT_TRUE(d.ok) << d.error;
  EXPECT_EQ(d.ttl, INT64_MAX);
  d = Decode(R"({"member":"m","ttl_ms":-9223372036854775808})");
  ASSERT_TRUE(d.ok) << d.error;
  EXPECT_EQ(d.ttl, INT64_MIN);
}

TEST(JsonFieldsTest, NullIsAbsent) {
  Decoded d = Decode(R"({"member":"m","ttl_ms":null})", /*ttl_required=*/false);
  ASSERT_TRUE(d.ok) << d.error;
  EXPECT_FALSE(d.ttl_present);
  EXPECT_EQ(d.ttl, -7);
  d = Decode(R"({"member":null,"ttl_ms":1})");
  EXPECT_FALSE(d.ok);
  EXPECT_EQ(d.error, "missing required field \"member\"");
}

TEST(JsonFieldsTest, EachMistakeHasItsSentence) {
  const std::pair<const char*, const char*> cases[] = {
      {"",
       "the request body is empty; expected a JSON object like {\"member\":\"m\",\"ttl_ms\":1}"},
      {" \t\r\n",
       "the request body is empty; expected a JSON object like "
       "{\"member\":\"m\",\"ttl_ms\":1}"},
      {"[]", "the body must be a JSON object"},
      {"\"m\"", "the body must be a JSON object"},
      {"12", "the body must be a JSON object"},
      {"{}", "missing required field \"member\""},
      {R"({"member":"m"})", "missing required field \"ttl_ms\""},
      {R"({"member":1,"ttl_ms":1})", "\"member\" must be a string"},
      {R"({"member":true,"ttl_ms":1})", "\"member\" must be a string"},
      {R"({"member":["m"],"ttl_ms":1})", "\"member\" must be a string"},
      {R"({"member":{"a":"b"},"ttl_ms":1})", "\"member\" must be a string"},
      {R"({"member":"m","ttl_ms":"1"})", "\"ttl_ms\" must be an integer"},
      {R"({"member":"m","ttl_ms":1.0})", "\"ttl_ms\" must be an integer"},
      {R"({"member":"m","ttl_ms":1e3})", "\"ttl_ms\" must be an integer"},
      {R"({"member":"m","ttl_ms":9223372036854775808})", "\"ttl_ms\" is out of range"},
      {R"({"member":"m","ttl_ms":99999999999999999999})", "\"ttl_ms\" must be an integer"},
      {R"({"member":"m","ttl_ms":1,"x":1})",
       "unknown field \"x\"; the fields are \"member\" and \"ttl_ms\""},
      {R"({"member":"m","member":"n","ttl_ms":1})", "duplicate field \"member\""},
  };
  for (const auto& [body, want] : cases) {
    const Decoded d = Decode(body);
    EXPECT_FALSE(d.ok) << body;
    EXPECT_EQ(d.error, want) << body;
  }
  const Decoded broken = Decode(R"({"member":"m","ttl_ms":1)");
  EXPECT_FALSE(broken.ok);
  EXPECT_EQ(broken.error.rfind("the body is not valid JSON (at byte 25): ", 0), 0u) << broken.error;
  const Decoded trailing = Decode(R"({"member":"m","ttl_ms":1} x)");
  EXPECT_FALSE(trailing.ok);
  EXPECT_NE(trailing.error.find("not valid JSON"), std::string::npos) << trailing.error;
}

TEST(JsonFieldsTest, HostileInputStaysBounded) {
  // Deep nesting stops at the first level; a long unknown name is cut.
  const std::string deep = "{\"member\":" + std::string(100000, '[');
  EXPECT_EQ(Decode(deep).error, "\"member\" must be a string");
  const Decoded d = Decode("{\"" + std::string(10000, 'x') + "\":1}");
  EXPECT_LT(d.error.size(), 200u);
}

}  // namespace
}  // namespace floodgate::http
