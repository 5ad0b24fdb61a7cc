// RESP2 request parser.
//
// Follows redis-server's networking.c (processMultibulkBuffer,
// processInlineBuffer) and sds.c (sdssplitargs) so a client sees the same
// behaviour as with Redis, with three deliberate differences:
//  - Length lines must end in exactly "\r\n" and bulk data must be followed by
//    "\r\n"; redis skips those two bytes unchecked, which lets a desynchronised
//    client run garbage as commands.
//  - An inline line over max_inline_bytes is refused even when its newline has
//    arrived (redis only checks while the newline is missing), so the outcome
//    does not depend on how the bytes were split into reads.
//  - A NUL byte in an inline line is an ordinary byte (sdssplitargs, working on
//    C strings, silently drops the rest of the line).
//
// Progress is kept as offsets from the pending command's first byte, never as
// pointers, because the caller's buffer may be reallocated between calls. A
// length line is read byte by byte as it arrives; an inline line is searched
// for its newline from where the last call stopped, then split once; bulk data
// is not looked at until its last byte has arrived. So a request costs time
// linear in its size however it is split into reads: a large argument trickling
// in costs O(1) per read.
#include "protocol/resp/parser.h"

#include <algorithm>
#include <cstring>
#include <limits>

namespace floodgate::resp {
namespace {

// isspace() in the C locale, as sdssplitargs uses between arguments.
bool IsSpace(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

// The byte a backslash escape stands for inside double quotes.
char Unescape(char c) {
  switch (c) {
    case 'n':
      return '\n';
    case 'r':
      return '\r';
    case 't':
      return '\t';
    case 'b':
      return '\b';
    case 'a':
      return '\a';
    default:
      return c;  // \" \\ and any other byte stand for themselves
  }
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// The escape at line[p] inside a `quote`d argument ('"' or '\''): how many
// bytes it takes, 0 when there is none there (the byte stands for itself),
// and the byte it stands for in *byte.
size_t QuotedEscape(std::string_view line, size_t p, char quote, char* byte) {
  if (line[p] != '\\' || p + 1 >= line.size()) return 0;
  const char next = line[p + 1];
  if (quote == '\'') {
    if (next != '\'') return 0;
    *byte = '\'';
    return 2;
  }
  if (next == 'x' && p + 3 < line.size() && HexValue(line[p + 2]) >= 0 &&
      HexValue(line[p + 3]) >= 0) {
    *byte = static_cast<char>(HexValue(line[p + 2]) * 16 + HexValue(line[p + 3]));
    return 4;
  }
  *byte = Unescape(next);
  return 2;
}

// The byte as it may appear inside an error line: never CR, LF or other controls.
std::string Printable(char c) {
  const auto u = static_cast<unsigned char>(c);
  if (u >= 0x20 && u < 0x7f) return std::string(1, c);
  static constexpr char kHex[] = "0123456789abcdef";
  return std::string{'\\', 'x', kHex[u >> 4], kHex[u & 0xf]};
}

}  // namespace

Parser::Parser(ParserLimits limits) : limits_(limits) {}

void Parser::Reset() {
  ResetCommand();
  error_.clear();
}

void Parser::ResetCommand() {
  state_ = State::kStart;
  pos_ = 0;
  args_left_ = 0;
  bulk_start_ = 0;
  bulk_length_ = 0;
  spans_.clear();
  // inline_bytes_ is kept: the arguments just returned may point into it.
}

Parser::Step Parser::Fail(std::string message) {
  error_ = std::move(message);
  state_ = State::kFailed;
  return Step::kError;
}

Parser::Status Parser::Parse(std::string_view input, std::vector<std::string_view>* args,
                             size_t* consumed, std::string* error) {
  args->clear();
  *consumed = 0;
  if (state_ == State::kFailed) {
    *error = error_;
    return Status::kError;
  }
  // Only a caller breaking the contract (dropping unconsumed bytes, passing
  // another buffer) can leave the progress past the end; start the command over
  // rather than read out of bounds.
  if (pos_ > input.size()) ResetCommand();

  // Items that carry no command are skipped here, and the next one is parsed in
  // the same call, so pipelined "*0\r\n" or blank lines never stall a command.
  size_t skipped = 0;
  for (;;) {
    size_t length = 0;
    switch (ParseOne(input.substr(skipped), args, &length)) {
      case Step::kSkip:
        skipped += length;
        ResetCommand();
        continue;
      case Step::kNeedMore:
        *consumed = skipped;
        return Status::kNeedMore;
      case Step::kError:
        *error = error_;
        return Status::kError;
      case Step::kCommand:
        *consumed = skipped + length;
        ResetCommand();
        return Status::kCommand;
    }
  }
}

Parser::Step Parser::ParseOne(std::string_view in, std::vector<std::string_view>* args,
                              size_t* length) {
  if (state_ == State::kStart) {
    if (in.empty()) return Step::kNeedMore;
    // As in redis, the first byte alone decides: '*' is multibulk, anything else inline.
    if (in[0] == '*') {
      state_ = State::kCount;
      pos_ = 1;
      StartNumber();
    } else {
      state_ = State::kInline;
      pos_ = 0;
    }
  }
  if (state_ == State::kInline) return ParseInline(in, args, length);
  return ParseMultibulk(in, args, length);
}

Parser::Step Parser::ParseInline(std::string_view in, std::vector<std::string_view>* args,
                                 size_t* length) {
  const size_t max = limits_.max_inline_bytes;
  const void* newline = std::memchr(in.data() + pos_, '\n', in.size() - pos_);
  if (newline == nullptr) {
    pos_ = in.size();
    // A final '\r' may be the first half of "\r\n", which does not count.
    size_t line = in.size();
    if (line > 0 && in[line - 1] == '\r') --line;
    if (line > max) return Fail("too big inline request");
    return Step::kNeedMore;
  }
  const size_t newline_at = static_cast<const char*>(newline) - in.data();
  size_t end = newline_at;
  if (end > 0 && in[end - 1] == '\r') --end;  // "\r\n" or a bare "\n" (telnet, nc)
  if (end > max) return Fail("too big inline request");
  if (!SplitInline(in.substr(0, end))) return Fail("unbalanced quotes in request");
  *length = newline_at + 1;
  if (inline_ends_.empty()) return Step::kSkip;
  if (inline_ends_.size() > limits_.max_args) {
    return Fail("too many arguments (max " + std::to_string(limits_.max_args) + ")");
  }
  const std::string_view bytes = inline_bytes_;
  size_t start = 0;
  for (size_t end_offset : inline_ends_) {
    if (end_offset - start > limits_.max_arg_bytes) {
      args->clear();
      return Fail("argument too long (max " + std::to_string(limits_.max_arg_bytes) + " bytes)");
    }
    args->push_back(bytes.substr(start, end_offset - start));
    start = end_offset;
  }
  return Step::kCommand;
}

// sdssplitargs: blanks separate arguments; "double quotes" take \xHH and
// \n \r \t \b \a escapes (any other escaped byte stands for itself);
// 'single quotes' take only \'. A quote may open mid-argument (a"b c" is one
// argument, `ab c`); a closing quote must be followed by a blank or the end.
bool Parser::SplitInline(std::string_view line) {
  inline_bytes_.clear();
  inline_ends_.clear();
  // Decoded arguments are never longer than the line, so this is the only
  // allocation, and views into inline_bytes_ stay valid while it is filled.
  inline_bytes_.reserve(line.size());
  const size_t n = line.size();
  size_t p = 0;
  for (;;) {
    while (p < n && IsSpace(line[p])) ++p;
    if (p == n) return true;
    char quote = 0;  // the quote the argument is inside, if any
    bool done = false;
    while (!done) {
      if (quote != 0) {
        if (p == n) return false;
        const char c = line[p];
        char escaped = 0;
        if (const size_t used = QuotedEscape(line, p, quote, &escaped); used > 0) {
          inline_bytes_.push_back(escaped);
          p += used;
        } else if (c == quote) {
          if (p + 1 < n && !IsSpace(line[p + 1])) return false;
          ++p;
          done = true;
        } else {
          inline_bytes_.push_back(c);
          ++p;
        }
      } else {
        if (p == n) break;
        const char c = line[p++];
        switch (c) {
          case ' ':
          case '\n':
          case '\r':
          case '\t':
            done = true;
            break;
          case '"':
          case '\'':
            quote = c;
            break;
          default:
            inline_bytes_.push_back(c);
            break;
        }
      }
    }
    inline_ends_.push_back(inline_bytes_.size());
  }
}

Parser::Step Parser::ParseMultibulk(std::string_view in, std::vector<std::string_view>* args,
                                    size_t* length) {
  for (;;) {
    switch (state_) {
      case State::kCount: {
        const Digit d = ReadNumber(in);
        if (d == Digit::kMore) return Step::kNeedMore;
        if (d == Digit::kBad) return Fail("invalid multibulk length");
        // redis ignores "*0" and "*-1" (a null array); any other negative count is garbage.
        if (num_negative_ && num_value_ != 1) return Fail("invalid multibulk length");
        if (num_negative_ || num_value_ == 0) {
          *length = pos_;
          return Step::kSkip;
        }
        if (num_value_ > limits_.max_args) {
          return Fail("too many arguments (max " + std::to_string(limits_.max_args) + ")");
        }
        args_left_ = static_cast<size_t>(num_value_);
        spans_.clear();
        // A client can claim many arguments and send none: grow with what arrives.
        spans_.reserve(std::min<size_t>(args_left_, 16));
        state_ = State::kBulkHeader;
        break;
      }
      case State::kBulkHeader: {
        if (pos_ >= in.size()) return Step::kNeedMore;
        const char c = in[pos_];
        if (c != '$') return Fail("expected '$', got '" + Printable(c) + "'");
        ++pos_;
        StartNumber();
        state_ = State::kBulkLength;
        break;
      }
      case State::kBulkLength: {
        const Digit d = ReadNumber(in);
        if (d == Digit::kMore) return Step::kNeedMore;
        if (d == Digit::kBad || num_negative_) return Fail("invalid bulk length");
        // Refused on the header, before the client gets to send the body.
        if (num_value_ > limits_.max_arg_bytes) {
          return Fail("argument too long (max " + std::to_string(limits_.max_arg_bytes) +
                      " bytes)");
        }
        bulk_start_ = pos_;
        bulk_length_ = static_cast<size_t>(num_value_);
        state_ = State::kBulkData;
        break;
      }
      case State::kBulkData: {
        // pos_ == bulk_start_ <= in.size() here; written to avoid overflow in the sums.
        const size_t available = in.size() - bulk_start_;
        if (available < bulk_length_ || available - bulk_length_ < 2) return Step::kNeedMore;
        const size_t end = bulk_start_ + bulk_length_;
        if (in[end] != '\r' || in[end + 1] != '\n') {
          return Fail("missing CRLF after bulk argument");
        }
        spans_.emplace_back(bulk_start_, bulk_length_);
        pos_ = end + 2;
        if (--args_left_ > 0) {
          state_ = State::kBulkHeader;
          break;
        }
        args->reserve(spans_.size());
        for (const auto& [offset, size] : spans_) args->push_back(in.substr(offset, size));
        *length = pos_;
        return Step::kCommand;
      }
      case State::kStart:
      case State::kInline:
      case State::kFailed:
        // Unreachable: ParseOne routes only multibulk states here.
        return Fail("internal parser state error");
    }
  }
}

void Parser::StartNumber() {
  num_negative_ = false;
  num_cr_ = false;
  num_digits_ = 0;
  num_value_ = 0;
}

Parser::Digit Parser::ReadNumber(std::string_view in) {
  while (pos_ < in.size()) {
    const Digit d = FeedNumber(in[pos_++]);
    if (d != Digit::kMore) return d;
  }
  return Digit::kMore;
}

// One byte of "<number>\r\n", number as redis's string2ll accepts it: "0" or
// -?[1-9][0-9]* within int64. Byte by byte so a length line split across reads
// resumes without rescanning, and so its length is bounded (20 digits at most)
// without a separate limit.
Parser::Digit Parser::FeedNumber(char c) {
  if (num_cr_) return c == '\n' ? Digit::kDone : Digit::kBad;
  if (c == '\r') {
    if (num_digits_ == 0) return Digit::kBad;
    num_cr_ = true;
    return Digit::kMore;
  }
  if (c == '-') {
    if (num_negative_ || num_digits_ > 0) return Digit::kBad;
    num_negative_ = true;
    return Digit::kMore;
  }
  if (c < '0' || c > '9') return Digit::kBad;
  const int digit = c - '0';
  if (num_digits_ > 0 && num_value_ == 0) return Digit::kBad;               // leading zero
  if (num_digits_ == 0 && num_negative_ && digit == 0) return Digit::kBad;  // "-0"
  constexpr uint64_t kMax = static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
  if (num_value_ > (kMax - digit) / 10) return Digit::kBad;
  num_value_ = num_value_ * 10 + digit;
  ++num_digits_;
  return Digit::kMore;
}

}  // namespace floodgate::resp
