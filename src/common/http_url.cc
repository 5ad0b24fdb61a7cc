// ParseHttpUrl: see http_url.h. Strict on purpose: the URL goes verbatim
// into a request line, so anything that could split or bend it is refused.
#include "common/http_url.h"

#include "common/text.h"

namespace floodgate {
namespace {

Status UrlError(std::string_view text, std::string_view what) {
  return InvalidArgumentError("URL " + text::QuoteForMessage(text, 128) + ": " + std::string(what));
}

bool IsHostChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '-' || c == '_';
}

}  // namespace

std::string HttpUrl::HostHeader() const {
  const bool v6 = host.find(':') != std::string::npos;
  return (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

Result<HttpUrl> ParseHttpUrl(std::string_view text) {
  constexpr std::string_view kScheme = "http://";
  if (text.substr(0, kScheme.size()) != kScheme) {
    if (text.substr(0, 8) == "https://") {
      // TLS would need certificates and their checks here; a local relay
      // (nginx, stunnel) adds it where the gateway needs it.
      return UrlError(text, "https is not supported; deliver through a local relay on http://");
    }
    return UrlError(text, "must start with http://");
  }
  for (char c : text) {
    if (static_cast<unsigned char>(c) <= 0x20 || c == 0x7f) {
      return UrlError(text, "must not contain spaces or control characters");
    }
  }
  std::string_view rest = text.substr(kScheme.size());
  if (rest.find('#') != std::string_view::npos) return UrlError(text, "must not have a #fragment");
  const size_t slash = rest.find_first_of("/?");
  std::string_view authority = rest.substr(0, slash);
  HttpUrl url;
  if (slash != std::string_view::npos) {
    url.path = std::string(rest.substr(slash));
    if (url.path[0] == '?') url.path.insert(0, "/");
  }
  if (authority.find('@') != std::string_view::npos) {
    return UrlError(text, "user info (user:password@) is not supported");
  }
  std::string_view port;
  if (!authority.empty() && authority.front() == '[') {
    const size_t close = authority.find(']');
    if (close == std::string_view::npos) return UrlError(text, "unclosed '[' in the host");
    url.host = std::string(authority.substr(1, close - 1));
    for (char c : url.host) {
      if (text::HexDigitValue(c) < 0 && c != ':' && c != '.') {
        return UrlError(text, "bad IPv6 address");
      }
    }
    const std::string_view after = authority.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') return UrlError(text, "unexpected text after ']'");
      port = after.substr(1);
      if (port.empty()) return UrlError(text, "empty port");
    }
  } else {
    const size_t colon = authority.rfind(':');
    url.host = std::string(authority.substr(0, colon));
    if (colon != std::string_view::npos) {
      port = authority.substr(colon + 1);
      if (port.empty()) return UrlError(text, "empty port");
    }
    for (char c : url.host) {
      if (!IsHostChar(c)) return UrlError(text, "bad character in the host");
    }
  }
  if (url.host.empty()) return UrlError(text, "no host");
  if (!port.empty()) {
    int value = 0;
    for (char c : port) {
      if (c < '0' || c > '9' || port.size() > 5) return UrlError(text, "bad port");
      value = value * 10 + (c - '0');
    }
    if (value < 1 || value > 65535) return UrlError(text, "port must be between 1 and 65535");
    url.port = value;
  }
  return url;
}

}  // namespace floodgate
