// check_request: decoding a check from a JSON body and from query
// parameters, with every error message.
#include "protocol/http/check_request.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

namespace floodgate::http {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

CheckRequest Json(std::string_view body) {
  CheckRequest req;
  std::string error;
  EXPECT_TRUE(DecodeCheckRequestJson(body, &req, &error)) << body << ": " << error;
  return req;
}

std::string JsonError(std::string_view body) {
  CheckRequest req;
  std::string error;
  EXPECT_FALSE(DecodeCheckRequestJson(body, &req, &error)) << body;
  return error;
}

CheckRequest Query(std::string_view query) {
  CheckRequest req;
  std::string error;
  EXPECT_TRUE(DecodeCheckRequestQuery(query, &req, &error)) << query << ": " << error;
  return req;
}

std::string QueryError(std::string_view query) {
  CheckRequest req;
  std::string error;
  EXPECT_FALSE(DecodeCheckRequestQuery(query, &req, &error)) << query;
  return error;
}

constexpr char kCostError[] = "\"cost\" must be an integer between 0 and 10^15";

// ---------------------------------------------------------------------------
// JSON.

TEST(CheckRequestJson, AllFields) {
  const CheckRequest r = Json(R"({"rule":"api","key":"user:42","cost":3,"tier":"pro"})");
  EXPECT_EQ(r.rule, "api");
  EXPECT_EQ(r.key, "user:42");
  EXPECT_EQ(r.cost, 3);
  EXPECT_EQ(r.tier, "pro");
}

TEST(CheckRequestJson, Defaults) {
  const CheckRequest r = Json(R"( {"key":"k", "rule":"r"} )");
  EXPECT_EQ(r.rule, "r");
  EXPECT_EQ(r.key, "k");
  EXPECT_EQ(r.cost, 1);
  EXPECT_EQ(r.tier, "");
  EXPECT_EQ(Json(R"({"rule":"r","key":"k","cost":null,"tier":null})").cost, 1);
  EXPECT_EQ(Json(R"({"rule":"r","key":"k","tier":""})").tier, "");
}

TEST(CheckRequestJson, ResetsTheOutput) {
  CheckRequest req{"old", "old", "old", 7};
  std::string error;
  ASSERT_TRUE(DecodeCheckRequestJson(R"({"rule":"r","key":"k"})", &req, &error));
  EXPECT_EQ(req.tier, "");
  EXPECT_EQ(req.cost, 1);
}

TEST(CheckRequestJson, StringsAreUnescaped) {
  const CheckRequest r = Json(R"({"rule":"a\"b","key":"caf\u00e9\n\u0000x"})");
  EXPECT_EQ(r.rule, "a\"b");
  EXPECT_EQ(r.key, std::string("caf\xc3\xa9\n\0x", 8));
}

TEST(CheckRequestJson, CostEdges) {
  EXPECT_EQ(Json(R"({"rule":"r","key":"k","cost":0})").cost, 0);
  EXPECT_EQ(Json(R"({"rule":"r","key":"k","cost":-0})").cost, 0);
  EXPECT_EQ(Json(R"({"rule":"r","key":"k","cost":1000000000000000})").cost, 1000000000000000);
  for (const char* bad : {"1000000000000001", "-1", "1.5", "1.0", "1e3", "\"5\"", "true", "[1]",
                          "{}", "18446744073709551616", "-9223372036854775809"}) {
    EXPECT_EQ(JsonError(std::string(R"({"rule":"r","key":"k","cost":)") + bad + "}"), kCostError)
        << bad;
  }
}

TEST(CheckRequestJson, KeyEdges) {
  EXPECT_EQ(Json(R"({"rule":"r","key":")" + std::string(512, 'k') + "\"}").key.size(), 512u);
  EXPECT_EQ(JsonError(R"({"rule":"r","key":")" + std::string(513, 'k') + "\"}"),
            "\"key\" is 513 bytes; at most 512 are allowed");
  EXPECT_EQ(JsonError(R"({"rule":"r","key":""})"), "\"key\" must not be empty");
  EXPECT_EQ(JsonError(R"({"rule":"","key":"k"})"), "\"rule\" must not be empty");
}

