// http_request_parser: requests whole, split at every byte and pipelined;
// keep-alive rules; each error status with its message; every limit at
// exactly its maximum and one past it; chunked bodies.
#include "protocol/http/request_parser.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <string_view>
#include <vector>

namespace floodgate::http {
namespace {

using ::testing::HasSubstr;
using namespace std::string_literals;
using Status = RequestParser::Status;

// One outcome of Parse(), copied out of the views so outcomes of different
// feeding patterns can be compared.
struct Outcome {
  Status status = Status::kNeedMore;
  std::string method, target, version, body;
  std::vector<std::pair<std::string, std::string>> headers;
  bool keep_alive = false;
  size_t consumed = 0;
  int code = 0;
  std::string error;

  bool operator==(const Outcome&) const = default;
};

std::ostream& operator<<(std::ostream& os, const Outcome& o) {
  switch (o.status) {
    case Status::kRequest:
      os << "request " << o.method << " " << o.target << " " << o.version
         << " body=" << o.body.size() << " headers=" << o.headers.size()
         << " keep_alive=" << o.keep_alive << " consumed=" << o.consumed;
      break;
    case Status::kNeedMore:
      os << "need more, " << o.consumed << " bytes pending";
      break;
    case Status::kError:
      os << "error " << o.code << ": " << o.error;
      break;
  }
  return os;
}

// Feeds `pieces` one after another into one parser, as a connection would:
// after each piece, takes out every complete request. Ends with the error, or
// with kNeedMore and the number of unconsumed bytes.
std::vector<Outcome> Feed(const std::vector<std::string>& pieces, ParserLimits limits = {}) {
  RequestParser parser(limits);
  std::string buffer;
  std::vector<Outcome> out;
  for (const std::string& piece : pieces) {
    buffer += piece;
    while (true) {
      Request req;
      Outcome o;
      o.status = parser.Parse(buffer, &req, &o.consumed, &o.code, &o.error);
      if (o.status == Status::kNeedMore) break;
      if (o.status == Status::kError) {
        o.consumed = 0;
        out.push_back(o);
        return out;
      }
      o.method = req.method;
      o.target = req.target;
      o.version = req.version;
      o.body = req.body;
      for (const auto& [n, v] : req.headers) o.headers.emplace_back(n, v);
      o.keep_alive = req.keep_alive;
      out.push_back(o);
      buffer.erase(0, o.consumed);
    }
  }
  Outcome pending;
  pending.consumed = buffer.size();
  out.push_back(pending);
  return out;
}

std::vector<Outcome> FeedWhole(std::string_view input, ParserLimits limits = {}) {
  return Feed({std::string(input)}, limits);
}

std::vector<Outcome> FeedBytes(std::string_view input, ParserLimits limits = {}) {
  std::vector<std::string> pieces;
  for (char c : input) pieces.emplace_back(1, c);
  return Feed(pieces, limits);
}

// The single request (or error) a complete input yields.
Outcome ParseOne(std::string_view input, ParserLimits limits = {}) {
  const std::vector<Outcome> all = FeedWhole(input, limits);
  return all.front();
}

Outcome ExpectError(std::string_view input, int code, ParserLimits limits = {}) {
  const Outcome o = ParseOne(input, limits);
  EXPECT_EQ(o.status, Status::kError) << o;
  EXPECT_EQ(o.code, code) << o;
  return o;
}

// ---------------------------------------------------------------------------
// Requests that parse.

TEST(HttpRequestParser, SimpleGet) {
  const std::string in = "GET /v1/check?rule=api&key=u HTTP/1.1\r\nHost: localhost\r\n\r\n";
  const Outcome o = ParseOne(in);
  ASSERT_EQ(o.status, Status::kRequest) << o;
  EXPECT_EQ(o.method, "GET");
  EXPECT_EQ(o.target, "/v1/check?rule=api&key=u");
  EXPECT_EQ(o.version, "HTTP/1.1");
  ASSERT_EQ(o.headers.size(), 1u);
  EXPECT_EQ(o.headers[0].first, "Host");
  EXPECT_EQ(o.headers[0].second, "localhost");
  EXPECT_EQ(o.body, "");
  EXPECT_TRUE(o.keep_alive);
  EXPECT_EQ(o.consumed, in.size());
}

TEST(HttpRequestParser, PostWithContentLength) {
  const std::string body = "{\"rule\":\"api\",\"key\":\"u\"}";
  const std::string in =
      "POST /v1/check HTTP/1.1\r\nHost: h\r\nContent-Type: application/json\r\n"
      "Content-Length: " +
      std::to_string(body.size()) + "\r\n\r\n" + body;
  const std::vector<Outcome> all = FeedWhole(in);
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].status, Status::kRequest) << all[0];
  EXPECT_EQ(all[0].body, body);
  EXPECT_EQ(all[0].consumed, in.size());
}

