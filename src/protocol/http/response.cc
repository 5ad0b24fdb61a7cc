// response: see response.h.
#include "protocol/http/response.h"

#include "common/text.h"

#include <vector>

namespace floodgate::http {
namespace {

// Header text comes partly from requests (rule names, keys echoed in
// headers); a CR or LF in it would split the response.
void AppendHeaderText(std::string* out, std::string_view text) {
  for (char c : text) out->push_back((c == '\r' || c == '\n' || c == '\0') ? ' ' : c);
}

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

bool HasNoBody(int status) {
  return (status >= 100 && status < 200) || status == 204 || status == 304;
}

}  // namespace

std::string_view StatusReason(int status) {
  static constexpr std::pair<int, std::string_view> kReasons[] = {
      {100, "Continue"},
      {200, "OK"},
      {201, "Created"},
      {204, "No Content"},
      {400, "Bad Request"},
      {401, "Unauthorized"},
      {403, "Forbidden"},
      {404, "Not Found"},
      {405, "Method Not Allowed"},
      {408, "Request Timeout"},
      {413, "Content Too Large"},  // RFC 9110's name; "Payload Too Large" before it
      {415, "Unsupported Media Type"},
      {429, "Too Many Requests"},
      {431, "Request Header Fields Too Large"},
      {500, "Internal Server Error"},
      {501, "Not Implemented"},
      {503, "Service Unavailable"},
      {505, "HTTP Version Not Supported"},
  };
  for (const auto& [code, reason] : kReasons) {
    if (code == status) return reason;
  }
  return "";
}

void AppendResponse(std::string* out, int status, std::string_view reason,
                    std::span<const HeaderField> headers, std::string_view body, bool keep_alive) {
  if (reason.empty()) reason = StatusReason(status);
  out->append("HTTP/1.1 ");
  out->append(std::to_string(status));
  out->push_back(' ');  // required even when the reason phrase is empty
  AppendHeaderText(out, reason);
  out->append("\r\n");
  for (const auto& [name, value] : headers) {
    AppendHeaderText(out, name);
    out->append(": ");
    AppendHeaderText(out, value);
    out->append("\r\n");
  }
  const bool no_body = HasNoBody(status);
  if (!no_body) {
    out->append("Content-Length: ");
    out->append(std::to_string(body.size()));
    out->append("\r\n");
  }
  if (!keep_alive) out->append("Connection: close\r\n");
  out->append("\r\n");
  if (!no_body) out->append(body);
}

void AppendProblem(std::string* out, int status, std::string_view title, std::string_view detail,
                   bool keep_alive, std::span<const HeaderField> extra_headers) {
  if (title.empty()) title = StatusReason(status);
  std::string body = "{\"type\":\"about:blank\",\"title\":\"";
  AppendJsonEscaped(&body, title);
  body.append("\",\"status\":");
  body.append(std::to_string(status));
  body.append(",\"detail\":\"");
  AppendJsonEscaped(&body, detail);
  body.append("\"}");

  std::vector<HeaderField> headers;
  headers.reserve(1 + extra_headers.size());
  headers.emplace_back("Content-Type", "application/problem+json");
  headers.insert(headers.end(), extra_headers.begin(), extra_headers.end());
  AppendResponse(out, status, "", headers, body, keep_alive);
}

void AppendJsonEscaped(std::string* out, std::string_view text) {
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

std::string QuoteForDetail(std::string_view text, size_t max_bytes) {
  return text::QuoteForMessage(text, max_bytes);
}

std::string JsonEscape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  AppendJsonEscaped(&out, text);
  return out;
}

}  // namespace floodgate::http