TEST(CheckRequestJson, MissingFields) {
  EXPECT_EQ(JsonError(R"({"key":"k"})"), "missing required field \"rule\"");
  EXPECT_EQ(JsonError("{}"), "missing required field \"rule\"");
}

// A key left out is the route's to judge (a rule with a key template
// builds it); one given empty is still an error.
TEST(CheckRequestJson, KeyMayBeLeftOut) {
  const CheckRequest req = Json(R"({"rule":"r"})");
  EXPECT_FALSE(req.key_given);
  EXPECT_TRUE(req.key.empty());
  EXPECT_TRUE(Json(R"({"rule":"r","key":"k"})").key_given);
  EXPECT_FALSE(Query("rule=r").key_given);
  EXPECT_TRUE(Query("rule=r&key=k").key_given);
}

TEST(CheckRequestJson, WrongTypes) {
  EXPECT_EQ(JsonError(R"({"rule":5,"key":"k"})"), "\"rule\" must be a string");
  EXPECT_EQ(JsonError(R"({"rule":"r","key":42})"), "\"key\" must be a string");
  EXPECT_EQ(JsonError(R"({"rule":"r","key":null})"), "\"key\" must be a string");
  EXPECT_EQ(JsonError(R"({"rule":null,"key":"k"})"), "\"rule\" must be a string");
  EXPECT_EQ(JsonError(R"({"rule":"r","key":true})"), "\"key\" must be a string");
  EXPECT_EQ(JsonError(R"({"rule":"r","key":["k"]})"), "\"key\" must be a string");
  EXPECT_EQ(JsonError(R"({"rule":{"a":1},"key":"k"})"), "\"rule\" must be a string");
  EXPECT_EQ(JsonError(R"({"rule":"r","key":"k","tier":1.5})"), "\"tier\" must be a string");
}

TEST(CheckRequestJson, UnknownAndDuplicateFields) {
  EXPECT_EQ(
      JsonError(R"({"rule":"r","key":"k","x":1})"),
      "unknown field \"x\"; the fields are \"rule\", \"key\", \"cost\", \"tier\", \"priority\", "
      "\"wait_ms\" and \"deny_status\"");
  EXPECT_EQ(JsonError(R"({"Rule":"r"})"),
            "unknown field \"Rule\"; the fields are \"rule\", \"key\", \"cost\", \"tier\", "
            "\"priority\", \"wait_ms\" and \"deny_status\"");
  EXPECT_EQ(JsonError(R"({"rule":"r","rule":"s","key":"k"})"), "duplicate field \"rule\"");
  EXPECT_EQ(JsonError(R"({"cost":null,"cost":1})"), "duplicate field \"cost\"");
}

TEST(CheckRequestJson, NotAnObject) {
  for (const char* body : {"[]", "[{\"rule\":\"r\"}]", "5", "\"rule\"", "null", "true"}) {
    EXPECT_EQ(JsonError(body), "the body must be a JSON object") << body;
  }
}

TEST(CheckRequestJson, EmptyBody) {
  const std::string expected =
      "the request body is empty; expected a JSON object like "
      "{\"rule\":\"api\",\"key\":\"user:42\"}";
  EXPECT_EQ(JsonError(""), expected);
  EXPECT_EQ(JsonError(" \r\n\t"), expected);
}

// nlohmann counts bytes from 1, and a body that ends too early fails at the
// byte after its last one.
TEST(CheckRequestJson, InvalidJsonNamesTheBytePosition) {
  EXPECT_EQ(JsonError(R"({"rule": tru})"),
            "the body is not valid JSON (at byte 13): syntax error while parsing value - invalid "
            "literal; last read: '\"rule\": tru}'");
  EXPECT_EQ(JsonError(R"({"rule":"r",})"),
            "the body is not valid JSON (at byte 13): syntax error while parsing object key - "
            "unexpected '}'; expected string literal");
  EXPECT_THAT(JsonError(R"({"rule":"r","key":"k"} x)"),
              StartsWith("the body is not valid JSON (at byte 24): "));
  EXPECT_THAT(JsonError(R"({"rule":"r")"), StartsWith("the body is not valid JSON (at byte 12): "));
  EXPECT_THAT(JsonError("{'rule':'r'}"), StartsWith("the body is not valid JSON (at byte 2): "));
  EXPECT_THAT(JsonError("{\"rule\":\"a\x01\"}"), StartsWith("the body is not valid JSON"));
  EXPECT_THAT(JsonError("{\"rule\":\"\xff\"}"), StartsWith("the body is not valid JSON"));
  EXPECT_THAT(JsonError(R"({"rule":"r","key":"k","cost":1e999})"),
              HasSubstr("number overflow parsing '1e999'"));
}