TEST(HttpRequestParser, ViewsPointIntoInputAndHeaderLookupIgnoresCase) {
  const std::string in =
      "GET / HTTP/1.1\r\nHost: h\r\nX-Api-KEY:   secret \t\r\nEmpty:\r\nx-api-key: second\r\n\r\n";
  RequestParser parser({});
  Request req;
  size_t consumed = 0;
  int code = 0;
  std::string error;
  ASSERT_EQ(parser.Parse(in, &req, &consumed, &code, &error), Status::kRequest) << error;
  EXPECT_EQ(req.Header("x-api-key"), "secret");  // the first one, trimmed
  EXPECT_EQ(req.Header("X-API-KEY"), "secret");
  EXPECT_EQ(req.Header("HOST"), "h");
  EXPECT_EQ(req.Header("empty"), "");
  EXPECT_TRUE(req.HasHeader("EMPTY"));
  EXPECT_FALSE(req.HasHeader("missing"));
  EXPECT_EQ(req.Header("missing"), "");
  EXPECT_EQ(req.headers.size(), 4u);
  EXPECT_EQ(req.headers[1].first, "X-Api-KEY");  // as sent
  EXPECT_GE(req.method.data(), in.data());
  EXPECT_LE(req.headers[3].second.data() + req.headers[3].second.size(), in.data() + in.size());
}

TEST(HttpRequestParser, BareLfLineEndings) {
  const Outcome o = ParseOne("POST /a HTTP/1.1\nHost: h\nContent-Length: 3\n\nabc");
  ASSERT_EQ(o.status, Status::kRequest) << o;
  EXPECT_EQ(o.target, "/a");
  EXPECT_EQ(o.headers[1].second, "3");
  EXPECT_EQ(o.body, "abc");
  // Mixed endings too.
  EXPECT_EQ(ParseOne("GET / HTTP/1.1\r\nHost: h\n\r\n").status, Status::kRequest);
}

TEST(HttpRequestParser, EmptyLinesBeforeRequestLineAreSkipped) {
  const std::string in = "\r\n\n\r\nGET / HTTP/1.1\r\nHost: h\r\n\r\n";
  const Outcome o = ParseOne(in);
  ASSERT_EQ(o.status, Status::kRequest) << o;
  EXPECT_EQ(o.method, "GET");
  EXPECT_EQ(o.consumed, in.size());
}

TEST(HttpRequestParser, Http10NeedsNoHost) {
  const Outcome o = ParseOne("GET /healthz HTTP/1.0\r\n\r\n");
  ASSERT_EQ(o.status, Status::kRequest) << o;
  EXPECT_EQ(o.version, "HTTP/1.0");
  EXPECT_FALSE(o.keep_alive);
}

TEST(HttpRequestParser, AbsoluteFormAndAsteriskTargets) {
  EXPECT_EQ(ParseOne("GET http://h:8080/v1/rules?x=1 HTTP/1.1\r\nHost: h\r\n\r\n").target,
            "http://h:8080/v1/rules?x=1");
  EXPECT_EQ(ParseOne("OPTIONS * HTTP/1.1\r\nHost: h\r\n\r\n").target, "*");
}

TEST(HttpRequestParser, ObsTextInValuesAndTargetIsKept) {
  const Outcome o = ParseOne("GET /caf\xc3\xa9 HTTP/1.1\r\nHost: h\r\nX-Name: caf\xc3\xa9\r\n\r\n");
  ASSERT_EQ(o.status, Status::kRequest) << o;
  EXPECT_EQ(o.target, "/caf\xc3\xa9");
  EXPECT_EQ(o.headers[1].second, "caf\xc3\xa9");
}

TEST(HttpRequestParser, NeedMoreUntilComplete) {
  const std::string in = "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n\r\nhello";
  for (size_t n = 0; n < in.size(); ++n) {
    const std::vector<Outcome> all = FeedWhole(in.substr(0, n));
    ASSERT_EQ(all.size(), 1u) << n;
    EXPECT_EQ(all[0].status, Status::kNeedMore) << n;
    EXPECT_EQ(all[0].consumed, n);
  }
}

// ---------------------------------------------------------------------------
// Keep-alive.

bool KeepAlive(std::string_view version, std::string_view connection_header) {
  std::string in = "GET / " + std::string(version) + "\r\nHost: h\r\n";
  if (!connection_header.empty()) in += "Connection: " + std::string(connection_header) + "\r\n";
  in += "\r\n";
  const Outcome o = ParseOne(in);
  EXPECT_EQ(o.status, Status::kRequest) << in << o;
  return o.keep_alive;
}

