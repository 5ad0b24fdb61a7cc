// response: see response.h.
#include "protocol/http/response.h"

#include "common/json_text.h"
#include "common/text.h"

#include <vector>

namespace floodgate::http {
namespace {

// Header text comes partly from requests (rule names, keys echoed in
// headers); a CR or LF in it would split the response.
void AppendHeaderText(std::string* out, std::string_view text) {
  for (char c : text) out->push_back((c == '\r' || c == '\n' || c == '\0') ? ' ' : c);
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
      {409, "Conflict"},
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

void AppendJsonEscaped(std::string* out, std::string_view text) { json::AppendEscaped(out, text); }

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
