// RESP2 request parser: turns a connection's input bytes into commands.
//
// Accepts what redis-server accepts from clients: multibulk requests
// (`*<n>\r\n$<len>\r\n<bytes>\r\n...`, what every client library sends) and
// inline commands (a text line split on blanks with sdssplitargs quoting, what
// telnet, nc and hand-typed redis-cli input send). Incremental: a command may
// arrive in any number of reads, split anywhere, and is scanned once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace floodgate::resp {

// Bounds on one request. Past any of them Parse returns kError.
struct ParserLimits {
  size_t max_args = 1024;               // arguments per command, the command name included
  size_t max_arg_bytes = 512 * 1024;    // bytes in one argument
  size_t max_inline_bytes = 64 * 1024;  // bytes in one inline line, without its line end
};

// Not thread-safe: one per connection.
//
// Usage, with `buf` holding the connection's unconsumed input:
//
//   for (;;) {
//     Status s = parser.Parse(buf, &args, &consumed, &error);
//     if (s == Status::kError) { reply "-ERR Protocol error: " + error; close; }
//     ... if kCommand, use args (they point into buf: use them before dropping) ...
//     buf.erase(0, consumed);  // after kCommand AND after kNeedMore
//     if (s == Status::kNeedMore) break;  // read more bytes, append to buf, call again
//   }
class Parser {
 public:
  explicit Parser(ParserLimits limits);

  enum class Status {
    kCommand,   // one command parsed
    kNeedMore,  // no complete command in `input` yet
    kError,     // malformed or over a limit; the connection should reply and close
  };

  // Parses the next command from `input`: all unconsumed bytes of the connection,
  // that is the same bytes as last time minus the *consumed ones, plus whatever
  // arrived since. The buffer may have moved in memory between calls (the parser
  // keeps offsets, not pointers).
  //
  // kCommand: *args holds the command's arguments (at least one) and *consumed
  //   is how many bytes of `input` it took. Arguments are views into `input`
  //   (multibulk) or into storage owned by the parser (inline commands, whose
  //   quotes and escapes are decoded): valid until the next Parse or Reset call
  //   and while `input`'s bytes stay in place. Pipelined commands come out one
  //   per call.
  // kNeedMore: *consumed is the number of leading bytes that carried no command
  //   and must be dropped too (empty inline lines, `*0\r\n`, `*-1\r\n`, which
  //   redis skips silently); usually 0. Dropping them keeps a stream of blank
  //   lines from piling up in the buffer. The parser remembers how far it got
  //   into the pending command, so the next call resumes where this one stopped
  //   and a large bulk string arriving in small reads is not rescanned.
  // kError: *error is a message fit for `-ERR Protocol error: <error>`, such as
  //   "invalid multibulk length", "invalid bulk length", "too many arguments
  //   (max 1024)", "argument too long (max 524288 bytes)", "too big inline
  //   request", "unbalanced quotes in request", "expected '$', got 'x'". It
  //   holds no CR or LF. *consumed is 0. The parser stays in the error state:
  //   later calls return the same error until Reset.
  //
  // Never reads outside `input`; never asserts on its contents.
  Status Parse(std::string_view input, std::vector<std::string_view>* args, size_t* consumed,
               std::string* error);

  // Forgets any partial command and error: the next Parse starts a new command
  // at the start of its input.
  void Reset();

 private:
  enum class State {
    kStart,       // before a command's first byte
    kInline,      // looking for the end of an inline line
    kCount,       // reading `*<n>\r\n`
    kBulkHeader,  // expecting the '$' of the next argument
    kBulkLength,  // reading `$<len>\r\n`
    kBulkData,    // waiting for <len> bytes and their CRLF
    kFailed,      // a protocol error was reported
  };
  // What one step of the state machine found at the start of its input.
  enum class Step { kCommand, kSkip, kNeedMore, kError };
  // Feeding one byte of a `<n>\r\n` length line.
  enum class Digit { kMore, kDone, kBad };

  // Each parses from the start of `in` (the pending command's first byte) and,
  // on kCommand or kSkip, sets *length to the bytes taken.
  Step ParseOne(std::string_view in, std::vector<std::string_view>* args, size_t* length);
  Step ParseInline(std::string_view in, std::vector<std::string_view>* args, size_t* length);
  Step ParseMultibulk(std::string_view in, std::vector<std::string_view>* args, size_t* length);
  bool SplitInline(std::string_view line);
  void StartNumber();
  Digit ReadNumber(std::string_view in);
  Digit FeedNumber(char c);
  void ResetCommand();
  Step Fail(std::string message);

  ParserLimits limits_;
  State state_ = State::kStart;
  // All offsets are relative to the start of the pending command.
  size_t pos_ = 0;  // next byte to look at
  // The length line being read: redis's string2ll grammar, "0" or -?[1-9][0-9]*.
  bool num_negative_ = false;
  bool num_cr_ = false;  // its '\r' was seen, the '\n' must follow
  int num_digits_ = 0;
  uint64_t num_value_ = 0;
  size_t args_left_ = 0;   // multibulk arguments still to read
  size_t bulk_start_ = 0;  // first byte of the argument being read
  size_t bulk_length_ = 0;
  std::vector<std::pair<size_t, size_t>> spans_;  // (offset, length) of each multibulk argument
  std::string inline_bytes_;                      // decoded inline arguments, back to back
  std::vector<size_t> inline_ends_;  // end offset of each inline argument in inline_bytes_
  std::string error_;
};

}  // namespace floodgate::resp
