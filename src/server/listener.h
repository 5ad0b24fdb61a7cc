// Listening sockets: "host:port" parsing and SO_REUSEPORT binding, so each
// event loop accepts on its own socket and the kernel spreads connections.
#pragma once

#include <string>

#include "floodgate/status.h"

namespace floodgate::server {

struct Endpoint {
  std::string host;  // numeric IPv4 or IPv6 address ("127.0.0.1", "::1", "0.0.0.0")
  int port = 0;      // 0: any free port, chosen when the first socket binds
  std::string ToString() const;
};

// Parses "host:port" or "[v6]:port". INVALID_ARGUMENT names the text.
Result<Endpoint> ParseEndpoint(const std::string& text);

// UNAVAILABLE when something already listens on endpoint's (non-zero) port,
// even another process with SO_REUSEPORT (which Listen alone would join).
Status CheckPortFree(const Endpoint& endpoint);

// A non-blocking listening socket with SO_REUSEPORT on `endpoint`. Returns
// the fd; endpoint.port is updated with the bound port (for port 0).
Result<int> Listen(Endpoint* endpoint, int backlog = 1024);

}  // namespace floodgate::server
