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

// The change log's word for it: "admin", "read" or "loopback" (a client
// certificate's name is "client_cert", server/http and server/resp's Who).
std::string_view AdminActorKind(const ServiceContext& service, AdminAccess access);

bool IsLoopback(const PeerAddress& peer);

}  // namespace floodgate::server
