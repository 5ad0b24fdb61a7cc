// JSON string escaping: see json_text.h.
#include "common/json_text.h"

namespace floodgate::json {
namespace {

// Length of the valid UTF-8 sequence at the start of `s` (1..4), or 0 with
// *bad set to the length of the maximal invalid prefix (>= 1), which becomes
// one U+FFFD as Unicode recommends (so one bad byte eats no good ones).
size_t Utf8SequenceLength(std::string_view s, size_t* bad) {
  const auto byte = [&](size_t i) { return static_cast<unsigned char>(s[i]); };
  const unsigned char b0 = byte(0);
  size_t len = 0;
  unsigned char lo = 0x80;
  unsigned char hi = 0xbf;
  if (b0 < 0x80) return 1;
  if (b0 >= 0xc2 && b0 <= 0xdf) {
    len = 2;
  } else if (b0 >= 0xe0 && b0 <= 0xef) {
    len = 3;
    if (b0 == 0xe0) lo = 0xa0;  // overlong
    if (b0 == 0xed) hi = 0x9f;  // surrogates
  } else if (b0 >= 0xf0 && b0 <= 0xf4) {
    len = 4;
    if (b0 == 0xf0) lo = 0x90;  // overlong
    if (b0 == 0xf4) hi = 0x8f;  // above U+10FFFF
  } else {
    *bad = 1;
    return 0;
  }
  for (size_t i = 1; i < len; ++i) {
    if (i >= s.size() || byte(i) < lo || byte(i) > hi) {
      *bad = i;
      return 0;
    }
    lo = 0x80;
    hi = 0xbf;
  }
  return len;
}

}  // namespace

void AppendEscaped(std::string* out, std::string_view text) {
  constexpr char kHex[] = "0123456789abcdef";
  size_t i = 0;
  while (i < text.size()) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c >= 0x80) {
      size_t bad = 0;
      const size_t len = Utf8SequenceLength(text.substr(i), &bad);
      if (len == 0) {
        out->append("\\ufffd");
        i += bad;
      } else {
        out->append(text.substr(i, len));
        i += len;
      }
      continue;
    }
    switch (c) {
      case '"':
        out->append("\\\"");
        break;
      case '\\':
        out->append("\\\\");
        break;
      case '\b':
        out->append("\\b");
        break;
      case '\f':
        out->append("\\f");
        break;
      case '\n':
        out->append("\\n");
        break;
      case '\r':
        out->append("\\r");
        break;
      case '\t':
        out->append("\\t");
        break;
      default:
        if (c < 0x20 || c == 0x7f) {
          out->append("\\u00");
          out->push_back(kHex[c >> 4]);
          out->push_back(kHex[c & 0xf]);
        } else {
          out->push_back(static_cast<char>(c));
        }
    }
    ++i;
  }
}

}  // namespace floodgate::json
