// Small text helpers shared by every layer that reads or writes text:
// quoting user text inside error messages, ASCII case-insensitive
// comparison, hex digits, backslash escaping for log and metric values.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace floodgate::text {

// Returns `text` between `quote` characters with quotes, backslashes and
// control bytes escaped, cut after `max_bytes` ("..." marks the cut). Config text and zone
// names may be anything, so one bad value must not yield a megabyte of error
// or a message that breaks a log line.
inline std::string QuoteForMessage(std::string_view text, size_t max_bytes = 64, char quote = '"') {
  std::string out(1, quote);
  for (size_t i = 0; i < text.size() && i < max_bytes; ++i) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c == static_cast<unsigned char>(quote) || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20 || c == 0x7f) {
      constexpr char kHex[] = "0123456789abcdef";
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 0xf];
    } else {
      out += static_cast<char>(c);
    }
  }
  if (text.size() > max_bytes) out += "...";
  out += quote;
  return out;
}

// ASCII only: unit words and zone names are ASCII, and locale-dependent
// folding would make a config mean different things on different hosts.
inline bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    char x = a[i], y = b[i];
    if (x >= 'A' && x <= 'Z') x = static_cast<char>(x - 'A' + 'a');
    if (y >= 'A' && y <= 'Z') y = static_cast<char>(y - 'A' + 'a');
    if (x != y) return false;
  }
  return true;
}

// The value of a hex digit, or -1.
inline int HexDigitValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Replaces *out with `in` percent-decoded; with `plus_as_space`, '+' decodes
// to ' ' (a query string's form). Returns false when a '%' is not followed
// by two hex digits (*out is then unspecified). Decoded bytes may be
// anything, NUL included. URLs, query strings and a request's original URI
// are all read with it.
inline bool PercentDecode(std::string_view in, bool plus_as_space, std::string* out) {
  out->clear();
  out->reserve(in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    const char c = in[i];
    if (c == '%') {
      if (in.size() - i < 3) return false;
      const int hi = HexDigitValue(in[i + 1]);
      const int lo = HexDigitValue(in[i + 2]);
      if (hi < 0 || lo < 0) return false;
      out->push_back(static_cast<char>(hi * 16 + lo));
      i += 2;
    } else if (c == '+' && plus_as_space) {
      out->push_back(' ');
    } else {
      out->push_back(c);
    }
  }
  return true;
}

// Appends `value` with backslash, double quote and newline escaped (\\, \", \n):
// the escaping of logfmt values and of Prometheus label values.
inline void AppendBackslashEscaped(std::string& out, std::string_view value) {
  for (char c : value) {
    if (c == '\\' || c == '"') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
}

}  // namespace floodgate::text
