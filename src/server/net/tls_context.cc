// TlsContext: see tls_context.h.
#include "server/net/tls_context.h"

#include <openssl/asn1.h>
#include <openssl/bn.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <memory>
#include <utility>

#include "common/openssl_error.h"

namespace floodgate::server {
namespace {

// Mozilla's "intermediate" TLS 1.2 suites (forward secrecy, AEAD only);
// TLS 1.3's are OpenSSL's defaults, all AEAD.
constexpr const char* kTls12Ciphers =
    "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:"
    "ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384:"
    "ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305";

Status FileError(std::string_view what, const std::string& path, const std::string& why) {
  return InvalidArgumentError("tls." + std::string(what) + " '" + path + "': " + why);
}

// Whether `path` can be opened for reading; the reason when not.
std::string Unreadable(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return std::string(std::strerror(errno));
  std::fclose(f);
  return "";
}

// ALPN: the first protocol of ours the client offers; none of ours offered
// (or none configured): no ALPN in the answer, the handshake goes on.
int SelectAlpn(SSL* ssl, const unsigned char** out, unsigned char* outlen, const unsigned char* in,
               unsigned int inlen, void*) {
  const auto* ours = static_cast<const std::string*>(SSL_get_app_data(ssl));
  if (ours == nullptr || ours->empty()) return SSL_TLSEXT_ERR_NOACK;
  unsigned char* selected = nullptr;
  if (SSL_select_next_proto(&selected, outlen, reinterpret_cast<const unsigned char*>(ours->data()),
                            static_cast<unsigned int>(ours->size()), in,
                            inlen) != OPENSSL_NPN_NEGOTIATED) {
    return SSL_TLSEXT_ERR_NOACK;
  }
  *out = selected;
  return SSL_TLSEXT_ERR_OK;
}

// The ALPN lists connections point at (SSL_set_app_data): one per kind,
// never freed.
const std::string* InternedAlpn(std::string_view alpn) {
  static const std::string* const kHttp = new std::string(AlpnFor("http"));
  static const std::string* const kGrpc = new std::string(AlpnFor("grpc"));
  if (alpn == *kHttp) return kHttp;
  if (alpn == *kGrpc) return kGrpc;
  return nullptr;
}

}  // namespace

std::string AlpnFor(std::string_view protocol) {
  if (protocol == "http") return std::string("\x08http/1.1", 9);
  if (protocol == "grpc") return std::string("\x02h2", 3);
  return "";
}

TlsContext::~TlsContext() { SSL_CTX_free(ctx_); }

Result<std::shared_ptr<const TlsContext>> TlsContext::Load(const TlsFiles& files, int64_t now_s) {
  if (files.cert_file.empty()) return InvalidArgumentError("tls.cert_file is required");
  if (files.key_file.empty()) return InvalidArgumentError("tls.key_file is required");
  if (files.require_client_cert && files.client_ca_file.empty()) {
    return InvalidArgumentError(
        "tls.require_client_cert needs tls.client_ca_file (the CAs client certificates chain to)");
  }
  if (std::string why = Unreadable(files.cert_file); !why.empty()) {
    return FileError("cert_file", files.cert_file, why);
  }
  if (std::string why = Unreadable(files.key_file); !why.empty()) {
    return FileError("key_file", files.key_file, why);
  }
  if (!files.client_ca_file.empty()) {
    if (std::string why = Unreadable(files.client_ca_file); !why.empty()) {
      return FileError("client_ca_file", files.client_ca_file, why);
    }
  }
  std::shared_ptr<TlsContext> context(new TlsContext());
  context->files_ = files;
  SSL_CTX* ctx = SSL_CTX_new(TLS_server_method());
  if (ctx == nullptr) return InternalError("cannot create a TLS context: " + OpenSslError());
  context->ctx_ = ctx;
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  SSL_CTX_set_options(
      ctx, SSL_OP_CIPHER_SERVER_PREFERENCE | SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_COMPRESSION);
  if (SSL_CTX_set_cipher_list(ctx, kTls12Ciphers) != 1) {
    return InternalError("cannot set the TLS 1.2 ciphers: " + OpenSslError());
  }
  // Partial writes and a moving write buffer: the loops write what the
  // socket takes and keep the rest in the connection's output.
  SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER |
                            SSL_MODE_RELEASE_BUFFERS);
  if (SSL_CTX_use_certificate_chain_file(ctx, files.cert_file.c_str()) != 1) {
    return FileError("cert_file", files.cert_file,
                     "not a PEM certificate (chain): " + OpenSslError());
  }
  // Read first, so that a key of another certificate is told apart from a
  // file that holds no key.
  EVP_PKEY* key = nullptr;
  if (std::FILE* f = std::fopen(files.key_file.c_str(), "rb"); f != nullptr) {
    key = PEM_read_PrivateKey(f, nullptr, nullptr, nullptr);
    std::fclose(f);
  }
  if (key == nullptr) {
    return FileError("key_file", files.key_file, "not a PEM private key: " + OpenSslError());
  }
  const bool matches = X509_check_private_key(SSL_CTX_get0_certificate(ctx), key) == 1;
  ERR_clear_error();
  const bool used = matches && SSL_CTX_use_PrivateKey(ctx, key) == 1;
  EVP_PKEY_free(key);
  if (!matches) {
    return FileError("key_file", files.key_file,
                     "does not match the certificate in '" + files.cert_file + "'");
  }
  if (!used) return FileError("key_file", files.key_file, OpenSslError());
  if (!files.client_ca_file.empty()) {
    if (SSL_CTX_load_verify_locations(ctx, files.client_ca_file.c_str(), nullptr) != 1) {
      return FileError("client_ca_file", files.client_ca_file,
                       "not PEM CA certificates: " + OpenSslError());
    }
    STACK_OF(X509_NAME)* names = SSL_load_client_CA_file(files.client_ca_file.c_str());
    if (names != nullptr) SSL_CTX_set_client_CA_list(ctx, names);
    SSL_CTX_set_verify(
        ctx, SSL_VERIFY_PEER | (files.require_client_cert ? SSL_VERIFY_FAIL_IF_NO_PEER_CERT : 0),
        nullptr);
  }
  SSL_CTX_set_alpn_select_cb(ctx, SelectAlpn, nullptr);

