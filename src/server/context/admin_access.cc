#include "server/context/admin_access.h"

#include <sys/socket.h>

#include <string>
#include <utility>

namespace floodgate::server {

bool IsLoopback(const PeerAddress& peer) {
  if (peer.family == AF_INET) return peer.ip[0] == 127;
  if (peer.family == AF_INET6) {
    static constexpr std::array<uint8_t, 16> kLoopback6 = {0, 0, 0, 0, 0, 0, 0, 0,
                                                           0, 0, 0, 0, 0, 0, 0, 1};
    if (peer.ip == kLoopback6) return true;
    // ::ffff:127.x.y.z, an IPv4 loopback client on a dual-stack socket.
    for (int i = 0; i < 10; ++i) {
      if (peer.ip[i] != 0) return false;
    }
    return peer.ip[10] == 0xff && peer.ip[11] == 0xff && peer.ip[12] == 127;
  }
  return false;
}

std::string_view AdminClientName(const ServiceContext& service,
                                 const std::vector<std::string>& client_names) {
  for (const std::string& name : client_names) {
    for (const std::string& admin : service.admin_client_names) {
      if (name == admin) return admin;
    }
  }
  return {};
}

AdminAccess AdminAccessOf(const ServiceContext& service, std::string_view token,
                          const PeerAddress& peer, const std::vector<std::string>& client_names) {
  if (!AdminClientName(service, client_names).empty()) return AdminAccess::kWrite;
  if (service.admin_token.empty()) {
    return IsLoopback(peer) ? AdminAccess::kWrite : AdminAccess::kNone;
  }
  if (token.empty()) return AdminAccess::kNone;
  // Both compared whatever the first gives, so the time says nothing of which matched.
  const bool admin = ConstantTimeEquals(token, service.admin_token);
  const bool read = !service.read_token.empty() && ConstantTimeEquals(token, service.read_token);
  if (admin) return AdminAccess::kWrite;
  if (read) return AdminAccess::kRead;
  return AdminAccess::kNone;
}

std::string PlaintextTokenRefusal(const ServiceContext& service, std::string_view token,
                                  const PeerAddress& peer, bool secure) {
  // An unknown peer is a session no loop serves (the dispatch tests, the
  // fuzzers): every served connection has its address.
  if (token.empty() || secure || service.admin_allow_plaintext || IsLoopback(peer) ||
      peer.family == 0) {
    return "";
  }
  return "an admin token is refused over plaintext from another host (anyone on the path could "
         "read it): connect over TLS (listen_tls) or set admin.allow_plaintext: true";
}

service::Actor AdminActor(const ServiceContext& service, AdminAccess access,
                          const ConnectionRef& self) {
  std::string peer = self.Peer().ToString();
  if (const std::string_view name = AdminClientName(service, self.ClientNames()); !name.empty()) {
    return service::Actor{"client_cert", std::move(peer), std::string(name)};
  }
  const char* kind = service.admin_token.empty()     ? "loopback"
                     : access == AdminAccess::kWrite ? "admin"
                                                     : "read";
  return service::Actor{kind, std::move(peer)};
}

}  // namespace floodgate::server
