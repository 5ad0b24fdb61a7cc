// OpenSSL client contexts and non-blocking sessions. See tls.h.
//
// SIGPIPE: OpenSSL writes with write(2), which raises SIGPIPE on a socket
// the peer closed; the client's I/O threads block SIGPIPE, so such a write
// fails with EPIPE instead of killing the process.
#include "redis/tls.h"

#include <arpa/inet.h>
#include <openssl/err.h>
#include <openssl/x509v3.h>

#include <cerrno>
#include <cstring>

#include "common/openssl_error.h"

namespace floodgate::redis {
namespace {

bool IsIpAddress(const std::string& host) {
  unsigned char buf[sizeof(in6_addr)];
  return inet_pton(AF_INET, host.c_str(), buf) == 1 || inet_pton(AF_INET6, host.c_str(), buf) == 1;
}

}  // namespace

Result<std::shared_ptr<TlsContext>> TlsContext::Create(const StoreTlsOptions& options) {
  SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
  if (ctx == nullptr) return InternalError("cannot create a TLS context: " + OpenSslError());
  std::shared_ptr<TlsContext> context(new TlsContext(ctx, options));
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  // Partial and moving writes: the output buffer may grow between a write
  // that wanted to be retried and its retry.
  SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  if (options.verify) {
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nullptr);
    if (!options.ca_file.empty()) {
      if (SSL_CTX_load_verify_locations(ctx, options.ca_file.c_str(), nullptr) != 1) {
        return InvalidArgumentError("TLS: cannot load CA file '" + options.ca_file +
                                    "': " + OpenSslError());
      }
    } else if (SSL_CTX_set_default_verify_paths(ctx) != 1) {
      return InvalidArgumentError("TLS: cannot load the system CA certificates: " + OpenSslError());
    }
  } else {
    SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, nullptr);
  }
  if (!options.cert_file.empty()) {
    if (SSL_CTX_use_certificate_chain_file(ctx, options.cert_file.c_str()) != 1) {
      return InvalidArgumentError("TLS: cannot load certificate file '" + options.cert_file +
                                  "': " + OpenSslError());
    }
    if (SSL_CTX_use_PrivateKey_file(ctx, options.key_file.c_str(), SSL_FILETYPE_PEM) != 1) {
      return InvalidArgumentError("TLS: cannot load key file '" + options.key_file +
                                  "': " + OpenSslError());
    }
    if (SSL_CTX_check_private_key(ctx) != 1) {
      return InvalidArgumentError("TLS: key file '" + options.key_file +
                                  "' does not match certificate '" + options.cert_file + "'");
    }
  }
  return context;
}

TlsContext::~TlsContext() { SSL_CTX_free(ctx_); }

Result<std::unique_ptr<TlsSession>> TlsSession::Create(const TlsContext& context, int fd,
                                                       const std::string& host) {
  ERR_clear_error();
  SSL* ssl = SSL_new(context.ctx());
  if (ssl == nullptr) return InternalError("cannot create a TLS session: " + OpenSslError());
  std::unique_ptr<TlsSession> session(new TlsSession(ssl));
  if (SSL_set_fd(ssl, fd) != 1) return InternalError("TLS: " + OpenSslError());
  SSL_set_connect_state(ssl);
  const StoreTlsOptions& options = context.options();
  const std::string& name = options.server_name.empty() ? host : options.server_name;
  const bool is_ip = IsIpAddress(name);
  // SNI carries names only (RFC 6066).
  if (!is_ip) SSL_set_tlsext_host_name(ssl, name.c_str());
  if (options.verify) {
    X509_VERIFY_PARAM* param = SSL_get0_param(ssl);
    const int ok = is_ip ? X509_VERIFY_PARAM_set1_ip_asc(param, name.c_str())
                         : X509_VERIFY_PARAM_set1_host(param, name.c_str(), 0);
    if (ok != 1) return InternalError("TLS: cannot set the name to verify: " + OpenSslError());
  }
  return session;
}

TlsSession::~TlsSession() { SSL_free(ssl_); }

TlsSession::Io TlsSession::Classify(int ret, const char* what) {
  const int err = SSL_get_error(ssl_, ret);
  switch (err) {
    case SSL_ERROR_WANT_READ:
      return Io::kWantRead;
    case SSL_ERROR_WANT_WRITE:
      return Io::kWantWrite;
    case SSL_ERROR_ZERO_RETURN:
      return Io::kClosed;
    case SSL_ERROR_SYSCALL: {
      const int saved = errno;
      ERR_clear_error();
      if (saved == 0 || ret == 0) {
        error_ = std::string(what) + ": connection closed by the server";
        return Io::kClosed;
      }
      error_ = std::string(what) + ": " + std::strerror(saved);
      return Io::kError;
    }
    default: {
      std::string reason = OpenSslError();
      const long verify = SSL_get_verify_result(ssl_);
      if (verify != X509_V_OK) {
        reason += ": ";
        reason += X509_verify_cert_error_string(verify);
      }
      error_ = std::string(what) + ": " + reason;
      return Io::kError;
    }
  }
}

TlsSession::Io TlsSession::Handshake() {
  ERR_clear_error();
  errno = 0;
  const int ret = SSL_connect(ssl_);
  if (ret == 1) return Io::kOk;
  const Io io = Classify(ret, "TLS handshake");
  // A peer that closes during the handshake (e.g. it refused our
  // certificate) is a failed handshake, not a clean close.
  if (io == Io::kClosed) {
    if (error_.empty()) error_ = "TLS handshake: connection closed by the server";
    return Io::kError;
  }
  return io;
}

TlsSession::Io TlsSession::Read(char* buf, size_t len, size_t* n) {
  ERR_clear_error();
  errno = 0;
  *n = 0;
  const int ret = SSL_read(ssl_, buf, static_cast<int>(len));
  if (ret > 0) {
    *n = static_cast<size_t>(ret);
    return Io::kOk;
  }
  return Classify(ret, "TLS read");
}

TlsSession::Io TlsSession::Write(const char* buf, size_t len, size_t* n) {
  ERR_clear_error();
  errno = 0;
  *n = 0;
  const int ret = SSL_write(ssl_, buf, static_cast<int>(std::min<size_t>(len, 1 << 30)));
  if (ret > 0) {
    *n = static_cast<size_t>(ret);
    return Io::kOk;
  }
  const Io io = Classify(ret, "TLS write");
  return io == Io::kClosed ? Io::kError : io;
}

}  // namespace floodgate::redis
