// ReloadingTlsCredentials: see grpc_tls_credentials.h.
//
// gRPC's C++ API has no credentials that fetch a new certificate per
// handshake; its C API does (a certificate config fetcher). The C++
// ServerCredentials interface a server calls to add its port is
// implemented here over those C credentials, as gRPC's own secure
// credentials do.
#include "server/grpc/grpc_tls_credentials.h"

#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpcpp/security/server_credentials.h>

#include <mutex>
#include <string>

namespace floodgate::server {
namespace {

class ReloadingCredentials final : public grpc::ServerCredentials {
 public:
  explicit ReloadingCredentials(const TlsContextHolder* holder) : holder_(holder) {
    const TlsFiles& files = holder->Current()->files();
    const grpc_ssl_client_certificate_request_type request =
        files.client_ca_file.empty() ? GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE
        : files.require_client_cert  ? GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY
                                     : GRPC_SSL_REQUEST_CLIENT_CERTIFICATE_AND_VERIFY;
    grpc_ssl_server_credentials_options* options =
        grpc_ssl_server_credentials_create_options_using_config_fetcher(request, &Fetch, this);
    creds_ = grpc_ssl_server_credentials_create_with_options(options);  // takes options
  }
  ~ReloadingCredentials() override { grpc_server_credentials_release(creds_); }

  void SetAuthMetadataProcessor(
      const std::shared_ptr<grpc::AuthMetadataProcessor>& /*processor*/) override {
    // Not used: the RateLimitService front authenticates by certificate only.
  }

 private:
  int AddPortToServer(const std::string& addr, grpc_server* server) override {
    return grpc_server_add_http2_port(server, addr.c_str(), creds_);
  }

  // Called by gRPC when the server starts and at each new connection's
  // handshake, on its own threads: a new config when the holder's context
  // changed since the last one given.
  static grpc_ssl_certificate_config_reload_status Fetch(
      void* self_ptr, grpc_ssl_server_certificate_config** config) {
    auto* self = static_cast<ReloadingCredentials*>(self_ptr);
    std::shared_ptr<const TlsContext> current = self->holder_->Current();
    std::lock_guard<std::mutex> lock(self->mu_);
    if (current == self->served_) return GRPC_SSL_CERTIFICATE_CONFIG_RELOAD_UNCHANGED;
    const TlsPem& pem = current->pem();
    grpc_ssl_pem_key_cert_pair pair{pem.key.c_str(), pem.cert_chain.c_str()};
    // gRPC copies the strings and owns the config it is given. It insists
    // on root certificates even when it asks for no client certificate;
    // with no client CAs, the server's own chain stands in, never used.
    const std::string& roots = pem.client_cas.empty() ? pem.cert_chain : pem.client_cas;
    *config = grpc_ssl_server_certificate_config_create(roots.c_str(), &pair, 1);
    if (*config == nullptr) return GRPC_SSL_CERTIFICATE_CONFIG_RELOAD_FAIL;
    self->served_ = std::move(current);
    return GRPC_SSL_CERTIFICATE_CONFIG_RELOAD_NEW;
  }

  const TlsContextHolder* const holder_;
  grpc_server_credentials* creds_ = nullptr;
  std::mutex mu_;
  std::shared_ptr<const TlsContext> served_;  // the context last given to gRPC
};

}  // namespace

std::shared_ptr<grpc::ServerCredentials> ReloadingTlsCredentials(const TlsContextHolder* holder) {
  return std::make_shared<ReloadingCredentials>(holder);
}

}  // namespace floodgate::server
