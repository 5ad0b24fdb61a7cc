// http://host:port/path URLs, for the outgoing HTTP POSTs (OTP delivery):
// parsed once, when the config is read, so that a bad URL is a config error
// with a position rather than a failure at the first delivery.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "floodgate/status.h"

namespace floodgate {

struct HttpUrl {
  std::string host;  // a name, an IPv4 address, or an IPv6 address without brackets
  int port = 80;
  std::string path = "/";  // with the query, if any; always starts with '/'
  // "host:port" as the Host header field wants it (brackets for IPv6).
  std::string HostHeader() const;
};

// Parses "http://host[:port][/path[?query]]". INVALID_ARGUMENT, quoting the
// faulty part, for another scheme, user info, a fragment, an empty host, a
// bad port, or bytes that cannot go on a request line (spaces, controls).
Result<HttpUrl> ParseHttpUrl(std::string_view text);

}  // namespace floodgate
