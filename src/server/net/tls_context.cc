// TlsContext: see tls_context.h.
#include "server/net/tls_context.h"

#include <openssl/asn1.h>
#include <openssl/bn.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <memory>
#include <utility>

#include "common/openssl_error.h"

namespace floodgate::server {
namespace {

// Mozilla's "intermediate" TLS 1.2 suites (forward secrecy, AEAD only),
// and TLS 1.3's in its order: AES-128-GCM first (OpenSSL's default puts
// AES-256 first, a little more work per record for no gain a rate limiter's
// replies need).
constexpr const char* kTls12Ciphers =
    "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:"
    "ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384:"
    "ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305";
constexpr const char* kTls13Suites =
    "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256";

Status FileError(std::string_view what, const std::string& path, const std::string& why) {
  return InvalidArgumentError("tls." + std::string(what) + " '" + path + "': " + why);
}

// The whole of `path` (a certificate or key: small), or why it cannot be
// read. Every file is read once, and the context built from those bytes:
// the listeners and the gRPC front (which takes PEM text) then serve the
// same certificate even if a file changes while it is being read.
std::string ReadSmallFile(const std::string& path, std::string* out) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return std::string(std::strerror(errno));
  out->clear();
  char buf[4096];
  size_t n = 0;
  while ((n = std::fread(buf, 1, sizeof(buf), f)) > 0) {
    out->append(buf, n);
    if (out->size() > kMaxTlsFileBytes) {
      std::fclose(f);
      return "larger than " + std::to_string(kMaxTlsFileBytes / (1024 * 1024)) +
             " MiB: not a certificate or key";
    }
  }
  const bool failed = std::ferror(f) != 0;
  std::fclose(f);
  return failed ? "read error" : "";
}

// A memory BIO over `pem` (which must outlive it).
struct Bio {
  explicit Bio(const std::string& pem)
      : bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()))) {}
  ~Bio() { BIO_free(bio); }
  BIO* bio;
};

// The certificate, then its chain, from `pem` into ctx (as
// SSL_CTX_use_certificate_chain_file does from a file).
bool UseCertificateChain(SSL_CTX* ctx, const std::string& pem) {
  Bio in(pem);
  X509* leaf = PEM_read_bio_X509_AUX(in.bio, nullptr, nullptr, nullptr);
  if (leaf == nullptr) return false;
  const bool used = SSL_CTX_use_certificate(ctx, leaf) == 1;
  X509_free(leaf);
  if (!used) return false;
  SSL_CTX_clear_chain_certs(ctx);
  while (X509* ca = PEM_read_bio_X509(in.bio, nullptr, nullptr, nullptr)) {
    if (SSL_CTX_add0_chain_cert(ctx, ca) != 1) {
      X509_free(ca);
      return false;
    }
  }
  // The loop ends on "no start line": the end of the file, not an error.
  ERR_clear_error();
  return true;
}

