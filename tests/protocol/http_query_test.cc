// http_query: target splitting, percent-decoding ('+', %2F, invalid escapes),
// query parameter lookup and path segments.
#include "protocol/http/query.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace floodgate::http {
namespace {

using namespace std::string_literals;
using Params = std::vector<std::pair<std::string, std::string>>;

void ExpectSplit(std::string_view target, std::string_view path, std::string_view query) {
  const Target t = SplitTarget(target);
  EXPECT_EQ(t.path, path) << target;
  EXPECT_EQ(t.query, query) << target;
}

TEST(HttpQuery, SplitTarget) {
  ExpectSplit("/v1/check?rule=api&key=u", "/v1/check", "rule=api&key=u");
  ExpectSplit("/v1/check", "/v1/check", "");
  ExpectSplit("/v1/check?", "/v1/check", "");
  ExpectSplit("/a?b?c", "/a", "b?c");
  ExpectSplit("/a#frag", "/a", "");
  ExpectSplit("/a?x=1#frag", "/a", "x=1");
  ExpectSplit("/", "/", "");
  ExpectSplit("http://host:8080/v1/rules?x=1", "/v1/rules", "x=1");
  ExpectSplit("http://host:8080", "/", "");
  ExpectSplit("http://host?x=1", "/", "x=1");
  ExpectSplit("*", "*", "");
  ExpectSplit("host:443", "host:443", "");
  ExpectSplit("", "", "");
}

std::optional<std::string> Decode(std::string_view in, bool plus_as_space) {
  std::string out;
  if (!PercentDecode(in, plus_as_space, &out)) return std::nullopt;
  return out;
}

TEST(HttpQuery, PercentDecode) {
  EXPECT_EQ(Decode("user%3A42", true), "user:42");
  EXPECT_EQ(Decode("a%2Fb", false), "a/b");
  EXPECT_EQ(Decode("a%2fb", false), "a/b");
  EXPECT_EQ(Decode("a+b", true), "a b");
  EXPECT_EQ(Decode("a+b", false), "a+b");
  EXPECT_EQ(Decode("a%2Bb", true), "a+b");
  EXPECT_EQ(Decode("%25", true), "%");
  EXPECT_EQ(Decode("%00", true), "\0"s);
  EXPECT_EQ(Decode("%C3%A9", true), "\xc3\xa9");
  EXPECT_EQ(Decode("%ff", true), "\xff");
  EXPECT_EQ(Decode("", true), "");
  EXPECT_EQ(Decode("%", true), std::nullopt);
  EXPECT_EQ(Decode("%2", true), std::nullopt);
  EXPECT_EQ(Decode("a%", true), std::nullopt);
  EXPECT_EQ(Decode("%zz", true), std::nullopt);
  EXPECT_EQ(Decode("%2g", true), std::nullopt);
  EXPECT_EQ(Decode("%%41", true), std::nullopt);
  EXPECT_EQ(Decode("%-1", true), std::nullopt);
}

TEST(HttpQuery, QueryParam) {
  std::string error;
  const std::string_view q = "rule=api&key=user%3A42&tier=pro+plus&empty=&flag&x=%2B";
  EXPECT_EQ(QueryParam(q, "rule", &error), "api");
  EXPECT_EQ(QueryParam(q, "key", &error), "user:42");
  EXPECT_EQ(QueryParam(q, "tier", &error), "pro plus");
  EXPECT_EQ(QueryParam(q, "empty", &error), "");
  EXPECT_EQ(QueryParam(q, "flag", &error), "");
  EXPECT_EQ(QueryParam(q, "x", &error), "+");
  EXPECT_EQ(QueryParam(q, "missing", &error), std::nullopt);
  EXPECT_EQ(QueryParam(q, "RULE", &error), std::nullopt);  // names are case-sensitive
  EXPECT_EQ(QueryParam("", "rule", &error), std::nullopt);
  EXPECT_EQ(error, "");
}

TEST(HttpQuery, QueryParamDecodesNamesAndTakesTheFirst) {
  std::string error;
  EXPECT_EQ(QueryParam("ru%6Ce=a&rule=b", "rule", &error), "a");
  EXPECT_EQ(QueryParam("a+b=1", "a b", &error), "1");
  EXPECT_EQ(QueryParam("&&k=v&", "k", &error), "v");
  EXPECT_EQ(QueryParam("k=a=b", "k", &error), "a=b");
  EXPECT_EQ(QueryParam("k=a%26b", "k", &error), "a&b");
  EXPECT_EQ(error, "");
}

TEST(HttpQuery, InvalidEscapeIsAnError) {
  std::string error;
  EXPECT_EQ(QueryParam("key=%zz", "key", &error), std::nullopt);
  EXPECT_EQ(error, "invalid percent-escape in the value of query parameter \"key\"");
  error.clear();
  // Anywhere in the query, even in another parameter.
  EXPECT_EQ(QueryParam("rule=a&other=50%", "rule", &error), std::nullopt);
  EXPECT_EQ(error, "invalid percent-escape in the value of query parameter \"other\"");
  error.clear();
  EXPECT_EQ(QueryParam("r%ule=a", "rule", &error), std::nullopt);
  EXPECT_EQ(error, "invalid percent-escape in the query parameter name \"r%ule\"");
}

TEST(HttpQuery, ParseQueryKeepsOrderAndDuplicates) {
  Params params;
  std::string error;
  ASSERT_TRUE(ParseQuery("b=2&a=1&b=3&c", &params, &error));
  EXPECT_EQ(params, (Params{{"b", "2"}, {"a", "1"}, {"b", "3"}, {"c", ""}}));
  ASSERT_TRUE(ParseQuery("", &params, &error));
  EXPECT_TRUE(params.empty());
  ASSERT_TRUE(ParseQuery("=v", &params, &error));
  EXPECT_EQ(params, (Params{{"", "v"}}));
  EXPECT_FALSE(ParseQuery("a=1&b=%4", &params, &error));
}

TEST(HttpQuery, DecodePathSegments) {
  using Segments = std::vector<std::string>;
  EXPECT_EQ(DecodePathSegments("/v1/sets/a%2Fb"), (Segments{"v1", "sets", "a/b"}));
  EXPECT_EQ(DecodePathSegments("/v1/sets/otp%3A%2B1%20555/members/x+y"),
            (Segments{"v1", "sets", "otp:+1 555", "members", "x+y"}));
  EXPECT_EQ(DecodePathSegments("/"), (Segments{""}));
  EXPECT_EQ(DecodePathSegments("/a/"), (Segments{"a", ""}));
  EXPECT_EQ(DecodePathSegments("/a//b"), (Segments{"a", "", "b"}));
  EXPECT_EQ(DecodePathSegments("/%2F"), (Segments{"/"}));
  EXPECT_EQ(DecodePathSegments("*"), (Segments{"*"}));
  EXPECT_EQ(DecodePathSegments("/v1/sets/%"), std::nullopt);
  EXPECT_EQ(DecodePathSegments("/v1/%G1/x"), std::nullopt);
}

}  // namespace
}  // namespace floodgate::http
