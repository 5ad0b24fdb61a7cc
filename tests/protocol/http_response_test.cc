// http_response: exact response bytes, the reason table, problem+json bodies
// and JSON escaping of quotes, control bytes and invalid UTF-8.
#include "protocol/http/response.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace floodgate::http {
namespace {

using namespace std::string_literals;

TEST(HttpResponse, KeepAliveResponseBytes) {
  std::string out = "previous";
  const std::vector<HeaderField> headers = {{"Content-Type", "application/json"},
                                            {"RateLimit", "\"api\";r=59;t=60"}};
  AppendResponse(&out, 200, "", headers, "{\"allowed\":true}", /*keep_alive=*/true);
  EXPECT_EQ(out,
            "previous"
            "HTTP/1.1 200 OK\r\n"
            "Content-Type: application/json\r\n"
            "RateLimit: \"api\";r=59;t=60\r\n"
            "Content-Length: 16\r\n"
            "\r\n"
            "{\"allowed\":true}");
}

TEST(HttpResponse, CloseResponseBytes) {
  std::string out;
  AppendResponse(&out, 429, "", {}, "", /*keep_alive=*/false);
  EXPECT_EQ(out,
            "HTTP/1.1 429 Too Many Requests\r\n"
            "Content-Length: 0\r\n"
            "Connection: close\r\n"
            "\r\n");
}

TEST(HttpResponse, CustomAndMissingReasons) {
  std::string out;
  AppendResponse(&out, 200, "Fine", {}, "x", true);
  EXPECT_EQ(out, "HTTP/1.1 200 Fine\r\nContent-Length: 1\r\n\r\nx");
  out.clear();
  AppendResponse(&out, 299, "", {}, "", true);
  EXPECT_EQ(out, "HTTP/1.1 299 \r\nContent-Length: 0\r\n\r\n");
}

TEST(HttpResponse, NoBodyStatusesHaveNoContentLength) {
  std::string out;
  AppendResponse(&out, 204, "", {}, "ignored", true);
  EXPECT_EQ(out, "HTTP/1.1 204 No Content\r\n\r\n");
  out.clear();
  AppendResponse(&out, 100, "", {}, "", true);
  EXPECT_EQ(out, "HTTP/1.1 100 Continue\r\n\r\n");
  out.clear();
  AppendResponse(&out, 304, "Not Modified", {}, "", false);
  EXPECT_EQ(out, "HTTP/1.1 304 Not Modified\r\nConnection: close\r\n\r\n");
}

TEST(HttpResponse, HeaderTextCannotInjectHeaders) {
  std::string out;
  const std::string with_nul = "nul\0byte"s;
  const std::vector<HeaderField> headers = {{"X-Key", "a\r\nSet-Cookie: x=1"}, {"X\nY", with_nul}};
  AppendResponse(&out, 200, "O\rK", headers, "", true);
  EXPECT_EQ(out,
            "HTTP/1.1 200 O K\r\n"
            "X-Key: a  Set-Cookie: x=1\r\n"
            "X Y: nul byte\r\n"
            "Content-Length: 0\r\n\r\n");
}

TEST(HttpResponse, StatusReasonTable) {
  const std::vector<std::pair<int, std::string>> table = {
      {200, "OK"},
      {204, "No Content"},
      {400, "Bad Request"},
      {401, "Unauthorized"},
      {404, "Not Found"},
      {405, "Method Not Allowed"},
      {413, "Content Too Large"},
      {429, "Too Many Requests"},
      {431, "Request Header Fields Too Large"},
      {500, "Internal Server Error"},
      {501, "Not Implemented"},
      {503, "Service Unavailable"},
      {505, "HTTP Version Not Supported"},
      {100, "Continue"},
      {201, "Created"},
      {403, "Forbidden"},
      {408, "Request Timeout"},
      {415, "Unsupported Media Type"},
  };
  for (const auto& [code, reason] : table) EXPECT_EQ(StatusReason(code), reason) << code;
  EXPECT_EQ(StatusReason(0), "");
  EXPECT_EQ(StatusReason(299), "");
  EXPECT_EQ(StatusReason(-1), "");
}

TEST(HttpResponse, ProblemBytes) {
  std::string out;
  AppendProblem(&out, 400, "", "missing required field \"rule\"", /*keep_alive=*/true);
  const std::string body =
      "{\"type\":\"about:blank\",\"title\":\"Bad Request\",\"status\":400,"
      "\"detail\":\"missing required field \\\"rule\\\"\"}";
  EXPECT_EQ(out,
            "HTTP/1.1 400 Bad Request\r\n"
            "Content-Type: application/problem+json\r\n"
            "Content-Length: " +
                std::to_string(body.size()) +
                "\r\n"
                "\r\n" +
                body);
}

TEST(HttpResponse, ProblemWithTitleExtraHeadersAndClose) {
  std::string out;
  const std::vector<HeaderField> extra = {{"Retry-After", "3"}, {"X-A", "b"}};
  AppendProblem(&out, 503, "Backend down", "redis is unreachable", /*keep_alive=*/false, extra);
  const std::string body =
      "{\"type\":\"about:blank\",\"title\":\"Backend down\",\"status\":503,"
      "\"detail\":\"redis is unreachable\"}";
  EXPECT_EQ(out,
            "HTTP/1.1 503 Service Unavailable\r\n"
            "Content-Type: application/problem+json\r\n"
            "Retry-After: 3\r\n"
            "X-A: b\r\n"
            "Content-Length: " +
                std::to_string(body.size()) +
                "\r\n"
                "Connection: close\r\n"
                "\r\n" +
                body);
}

TEST(HttpResponse, ProblemEscapesQuotesAndControlCharacters) {
  const std::string detail =
      "key \"a\\b\"\n\r\t\b\f\x01\x1f\x7f"
      " end"s +
      '\0';
  std::string out;
  AppendProblem(&out, 400, "T\"itle", detail, true);
  const std::string body = out.substr(out.find("\r\n\r\n") + 4);
  EXPECT_EQ(body,
            "{\"type\":\"about:blank\",\"title\":\"T\\\"itle\",\"status\":400,"
            "\"detail\":\"key \\\"a\\\\b\\\"\\n\\r\\t\\b\\f\\u0001\\u001f\\u007f end\\u0000\"}");
  const nlohmann::json parsed = nlohmann::json::parse(body);
  EXPECT_EQ(parsed["detail"], detail);
  EXPECT_EQ(parsed["title"], "T\"itle");
  EXPECT_EQ(parsed["status"], 400);
  EXPECT_EQ(parsed["type"], "about:blank");
}

TEST(HttpResponse, JsonEscapeKeepsValidUtf8) {
  EXPECT_EQ(JsonEscape("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80 /"),
            "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80 /");
  EXPECT_EQ(JsonEscape("\xef\xbf\xbf\xf4\x8f\xbf\xbf"), "\xef\xbf\xbf\xf4\x8f\xbf\xbf");  // maxima
  EXPECT_EQ(JsonEscape(""), "");
}

TEST(HttpResponse, JsonEscapeReplacesInvalidUtf8) {
  // One U+FFFD per maximal invalid subpart (Unicode 15, 3.9).
  EXPECT_EQ(JsonEscape("a\xff"
                       "b"),
            "a\\ufffdb");
  EXPECT_EQ(JsonEscape("\x80"), "\\ufffd");
  EXPECT_EQ(JsonEscape("\xc3"), "\\ufffd");  // truncated at the end
  EXPECT_EQ(JsonEscape("\xe2\x82"
                       "a"),
            "\\ufffda");                                           // truncated 3-byte sequence
  EXPECT_EQ(JsonEscape("\xc0\xaf"), "\\ufffd\\ufffd");             // overlong '/'
  EXPECT_EQ(JsonEscape("\xe0\x80\x80"), "\\ufffd\\ufffd\\ufffd");  // overlong
  EXPECT_EQ(JsonEscape("\xed\xa0\x80"), "\\ufffd\\ufffd\\ufffd");  // surrogate
  EXPECT_EQ(JsonEscape("\xf4\x90\x80\x80"), "\\ufffd\\ufffd\\ufffd\\ufffd");  // > U+10FFFF
  EXPECT_EQ(JsonEscape("\xf5\x80"), "\\ufffd\\ufffd");
  const std::string escaped = JsonEscape("\xff\xfe ok \xc3\xa9");
  EXPECT_EQ(nlohmann::json::parse("\"" + escaped + "\""), "\xef\xbf\xbd\xef\xbf\xbd ok \xc3\xa9");
}

TEST(HttpResponse, JsonEscapeAllControlCharacters) {
  for (int c = 0; c < 0x20; ++c) {
    const std::string escaped = JsonEscape(std::string(1, static_cast<char>(c)));
    EXPECT_EQ(escaped[0], '\\') << c;
    EXPECT_EQ(nlohmann::json::parse("\"" + escaped + "\""), std::string(1, static_cast<char>(c)));
  }
  EXPECT_EQ(JsonEscape("\x02"), "\\u0002");
  EXPECT_EQ(JsonEscape("\x1b"), "\\u001b");
}

TEST(HttpResponse, QuoteForDetail) {
  EXPECT_EQ(QuoteForDetail("plain"), "\"plain\"");
  EXPECT_EQ(QuoteForDetail("a\"b\\c\r\n\x7f"), "\"a\\\"b\\\\c\\x0d\\x0a\\x7f\"");
  EXPECT_EQ(QuoteForDetail(std::string(50, 'x')), "\"" + std::string(40, 'x') + "...\"");
  EXPECT_EQ(QuoteForDetail(std::string(40, 'x')), "\"" + std::string(40, 'x') + "\"");
  EXPECT_EQ(QuoteForDetail("abcdef", 3), "\"abc...\"");
  EXPECT_EQ(QuoteForDetail(""), "\"\"");
}

}  // namespace
}  // namespace floodgate::http
