// request_parser: see request_parser.h.
//
// The parser works line by line over offsets into the caller's input. Each
// complete line is validated and recorded as soon as its LF arrives, and the
// search for the next LF resumes where the previous call stopped, so feeding a
// request a byte at a time costs the same as feeding it whole. Every limit is
// checked as "the line must end within the remaining budget", which depends
// only on the bytes seen, so a request split anywhere gets the same answer
// (including the same error) as the request in one piece.
#include "protocol/http/request_parser.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include "common/text.h"
#include "protocol/http/response.h"

namespace floodgate::http {
namespace {

// RFC 9110 tchar.
bool IsTokenChar(unsigned char c) {
  if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) return true;
  return std::string_view("!#$%&'*+-.^_`|~").find(static_cast<char>(c)) != std::string_view::npos;
}

bool IsToken(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (!IsTokenChar(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

// Field values may hold HTAB, visible ASCII, SP and obs-text; a CR, LF, NUL or
// other control byte would let one field smuggle another past a proxy.
bool IsFieldValueChar(unsigned char c) { return c == '\t' || (c >= 0x20 && c != 0x7f); }

using text::EqualsIgnoreCase;  // ASCII only: field names and codings are ASCII

std::string_view TrimOws(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// Calls fn(element) for each element of a comma-separated field value,
// trimmed, empty elements included (callers decide whether those are fine).
template <typename Fn>
void ForEachListElement(std::string_view value, Fn fn) {
  while (true) {
    const size_t comma = value.find(',');
    fn(TrimOws(value.substr(0, comma)));
    if (comma == std::string_view::npos) return;
    value.remove_prefix(comma + 1);
  }
}

// Splits a header or trailer line into name and value. Returns "" when valid,
// else why not.
std::string SplitFieldLine(std::string_view line, std::string_view* name, std::string_view* value) {
  if (line.front() == ' ' || line.front() == '\t') {
    return "obsolete line folding (a field line starting with whitespace) is not allowed";
  }
  const size_t colon = line.find(':');
  if (colon == std::string_view::npos)
    return "header line without a colon: " + QuoteForDetail(line);
  *name = line.substr(0, colon);
  if (name->empty()) return "header line with an empty field name: " + QuoteForDetail(line);
  if (name->back() == ' ' || name->back() == '\t') {
    return "whitespace between the field name and the colon in " + QuoteForDetail(line);
  }
  if (!IsToken(*name)) return "invalid header field name " + QuoteForDetail(*name);
  *value = TrimOws(line.substr(colon + 1));
  for (char c : *value) {
    if (!IsFieldValueChar(static_cast<unsigned char>(c))) {
      return "header field " + QuoteForDetail(*name) + " contains a control character";
    }
  }
  return "";
}

// Digits only: "+5", "0x10", "5 " (inner) and "" are not lengths. Saturates
// at the maximum instead of wrapping, so a huge value reads as too large.
bool ParseDecimal(std::string_view s, uint64_t* out) {
  if (s.empty()) return false;
  uint64_t v = 0;
  constexpr uint64_t kMax = std::numeric_limits<uint64_t>::max();
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    const uint64_t d = static_cast<uint64_t>(c - '0');
    v = (v > (kMax - d) / 10) ? kMax : v * 10 + d;
  }
  *out = v;
  return true;
}

}  // namespace

std::string_view Request::Header(std::string_view name) const {
  for (const auto& [n, v] : headers) {
    if (EqualsIgnoreCase(n, name)) return v;
  }
  return {};
}

bool Request::HasHeader(std::string_view name) const {
  for (const auto& h : headers) {
    if (EqualsIgnoreCase(h.first, name)) return true;
  }
  return false;
}

RequestParser::RequestParser(ParserLimits limits) : limits_(limits) {}

void RequestParser::Reset() {
  StartRequest();
  keep_alive_ = false;
  content_length_ = 0;
  chunk_remaining_ = 0;
  framing_bytes_ = 0;
  trailer_bytes_ = 0;
  chunked_body_.clear();
  error_status_ = 0;
  error_.clear();
}

bool RequestParser::ExpectsContinue() const {
  return expects_continue_ && state_ != State::kHead && state_ != State::kError;
}

RequestParser::Status RequestParser::Fail(int status_code, std::string message,
                                          int* status_code_out, std::string* error) {
  state_ = State::kError;
  error_status_ = status_code;
  error_ = std::move(message);
  *status_code_out = error_status_;
  *error = error_;
  return Status::kError;
}

RequestParser::LineResult RequestParser::NextLine(std::string_view input, size_t budget,
                                                  size_t* line_pos, size_t* line_len) {
  // The line, LF included, must end before `limit`.
  const size_t limit = budget > std::numeric_limits<size_t>::max() - pos_
                           ? std::numeric_limits<size_t>::max()
                           : pos_ + budget;
  const size_t end = std::min(input.size(), limit);
  scan_pos_ = std::max(scan_pos_, pos_);
  if (scan_pos_ < end) {
    const void* lf = std::memchr(input.data() + scan_pos_, '\n', end - scan_pos_);
    if (lf != nullptr) {
      const size_t lf_pos = static_cast<const char*>(lf) - input.data();
      *line_pos = pos_;
      *line_len = lf_pos - pos_;
      if (*line_len > 0 && input[lf_pos - 1] == '\r') --*line_len;
      pos_ = lf_pos + 1;
      scan_pos_ = pos_;
      return LineResult::kFound;
    }
    scan_pos_ = end;
  }
  return input.size() >= limit ? LineResult::kTooLong : LineResult::kNeedMore;
}

RequestParser::LineResult RequestParser::NextCountedLine(std::string_view input, size_t* counted,
                                                         size_t* line_pos, size_t* line_len) {
  const size_t start = pos_;
  const LineResult r = NextLine(input, limits_.max_header_bytes - *counted, line_pos, line_len);
  if (r == LineResult::kFound) *counted += pos_ - start;
  return r;
}

std::string RequestParser::FramingTooLong() const {
  return "the chunk framing (chunk-size lines and line endings) exceeds " +
         std::to_string(limits_.max_header_bytes) + " bytes; send fewer, larger chunks";
}

int RequestParser::ParseRequestLine(std::string_view input, size_t pos, size_t len) {
  const std::string_view line = input.substr(pos, len);
  const size_t sp1 = line.find(' ');
  const size_t sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
  if (sp2 == std::string_view::npos) {
    error_ =
        "malformed request line " + QuoteForDetail(line) + "; expected \"METHOD target HTTP/1.1\"";
    return 400;
  }
  const std::string_view method = line.substr(0, sp1);
  const std::string_view target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  const std::string_view version = line.substr(sp2 + 1);
  if (!IsToken(method)) {
    error_ = "malformed request line: the method " + QuoteForDetail(method) + " is not a token";
    return 400;
  }
  if (target.empty()) {
    error_ = "malformed request line " + QuoteForDetail(line) + ": empty request target";
    return 400;
  }
  for (char c : target) {
    const unsigned char u = static_cast<unsigned char>(c);
    if (u <= 0x20 || u == 0x7f) {
      error_ = "malformed request line: the request target " + QuoteForDetail(target) +
               " contains a space or control character";
      return 400;
    }
  }
  const bool well_formed = version.size() == 8 && version.substr(0, 5) == "HTTP/" &&
                           version[5] >= '0' && version[5] <= '9' && version[6] == '.' &&
                           version[7] >= '0' && version[7] <= '9';
  if (!well_formed) {
    error_ = "malformed request line: expected an HTTP version like \"HTTP/1.1\", got " +
             QuoteForDetail(version);
    return 400;
  }
  if (version != "HTTP/1.1" && version != "HTTP/1.0") {
    error_ = "HTTP version " + std::string(version.substr(5)) +
             " is not supported; use HTTP/1.1 or HTTP/1.0";
    return 505;
  }
  http11_ = version[7] == '1';
  method_ = {pos, method.size()};
  target_ = {pos + sp1 + 1, target.size()};
  version_ = {pos + sp2 + 1, version.size()};
  body_limit_ = limits_.max_body_bytes;
  if (!limits_.large_body_path.empty() &&
      target.substr(0, target.find('?')) == limits_.large_body_path) {
    body_limit_ = std::max(body_limit_, limits_.large_body_bytes);
  }
  have_request_line_ = true;
  return 0;
}

int RequestParser::ParseHeaderLine(std::string_view input, size_t pos, size_t len) {
  const std::string_view line = input.substr(pos, len);
  std::string_view name, value;
  std::string why = SplitFieldLine(line, &name, &value);
  if (!why.empty()) {
    error_ = std::move(why);
    return 400;
  }
  if (headers_.size() == limits_.max_headers) {
    error_ = "the request has more than " + std::to_string(limits_.max_headers) + " header fields";
    return 431;
  }
  headers_.push_back({Slice{pos, name.size()},
                      Slice{pos + static_cast<size_t>(value.data() - line.data()), value.size()}});
  return 0;
}

int RequestParser::FinishHead(std::string_view input) {
  int host_count = 0;
  bool has_length = false;
  std::string length_error;
  uint64_t length = 0;
  bool has_te = false;
  int chunked_count = 0;
  std::string_view unsupported_coding;
  bool empty_coding = false;
  bool close = false;
  bool keep_alive = false;
  bool expect_continue = false;
  for (const auto& [name_slice, value_slice] : headers_) {
    const std::string_view name = input.substr(name_slice.pos, name_slice.len);
    const std::string_view value = input.substr(value_slice.pos, value_slice.len);
    if (EqualsIgnoreCase(name, "host")) {
      ++host_count;
    } else if (EqualsIgnoreCase(name, "content-length")) {
      // RFC 9110 allows a list of identical values ("42, 42", as some proxies
      // merge repeats); anything else is ambiguous framing.
      ForEachListElement(value, [&](std::string_view element) {
        uint64_t v = 0;
        if (!length_error.empty()) return;
        if (!ParseDecimal(element, &v)) {
          length_error =
              "invalid Content-Length " + QuoteForDetail(value) + "; expected a decimal number";
        } else if (has_length && v != length) {
          length_error = "conflicting Content-Length values";
        }
        has_length = true;
        length = v;
      });
    } else if (EqualsIgnoreCase(name, "transfer-encoding")) {
      has_te = true;
      ForEachListElement(value, [&](std::string_view coding) {
        if (coding.empty()) {
          empty_coding = true;
        } else if (EqualsIgnoreCase(coding, "chunked")) {
          ++chunked_count;
        } else if (unsupported_coding.empty()) {
          unsupported_coding = coding;
        }
      });
    } else if (EqualsIgnoreCase(name, "connection")) {
      ForEachListElement(value, [&](std::string_view option) {
        if (EqualsIgnoreCase(option, "close")) close = true;
        if (EqualsIgnoreCase(option, "keep-alive")) keep_alive = true;
      });
    } else if (EqualsIgnoreCase(name, "expect")) {
      expect_continue = EqualsIgnoreCase(value, "100-continue");
    }
  }

  // RFC 9112 3.2: a server MUST answer 400 to an HTTP/1.1 request without
  // Host or with more than one.
  if (host_count > 1) {
    error_ = "the request has more than one Host header field";
    return 400;
  }
  if (host_count == 0 && http11_) {
    error_ = "an HTTP/1.1 request must have a Host header field";
    return 400;
  }
  // Both framings at once is the classic request-smuggling shape; refuse
  // rather than pick one (RFC 9112 6.3 allows either, and closing).
  if (has_te && has_length) {
    error_ = "the request has both Content-Length and Transfer-Encoding";
    return 400;
  }
  if (has_te) {
    if (!http11_) {
      error_ = "Transfer-Encoding is not allowed in an HTTP/1.0 request";
      return 400;
    }
    if (!unsupported_coding.empty()) {
      error_ = "transfer-coding " + QuoteForDetail(unsupported_coding) +
               " is not supported; only chunked is";
      return 501;
    }
    if (empty_coding || chunked_count != 1) {
      error_ = "malformed Transfer-Encoding; expected exactly \"chunked\"";
      return 400;
    }
  }
  if (!length_error.empty()) {
    error_ = std::move(length_error);
    return 400;
  }
  if (length > body_limit_) {
    const std::string size =
        length == std::numeric_limits<uint64_t>::max() ? "more than 2^64" : std::to_string(length);
    error_ = "the request body is " + size + " bytes (Content-Length); the limit is " +
             std::to_string(body_limit_);
    return 413;
  }

  keep_alive_ = http11_ ? !close : (keep_alive && !close);
  // RFC 9110 10.1.1: no 100 (Continue) for an HTTP/1.0 client.
  expects_continue_ = expect_continue && http11_;
  if (has_te) {
    chunked_body_.clear();
    framing_bytes_ = 0;
    trailer_bytes_ = 0;
    state_ = State::kChunkSize;
  } else {
    content_length_ = length;
    state_ = State::kBody;
  }
  return 0;
}

int RequestParser::ParseChunkSize(std::string_view line) {
  uint64_t size = 0;
  size_t i = 0;
  for (; i < line.size() && text::HexDigitValue(line[i]) >= 0; ++i) {
    // Checked before the shift, so a long run of digits cannot wrap around to
    // a small size (a smuggling trick against parsers that wrap).
    if (size > (std::numeric_limits<uint64_t>::max() >> 4)) {
      error_ = "chunk size " + QuoteForDetail(line) + " overflows 64 bits";
      return 400;
    }
    size = (size << 4) | static_cast<uint64_t>(text::HexDigitValue(line[i]));
  }
  if (i == 0) {
    error_ = "malformed chunk size line " + QuoteForDetail(line) + "; expected hexadecimal digits";
    return 400;
  }
  // Chunk extensions are ignored, but must not hide control bytes.
  size_t j = i;
  while (j < line.size() && (line[j] == ' ' || line[j] == '\t')) ++j;
  if (j < line.size()) {
    if (line[j] != ';') {
      error_ =
          "malformed chunk size line " + QuoteForDetail(line) + "; expected hexadecimal digits";
      return 400;
    }
    for (; j < line.size(); ++j) {
      if (!IsFieldValueChar(static_cast<unsigned char>(line[j]))) {
        error_ = "chunk extension " + QuoteForDetail(line) + " contains a control character";
        return 400;
      }
    }
  }
  if (size == 0) {
    state_ = State::kTrailers;
    return 0;
  }
  if (size > body_limit_ - chunked_body_.size()) {
    error_ =
        "the chunked request body exceeds the limit of " + std::to_string(body_limit_) + " bytes";
    return 413;
  }
  chunk_remaining_ = size;
  state_ = State::kChunkData;
  return 0;
}

RequestParser::Status RequestParser::Complete(std::string_view input, std::string_view body,
                                              Request* req, size_t* consumed) {
  auto view = [input](Slice s) { return input.substr(s.pos, s.len); };
  req->method = view(method_);
  req->target = view(target_);
  req->version = view(version_);
  req->headers.clear();
  for (const auto& [name, value] : headers_) req->headers.emplace_back(view(name), view(value));
  req->body = body;
  req->keep_alive = keep_alive_;
  *consumed = pos_;
  // Ready for the next request, which starts at the first byte of the next
  // input. chunked_body_ stays: req->body may point into it.
  StartRequest();
  return Status::kRequest;
}

void RequestParser::StartRequest() {
  state_ = State::kHead;
  pos_ = 0;
  scan_pos_ = 0;
  have_request_line_ = false;
  headers_.clear();
  expects_continue_ = false;
}

RequestParser::Status RequestParser::Parse(std::string_view input, Request* req, size_t* consumed,
                                           int* status_code, std::string* error) {
  if (state_ == State::kError) {
    *status_code = error_status_;
    *error = error_;
    return Status::kError;
  }
  // A caller that dropped bytes we had already scanned broke the contract;
  // starting over is the only way to stay inside `input`.
  if (input.size() < std::max(pos_, scan_pos_)) Reset();

  while (true) {
    switch (state_) {
      case State::kHead: {
        size_t line_pos = 0;
        size_t line_len = 0;
        const size_t budget = limits_.max_header_bytes - std::min(pos_, limits_.max_header_bytes);
        const LineResult r = NextLine(input, budget, &line_pos, &line_len);
        if (r == LineResult::kNeedMore) return Status::kNeedMore;
        if (r == LineResult::kTooLong) {
          return Fail(431,
                      "the request line and header fields exceed " +
                          std::to_string(limits_.max_header_bytes) + " bytes",
                      status_code, error);
        }
        int code = 0;
        if (!have_request_line_) {
          // Empty lines before the request line are skipped (RFC 9112 2.2):
          // some clients send a CRLF after a POST body.
          if (line_len > 0) code = ParseRequestLine(input, line_pos, line_len);
        } else if (line_len == 0) {
          code = FinishHead(input);
        } else {
          code = ParseHeaderLine(input, line_pos, line_len);
        }
        if (code != 0) return Fail(code, std::move(error_), status_code, error);
        break;
      }

      case State::kBody: {
        if (input.size() - pos_ < content_length_) return Status::kNeedMore;
        const std::string_view body = input.substr(pos_, content_length_);
        pos_ += content_length_;
        return Complete(input, body, req, consumed);
      }

      case State::kChunkSize: {
        size_t line_pos = 0;
        size_t line_len = 0;
        const LineResult r = NextCountedLine(input, &framing_bytes_, &line_pos, &line_len);
        if (r == LineResult::kNeedMore) return Status::kNeedMore;
        if (r == LineResult::kTooLong) return Fail(413, FramingTooLong(), status_code, error);
        const int code = ParseChunkSize(input.substr(line_pos, line_len));
        if (code != 0) return Fail(code, std::move(error_), status_code, error);
        break;
      }

      case State::kChunkData: {
        const size_t take =
            static_cast<size_t>(std::min<uint64_t>(input.size() - pos_, chunk_remaining_));
        chunked_body_.append(input.data() + pos_, take);
        pos_ += take;
        scan_pos_ = pos_;
        chunk_remaining_ -= take;
        if (chunk_remaining_ > 0) return Status::kNeedMore;
        state_ = State::kChunkDataEnd;
        break;
      }

      case State::kChunkDataEnd: {
        if (pos_ >= input.size()) return Status::kNeedMore;
        size_t n = 0;
        if (input[pos_] == '\n') {
          n = 1;
        } else if (input[pos_] == '\r') {
          if (pos_ + 1 >= input.size()) return Status::kNeedMore;
          if (input[pos_ + 1] == '\n') n = 2;
        }
        if (n == 0) {
          return Fail(400, "chunk data is not followed by CRLF (longer than its chunk size?)",
                      status_code, error);
        }
        if (framing_bytes_ + n > limits_.max_header_bytes) {
          return Fail(413, FramingTooLong(), status_code, error);
        }
        framing_bytes_ += n;
        pos_ += n;
        scan_pos_ = pos_;
        state_ = State::kChunkSize;
        break;
      }

      case State::kTrailers: {
        size_t line_pos = 0;
        size_t line_len = 0;
        const LineResult r = NextCountedLine(input, &trailer_bytes_, &line_pos, &line_len);
        if (r == LineResult::kNeedMore) return Status::kNeedMore;
        if (r == LineResult::kTooLong) {
          return Fail(
              431,
              "the trailer section exceeds " + std::to_string(limits_.max_header_bytes) + " bytes",
              status_code, error);
        }
        if (line_len == 0) return Complete(input, chunked_body_, req, consumed);
        // Trailer fields are skipped, but checked like header fields so a
        // malformed one cannot pass through unnoticed.
        std::string_view name, value;
        std::string why = SplitFieldLine(input.substr(line_pos, line_len), &name, &value);
        if (!why.empty()) return Fail(400, "trailer: " + why, status_code, error);
        break;
      }

      case State::kError:
        *status_code = error_status_;
        *error = error_;
        return Status::kError;
    }
  }
}

}  // namespace floodgate::http
