// The gRPC front's TLS: server credentials that serve the listeners'
// current certificate (TlsContextHolder), so a reload (SIGHUP, or the
// files changing on disk) reaches gRPC as it reaches RESP and HTTP: each
// new connection's handshake asks for the certificate (gRPC's certificate
// config fetcher), open connections keep theirs.
//
// gRPC's own TLS: TLS 1.2 and 1.3, ALPN h2, its cipher list (ECDHE with
// AES-GCM). With tls.client_ca_file, client certificates are asked for and
// verified (required with tls.require_client_cert); whether they are asked
// for is fixed when the front starts.
#pragma once

#include <memory>

#include "server/net/tls_context.h"

namespace grpc {
class ServerCredentials;
}  // namespace grpc

namespace floodgate::server {

// Credentials for ServerBuilder::AddListeningPort. `holder` must outlive
// the gRPC server they are given to (and the credentials).
std::shared_ptr<grpc::ServerCredentials> ReloadingTlsCredentials(const TlsContextHolder* holder);

}  // namespace floodgate::server