TEST(HttpRequestParser, KeepAliveRules) {
  EXPECT_TRUE(KeepAlive("HTTP/1.1", ""));
  EXPECT_FALSE(KeepAlive("HTTP/1.1", "close"));
  EXPECT_FALSE(KeepAlive("HTTP/1.1", "Close"));
  EXPECT_FALSE(KeepAlive("HTTP/1.1", "upgrade, CLOSE"));
  EXPECT_TRUE(KeepAlive("HTTP/1.1", "keep-alive"));
  EXPECT_TRUE(KeepAlive("HTTP/1.1", "closed"));  // a different token
  EXPECT_FALSE(KeepAlive("HTTP/1.0", ""));
  EXPECT_TRUE(KeepAlive("HTTP/1.0", "keep-alive"));
  EXPECT_TRUE(KeepAlive("HTTP/1.0", "Keep-Alive"));
  EXPECT_TRUE(KeepAlive("HTTP/1.0", "foo ,  keep-alive"));
  EXPECT_FALSE(KeepAlive("HTTP/1.0", "keep-alive, close"));
  EXPECT_FALSE(KeepAlive("HTTP/1.0", "upgrade"));
}

TEST(HttpRequestParser, KeepAliveFromRepeatedConnectionFields) {
  const Outcome o =
      ParseOne("GET / HTTP/1.1\r\nHost: h\r\nConnection: te\r\nConnection: close\r\n\r\n");
  EXPECT_FALSE(o.keep_alive);
}

// ---------------------------------------------------------------------------
// Pipelining.

TEST(HttpRequestParser, PipelinedRequestsComeOutOneAtATime) {
  const std::string a = "GET /a HTTP/1.1\r\nHost: h\r\n\r\n";
  const std::string b = "POST /b HTTP/1.1\r\nHost: h\r\nContent-Length: 2\r\n\r\nhi";
  const std::string c =
      "POST /c HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nyo\r\n0\r\n\r\n";
  const std::string d_partial = "GET /d HTTP/1.1\r\nHo";
  const std::vector<Outcome> all = FeedWhole(a + b + c + d_partial);
  ASSERT_EQ(all.size(), 4u);
  EXPECT_EQ(all[0].target, "/a");
  EXPECT_EQ(all[0].consumed, a.size());
  EXPECT_EQ(all[1].target, "/b");
  EXPECT_EQ(all[1].body, "hi");
  EXPECT_EQ(all[1].consumed, b.size());
  EXPECT_EQ(all[2].target, "/c");
  EXPECT_EQ(all[2].body, "yo");
  EXPECT_EQ(all[2].consumed, c.size());
  EXPECT_EQ(all[3].status, Status::kNeedMore);
  EXPECT_EQ(all[3].consumed, d_partial.size());
}

TEST(HttpRequestParser, OneRequestPerCallEvenWhenMoreAreBuffered) {
  const std::string two = "GET /1 HTTP/1.1\r\nHost: h\r\n\r\nGET /2 HTTP/1.1\r\nHost: h\r\n\r\n";
  RequestParser parser({});
  Request req;
  size_t consumed = 0;
  int code = 0;
  std::string error;
  ASSERT_EQ(parser.Parse(two, &req, &consumed, &code, &error), Status::kRequest);
  EXPECT_EQ(req.target, "/1");
  EXPECT_EQ(consumed, two.size() / 2);
  ASSERT_EQ(parser.Parse(std::string_view(two).substr(consumed), &req, &consumed, &code, &error),
            Status::kRequest);
  EXPECT_EQ(req.target, "/2");
}

// ---------------------------------------------------------------------------
// Every split gives the same answer.

std::vector<std::string> SplitCorpus() {
  return {
      "GET /v1/check?rule=api&key=user%3A42 HTTP/1.1\r\nHost: h\r\nAccept: */*\r\n\r\n",
      "POST /v1/check HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n\r\nhelloGET / HTTP/1.0\r\n\r\n",
      "POST /x HTTP/1.1\nHost: h\nTransfer-Encoding: chunked\n\n5\nhello\n0\n\n",
      "POST /x HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: Chunked\r\n\r\n"
      "5;ext=1\r\nhello\r\n6\r\n world\r\nA\r\n0123456789\r\n0\r\nX-T: 1\r\n\r\n"
      "GET /next HTTP/1.1\r\nHost: h\r\n\r\n",
      "\r\nGET / HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n",
      "GET / HTTP/2.0\r\nHost: h\r\n\r\n",
      "GET / HTTP/1.1\r\nHost: h\r\n folded\r\n\r\n",
      "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 99999\r\n\r\n",
      "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nhello\r\n",
      "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n10000000000000000\r\n",
      "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r",
      "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: gzip\r\n\r\n",
      "GET / HTTP/1.1\r\nHost: h\r\nX: a\rb\r\n\r\n",
      "GET / HTTP/1.1\r\nHost: h\r\nX-Long: " + std::string(9000, 'a') + "\r\n\r\n",
  };
}

TEST(HttpRequestParser, EverySplitPositionGivesTheSameResult) {
  for (const std::string& in : SplitCorpus()) {
    const std::vector<Outcome> whole = FeedWhole(in);
    for (size_t i = 0; i <= in.size(); ++i) {
      ASSERT_EQ(Feed({in.substr(0, i), in.substr(i)}), whole) << "split at " << i << " of:\n" << in;
    }
    ASSERT_EQ(FeedBytes(in), whole) << "byte by byte:\n" << in;
  }
}

