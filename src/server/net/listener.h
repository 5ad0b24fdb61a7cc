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
// `serve --replace` skips it to join the sockets of the floodgate it takes
// over from (docs/operations.md, "Graceful restart"). The error says
// "cannot listen <what>on <endpoint>".
Status CheckPortFree(const Endpoint& endpoint, const std::string& what = "");

// What a port found busy adds to its error: how to take over on purpose.
inline constexpr const char* kReplaceHint =
    " (another floodgate? start the new one with --replace to take over from it)";

// Whether net.ipv4.tcp_migrate_req reads 1 in this network namespace:
// closing a listening socket then hands the connections in its accept
// queue (and its handshakes) to another socket of its SO_REUSEPORT group
// instead of resetting them. Unknown (an older kernel, no /proc): false,
// with *known false.
bool TcpMigrateReq(bool* known);

// A non-blocking listening socket with SO_REUSEPORT on `endpoint`. Returns
// the fd; endpoint.port is updated with the bound port (for port 0).
Result<int> Listen(Endpoint* endpoint, int backlog = 1024);

}  // namespace floodgate::server