  // The leaf's serial and validity, for the logs, the reload's message and
  // the warnings.
  X509* leaf = SSL_CTX_get0_certificate(ctx);
  if (BIGNUM* bn = ASN1_INTEGER_to_BN(X509_get0_serialNumber(leaf), nullptr); bn != nullptr) {
    if (char* hex = BN_bn2hex(bn); hex != nullptr) {
      context->serial_ = hex;
      OPENSSL_free(hex);
    }
    BN_free(bn);
  }
  std::tm end{};
  if (ASN1_TIME_to_tm(X509_get0_notAfter(leaf), &end) == 1) {
    context->not_after_s_ = static_cast<int64_t>(timegm(&end));
    const int64_t left = context->not_after_s_ - now_s;
    if (left <= 0) {
      context->warnings_.push_back("the certificate in '" + files.cert_file + "' expired " +
                                   std::to_string(-left / 86'400) +
                                   " days ago: clients that check it will refuse it");
    } else if (left < kTlsExpiryWarningS) {
      context->warnings_.push_back("the certificate in '" + files.cert_file + "' expires in " +
                                   std::to_string(left / 86'400) + " days");
    }
  }
  return std::shared_ptr<const TlsContext>(std::move(context));
}

SSL* TlsContext::NewConnection(std::string_view alpn) const {
  SSL* ssl = SSL_new(ctx_);
  if (ssl == nullptr) return nullptr;
  SSL_set_accept_state(ssl);
  SSL_set_app_data(ssl, const_cast<std::string*>(InternedAlpn(alpn)));
  return ssl;
}

Status TlsContextHolder::Reload(const TlsFiles& files, int64_t now_s) {
  auto next = TlsContext::Load(files, now_s);
  if (!next.ok()) return next.status();
  std::lock_guard<std::mutex> lock(mu_);
  current_ = std::move(*next);
  return Status::Ok();
}

}  // namespace floodgate::server