TEST(CheckRequestJson, LongInvalidTokenIsCutInTheMessage) {
  const std::string error = JsonError("{\"rule\":\"" + std::string(10000, 'a'));
  EXPECT_THAT(error, StartsWith("the body is not valid JSON (at byte 10010): "));
  EXPECT_LT(error.size(), 260u);
  EXPECT_THAT(error, HasSubstr("..."));
}

TEST(CheckRequestJson, DeepNestingStopsAtTheFirstLevel) {
  // Parsing stops at the first container, so depth costs nothing.
  const std::string deep(100000, '[');
  EXPECT_EQ(JsonError(deep), "the body must be a JSON object");
  EXPECT_EQ(JsonError("{\"rule\":" + deep), "\"rule\" must be a string");
  EXPECT_EQ(JsonError("{\"x\":" + deep),
            "unknown field \"x\"; the fields are \"rule\", \"key\", "
            "\"cost\", \"tier\", \"priority\", \"wait_ms\" and \"deny_status\"");
}

TEST(CheckRequestJson, FirstProblemInDocumentOrderWins) {
  EXPECT_EQ(JsonError(R"({"rule":5, garbage)"), "\"rule\" must be a string");
  EXPECT_EQ(
      JsonError(R"({"x":1,"rule":5})"),
      "unknown field \"x\"; the fields are \"rule\", \"key\", \"cost\", \"tier\", \"priority\", "
      "\"wait_ms\" and \"deny_status\"");
}

TEST(CheckRequestJson, UnknownFieldNameIsQuotedSafely) {
  EXPECT_EQ(JsonError(R"({"a\"\n":1})"),
            "unknown field \"a\\\"\\x0a\"; the fields are \"rule\", \"key\", \"cost\", \"tier\", "
            "\"priority\", \"wait_ms\" and \"deny_status\"");
}

// ---------------------------------------------------------------------------
// Query parameters.

TEST(CheckRequestQuery, AllFields) {
  const CheckRequest r = Query("rule=api&key=user%3A42&cost=3&tier=pro");
  EXPECT_EQ(r.rule, "api");
  EXPECT_EQ(r.key, "user:42");
  EXPECT_EQ(r.cost, 3);
  EXPECT_EQ(r.tier, "pro");
}

TEST(CheckRequestQuery, DefaultsAndDecoding) {
  const CheckRequest r = Query("key=a+b%2Fc%2B&rule=r");
  EXPECT_EQ(r.key, "a b/c+");
  EXPECT_EQ(r.cost, 1);
  EXPECT_EQ(r.tier, "");
  EXPECT_EQ(Query("rule=r&key=k&tier=").tier, "");
  EXPECT_EQ(Query("&rule=r&&key=k&").rule, "r");
}

TEST(CheckRequestQuery, CostEdges) {
  EXPECT_EQ(Query("rule=r&key=k&cost=0").cost, 0);
  EXPECT_EQ(Query("rule=r&key=k&cost=000").cost, 0);
  EXPECT_EQ(Query("rule=r&key=k&cost=1000000000000000").cost, 1000000000000000);
  for (const char* bad : {"1000000000000001", "99999999999999999999999999", "-1", "+1", "1.0",
                          "1e3", "abc", "", "1%20", "0x10"}) {
    EXPECT_EQ(QueryError(std::string("rule=r&key=k&cost=") + bad), kCostError) << bad;
  }
}