TEST(HttpRequestParser, EverySplitPositionAtTightLimits) {
  // Limits sized so that the split falls around each limit's edge.
  ParserLimits limits;
  limits.max_header_bytes = 60;
  limits.max_headers = 3;
  limits.max_body_bytes = 8;
  const std::vector<std::string> inputs = {
      "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: "
      "chunked\r\n\r\n4\r\nabcd\r\n4\r\nefgh\r\n0\r\n\r\n",
      "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nabcd\r\n5\r\nefghi\r\n",
      "GET / HTTP/1.1\r\nHost: h\r\nA: 1\r\nB: 2\r\nC: 3\r\n\r\n",
      "GET / HTTP/1.1\r\nHost: h\r\nA: 1\r\nB: 2\r\n\r\n",
      "GET /" + std::string(60, 'x') + " HTTP/1.1\r\n\r\n",
  };
  for (const std::string& in : inputs) {
    const std::vector<Outcome> whole = FeedWhole(in, limits);
    for (size_t i = 0; i <= in.size(); ++i) {
      ASSERT_EQ(Feed({in.substr(0, i), in.substr(i)}, limits), whole) << i << ":\n" << in;
    }
    ASSERT_EQ(FeedBytes(in, limits), whole) << in;
  }
}

// ---------------------------------------------------------------------------
// Request line errors.

TEST(HttpRequestParser, MalformedRequestLines) {
  EXPECT_EQ(ExpectError("GET /\r\n\r\n", 400).error,
            "malformed request line \"GET /\"; expected \"METHOD target HTTP/1.1\"");
  EXPECT_EQ(ExpectError("GET  / HTTP/1.1\r\n\r\n", 400).error,
            "malformed request line \"GET  / HTTP/1.1\": empty request target");
  EXPECT_EQ(ExpectError("G(T / HTTP/1.1\r\n\r\n", 400).error,
            "malformed request line: the method \"G(T\" is not a token");
  EXPECT_EQ(ExpectError("GET /a\x01 HTTP/1.1\r\n\r\n", 400).error,
            "malformed request line: the request target \"/a\\x01\" contains a space or control "
            "character");
  EXPECT_EQ(ExpectError("GET / http/1.1\r\n\r\n", 400).error,
            "malformed request line: expected an HTTP version like \"HTTP/1.1\", got "
            "\"http/1.1\"");
  ExpectError("GET / HTTP/1.1 \r\n\r\n", 400);
  ExpectError("GET / HTTP/1.10\r\n\r\n", 400);
  ExpectError("GET / HTTP/1\r\n\r\n", 400);
  ExpectError(" GET / HTTP/1.1\r\n\r\n", 400);
  ExpectError("GET / HTTP/1.1\r\r\n\r\n", 400);  // a bare CR in the line
}

TEST(HttpRequestParser, UnsupportedVersionsAre505) {
  EXPECT_EQ(ExpectError("GET / HTTP/2.0\r\nHost: h\r\n\r\n", 505).error,
            "HTTP version 2.0 is not supported; use HTTP/1.1 or HTTP/1.0");
  ExpectError("GET / HTTP/1.2\r\n\r\n", 505);
  ExpectError("GET / HTTP/0.9\r\n\r\n", 505);
  ExpectError("GET / HTTP/3.0\r\n\r\n", 505);
}

// ---------------------------------------------------------------------------
// Header field errors.

TEST(HttpRequestParser, MalformedHeaderFields) {
  EXPECT_EQ(ExpectError("GET / HTTP/1.1\r\nHost: h\r\n folded\r\n\r\n", 400).error,
            "obsolete line folding (a field line starting with whitespace) is not allowed");
  ExpectError("GET / HTTP/1.1\r\nHost: h\r\n\tfolded\r\n\r\n", 400);
  ExpectError("GET / HTTP/1.1\r\n Host: h\r\n\r\n", 400);
  EXPECT_EQ(ExpectError("GET / HTTP/1.1\r\nHost: h\r\nNoColon\r\n\r\n", 400).error,
            "header line without a colon: \"NoColon\"");
  EXPECT_EQ(ExpectError("GET / HTTP/1.1\r\nHost : h\r\n\r\n", 400).error,
            "whitespace between the field name and the colon in \"Host : h\"");
  EXPECT_EQ(ExpectError("GET / HTTP/1.1\r\n: h\r\n\r\n", 400).error,
            "header line with an empty field name: \": h\"");
  EXPECT_EQ(ExpectError("GET / HTTP/1.1\r\nBad(Name): h\r\n\r\n", 400).error,
            "invalid header field name \"Bad(Name)\"");
  EXPECT_EQ(ExpectError("GET / HTTP/1.1\r\nX: a\0b\r\n\r\n"s, 400).error,
            "header field \"X\" contains a control character");
  ExpectError("GET / HTTP/1.1\r\nX: a\rb\r\n\r\n", 400);
  ExpectError("GET / HTTP/1.1\r\nX: a\x7f\r\n\r\n", 400);
}

