// response: building HTTP/1.1 responses into a connection's output buffer —
// the status line, header fields, Content-Length and the body — plus RFC 9457
// problem details (application/problem+json) for errors, JSON string
// escaping, and quoting of client text inside error details.
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <string_view>
#include <utility>

namespace floodgate::http {

using HeaderField = std::pair<std::string_view, std::string_view>;

// The reason phrase for the status codes this server sends ("Too Many
// Requests" for 429), or "" for any other code.
std::string_view StatusReason(int status);

// Appends one complete response to *out:
//   HTTP/1.1 <status> <reason>\r\n
//   <headers, in order>\r\n
//   Content-Length: <body size>\r\n
//   Connection: close\r\n           (only when !keep_alive)
//   \r\n
//   <body>
// An empty `reason` means StatusReason(status). `headers` must not contain
// Content-Length or Connection (both are written here). CR, LF and NUL in a
// header name or value are written as spaces, so text taken from a request
// can never start a header of its own. For 1xx, 204 and 304 responses, which
// have no body (RFC 9110), neither Content-Length nor the body is written.
void AppendResponse(std::string* out, int status, std::string_view reason,
                    std::span<const HeaderField> headers, std::string_view body, bool keep_alive);

// Appends an error response with an RFC 9457 body, e.g.
//   Content-Type: application/problem+json
//   {"type":"about:blank","title":"Bad Request","status":400,"detail":"..."}
// An empty `title` means StatusReason(status). `extra_headers` follow
// Content-Type (e.g. Retry-After, Allow).
void AppendProblem(std::string* out, int status, std::string_view title, std::string_view detail,
                   bool keep_alive, std::span<const HeaderField> extra_headers = {});

// Appends `text` escaped for use inside a JSON string (without the quotes):
// '"', '\\' and control characters are escaped (\n, \t ... or \u00XX, DEL as
// \u007f); bytes that are not valid UTF-8 become U+FFFD, so the result is
// always valid JSON whatever bytes a client sent.
void AppendJsonEscaped(std::string* out, std::string_view text);
std::string JsonEscape(std::string_view text);

// Client text for a problem detail or log line: between double quotes, with
// '"', '\\' and control bytes escaped (\xNN), cut after `max_bytes` ("..."
// marks the cut). A hostile request cannot make a huge detail or one that
// breaks a log line.
std::string QuoteForDetail(std::string_view text, size_t max_bytes = 40);

}  // namespace floodgate::http
