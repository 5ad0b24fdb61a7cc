// resp writer: every reply type byte for byte, and round trips through the parser.
#include "protocol/resp/writer.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "protocol/resp/parser.h"

namespace floodgate::resp {
namespace {

using namespace std::string_literals;

TEST(RespWriterTest, SimpleString) {
  std::string out;
  AppendSimpleString(&out, "OK");
  EXPECT_EQ(out, "+OK\r\n");
  out.clear();
  AppendSimpleString(&out, "");
  EXPECT_EQ(out, "+\r\n");
  out.clear();
  AppendSimpleString(&out, "a\r\nb\nc\r");
  EXPECT_EQ(out, "+a  b c \r\n");
}

TEST(RespWriterTest, Error) {
  std::string out;
  AppendError(&out, "unknown command 'FOO'");
  EXPECT_EQ(out, "-ERR unknown command 'FOO'\r\n");
  out.clear();
  // An upper-case first word is not taken for a code.
  AppendError(&out, "OTP expired");
  EXPECT_EQ(out, "-ERR OTP expired\r\n");
  out.clear();
  AppendError(&out, "Protocol error: line one\r\nline two\n");
  EXPECT_EQ(out, "-ERR Protocol error: line one  line two \r\n");
  out.clear();
  AppendError(&out, "");
  EXPECT_EQ(out, "-ERR\r\n");
}

TEST(RespWriterTest, ErrorWithCode) {
  std::string out;
  AppendErrorWithCode(&out, "WRONGTYPE", "Operation against a key holding the wrong kind of value");
  EXPECT_EQ(out, "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n");
  out.clear();
  AppendErrorWithCode(&out, "NOAUTH", "Authentication required.");
  EXPECT_EQ(out, "-NOAUTH Authentication required.\r\n");
  out.clear();
  AppendErrorWithCode(&out, "NOSCRIPT", "");
  EXPECT_EQ(out, "-NOSCRIPT\r\n");
  out.clear();
  AppendErrorWithCode(&out, "", "no code");
  EXPECT_EQ(out, "-ERR no code\r\n");
  out.clear();
  AppendErrorWithCode(&out, "BAD CODE\r\n", "m\ns");
  EXPECT_EQ(out, "-BAD_CODE__ m s\r\n");
}

TEST(RespWriterTest, Integer) {
  std::string out;
  AppendInteger(&out, 0);
  AppendInteger(&out, 42);
  AppendInteger(&out, -1);
  EXPECT_EQ(out, ":0\r\n:42\r\n:-1\r\n");
  out.clear();
  AppendInteger(&out, std::numeric_limits<int64_t>::max());
  AppendInteger(&out, std::numeric_limits<int64_t>::min());
  EXPECT_EQ(out, ":9223372036854775807\r\n:-9223372036854775808\r\n");
}

TEST(RespWriterTest, Bulk) {
  std::string out;
  AppendBulk(&out, "hello");
  EXPECT_EQ(out, "$5\r\nhello\r\n");
  out.clear();
  AppendBulk(&out, "");
  EXPECT_EQ(out, "$0\r\n\r\n");
  out.clear();
  AppendBulk(&out, "a\r\n\0b"s);
  EXPECT_EQ(out, "$5\r\na\r\n\0b\r\n"s);
  out.clear();
  AppendBulk(&out, std::string(1000, 'x'));
  EXPECT_EQ(out, "$1000\r\n" + std::string(1000, 'x') + "\r\n");
  out.clear();
  AppendNullBulk(&out);
  EXPECT_EQ(out, "$-1\r\n");
}

TEST(RespWriterTest, Arrays) {
  std::string out;
  AppendArrayHeader(&out, 0);
  EXPECT_EQ(out, "*0\r\n");
  out.clear();
  AppendNullArray(&out);
  EXPECT_EQ(out, "*-1\r\n");
  out.clear();
  // An FG.CHECK reply: [allowed, limit, remaining, retry_after_ms, reset_after_ms].
  AppendArrayHeader(&out, 5);
  for (int64_t v : {1, 10, 9, -1, 6000}) AppendInteger(&out, v);
  EXPECT_EQ(out, "*5\r\n:1\r\n:10\r\n:9\r\n:-1\r\n:6000\r\n");
  out.clear();
  AppendArrayHeader(&out, 2);
  AppendBulk(&out, "a");
  AppendNullBulk(&out);
  EXPECT_EQ(out, "*2\r\n$1\r\na\r\n$-1\r\n");
}

TEST(RespWriterTest, AppendsToExistingOutput) {
  std::string out = "+PONG\r\n";
  AppendInteger(&out, 7);
  EXPECT_EQ(out, "+PONG\r\n:7\r\n");
}

TEST(RespWriterTest, ArrayOfBulksRoundTripsThroughTheParser) {
  // A request, as a client would encode it, comes back out of the parser as is.
  const std::vector<std::string> args = {"SET", "", "a\r\nb", "\0\xff"s, std::string(300, 'z')};
  std::string out;
  AppendArrayHeader(&out, args.size());
  for (const auto& a : args) AppendBulk(&out, a);

  Parser parser({});
  std::vector<std::string_view> parsed;
  size_t consumed = 0;
  std::string error;
  ASSERT_EQ(parser.Parse(out, &parsed, &consumed, &error), Parser::Status::kCommand) << error;
  EXPECT_EQ(consumed, out.size());
  EXPECT_EQ(std::vector<std::string>(parsed.begin(), parsed.end()), args);
}

}  // namespace
}  // namespace floodgate::resp
