// TlsContext: what the listeners serve TLS with (the config's `tls:`
// section; docs/operations.md, "TLS"): the certificate chain and its key,
// checked to match, and optionally the CAs that client certificates must
// chain to (mTLS). TLS 1.2 and 1.3 only, the server's cipher order, no
// renegotiation, no compression, no session tickets across reloads (a new
// context has a new ticket key).
//
// A loaded context is immutable: a reload makes a new one, and each
// connection keeps the one it began with (OpenSSL counts the references),
// so replacing the files drops no open connection. TlsContextHolder is the
// listeners' current one.
//
// ALPN: a connection names the protocols its listener speaks
// (AlpnFor: "http/1.1" for HTTP, none for RESP); a client offering ALPN
// without one of them is still served (as curl and redis-cli expect), the
// connection answering without ALPN.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "floodgate/status.h"

typedef struct ssl_ctx_st SSL_CTX;
typedef struct ssl_st SSL;

namespace floodgate::server {

// The files a `tls:` section names.
struct TlsFiles {
  std::string cert_file;             // PEM: the certificate, then its chain
  std::string key_file;              // PEM: its private key (unencrypted)
  std::string client_ca_file;        // PEM CAs for client certificates; empty: none asked
  bool require_client_cert = false;  // needs client_ca_file
};

// How long before its end a certificate is warned about.
inline constexpr int64_t kTlsExpiryWarningS = 14 * 86'400;
// A certificate, key or CA file larger than this is refused as not one.
inline constexpr size_t kMaxTlsFileBytes = 4 * 1024 * 1024;

// The files' contents as loaded: what the gRPC front, which takes PEM
// text, serves (grpc_tls_credentials.h).
struct TlsPem {
  std::string cert_chain;
  std::string key;
  std::string client_cas;  // empty: no client certificates asked
};

class TlsContext {
 public:
  // Loads `files` at `now_s` (seconds since the epoch). INVALID_ARGUMENT
  // naming the file and what is wrong with it: missing or unreadable, not
  // PEM, a key that does not match the certificate, require_client_cert
  // without client_ca_file. An expired or soon-expiring certificate loads,
  // with a warning (warnings()): refusing it would turn an operator's late
  // renewal into an outage.
  static Result<std::shared_ptr<const TlsContext>> Load(const TlsFiles& files, int64_t now_s);
  ~TlsContext();
  TlsContext(const TlsContext&) = delete;
  TlsContext& operator=(const TlsContext&) = delete;

  // A new server-side connection object (SSL_accept state) for one socket's
  // bytes; `alpn` is AlpnFor's wire list for its listener (empty: none).
  // Null only when OpenSSL is out of memory.
  SSL* NewConnection(std::string_view alpn) const;

  SSL_CTX* ctx() const { return ctx_; }
  const TlsFiles& files() const { return files_; }
  const TlsPem& pem() const { return pem_; }
  // The leaf certificate's serial number in upper-case hex, as
  // `openssl x509 -serial` prints it, and its end of validity.
  const std::string& serial() const { return serial_; }
  int64_t not_after_s() const { return not_after_s_; }
  // "certificate … expired …" / "… expires in N days": said at load.
  const std::vector<std::string>& warnings() const { return warnings_; }

 private:
  TlsContext() = default;

  SSL_CTX* ctx_ = nullptr;
  TlsFiles files_;
  TlsPem pem_;
  std::string serial_;
  int64_t not_after_s_ = 0;
  std::vector<std::string> warnings_;
};

// The names a verified client certificate gives on `ssl` once its handshake
// is done: the subject's CN and the DNS, email and URI SANs. None without a
// certificate or when it did not verify (against client_ca_file).
std::vector<std::string> VerifiedClientNames(SSL* ssl);

// ALPN's wire form (length-prefixed names) of the protocols a listener
// speaks: "http" -> "http/1.1", "grpc" -> "h2", anything else none.
std::string AlpnFor(std::string_view protocol);

// The listeners' current context. Thread-safe.
class TlsContextHolder {
 public:
  explicit TlsContextHolder(std::shared_ptr<const TlsContext> first) : current_(std::move(first)) {}
  std::shared_ptr<const TlsContext> Current() const {
    std::lock_guard<std::mutex> lock(mu_);
    return current_;
  }
  // Loads `files` again; on success new connections use the new context,
  // on failure the old one stays and the error says why (the caller logs
  // and counts it).
  Status Reload(const TlsFiles& files, int64_t now_s);

 private:
  mutable std::mutex mu_;
  std::shared_ptr<const TlsContext> current_;
};

}  // namespace floodgate::server