TEST(HttpRequestParser, HostRules) {
  EXPECT_EQ(ExpectError("GET / HTTP/1.1\r\n\r\n", 400).error,
            "an HTTP/1.1 request must have a Host header field");
  EXPECT_EQ(ExpectError("GET / HTTP/1.1\r\nHost: a\r\nhost: b\r\n\r\n", 400).error,
            "the request has more than one Host header field");
  ExpectError("GET / HTTP/1.0\r\nHost: a\r\nHost: b\r\n\r\n", 400);
  EXPECT_EQ(ParseOne("GET / HTTP/1.1\r\nHost:\r\n\r\n").status, Status::kRequest);
}

// ---------------------------------------------------------------------------
// Framing errors.

std::string WithHeaders(std::string_view fields, std::string_view version = "HTTP/1.1") {
  return "POST / " + std::string(version) + "\r\nHost: h\r\n" + std::string(fields) + "\r\n";
}

TEST(HttpRequestParser, InvalidContentLength) {
  EXPECT_EQ(ExpectError(WithHeaders("Content-Length: abc\r\n"), 400).error,
            "invalid Content-Length \"abc\"; expected a decimal number");
  for (const char* bad : {"-1", "+5", "", "5,", ",5", "0x10", "1 2", "5;", "1.0"}) {
    ExpectError(WithHeaders("Content-Length: " + std::string(bad) + "\r\n"), 400);
  }
}

TEST(HttpRequestParser, RepeatedContentLength) {
  // Identical repeats are one length (RFC 9110 8.6).
  EXPECT_EQ(ParseOne(WithHeaders("Content-Length: 2, 2\r\n") + "ab").body, "ab");
  EXPECT_EQ(ParseOne(WithHeaders("Content-Length: 2\r\nContent-Length: 02\r\n") + "ab").body, "ab");
  EXPECT_EQ(ExpectError(WithHeaders("Content-Length: 2, 3\r\n"), 400).error,
            "conflicting Content-Length values");
  EXPECT_EQ(ExpectError(WithHeaders("Content-Length: 2\r\ncontent-length: 3\r\n"), 400).error,
            "conflicting Content-Length values");
}

TEST(HttpRequestParser, ContentLengthAndTransferEncodingTogether) {
  EXPECT_EQ(
      ExpectError(WithHeaders("Content-Length: 3\r\nTransfer-Encoding: chunked\r\n"), 400).error,
      "the request has both Content-Length and Transfer-Encoding");
  ExpectError(WithHeaders("Transfer-Encoding: chunked\r\nContent-Length: 3\r\n"), 400);
}

TEST(HttpRequestParser, TransferCodings) {
  EXPECT_EQ(ExpectError(WithHeaders("Transfer-Encoding: gzip\r\n"), 501).error,
            "transfer-coding \"gzip\" is not supported; only chunked is");
  ExpectError(WithHeaders("Transfer-Encoding: gzip, chunked\r\n"), 501);
  ExpectError(WithHeaders("Transfer-Encoding: identity\r\n"), 501);
  ExpectError(WithHeaders("Transfer-Encoding: chunked\r\nTransfer-Encoding: deflate\r\n"), 501);
  EXPECT_EQ(ExpectError(WithHeaders("Transfer-Encoding: chunked, chunked\r\n"), 400).error,
            "malformed Transfer-Encoding; expected exactly \"chunked\"");
  ExpectError(WithHeaders("Transfer-Encoding:\r\n"), 400);
  ExpectError(WithHeaders("Transfer-Encoding: chunked,\r\n"), 400);
  EXPECT_EQ(ExpectError(WithHeaders("Transfer-Encoding: chunked\r\n", "HTTP/1.0"), 400).error,
            "Transfer-Encoding is not allowed in an HTTP/1.0 request");
  EXPECT_EQ(ParseOne(WithHeaders("Transfer-Encoding: CHUNKED\r\n") + "0\r\n\r\n").status,
            Status::kRequest);
}

// ---------------------------------------------------------------------------
// Limits at exactly the maximum and one past it.

// A request whose head (request line through the blank line) is exactly
// `size` bytes.
std::string HeadOfSize(size_t size, std::string_view eol = "\r\n") {
  const std::string start =
      "GET / HTTP/1.1" + std::string(eol) + "Host: h" + std::string(eol) + "X-Pad: ";
  const std::string end = std::string(eol) + std::string(eol);
  return start + std::string(size - start.size() - end.size(), 'p') + end;
}

