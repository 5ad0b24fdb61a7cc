// RESP2 reply encoding: each function appends one reply (or an array header)
// to a connection's output buffer.
//
// Free functions, stateless, thread-safe. The small ones are inline: they run
// once or more per reply on every connection.
#pragma once

#include <charconv>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace floodgate::resp {

namespace writer_internal {

// Appends `prefix`, the decimal `value` and CRLF: ":42\r\n", "$5\r\n", "*3\r\n".
template <typename Int>
inline void AppendPrefixedNumber(std::string* out, char prefix, Int value) {
  char digits[24];  // an int64 has at most 20 characters with its sign
  const auto result = std::to_chars(digits, digits + sizeof(digits), value);
  out->push_back(prefix);
  out->append(digits, result.ptr);
  out->append("\r\n", 2);
}

}  // namespace writer_internal

// "+OK\r\n". A simple string cannot hold line breaks: any CR or LF in `s` is
// written as a space.
void AppendSimpleString(std::string* out, std::string_view s);

// "-ERR <message>\r\n", the generic error every client shows as is. Always adds
// the ERR code, whatever `message` starts with: a message that happens to begin
// with an upper-case word ("OTP expired") is not mistaken for a code. CR and LF
// in `message` are written as spaces.
void AppendError(std::string* out, std::string_view message);

// "-<code> <message>\r\n" for errors whose code clients act on: "WRONGTYPE",
// "NOSCRIPT", "NOAUTH", "NOPROTO", "BUSY". `code` should be one upper-case word;
// blanks, CR and LF in it are written as '_' so it stays one word, and an empty
// code is written as ERR. An empty `message` writes just "-<code>\r\n".
void AppendErrorWithCode(std::string* out, std::string_view code, std::string_view message);

// ":<value>\r\n".
inline void AppendInteger(std::string* out, int64_t value) {
  writer_internal::AppendPrefixedNumber(out, ':', value);
}

// "$<size>\r\n<bytes>\r\n". Binary-safe: any bytes, CR, LF and NUL included.
inline void AppendBulk(std::string* out, std::string_view bytes) {
  writer_internal::AppendPrefixedNumber(out, '$', bytes.size());
  out->append(bytes);
  out->append("\r\n", 2);
}

// "$-1\r\n": the RESP2 null (a missing key, a nil reply).
inline void AppendNullBulk(std::string* out) { out->append("$-1\r\n", 5); }

// "*<count>\r\n"; the caller then appends exactly `count` replies.
inline void AppendArrayHeader(std::string* out, size_t count) {
  writer_internal::AppendPrefixedNumber(out, '*', count);
}

// "*-1\r\n": the RESP2 null array.
inline void AppendNullArray(std::string* out) { out->append("*-1\r\n", 5); }

}  // namespace floodgate::resp
