// request_parser: an incremental HTTP/1.1 (and 1.0) request parser. It reads
// the unconsumed bytes of one connection and yields one request at a time, with
// views into those bytes; chunked request bodies are decoded into a buffer the
// parser owns. Limits are passed in; past a limit the answer is an error with
// the HTTP status to send and a detail sentence.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace floodgate::http {

struct ParserLimits {
  // Request line plus header fields, line endings and the blank line included
  // (and any empty lines before the request line). Also bounds the trailer
  // section and the chunk framing of a chunked body (see RequestParser).
  size_t max_header_bytes = 8192;
  size_t max_headers = 64;
  // The body as the application sees it (decoded, for chunked bodies).
  size_t max_body_bytes = 64 * 1024;
  // A request whose target's path (before any query) is exactly this may
  // have a body
  // of up to large_body_bytes instead (POST /v1/admin/simulate's traffic
  // log); empty: none may.
  std::string_view large_body_path;
  size_t large_body_bytes = 0;
};

struct Request {
  std::string_view method;   // case-sensitive token, e.g. "GET"
  std::string_view target;   // as sent: origin-form "/v1/check?x=1", absolute-form or "*"
  std::string_view version;  // "HTTP/1.1" or "HTTP/1.0"
  // Field names as sent (compare with Header(), which ignores case); values
  // with leading and trailing whitespace removed. In arrival order.
  std::vector<std::pair<std::string_view, std::string_view>> headers;
  std::string_view body;
  // Whether the connection may carry another request after this one:
  // HTTP/1.1 unless "Connection: close", HTTP/1.0 only with "Connection: keep-alive".
  bool keep_alive = false;

  // The value of the first field named `name` (ASCII case-insensitive), or ""
  // when there is none.
  std::string_view Header(std::string_view name) const;
  bool HasHeader(std::string_view name) const;
};

// Not thread-safe: one per connection.
//
// Accepted: "METHOD SP target SP HTTP/1.x" request lines; CRLF or bare LF line
// endings; empty lines before the request line (ignored, as RFC 9112 allows).
// Framing: Content-Length (one decimal value, identical repeats allowed), or
// Transfer-Encoding: chunked (HTTP/1.1 only), or no body.
//
// Errors (status code, then why):
//   400  malformed request line or header field, obs-fold, missing or repeated
//        Host in HTTP/1.1, bad or conflicting Content-Length, both
//        Content-Length and Transfer-Encoding, Transfer-Encoding in HTTP/1.0,
//        malformed chunk size or chunk framing, chunk size overflowing 64 bits.
//   413  body larger than max_body_bytes (reported as soon as the header
//        section or a chunk size shows it), or the chunk framing (chunk-size
//        lines and CRLFs after chunk data) larger than max_header_bytes.
//   431  head larger than max_header_bytes, more than max_headers fields, or a
//        trailer section larger than max_header_bytes.
//   501  a transfer-coding other than chunked.
//   505  an HTTP version other than 1.0 and 1.1.
// After kError the parser keeps answering the same error; reply and close the
// connection (the framing of anything that follows is unknown).
class RequestParser {
 public:
  explicit RequestParser(ParserLimits limits);

  enum class Status { kRequest, kNeedMore, kError };

  // `input` is every unconsumed byte of the connection: the same bytes as in
  // the previous call followed by any new ones. (If it is shorter than what
  // was already scanned, parsing restarts from its first byte.)
  //
  // kRequest: *req holds views into `input` (and, for a chunked body, into a
  //   buffer of the parser); they stay valid until the caller drops those
  //   bytes or calls Parse() again. *consumed is the request's length in
  //   `input`; drop that many bytes before the next call. One request per
  //   call, so pipelined requests come out one after another.
  // kNeedMore: call again with more bytes. Work already done is kept, so the
  //   next call continues where this one stopped.
  // kError: *status_code and *error say why (see above).
  Status Parse(std::string_view input, Request* req, size_t* consumed, int* status_code,
               std::string* error);

  // True once the current request's header section is parsed, while its body
  // is incomplete, if it asked for "Expect: 100-continue": the server may then
  // send "HTTP/1.1 100 Continue" so the client sends the body at once.
  bool ExpectsContinue() const;

  // Forgets the request in progress and any error.
  void Reset();

 private:
  enum class State { kHead, kBody, kChunkSize, kChunkData, kChunkDataEnd, kTrailers, kError };
  enum class LineResult { kFound, kNeedMore, kTooLong };

  // A piece of `input`, kept as offsets because the caller's buffer may move
  // between calls.
  struct Slice {
    size_t pos = 0;
    size_t len = 0;
  };

  Status Fail(int status_code, std::string message, int* status_code_out, std::string* error);
  LineResult NextLine(std::string_view input, size_t budget, size_t* line_pos, size_t* line_len);
  // NextLine for a part of the request that may take max_header_bytes in
  // all, `*counted` of them so far: a line found is counted in.
  LineResult NextCountedLine(std::string_view input, size_t* counted, size_t* line_pos,
                             size_t* line_len);
  // The 413 message for chunk framing past max_header_bytes.
  std::string FramingTooLong() const;
  // Each returns 0 when fine, else the HTTP status for error_ (which it sets).
  int ParseRequestLine(std::string_view input, size_t pos, size_t len);
  int ParseHeaderLine(std::string_view input, size_t pos, size_t len);
  int FinishHead(std::string_view input);
  int ParseChunkSize(std::string_view line);
  Status Complete(std::string_view input, std::string_view body, Request* req, size_t* consumed);
  // Back to the start of a request's head, at the first byte of the input;
  // what the head sets again (framing, lengths, the body) is left as it is.
  void StartRequest();

  const ParserLimits limits_;
  State state_ = State::kHead;
  size_t pos_ = 0;       // next unprocessed byte of the input
  size_t scan_pos_ = 0;  // where the search for the next LF resumes (>= pos_)
  bool have_request_line_ = false;
  Slice method_, target_, version_;
  // The current request's body bound (ParserLimits: its target decides).
  size_t body_limit_ = 0;
  bool http11_ = false;
  std::vector<std::pair<Slice, Slice>> headers_;
  bool keep_alive_ = false;
  bool expects_continue_ = false;
  uint64_t content_length_ = 0;
  uint64_t chunk_remaining_ = 0;
  size_t framing_bytes_ = 0;  // chunk-size lines and CRLFs after chunk data
  size_t trailer_bytes_ = 0;
  std::string chunked_body_;
  int error_status_ = 0;
  std::string error_;
};

}  // namespace floodgate::http