TEST(HttpRequestParser, HeaderBytesLimit) {
  ParserLimits limits;
  limits.max_header_bytes = 100;
  EXPECT_EQ(ParseOne(HeadOfSize(100), limits).status, Status::kRequest);
  EXPECT_EQ(ParseOne(HeadOfSize(100, "\n"), limits).status, Status::kRequest);
  EXPECT_EQ(ExpectError(HeadOfSize(101), 431, limits).error,
            "the request line and header fields exceed 100 bytes");
  ExpectError(HeadOfSize(101, "\n"), 431, limits);
  // Reported as soon as the first 100 bytes hold no end of the head: it can
  // no longer fit.
  EXPECT_EQ(FeedWhole(HeadOfSize(101).substr(0, 99), limits).back().status, Status::kNeedMore);
  EXPECT_EQ(FeedWhole(HeadOfSize(101).substr(0, 100), limits).back().status, Status::kError);
  // Empty lines before the request line count.
  ExpectError("\r\n" + HeadOfSize(99), 431, limits);
  EXPECT_EQ(ParseOne("\r\n" + HeadOfSize(98), limits).status, Status::kRequest);
  // A request line alone past the limit.
  ExpectError("GET /" + std::string(200, 'a'), 431, limits);
}

TEST(HttpRequestParser, HeaderCountLimit) {
  ParserLimits limits;
  limits.max_headers = 3;
  EXPECT_EQ(ParseOne("GET / HTTP/1.1\r\nHost: h\r\nA: 1\r\nB: 2\r\n\r\n", limits).status,
            Status::kRequest);
  EXPECT_EQ(
      ExpectError("GET / HTTP/1.1\r\nHost: h\r\nA: 1\r\nB: 2\r\nC: 3\r\n\r\n", 431, limits).error,
      "the request has more than 3 header fields");
  // The default is 64.
  std::string in = "GET / HTTP/1.1\r\nHost: h\r\n";
  for (int i = 1; i < 64; ++i) in += "X-" + std::to_string(i) + ": v\r\n";
  EXPECT_EQ(ParseOne(in + "\r\n").status, Status::kRequest);
  ExpectError(in + "X-64: v\r\n\r\n", 431);
}

TEST(HttpRequestParser, ContentLengthBodyLimit) {
  ParserLimits limits;
  limits.max_body_bytes = 10;
  EXPECT_EQ(ParseOne(WithHeaders("Content-Length: 10\r\n") + "0123456789", limits).body,
            "0123456789");
  // 413 as soon as the head is parsed, before any body byte.
  EXPECT_EQ(ExpectError(WithHeaders("Content-Length: 11\r\n"), 413, limits).error,
            "the request body is 11 bytes (Content-Length); the limit is 10");
  EXPECT_EQ(ExpectError(WithHeaders("Content-Length: 99999999999999999999999\r\n"), 413).error,
            "the request body is more than 2^64 bytes (Content-Length); the limit is 65536");
  ExpectError(WithHeaders("Content-Length: 18446744073709551615\r\n"), 413);
  // The default is 64 KiB.
  EXPECT_EQ(
      ParseOne(WithHeaders("Content-Length: 65536\r\n") + std::string(65536, 'b')).body.size(),
      65536u);
  ExpectError(WithHeaders("Content-Length: 65537\r\n"), 413);
}

// ---------------------------------------------------------------------------
// Chunked bodies.

std::string Chunked(std::string_view chunks) {
  return WithHeaders("Transfer-Encoding: chunked\r\n") + std::string(chunks);
}

TEST(HttpRequestParser, ChunkedBodyIsDecoded) {
  const std::string in = Chunked("5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n");
  const Outcome o = ParseOne(in);
  ASSERT_EQ(o.status, Status::kRequest) << o;
  EXPECT_EQ(o.body, "hello world");
  EXPECT_EQ(o.consumed, in.size());
  EXPECT_TRUE(o.keep_alive);
}

TEST(HttpRequestParser, ChunkedVariants) {
  EXPECT_EQ(ParseOne(Chunked("0\r\n\r\n")).body, "");
  EXPECT_EQ(ParseOne(Chunked("a\r\n0123456789\r\nA\r\n0123456789\r\n0\r\n\r\n")).body,
            std::string("0123456789") + "0123456789");
  EXPECT_EQ(ParseOne(Chunked("00000000000000000000003\r\nabc\r\n000\r\n\r\n")).body, "abc");
  EXPECT_EQ(ParseOne(Chunked("3;name=value;x\r\nabc\r\n0 ; last\r\n\r\n")).body, "abc");
  EXPECT_EQ(ParseOne(Chunked("3\r\nabc\r\n0\r\nX-Checksum: 1\r\nX-Other: 2\r\n\r\n")).body, "abc");
  EXPECT_EQ(ParseOne(Chunked("3\nabc\n0\n\n")).body, "abc");
  EXPECT_EQ(ParseOne(Chunked("3\r\na\r\n\r\n0\r\n\r\n")).body, "a\r\n");  // CRLF inside data
}

