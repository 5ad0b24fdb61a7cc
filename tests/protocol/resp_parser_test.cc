// resp::Parser: multibulk and inline requests, every split point, pipelining,
// each protocol error with its message, and every limit at max and max+1.
#include "protocol/resp/parser.h"

#include <gtest/gtest.h>

#include <string>
#include <string_view>
#include <vector>

namespace floodgate::resp {
namespace {

using Status = Parser::Status;
using Args = std::vector<std::string>;

using namespace std::string_literals;  // "...\0..."s keeps embedded NULs

std::string Join(const std::vector<std::string_view>& views) {
  std::string out;
  for (auto v : views) out.append(v).push_back('|');
  return out;
}

Args Copy(const std::vector<std::string_view>& views) { return Args(views.begin(), views.end()); }

// What feeding a byte stream produced: the commands, then how it ended.
struct Outcome {
  std::vector<Args> commands;
  Status last = Status::kNeedMore;
  std::string error;
  size_t left = 0;  // bytes still buffered at the end
};

// Feeds `input` in chunks of `chunk` bytes (0: all at once) the way a
// connection does: append, parse until kNeedMore, drop what was consumed.
Outcome Feed(std::string_view input, size_t chunk = 0, ParserLimits limits = {}) {
  Parser parser(limits);
  Outcome outcome;
  std::string buffer;
  std::vector<std::string_view> args;
  size_t at = 0;
  while (at < input.size() || (at == 0 && input.empty())) {
    const size_t n = chunk == 0 ? input.size() : std::min(chunk, input.size() - at);
    buffer.append(input.substr(at, n));
    at += n;
    for (;;) {
      size_t consumed = 0;
      const Status s = parser.Parse(buffer, &args, &consumed, &outcome.error);
      outcome.last = s;
      if (s == Status::kError) {
        outcome.left = buffer.size();
        return outcome;
      }
      EXPECT_LE(consumed, buffer.size());
      if (s == Status::kCommand) {
        EXPECT_GT(consumed, 0u);
        outcome.commands.push_back(Copy(args));
      }
      buffer.erase(0, consumed);
      if (s == Status::kNeedMore) break;
    }
    if (input.empty()) break;
  }
  outcome.left = buffer.size();
  return outcome;
}

// Parses one complete input with a fresh parser, expecting exactly one command.
Args ParseOne(std::string_view input, ParserLimits limits = {}) {
  Parser parser(limits);
  std::vector<std::string_view> args;
  size_t consumed = 0;
  std::string error;
  EXPECT_EQ(parser.Parse(input, &args, &consumed, &error), Status::kCommand) << error;
  EXPECT_EQ(consumed, input.size());
  return Copy(args);
}

// The error a fresh parser reports on `input` (fed whole), or "" if none.
std::string ErrorOf(std::string_view input, ParserLimits limits = {}) {
  const Outcome outcome = Feed(input, 0, limits);
  if (outcome.last != Status::kError) return "";
  // The same error comes out whatever the read sizes were.
  EXPECT_EQ(Feed(input, 1, limits).error, outcome.error) << "byte by byte";
  return outcome.error;
}

// ---------------------------------------------------------------------------
// Multibulk

TEST(RespParserTest, MultibulkCommand) {
  EXPECT_EQ(ParseOne("*1\r\n$4\r\nPING\r\n"), (Args{"PING"}));
  EXPECT_EQ(ParseOne("*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$5\r\nvalue\r\n"), (Args{"SET", "k", "value"}));
}

TEST(RespParserTest, BulkStringsAreBinarySafe) {
  const std::string input = "*2\r\n$4\r\nECHO\r\n$7\r\na\r\nb\0c\n\r\n"s;
  EXPECT_EQ(ParseOne(input), (Args{"ECHO", "a\r\nb\0c\n"s}));
  // A bulk that looks like a whole request is still just bytes.
  EXPECT_EQ(ParseOne("*1\r\n$14\r\n*1\r\n$4\r\nPING\r\n\r\n"), (Args{"*1\r\n$4\r\nPING\r\n"}));
}

TEST(RespParserTest, EmptyBulk) {
  EXPECT_EQ(ParseOne("*1\r\n$0\r\n\r\n"), (Args{""}));
  EXPECT_EQ(ParseOne("*3\r\n$0\r\n\r\n$1\r\nx\r\n$0\r\n\r\n"), (Args{"", "x", ""}));
}

TEST(RespParserTest, EmptyAndNullMultibulkAreSkipped) {
  Parser parser({});
  std::vector<std::string_view> args;
  size_t consumed = 99;
  std::string error;
  EXPECT_EQ(parser.Parse("*0\r\n", &args, &consumed, &error), Status::kNeedMore);
  EXPECT_EQ(consumed, 4u);
  EXPECT_TRUE(args.empty());
  EXPECT_EQ(parser.Parse("*-1\r\n", &args, &consumed, &error), Status::kNeedMore);
  EXPECT_EQ(consumed, 5u);

  // Skipped items before a command are consumed with it.
  const std::string input = "*0\r\n*-1\r\n*1\r\n$4\r\nPING\r\n";
  EXPECT_EQ(parser.Parse(input, &args, &consumed, &error), Status::kCommand);
  EXPECT_EQ(consumed, input.size());
  EXPECT_EQ(Join(args), "PING|");

  // Before a partial command: only the skipped bytes are consumed, and the
  // partial command is resumed once the caller has dropped them.
  EXPECT_EQ(parser.Parse("*0\r\n*1\r\n$4\r\nPI", &args, &consumed, &error), Status::kNeedMore);
  EXPECT_EQ(consumed, 4u);
  EXPECT_EQ(parser.Parse("*1\r\n$4\r\nPING\r\n", &args, &consumed, &error), Status::kCommand);
  EXPECT_EQ(consumed, 14u);
  EXPECT_EQ(Join(args), "PING|");
}

TEST(RespParserTest, EmptyInput) {
  Parser parser({});
  std::vector<std::string_view> args;
  size_t consumed = 99;
  std::string error;
  EXPECT_EQ(parser.Parse("", &args, &consumed, &error), Status::kNeedMore);
  EXPECT_EQ(consumed, 0u);
}

// ---------------------------------------------------------------------------
// Inline

TEST(RespParserTest, InlineCommands) {
  EXPECT_EQ(ParseOne("PING\r\n"), (Args{"PING"}));
  EXPECT_EQ(ParseOne("PING\n"), (Args{"PING"}));  // telnet, nc
  EXPECT_EQ(ParseOne("SET k v\r\n"), (Args{"SET", "k", "v"}));
  EXPECT_EQ(ParseOne("SET\tk\t\t v\r\n"), (Args{"SET", "k", "v"}));
  EXPECT_EQ(ParseOne("   GET k   \r\n"), (Args{"GET", "k"}));
  EXPECT_EQ(ParseOne("GET k \t \n"), (Args{"GET", "k"}));
  // A '\r' not before the '\n' separates arguments like a blank.
  EXPECT_EQ(ParseOne("a\rb\n"), (Args{"a", "b"}));
  // \v and \f separate arguments only where blanks are skipped, not inside one (sdssplitargs).
  EXPECT_EQ(ParseOne("\v\fa\vb\n"), (Args{"a\vb"}));
  // Lines that start like other RESP types are still inline.
  EXPECT_EQ(ParseOne("$3 +x :1\n"), (Args{"$3", "+x", ":1"}));
  // NUL is an ordinary byte.
  EXPECT_EQ(ParseOne("a\0b c\n"s), (Args{"a\0b"s, "c"}));
}

TEST(RespParserTest, InlineQuotes) {
  EXPECT_EQ(ParseOne("SET \"a b\" 'c d'\r\n"), (Args{"SET", "a b", "c d"}));
  EXPECT_EQ(ParseOne("ECHO \"\"\n"), (Args{"ECHO", ""}));
  EXPECT_EQ(ParseOne("ECHO ''\n"), (Args{"ECHO", ""}));
  EXPECT_EQ(ParseOne("ECHO \"\\x41\\x7a\\n\\r\\t\\\"\\\\\\b\\a\"\n"),
            (Args{"ECHO", "Az\n\r\t\"\\\b\a"}));
  EXPECT_EQ(ParseOne("ECHO \"\\x00\\xFF\"\n"), (Args{"ECHO", "\0\xff"s}));
  // Not a \xHH escape: the escaped byte stands for itself.
  EXPECT_EQ(ParseOne("ECHO \"\\xZZ\\q\\x4\"\n"), (Args{"ECHO", "xZZqx4"}));
  // Single quotes take only \'.
  EXPECT_EQ(ParseOne("ECHO 'it\\'s' 'a\\nb' 'say \"hi\"'\n"),
            (Args{"ECHO", "it's", "a\\nb", "say \"hi\""}));
  EXPECT_EQ(ParseOne("ECHO \"it's\"\n"), (Args{"ECHO", "it's"}));
  // A quote may open mid-argument.
  EXPECT_EQ(ParseOne("ECHO ab\"c d\" x'y z'\n"), (Args{"ECHO", "abc d", "xy z"}));
  // A closing quote followed by a tab, or by the line's end.
  EXPECT_EQ(ParseOne("ECHO \"a\"\t\"b\"\r\n"), (Args{"ECHO", "a", "b"}));
}

TEST(RespParserTest, EmptyInlineLinesAreSkipped) {
  Parser parser({});
  std::vector<std::string_view> args;
  size_t consumed = 0;
  std::string error;
  EXPECT_EQ(parser.Parse("\r\n", &args, &consumed, &error), Status::kNeedMore);
  EXPECT_EQ(consumed, 2u);
  EXPECT_EQ(parser.Parse("\n", &args, &consumed, &error), Status::kNeedMore);
  EXPECT_EQ(consumed, 1u);
  EXPECT_EQ(parser.Parse(" \t \r\n\n", &args, &consumed, &error), Status::kNeedMore);
  EXPECT_EQ(consumed, 6u);
  const std::string input = "\n\r\n  \nPING\n";
  EXPECT_EQ(parser.Parse(input, &args, &consumed, &error), Status::kCommand);
  EXPECT_EQ(consumed, input.size());
  EXPECT_EQ(Join(args), "PING|");
  // A lone '\r' might be the start of "\r\n": wait.
  EXPECT_EQ(parser.Parse("\r", &args, &consumed, &error), Status::kNeedMore);
  EXPECT_EQ(consumed, 0u);
}

// ---------------------------------------------------------------------------
// Splits and pipelining

const char* const kSingleCommands[] = {
    "*1\r\n$4\r\nPING\r\n",
    "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$5\r\nvalue\r\n",
    "*2\r\n$4\r\nECHO\r\n$13\r\n\r\n*1\r\n$1\r\nx\r\n\r\n",
    "*1\r\n$0\r\n\r\n",
    ("*10\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n$1\r\nd\r\n$1\r\ne\r\n$1\r\nf\r\n$1\r\ng\r\n"
     "$1\r\nh\r\n$1\r\ni\r\n$10\r\n0123456789\r\n"),
    "PING\r\n",
    "PING\n",
    "SET \"a b\" 'c\\'d' \"\\x41\\n\"\t x\r\n",
    "  GET   key  \n",
};

TEST(RespParserTest, EverySplitPointGivesTheSameCommand) {
  for (std::string_view input : kSingleCommands) {
    SCOPED_TRACE(testing::Message() << "input: " << testing::PrintToString(std::string(input)));
    const Args expected = ParseOne(input);
    std::vector<std::string_view> args;
    size_t consumed = 0;
    std::string error;
    // A fresh parser per split: the first part, then everything.
    for (size_t split = 0; split < input.size(); ++split) {
      Parser parser({});
      ASSERT_EQ(parser.Parse(input.substr(0, split), &args, &consumed, &error), Status::kNeedMore)
          << "split " << split;
      EXPECT_EQ(consumed, 0u);
      ASSERT_EQ(parser.Parse(input, &args, &consumed, &error), Status::kCommand) << split;
      EXPECT_EQ(consumed, input.size());
      EXPECT_EQ(Copy(args), expected) << "split " << split;
    }
    // One parser shown every prefix in turn, each from a freshly allocated
    // buffer so no view or pointer from an earlier call can be reused.
    Parser parser({});
    for (size_t length = 0; length < input.size(); ++length) {
      const std::string prefix(input.substr(0, length));
      ASSERT_EQ(parser.Parse(prefix, &args, &consumed, &error), Status::kNeedMore) << length;
      EXPECT_EQ(consumed, 0u);
    }
    const std::string whole(input);
    ASSERT_EQ(parser.Parse(whole, &args, &consumed, &error), Status::kCommand);
    EXPECT_EQ(Copy(args), expected);
  }
}

TEST(RespParserTest, PipelinedCommandsComeOutOneByOne) {
  const std::string a = "*2\r\n$3\r\nGET\r\n$1\r\na\r\n";
  const std::string b = "PING\r\n";
  const std::string c = "*1\r\n$4\r\nQUIT\r\n";
  const std::string d = "ECHO \"x y\"\n";
  std::string buffer = a + b + c + d + "*1\r\n$3\r\nGE";
  Parser parser({});
  std::vector<std::string_view> args;
  size_t consumed = 0;
  std::string error;

  ASSERT_EQ(parser.Parse(buffer, &args, &consumed, &error), Status::kCommand);
  EXPECT_EQ(consumed, a.size());
  EXPECT_EQ(Join(args), "GET|a|");
  buffer.erase(0, consumed);
  ASSERT_EQ(parser.Parse(buffer, &args, &consumed, &error), Status::kCommand);
  EXPECT_EQ(consumed, b.size());
  EXPECT_EQ(Join(args), "PING|");
  buffer.erase(0, consumed);
  ASSERT_EQ(parser.Parse(buffer, &args, &consumed, &error), Status::kCommand);
  EXPECT_EQ(consumed, c.size());
  EXPECT_EQ(Join(args), "QUIT|");
  buffer.erase(0, consumed);
  ASSERT_EQ(parser.Parse(buffer, &args, &consumed, &error), Status::kCommand);
  EXPECT_EQ(consumed, d.size());
  EXPECT_EQ(Join(args), "ECHO|x y|");
  buffer.erase(0, consumed);
  ASSERT_EQ(parser.Parse(buffer, &args, &consumed, &error), Status::kNeedMore);
  EXPECT_EQ(consumed, 0u);
  buffer += "T\r\n";
  ASSERT_EQ(parser.Parse(buffer, &args, &consumed, &error), Status::kCommand);
  EXPECT_EQ(consumed, buffer.size());
  EXPECT_EQ(Join(args), "GET|");
}

TEST(RespParserTest, PipelineInAnyReadSizes) {
  std::string stream;
  std::vector<Args> expected;
  for (std::string_view input : kSingleCommands) {
    stream += input;
    stream += "\r\n*0\r\n";  // things that carry no command between them
    expected.push_back(ParseOne(input));
  }
  for (size_t chunk = 0; chunk <= 17; ++chunk) {
    const Outcome outcome = Feed(stream, chunk);
    EXPECT_EQ(outcome.last, Status::kNeedMore) << outcome.error;
    EXPECT_EQ(outcome.commands, expected) << "chunk " << chunk;
    EXPECT_EQ(outcome.left, 0u) << "chunk " << chunk;
  }
}

TEST(RespParserTest, LargeArgumentByteByByteIsLinear) {
  // 512 KiB, the default maximum, one byte per read: each call must be O(1)
  // for this to finish quickly (a rescan per read would be ~1.4e11 steps).
  const size_t size = 512 * 1024;
  std::string input = "*2\r\n$3\r\nSET\r\n$" + std::to_string(size) + "\r\n";
  const size_t header = input.size();
  for (size_t i = 0; i < size; ++i) input.push_back(static_cast<char>('a' + i % 26));
  input += "\r\n";

  Parser parser({});
  std::vector<std::string_view> args;
  size_t consumed = 0;
  std::string error;
  std::string buffer;
  buffer.reserve(input.size());
  for (size_t i = 0; i + 1 < input.size(); ++i) {
    buffer.push_back(input[i]);
    ASSERT_EQ(parser.Parse(buffer, &args, &consumed, &error), Status::kNeedMore) << i;
  }
  buffer.push_back(input.back());
  ASSERT_EQ(parser.Parse(buffer, &args, &consumed, &error), Status::kCommand);
  EXPECT_EQ(consumed, input.size());
  ASSERT_EQ(args.size(), 2u);
  EXPECT_EQ(args[0], "SET");
  EXPECT_EQ(args[1].size(), size);
  EXPECT_EQ(args[1], std::string_view(input).substr(header, size));
}

TEST(RespParserTest, LongInlineLineByteByByte) {
  // 64 KiB, the default maximum, one byte per read.
  std::string input(64 * 1024, 'x');
  input[10] = ' ';
  const Outcome outcome = Feed(input + "\r\n", 1);
  ASSERT_EQ(outcome.commands.size(), 1u) << outcome.error;
  EXPECT_EQ(outcome.commands[0][1].size(), 64 * 1024 - 11);
}

TEST(RespParserTest, ShorterInputThanLastTimeDoesNotReadOutOfBounds) {
  // A caller breaking the contract gets garbage, not a crash.
  Parser parser({});
  std::vector<std::string_view> args;
  size_t consumed = 0;
  std::string error;
  EXPECT_EQ(parser.Parse("*1\r\n$100\r\nabc", &args, &consumed, &error), Status::kNeedMore);
  EXPECT_EQ(parser.Parse("*1", &args, &consumed, &error), Status::kNeedMore);
  EXPECT_EQ(parser.Parse("*1\r\n$1\r\nx\r\n", &args, &consumed, &error), Status::kCommand);
  EXPECT_EQ(Join(args), "x|");
}

// ---------------------------------------------------------------------------
// Errors

TEST(RespParserTest, InvalidMultibulkLength) {
  for (const char* input : {"*abc\r\n", "*\r\n", "*-2\r\n", "*-0\r\n", "*01\r\n", "*+1\r\n",
                            "*1 \r\n", "*1\r\r", "*1\rx", "*1\n", "*--1\r\n", "*1-\r\n",
                            "*9223372036854775808\r\n", "*99999999999999999999999\r\n"}) {
    EXPECT_EQ(ErrorOf(input), "invalid multibulk length") << testing::PrintToString(input);
  }
  // The error is reported on the first bad byte, without waiting for a line end.
  EXPECT_EQ(ErrorOf("*x"), "invalid multibulk length");
}

TEST(RespParserTest, InvalidBulkLength) {
  for (const char* input :
       {"*1\r\n$-1\r\n", "*1\r\n$-5\r\n", "*1\r\n$abc\r\n", "*1\r\n$\r\n", "*1\r\n$01\r\n",
        "*1\r\n$1\r\r", "*1\r\n$1\n", "*1\r\n$9223372036854775808\r\n"}) {
    EXPECT_EQ(ErrorOf(input), "invalid bulk length") << testing::PrintToString(input);
  }
}

TEST(RespParserTest, ExpectedDollar) {
  EXPECT_EQ(ErrorOf("*1\r\nx"), "expected '$', got 'x'");
  EXPECT_EQ(ErrorOf("*2\r\n$1\r\na\r\n:1\r\n"), "expected '$', got ':'");
  // Control bytes are escaped so the error line stays one line.
  EXPECT_EQ(ErrorOf("*1\r\n\r\n"), "expected '$', got '\\x0d'");
  EXPECT_EQ(ErrorOf("*1\r\n\xff"), "expected '$', got '\\xff'");
}

TEST(RespParserTest, MissingCrlfAfterBulk) {
  EXPECT_EQ(ErrorOf("*1\r\n$3\r\nfooXY"), "missing CRLF after bulk argument");
  EXPECT_EQ(ErrorOf("*1\r\n$3\r\nfoo\rX"), "missing CRLF after bulk argument");
  EXPECT_EQ(ErrorOf("*1\r\n$3\r\nfoo\n\r"), "missing CRLF after bulk argument");
  // Too few bytes yet to tell.
  EXPECT_EQ(ErrorOf("*1\r\n$3\r\nfoo\r"), "");
}

TEST(RespParserTest, UnbalancedQuotes) {
  for (const char* input : {"SET \"a\r\n", "SET 'a\n", "SET \"a\"b\n", "SET 'a'b\n",
                            "ECHO \"\\\"\n", "ECHO \"a\\\n", "ECHO 'a\\'\n"}) {
    EXPECT_EQ(ErrorOf(input), "unbalanced quotes in request") << testing::PrintToString(input);
  }
}

TEST(RespParserTest, ErrorIsStickyUntilReset) {
  Parser parser({});
  std::vector<std::string_view> args;
  size_t consumed = 99;
  std::string error;
  EXPECT_EQ(parser.Parse("*x\r\n", &args, &consumed, &error), Status::kError);
  EXPECT_EQ(consumed, 0u);
  EXPECT_EQ(error, "invalid multibulk length");
  error.clear();
  EXPECT_EQ(parser.Parse("PING\r\n", &args, &consumed, &error), Status::kError);
  EXPECT_EQ(error, "invalid multibulk length");
  parser.Reset();
  EXPECT_EQ(parser.Parse("PING\r\n", &args, &consumed, &error), Status::kCommand);
  EXPECT_EQ(Join(args), "PING|");
}

TEST(RespParserTest, ResetDropsAPartialCommand) {
  Parser parser({});
  std::vector<std::string_view> args;
  size_t consumed = 0;
  std::string error;
  EXPECT_EQ(parser.Parse("*2\r\n$3\r\nGET\r\n", &args, &consumed, &error), Status::kNeedMore);
  parser.Reset();
  EXPECT_EQ(parser.Parse("PING\n", &args, &consumed, &error), Status::kCommand);
  EXPECT_EQ(Join(args), "PING|");
}

// ---------------------------------------------------------------------------
// Limits, each at max and max+1

std::string Multibulk(const Args& args) {
  std::string out = "*" + std::to_string(args.size()) + "\r\n";
  for (const auto& a : args) out += "$" + std::to_string(a.size()) + "\r\n" + a + "\r\n";
  return out;
}

TEST(RespParserTest, DefaultLimits) {
  const ParserLimits limits;
  EXPECT_EQ(limits.max_args, 1024u);
  EXPECT_EQ(limits.max_arg_bytes, 512u * 1024);
  EXPECT_EQ(limits.max_inline_bytes, 64u * 1024);

  EXPECT_EQ(ParseOne(Multibulk(Args(1024, "a"))).size(), 1024u);
  EXPECT_EQ(ErrorOf("*1025\r\n"), "too many arguments (max 1024)");
  EXPECT_EQ(ErrorOf("*9223372036854775807\r\n"), "too many arguments (max 1024)");

  EXPECT_EQ(ParseOne(Multibulk({std::string(512 * 1024, 'v')}))[0].size(), 512u * 1024);
  // Refused on the header alone, before any of the body arrives.
  EXPECT_EQ(ErrorOf("*1\r\n$524289\r\n"), "argument too long (max 524288 bytes)");
  EXPECT_EQ(ErrorOf("*1\r\n$9223372036854775807\r\n"), "argument too long (max 524288 bytes)");

  const std::string max_line(64 * 1024, 'x');
  EXPECT_EQ(ParseOne(max_line + "\r\n")[0], max_line);
  EXPECT_EQ(ErrorOf(max_line + "x\r\n"), "too big inline request");
  EXPECT_EQ(ErrorOf(max_line + "x"), "too big inline request");
  EXPECT_EQ(ErrorOf(max_line + "\r"), "");
}

TEST(RespParserTest, MaxArgs) {
  const ParserLimits limits{.max_args = 3};
  EXPECT_EQ(ParseOne("*3\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n", limits).size(), 3u);
  EXPECT_EQ(ErrorOf("*4\r\n", limits), "too many arguments (max 3)");
  EXPECT_EQ(ParseOne("a b c\n", limits).size(), 3u);
  EXPECT_EQ(ErrorOf("a b c d\n", limits), "too many arguments (max 3)");
}

TEST(RespParserTest, MaxArgBytes) {
  const ParserLimits limits{.max_arg_bytes = 5};
  EXPECT_EQ(ParseOne("*2\r\n$5\r\nabcde\r\n$0\r\n\r\n", limits), (Args{"abcde", ""}));
  EXPECT_EQ(ErrorOf("*2\r\n$5\r\nabcde\r\n$6\r\n", limits), "argument too long (max 5 bytes)");
  EXPECT_EQ(ParseOne("abcde \"\\x41\\x42\\x43\\x44\\x45\"\n", limits), (Args{"abcde", "ABCDE"}));
  EXPECT_EQ(ErrorOf("abcdef\n", limits), "argument too long (max 5 bytes)");
  // Decoded size counts, not the quoted spelling.
  EXPECT_EQ(ErrorOf("\"\\x41\\x42\\x43\\x44\\x45\\x46\"\n", limits),
            "argument too long (max 5 bytes)");
}

TEST(RespParserTest, MaxInlineBytes) {
  const ParserLimits limits{.max_inline_bytes = 8};
  // The line end does not count: 8 bytes with "\r\n" or "\n" fit.
  EXPECT_EQ(ParseOne("GET 1234\r\n", limits), (Args{"GET", "1234"}));
  EXPECT_EQ(ParseOne("GET 1234\n", limits), (Args{"GET", "1234"}));
  EXPECT_EQ(ErrorOf("GET 12345\r\n", limits), "too big inline request");
  EXPECT_EQ(ErrorOf("GET 12345\n", limits), "too big inline request");
  // Without a line end yet: 8 bytes wait, 8 and a '\r' wait, 9 fail at once.
  EXPECT_EQ(ErrorOf("GET 1234", limits), "");
  EXPECT_EQ(ErrorOf("GET 1234\r", limits), "");
  EXPECT_EQ(ErrorOf("GET 12345", limits), "too big inline request");
  EXPECT_EQ(ErrorOf("GET 1234\rx", limits), "too big inline request");
  // Blank lines count as lines.
  EXPECT_EQ(ErrorOf("         \n", limits), "too big inline request");
  // Multibulk requests are not inline.
  EXPECT_EQ(ParseOne("*1\r\n$10\r\n0123456789\r\n", limits), (Args{"0123456789"}));
}

}  // namespace
}  // namespace floodgate::resp
