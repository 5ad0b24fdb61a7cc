// libFuzzer target for http::RequestParser.
//
// The input is one connection's byte stream. It is parsed three ways: fed
// whole, in chunks of pseudo-random sizes derived from the input, and one byte
// at a time, each under the default limits and under tiny ones, and the fuzzer
// checks:
//  - the three feeds give the same requests, the same final status and error,
//    and leave the same bytes unconsumed (read sizes never change the outcome);
//  - every answer is sane: consumed within the input, at most max_headers
//    fields, a body of at most max_body_bytes, an error status the parser
//    documents, a non-empty one-line error that is repeated on the next call;
//  - every request, written out again in canonical form (CRLF, one
//    Content-Length), parses back to the same request.
// Each Parse call sees an exact-size heap copy of the input, so ASan reports
// any read past it; UBSan catches undefined behaviour.
//
//   clang++-14 -std=c++20 -g -O1 -fsanitize=fuzzer,address,undefined -Isrc -I/usr/include \
//     fuzz/http_parser_fuzz.cc src/protocol/http/*.cc -o /tmp/http_fuzz
//   cp -r fuzz/corpus/http /tmp/http_corpus && /tmp/http_fuzz -max_total_time=60 /tmp/http_corpus
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/text.h"
#include "fuzz/chunks.h"
#include "protocol/http/request_parser.h"