TEST(HttpRequestParser, ChunkedBodyOutlivesTheInputBuffer) {
  // The decoded body lives in the parser, so it stays valid after the caller
  // erases the consumed bytes (until the next Parse call).
  std::string buffer = Chunked("3\r\nabc\r\n0\r\n\r\n");
  RequestParser parser({});
  Request req;
  size_t consumed = 0;
  int code = 0;
  std::string error;
  ASSERT_EQ(parser.Parse(buffer, &req, &consumed, &code, &error), Status::kRequest);
  buffer.assign(buffer.size(), 'X');
  EXPECT_EQ(req.body, "abc");
}

TEST(HttpRequestParser, BadChunkSizes) {
  EXPECT_EQ(ExpectError(Chunked("zz\r\n"), 400).error,
            "malformed chunk size line \"zz\"; expected hexadecimal digits");
  ExpectError(Chunked("\r\n"), 400);
  ExpectError(Chunked("-1\r\n"), 400);
  ExpectError(Chunked("0x5\r\n"), 400);
  ExpectError(Chunked("5 x\r\n"), 400);
  ExpectError(Chunked(" 5\r\n"), 400);
  ExpectError(Chunked("5\r\r\n"), 400);
  EXPECT_EQ(ExpectError(Chunked("5;a\x01\r\n"), 400).error,
            "chunk extension \"5;a\\x01\" contains a control character");
}

TEST(HttpRequestParser, OverflowingChunkSizes) {
  // 16 hex digits still fit in 64 bits: too large, not malformed.
  EXPECT_EQ(ExpectError(Chunked("ffffffffffffffff\r\n"), 413).error,
            "the chunked request body exceeds the limit of 65536 bytes");
  // 17 significant digits would wrap; a wrapping parser would read 0x10 here.
  EXPECT_EQ(ExpectError(Chunked("10000000000000010\r\n"), 400).error,
            "chunk size \"10000000000000010\" overflows 64 bits");
  ExpectError(Chunked("fffffffffffffffffffffffffffffffff\r\n"), 400);
}

TEST(HttpRequestParser, ChunkDataMustEndWithLineEnding) {
  EXPECT_EQ(ExpectError(Chunked("3\r\nhello\r\n0\r\n\r\n"), 400).error,
            "chunk data is not followed by CRLF (longer than its chunk size?)");
  ExpectError(Chunked("3\r\nabc\rX0\r\n\r\n"), 400);
}

TEST(HttpRequestParser, ChunkedBodyLimit) {
  ParserLimits limits;
  limits.max_body_bytes = 10;
  EXPECT_EQ(ParseOne(Chunked("5\r\n01234\r\n5\r\n56789\r\n0\r\n\r\n"), limits).body, "0123456789");
  EXPECT_EQ(ParseOne(Chunked("a\r\n0123456789\r\n0\r\n\r\n"), limits).body, "0123456789");
  // 413 as soon as the size line that passes the limit arrives.
  EXPECT_EQ(ExpectError(Chunked("5\r\n01234\r\n6\r\n"), 413, limits).error,
            "the chunked request body exceeds the limit of 10 bytes");
  ExpectError(Chunked("b\r\n"), 413, limits);
}

TEST(HttpRequestParser, ChunkFramingLimit) {
  // Framing (size lines, CRLFs after data) is bounded by max_header_bytes:
  // twelve 1-byte chunks cost 12 * 5 bytes, then the last-chunk line.
  ParserLimits limits;
  limits.max_header_bytes = 64;
  std::string chunks;
  for (int i = 0; i < 12; ++i) chunks += "1\r\nx\r\n";
  EXPECT_EQ(ParseOne(Chunked(chunks + "0;\r\n\r\n"), limits).body, std::string(12, 'x'));  // 64
  EXPECT_EQ(ExpectError(Chunked(chunks + "0;a\r\n\r\n"), 413, limits).error,
            "the chunk framing (chunk-size lines and line endings) exceeds 64 bytes; send fewer, "
            "larger chunks");
  ExpectError(Chunked(chunks + "1\r\nx\r\n0\r\n\r\n"), 413, limits);
}

TEST(HttpRequestParser, TrailerLimitAndSyntax) {
  ParserLimits limits;
  limits.max_header_bytes = 64;
  const std::string head = Chunked("0\r\n");
  // "X: " + pad + CRLF + CRLF == 64 bytes of trailer section.
  EXPECT_EQ(ParseOne(head + "X: " + std::string(57, 't') + "\r\n\r\n", limits).status,
            Status::kRequest);
  EXPECT_EQ(ExpectError(head + "X: " + std::string(58, 't') + "\r\n\r\n", 431, limits).error,
            "the trailer section exceeds 64 bytes");
  EXPECT_EQ(ExpectError(Chunked("0\r\nno colon\r\n\r\n"), 400).error,
            "trailer: header line without a colon: \"no colon\"");
  ExpectError(Chunked("0\r\nX: 1\r\n folded\r\n\r\n"), 400);
}