// The CAs in `pem`, trusted for client certificates and named to clients
// (the certificate request's list); false when there is none or one is bad.
bool UseClientCas(SSL_CTX* ctx, const std::string& pem) {
  Bio in(pem);
  X509_STORE* store = SSL_CTX_get_cert_store(ctx);
  STACK_OF(X509_NAME)* names = sk_X509_NAME_new_null();
  int count = 0;
  bool ok = names != nullptr;
  while (ok) {
    X509* ca = PEM_read_bio_X509(in.bio, nullptr, nullptr, nullptr);
    if (ca == nullptr) break;
    ok = X509_STORE_add_cert(store, ca) == 1;
    if (X509_NAME* name = X509_NAME_dup(X509_get_subject_name(ca)); ok && name != nullptr) {
      sk_X509_NAME_push(names, name);
    }
    X509_free(ca);
    ++count;
  }
  const unsigned long last = ERR_peek_last_error();
  const bool clean_end =
      ERR_GET_LIB(last) == ERR_LIB_PEM && ERR_GET_REASON(last) == PEM_R_NO_START_LINE;
  if (ok && count > 0 && (last == 0 || clean_end)) {
    ERR_clear_error();
    SSL_CTX_set_client_CA_list(ctx, names);
    return true;
  }
  sk_X509_NAME_pop_free(names, X509_NAME_free);
  return false;
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

TlsContext::~TlsContext() {
  SSL_CTX_free(ctx_);
  // The key's text is not left in freed memory.
  if (!pem_.key.empty()) OPENSSL_cleanse(pem_.key.data(), pem_.key.size());
}

std::vector<std::string> VerifiedClientNames(SSL* ssl) {
  std::vector<std::string> names;
  if (ssl == nullptr || SSL_get_verify_result(ssl) != X509_V_OK) return names;
  X509* cert = SSL_get0_peer_certificate(ssl);
  if (cert == nullptr) return names;
  char cn[256];
  const int n = X509_NAME_get_text_by_NID(X509_get_subject_name(cert), NID_commonName, cn,
                                          static_cast<int>(sizeof(cn)));
  // A name with a NUL in it would read as a shorter one: never a name.
  if (n > 0 && std::memchr(cn, 0, static_cast<size_t>(n)) == nullptr) {
    names.emplace_back(cn, static_cast<size_t>(n));
  }
  auto* sans =
      static_cast<GENERAL_NAMES*>(X509_get_ext_d2i(cert, NID_subject_alt_name, nullptr, nullptr));
  for (int i = 0; sans != nullptr && i < sk_GENERAL_NAME_num(sans); ++i) {
    const GENERAL_NAME* san = sk_GENERAL_NAME_value(sans, i);
    if (san->type != GEN_DNS && san->type != GEN_EMAIL && san->type != GEN_URI) continue;
    const ASN1_IA5STRING* text = san->d.ia5;
    const std::string_view name(reinterpret_cast<const char*>(ASN1_STRING_get0_data(text)),
                                static_cast<size_t>(ASN1_STRING_length(text)));
    if (!name.empty() && name.find('\0') == std::string_view::npos) names.emplace_back(name);
  }
  GENERAL_NAMES_free(sans);
  return names;
}

Result<std::shared_ptr<const TlsContext>> TlsContext::Load(const TlsFiles& files, int64_t now_s) {
  if (files.cert_file.empty()) return InvalidArgumentError("tls.cert_file is required");
  if (files.key_file.empty()) return InvalidArgumentError("tls.key_file is required");
  if (files.require_client_cert && files.client_ca_file.empty()) {
    return InvalidArgumentError(
        "tls.require_client_cert needs tls.client_ca_file (the CAs client certificates chain to)");
  }
  std::shared_ptr<TlsContext> context(new TlsContext());
  context->files_ = files;
  TlsPem& pem = context->pem_;
  if (std::string why = ReadSmallFile(files.cert_file, &pem.cert_chain); !why.empty()) {
    return FileError("cert_file", files.cert_file, why);
  }
  if (std::string why = ReadSmallFile(files.key_file, &pem.key); !why.empty()) {
    return FileError("key_file", files.key_file, why);
  }
  if (!files.client_ca_file.empty()) {
    if (std::string why = ReadSmallFile(files.client_ca_file, &pem.client_cas); !why.empty()) {
      return FileError("client_ca_file", files.client_ca_file, why);
    }
  }
  SSL_CTX* ctx = SSL_CTX_new(TLS_server_method());
  if (ctx == nullptr) return InternalError("cannot create a TLS context: " + OpenSslError());
  context->ctx_ = ctx;
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  SSL_CTX_set_options(
      ctx, SSL_OP_CIPHER_SERVER_PREFERENCE | SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_COMPRESSION);
  if (SSL_CTX_set_cipher_list(ctx, kTls12Ciphers) != 1) {
    return InternalError("cannot set the TLS 1.2 ciphers: " + OpenSslError());
  }
  if (SSL_CTX_set_ciphersuites(ctx, kTls13Suites) != 1) {
    return InternalError("cannot set the TLS 1.3 suites: " + OpenSslError());
  }
  // Partial writes and a moving write buffer: the loops write what the
  // socket takes and keep the rest in the connection's output. Read-ahead:
  // one read() takes whatever records have arrived, not a record's header
  // and then its body (two system calls a request); what it read past the
  // record is SSL_has_pending's. The record buffers stay while a connection
  // is busy (allocating them per record cost more than the cipher) and are
  // given back once it is quiet (EventLoop::SweepTimers, SSL_free_buffers).
  SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  SSL_CTX_set_read_ahead(ctx, 1);
  if (!UseCertificateChain(ctx, pem.cert_chain)) {
    return FileError("cert_file", files.cert_file,
                     "not a PEM certificate (chain): " + OpenSslError());
  }
  // Read first, so that a key of another certificate is told apart from a
  // file that holds no key.
  EVP_PKEY* key = nullptr;
  {
    Bio in(pem.key);
    key = PEM_read_bio_PrivateKey(in.bio, nullptr, nullptr, nullptr);
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
    if (!UseClientCas(ctx, pem.client_cas)) {
      return FileError("client_ca_file", files.client_ca_file,
                       "not PEM CA certificates: " + OpenSslError());
    }
    SSL_CTX_set_verify(
        ctx, SSL_VERIFY_PEER | (files.require_client_cert ? SSL_VERIFY_FAIL_IF_NO_PEER_CERT : 0),
        nullptr);
  }
  // A session resumed with client certificates asked for must name the
  // context it was made in, or OpenSSL refuses it (internal_error): nginx
  // and other proxies resume by default.
  static constexpr unsigned char kSessionContext[] = "floodgate";
  SSL_CTX_set_session_id_context(ctx, kSessionContext, sizeof(kSessionContext) - 1);
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
