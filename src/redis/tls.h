// TLS for Redis connections (rediss://): an OpenSSL client context built
// from the URL's options, and non-blocking TLS on one socket.
#pragma once

#include <openssl/ssl.h>
#include <sys/types.h>

#include <memory>
#include <string>

#include "common/store_url.h"
#include "floodgate/status.h"

namespace floodgate::redis {

// An SSL_CTX configured once (CA, client certificate, verification).
// Thread-safe: sessions may be created from any thread.
class TlsContext {
 public:
  // INVALID_ARGUMENT when a file cannot be loaded (the message names the file
  // and OpenSSL's reason).
  static Result<std::shared_ptr<TlsContext>> Create(const StoreTlsOptions& options);
  ~TlsContext();
  TlsContext(const TlsContext&) = delete;
  TlsContext& operator=(const TlsContext&) = delete;

  SSL_CTX* ctx() const { return ctx_; }
  const StoreTlsOptions& options() const { return options_; }

 private:
  TlsContext(SSL_CTX* ctx, StoreTlsOptions options) : ctx_(ctx), options_(std::move(options)) {}
  SSL_CTX* ctx_;
  StoreTlsOptions options_;
};

// TLS on one connected non-blocking socket. Not thread-safe.
class TlsSession {
 public:
  enum class Io { kOk, kWantRead, kWantWrite, kClosed, kError };

  // INTERNAL when OpenSSL cannot make the session. `host` is the name (or
  // address) verified unless the options name another or turn verification off.
  static Result<std::unique_ptr<TlsSession>> Create(const TlsContext& context, int fd,
                                                    const std::string& host);
  ~TlsSession();
  TlsSession(const TlsSession&) = delete;
  TlsSession& operator=(const TlsSession&) = delete;

  // Drives the handshake: kOk when done; kWantRead/kWantWrite to be called
  // again when the socket is ready; kError with error() explaining (e.g.
  // "certificate verify failed: self-signed certificate in certificate chain").
  Io Handshake();
  // Reads up to `len` bytes: kOk with *n > 0, kWantRead/kWantWrite (nothing
  // read), kClosed (peer closed), kError.
  Io Read(char* buf, size_t len, size_t* n);
  // Writes up to `len` bytes: kOk with *n > 0, kWantRead/kWantWrite, kError.
  Io Write(const char* buf, size_t len, size_t* n);

  const std::string& error() const { return error_; }

 private:
  explicit TlsSession(SSL* ssl) : ssl_(ssl) {}
  Io Classify(int ret, const char* what);
  SSL* ssl_;
  std::string error_;
};

}  // namespace floodgate::redis