namespace {

using floodgate::http::ParserLimits;
using floodgate::http::Request;
using floodgate::http::RequestParser;
using Status = RequestParser::Status;

// Fails loudly, so libFuzzer saves the input; assert() may be compiled out.
#define FUZZ_CHECK(condition)                                                            \
  do {                                                                                   \
    if (!(condition)) {                                                                  \
      std::fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #condition); \
      std::abort();                                                                      \
    }                                                                                    \
  } while (0)

// A request copied out of the parser's views.
struct Parsed {
  std::string method, target, version, body;
  std::vector<std::pair<std::string, std::string>> headers;
  bool keep_alive = false;
  size_t consumed = 0;
  bool operator==(const Parsed&) const = default;
};

struct Outcome {
  std::vector<Parsed> requests;
  Status last = Status::kNeedMore;
  int code = 0;
  std::string error;
  std::string left;  // bytes never consumed (when the feed ended without an error)
  bool operator==(const Outcome&) const = default;
};

// splitmix64: a deterministic stream of chunk sizes from a seed.
bool IsFraming(std::string_view name) {
  return floodgate::text::EqualsIgnoreCase(name, "content-length") ||
         floodgate::text::EqualsIgnoreCase(name, "transfer-encoding");
}

// One Parse call on an exact-size copy of `buffer`; a request is copied out
// before the copy is freed.
Status ParseCopy(RequestParser* parser, const std::string& buffer, Parsed* parsed, int* code,
                 std::string* error) {
  std::unique_ptr<char[]> copy(new char[std::max<size_t>(buffer.size(), 1)]);
  std::memcpy(copy.get(), buffer.data(), buffer.size());
  Request req;
  size_t consumed = 12345;
  const Status status =
      parser->Parse(std::string_view(copy.get(), buffer.size()), &req, &consumed, code, error);
  if (status == Status::kRequest) {
    parsed->method = req.method;
    parsed->target = req.target;
    parsed->version = req.version;
    parsed->body = req.body;
    parsed->headers.clear();
    for (const auto& [n, v] : req.headers) parsed->headers.emplace_back(n, v);
    parsed->keep_alive = req.keep_alive;
    parsed->consumed = consumed;
  }
  return status;
}

// The request in canonical form parses back to itself (framing fields aside).
void CheckRoundTrip(const Parsed& p, const ParserLimits& limits) {
  std::string encoded = p.method + " " + p.target + " " + p.version + "\r\n";
  bool had_framing = false;
  for (const auto& [n, v] : p.headers) {
    if (IsFraming(n)) {
      had_framing = true;
      continue;
    }
    encoded += n + ": " + v + "\r\n";
  }
  if (had_framing) encoded += "Content-Length: " + std::to_string(p.body.size()) + "\r\n";
  encoded += "\r\n" + p.body;
  ParserLimits roomy = limits;
  roomy.max_header_bytes = limits.max_header_bytes * 2 + 64;  // CRLF where LF was, say
  RequestParser parser(roomy);
  Parsed again;
  int code = 0;
  std::string error;
  FUZZ_CHECK(ParseCopy(&parser, encoded, &again, &code, &error) == Status::kRequest);
  FUZZ_CHECK(again.consumed == encoded.size());
  FUZZ_CHECK(again.method == p.method && again.target == p.target && again.version == p.version);
  FUZZ_CHECK(again.body == p.body);
  FUZZ_CHECK(again.keep_alive == p.keep_alive);
  std::vector<std::pair<std::string, std::string>> a, b;
  for (const auto& h : p.headers) {
    if (!IsFraming(h.first)) a.push_back(h);
  }
  for (const auto& h : again.headers) {
    if (!IsFraming(h.first)) b.push_back(h);
  }
  FUZZ_CHECK(a == b);
}

// Feeds `data` in chunks: whole when seed is 0, one byte at a time when seed
// is 1, otherwise sizes drawn from the seed (mostly small, sometimes large).
Outcome Feed(std::string_view data, const ParserLimits& limits, uint64_t seed,
             bool check_round_trip) {
  RequestParser parser(limits);
  Outcome outcome;
  std::string buffer;
  size_t at = 0;
  floodgate::fuzz::ChunkSizer chunks(seed);
  do {
    const size_t n = chunks.Next(data.size() - at);
    buffer.append(data.substr(at, n));
    at += n;
    for (;;) {
      Parsed parsed;
      const Status status = ParseCopy(&parser, buffer, &parsed, &outcome.code, &outcome.error);
      outcome.last = status;
      if (status == Status::kError) {
        FUZZ_CHECK(outcome.code == 400 || outcome.code == 413 || outcome.code == 431 ||
                   outcome.code == 501 || outcome.code == 505);
        FUZZ_CHECK(!outcome.error.empty());
        FUZZ_CHECK(outcome.error.find_first_of("\r\n") == std::string::npos);
        // The error is sticky.
        int code = 0;
        std::string again;
        FUZZ_CHECK(ParseCopy(&parser, buffer, &parsed, &code, &again) == Status::kError);
        FUZZ_CHECK(code == outcome.code && again == outcome.error);
        return outcome;
      }
      if (status == Status::kNeedMore) break;
      FUZZ_CHECK(parsed.consumed > 0 && parsed.consumed <= buffer.size());
      FUZZ_CHECK(parsed.headers.size() <= limits.max_headers);
      FUZZ_CHECK(parsed.body.size() <= limits.max_body_bytes);
      FUZZ_CHECK(parsed.version == "HTTP/1.1" || parsed.version == "HTTP/1.0");
      if (check_round_trip) CheckRoundTrip(parsed, limits);
      buffer.erase(0, parsed.consumed);
      outcome.requests.push_back(std::move(parsed));
    }
  } while (at < data.size());
  outcome.code = 0;
  outcome.error.clear();
  outcome.left = buffer;
  return outcome;
}

void Check(std::string_view data, const ParserLimits& limits) {
  // FNV-1a of the input seeds the chunk sizes, so a crash replays exactly.
  uint64_t seed = 0xcbf29ce484222325ULL;
  for (unsigned char c : data) seed = (seed ^ c) * 0x100000001b3ULL;
  seed |= 2;  // neither 0 (whole) nor 1 (byte by byte)

  const Outcome whole = Feed(data, limits, 0, /*check_round_trip=*/true);
  FUZZ_CHECK(Feed(data, limits, seed, false) == whole);
  FUZZ_CHECK(Feed(data, limits, 1, false) == whole);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  Check(input, ParserLimits{});
  // Tiny limits so that inputs of a few dozen bytes reach every limit's edge.
  Check(input, ParserLimits{.max_header_bytes = 48, .max_headers = 3, .max_body_bytes = 8});
  return 0;
}