TEST(CheckRequestQuery, Errors) {
  EXPECT_EQ(QueryError("key=k"), "missing required query parameter \"rule\"");
  EXPECT_EQ(QueryError(""), "missing required query parameter \"rule\"");
  EXPECT_EQ(QueryError("rule=&key=k"), "\"rule\" must not be empty");
  EXPECT_EQ(QueryError("rule=r&key"), "\"key\" must not be empty");
  EXPECT_EQ(QueryError("rule=r&key=" + std::string(513, 'k')),
            "\"key\" is 513 bytes; at most 512 are allowed");
  EXPECT_EQ(Query("rule=r&key=" + std::string(512, 'k')).key.size(), 512u);
  EXPECT_EQ(QueryError("rule=r&key=k&x=1"),
            "unknown query parameter \"x\"; the parameters are rule, key, cost, tier, priority, "
            "wait_ms and deny_status");
  EXPECT_EQ(QueryError("rule=r&rule=s&key=k"), "query parameter \"rule\" is given more than once");
  EXPECT_EQ(QueryError("rule=r&key=%zz"),
            "invalid percent-escape in the value of query parameter \"key\"");
}

TEST(CheckRequestQuery, DenyStatus) {
  EXPECT_EQ(Query("rule=r&key=k").deny_status, 429);
  EXPECT_EQ(Query("rule=r&key=k&deny_status=403").deny_status, 403);
  EXPECT_EQ(Query("deny_status=401&rule=r&key=k").deny_status, 401);
  EXPECT_EQ(Query("rule=r&key=k&deny_status=429").deny_status, 429);
  EXPECT_EQ(QueryError("rule=r&key=k&deny_status=404"), "\"deny_status\" must be 401, 403 or 429");
  EXPECT_EQ(QueryError("rule=r&key=k&deny_status="), "\"deny_status\" must be 401, 403 or 429");
  EXPECT_EQ(QueryError("rule=r&key=k&deny_status=403&deny_status=403"),
            "query parameter \"deny_status\" is given more than once");
}

// A POST check takes deny_status in its body, or in its query (a hook that
// adds it to the URL), the same three values.
TEST(CheckRequestJson, DenyStatus) {
  CheckRequest out;
  std::string error;
  ASSERT_TRUE(DecodeCheckRequestJson(R"({"rule":"r","key":"k","deny_status":403})", &out, &error))
      << error;
  EXPECT_EQ(out.deny_status, 403);
  ASSERT_TRUE(DecodeCheckRequestJson(R"({"rule":"r","key":"k","deny_status":null})", &out, &error));
  EXPECT_EQ(out.deny_status, 429);
  for (const char* bad : {"404", "\"403\"", "403.0", "-403", "true", "4030000000000000000000"}) {
    EXPECT_EQ(JsonError(std::string(R"({"rule":"r","key":"k","deny_status":)") + bad + "}"),
              "\"deny_status\" must be 401, 403 or 429")
        << bad;
  }
}

TEST(CheckRequestPostQuery, DenyStatusAloneAndAgreeingWithTheBody) {
  CheckRequest out;
  std::string error;
  ASSERT_TRUE(DecodeCheckRequestJson(R"({"rule":"r","key":"k"})", &out, &error));
  ASSERT_TRUE(DecodeDenyStatusQuery("", &out, &error));
  EXPECT_EQ(out.deny_status, 429);
  ASSERT_TRUE(DecodeDenyStatusQuery("deny_status=401", &out, &error)) << error;
  EXPECT_EQ(out.deny_status, 401);

  ASSERT_TRUE(DecodeCheckRequestJson(R"({"rule":"r","key":"k","deny_status":403})", &out, &error));
  EXPECT_TRUE(DecodeDenyStatusQuery("deny_status=403", &out, &error)) << error;
  EXPECT_FALSE(DecodeDenyStatusQuery("deny_status=401", &out, &error));
  EXPECT_EQ(error, "deny_status is given in both the query and the body, with different values");

  out = CheckRequest{};
  EXPECT_FALSE(DecodeDenyStatusQuery("rule=other", &out, &error));
  EXPECT_EQ(error,
            "a POST check takes its arguments in the JSON body; its query may hold only "
            "deny_status, not \"rule\"");
  EXPECT_FALSE(DecodeDenyStatusQuery("deny_status=500", &out, &error));
  EXPECT_EQ(error, "\"deny_status\" must be 401, 403 or 429");
  EXPECT_FALSE(DecodeDenyStatusQuery("deny_status=403&deny_status=403", &out, &error));
  EXPECT_EQ(error, "query parameter \"deny_status\" is given more than once");
}

}  // namespace
}  // namespace floodgate::http
