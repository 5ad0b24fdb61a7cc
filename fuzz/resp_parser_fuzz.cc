// libFuzzer target for resp::Parser.
//
// The input is one connection's byte stream. It is parsed three ways, fed
// whole, in chunks of pseudo-random sizes derived from the input, and one byte
// at a time, each under generous and under tiny limits, and the fuzzer checks:
//  - the three feeds give the same commands, the same final status and error,
//    and leave the same bytes unconsumed (read sizes never change the outcome);
//  - every call reports sane counts: consumed within the buffer, commands of
//    1..max_args arguments of at most max_arg_bytes bytes, an error message
//    that is non-empty and fits on one line;
//  - every command, re-encoded as a multibulk request with the writer, parses
//    back to the same arguments.
// Memory errors and undefined behaviour are caught by ASan and UBSan.
//
//   clang++-14 -std=c++20 -g -O1 -fsanitize=fuzzer,address,undefined -Isrc \
//     fuzz/resp_parser_fuzz.cc src/protocol/resp/*.cc -o /tmp/resp_fuzz
//   cp -r fuzz/corpus/resp /tmp/resp_corpus && /tmp/resp_fuzz /tmp/resp_corpus
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "fuzz/chunks.h"
#include "protocol/resp/parser.h"
#include "protocol/resp/writer.h"

namespace {

using floodgate::resp::Parser;
using floodgate::resp::ParserLimits;

// Fails loudly, so libFuzzer saves the input; assert() may be compiled out.
#define FUZZ_CHECK(condition)                                                            \
  do {                                                                                   \
    if (!(condition)) {                                                                  \
      std::fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #condition); \
      std::abort();                                                                      \
    }                                                                                    \
  } while (0)

struct Outcome {
  std::vector<std::vector<std::string>> commands;
  Parser::Status last = Parser::Status::kNeedMore;
  std::string error;
  std::string left;  // bytes never consumed (when the feed ended without an error)
  bool operator==(const Outcome&) const = default;
};

// splitmix64: a deterministic stream of chunk sizes from a seed.
void CheckRoundTrip(const std::vector<std::string>& args, const ParserLimits& limits) {
  std::string encoded;
  floodgate::resp::AppendArrayHeader(&encoded, args.size());
  for (const auto& a : args) floodgate::resp::AppendBulk(&encoded, a);
  Parser parser(limits);
  std::vector<std::string_view> parsed;
  size_t consumed = 0;
  std::string error;
  FUZZ_CHECK(parser.Parse(encoded, &parsed, &consumed, &error) == Parser::Status::kCommand);
  FUZZ_CHECK(consumed == encoded.size());
  FUZZ_CHECK(parsed.size() == args.size());
  for (size_t i = 0; i < args.size(); ++i) FUZZ_CHECK(parsed[i] == args[i]);
}

// Feeds `data` in chunks: whole when seed is 0, one byte at a time when seed is 1,
// otherwise sizes drawn from the seed (mostly small, sometimes large).
Outcome Feed(std::string_view data, const ParserLimits& limits, uint64_t seed,
             bool check_round_trip) {
  Parser parser(limits);
  Outcome outcome;
  std::string buffer;
  std::vector<std::string_view> args;
  size_t at = 0;
  floodgate::fuzz::ChunkSizer chunks(seed);
  do {
    const size_t n = chunks.Next(data.size() - at);
    buffer.append(data.substr(at, n));
    at += n;
    // A fresh copy each read, as a connection buffer may move when it grows.
    buffer = std::string(buffer);
    for (;;) {
      size_t consumed = 12345;
      const Parser::Status status = parser.Parse(buffer, &args, &consumed, &outcome.error);
      outcome.last = status;
      if (status == Parser::Status::kError) {
        FUZZ_CHECK(consumed == 0);
        FUZZ_CHECK(!outcome.error.empty());
        FUZZ_CHECK(outcome.error.find_first_of("\r\n") == std::string::npos);
        // The error is sticky.
        std::string again;
        FUZZ_CHECK(parser.Parse(buffer, &args, &consumed, &again) == Parser::Status::kError);
        FUZZ_CHECK(again == outcome.error);
        // outcome.left stays empty: after an error the connection closes, and
        // blank lines skipped just before the bad line are not reported consumed.
        return outcome;
      }
      FUZZ_CHECK(consumed <= buffer.size());
      if (status == Parser::Status::kCommand) {
        FUZZ_CHECK(consumed > 0);
        FUZZ_CHECK(!args.empty() && args.size() <= limits.max_args);
        std::vector<std::string> copy;
        for (std::string_view a : args) {
          FUZZ_CHECK(a.size() <= limits.max_arg_bytes);
          copy.emplace_back(a);
        }
        if (check_round_trip) CheckRoundTrip(copy, limits);
        outcome.commands.push_back(std::move(copy));
      } else {
        FUZZ_CHECK(args.empty());
      }
      buffer.erase(0, consumed);
      if (status == Parser::Status::kNeedMore) break;
    }
  } while (at < data.size());
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
  if (whole.last == Parser::Status::kError) return;
  // What is left is the start of one command at most: never a whole command.
  if (!whole.left.empty()) FUZZ_CHECK(Feed(whole.left, limits, 0, false).commands.empty());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  Check(input, ParserLimits{});
  // Tiny limits so that inputs of a few bytes reach every limit's edge.
  Check(input, ParserLimits{.max_args = 3, .max_arg_bytes = 8, .max_inline_bytes = 16});
  return 0;
}