// ---------------------------------------------------------------------------
// Parser state.

TEST(HttpRequestParser, ErrorsAreSticky) {
  RequestParser parser({});
  Request req;
  size_t consumed = 0;
  int code = 0;
  std::string error;
  ASSERT_EQ(parser.Parse("BAD\r\n", &req, &consumed, &code, &error), Status::kError);
  code = 0;
  error.clear();
  EXPECT_EQ(parser.Parse("GET / HTTP/1.1\r\nHost: h\r\n\r\n", &req, &consumed, &code, &error),
            Status::kError);
  EXPECT_EQ(code, 400);
  EXPECT_THAT(error, HasSubstr("malformed request line"));
  parser.Reset();
  EXPECT_EQ(parser.Parse("GET / HTTP/1.1\r\nHost: h\r\n\r\n", &req, &consumed, &code, &error),
            Status::kRequest);
}

TEST(HttpRequestParser, ShorterInputThanBeforeRestarts) {
  RequestParser parser({});
  Request req;
  size_t consumed = 0;
  int code = 0;
  std::string error;
  EXPECT_EQ(parser.Parse("GET / HTTP/1.1\r\nHo", &req, &consumed, &code, &error),
            Status::kNeedMore);
  const std::string fresh = "GET /x HTTP/1.1\r\nHost: h\r\n\r\n";
  EXPECT_EQ(parser.Parse(std::string_view(fresh).substr(0, 3), &req, &consumed, &code, &error),
            Status::kNeedMore);
  ASSERT_EQ(parser.Parse(fresh, &req, &consumed, &code, &error), Status::kRequest);
  EXPECT_EQ(req.target, "/x");
}

TEST(HttpRequestParser, ExpectsContinue) {
  const std::string head = WithHeaders("Content-Length: 5\r\nExpect: 100-continue\r\n");
  RequestParser parser({});
  Request req;
  size_t consumed = 0;
  int code = 0;
  std::string error;
  EXPECT_EQ(parser.Parse(std::string_view(head).substr(0, 20), &req, &consumed, &code, &error),
            Status::kNeedMore);
  EXPECT_FALSE(parser.ExpectsContinue());  // head not parsed yet
  EXPECT_EQ(parser.Parse(head, &req, &consumed, &code, &error), Status::kNeedMore);
  EXPECT_TRUE(parser.ExpectsContinue());
  EXPECT_EQ(parser.Parse(head + "hello", &req, &consumed, &code, &error), Status::kRequest);
  EXPECT_FALSE(parser.ExpectsContinue());

  RequestParser http10({});
  const std::string head10 =
      WithHeaders("Content-Length: 5\r\nExpect: 100-continue\r\n", "HTTP/1.0");
  EXPECT_EQ(http10.Parse(head10, &req, &consumed, &code, &error), Status::kNeedMore);
  EXPECT_FALSE(http10.ExpectsContinue());
}

// One path may take larger bodies (POST /v1/admin/simulate's logs); every
// other target, and the same path's neighbours, keep the usual bound.
TEST(HttpRequestParser, LargeBodyPathHasItsOwnBound) {
  ParserLimits limits;
  limits.max_body_bytes = 10;
  limits.large_body_path = "/big";
  limits.large_body_bytes = 20;
  const std::string body(20, 'x');
  auto post = [&](const std::string& target, size_t size) {
    return "POST " + target + " HTTP/1.1\r\nHost: h\r\nContent-Length: " + std::to_string(size) +
           "\r\n\r\n" + std::string(size, 'x');
  };
  EXPECT_EQ(ParseOne(post("/big", 20), limits).body, body);
  EXPECT_EQ(ParseOne(post("/big?rule=api", 20), limits).body, body);
  EXPECT_EQ(ExpectError(post("/big", 21), 413, limits).error,
            "the request body is 21 bytes (Content-Length); the limit is 20");
  EXPECT_EQ(ExpectError(post("/bigger", 11), 413, limits).error,
            "the request body is 11 bytes (Content-Length); the limit is 10");
  EXPECT_EQ(ExpectError(post("/", 11), 413, limits).code, 413);
  // Chunked bodies are bounded the same way.
  const std::string chunked =
      "POST /big HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\nf\r\n" +
      std::string(15, 'x') + "\r\n5\r\nxxxxx\r\n0\r\n\r\n";
  EXPECT_EQ(ParseOne(chunked, limits).body, body);
  // The bound applies per request: a small request after a large one on
  // the same connection is bounded as usual.
  const std::vector<Outcome> both = FeedWhole(post("/big", 20) + post("/", 11), limits);
  ASSERT_EQ(both.size(), 2u);
  EXPECT_EQ(both[0].body, body);
  EXPECT_EQ(both[1].code, 413);
}

}  // namespace
}  // namespace floodgate::http
