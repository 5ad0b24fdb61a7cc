// Who may use the control plane (docs/control-plane.md): the admin token
// reads and writes, the read token reads; with no admin token set, only
// loopback clients may (like Redis's protected mode). Tokens compare in
// constant time.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "server/context/service_context.h"
#include "server/net/peer_address.h"
#include "server/net/session.h"
#include "service/control/control_plane.h"

namespace floodgate::server {

enum class AdminAccess {
  kNone,   // no credentials that count here: 401
  kRead,   // the read token: GETs and FG.STATE / FG.OVERRIDE GET only
  kWrite,  // the admin token, or a loopback client when no admin token is set
};

// Access of a client that presents `token` ("" : none) from `peer`, over a
// connection whose verified client certificate has `client_names` (mTLS):
// one that admin.client_names lists is an admin identity (kWrite) with or
// without a token.
AdminAccess AdminAccessOf(const ServiceContext& service, std::string_view token,
                          const PeerAddress& peer,
                          const std::vector<std::string>& client_names = {});

// The name among `client_names` that admin.client_names lists; empty: none.
std::string_view AdminClientName(const ServiceContext& service,
                                 const std::vector<std::string>& client_names);

// Why a token presented by `peer` must be refused however good it is: sent
// in clear (`secure` false) from another host, with admin.allow_plaintext
// off. Empty: not refused for that.
std::string PlaintextTokenRefusal(const ServiceContext& service, std::string_view token,
                                  const PeerAddress& peer, bool secure);

// Who makes a change, for the change log: "client_cert" with the name
// admin.client_names lists (the connection's verified certificate), else
// "admin", "read" or "loopback" (no admin token set) as `access` says; and
// from where.
service::Actor AdminActor(const ServiceContext& service, AdminAccess access,
                          const ConnectionRef& self);

bool IsLoopback(const PeerAddress& peer);

}  // namespace floodgate::server
