// Real keys and signed tokens for the tests of the JWT verifier and the
// JWK Set reader: keys generated with OpenSSL, their public parts written
// as JWKs, and compact JWS tokens signed as an identity provider signs
// them (RS256: PKCS #1 v1.5 over SHA-256; ES256: ECDSA whose DER signature
// is rewritten as r || s; HS256: HMAC-SHA256).
#pragma once

#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/ecdsa.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/pem.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "service/subjects/base64url.h"
#include "service/subjects/jwks.h"

namespace floodgate::testing {

using service::EvpPkeyPtr;

// Generation failing is a broken test machine, not a result to test.
inline void Require(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "OpenSSL failed: %s\n", what);
    std::abort();
  }
}

inline EvpPkeyPtr NewRsaKey(size_t bits) {
  EvpPkeyPtr key(EVP_PKEY_Q_keygen(nullptr, nullptr, "RSA", bits));
  Require(key != nullptr, "RSA keygen");
  return key;
}

inline EvpPkeyPtr NewP256Key() {
  EvpPkeyPtr key(EVP_PKEY_Q_keygen(nullptr, nullptr, "EC", "P-256"));
  Require(key != nullptr, "P-256 keygen");
  return key;
}

// The big-endian bytes of a key's number parameter (`size` bytes,
// left-padded, when size > 0).
inline std::string KeyNumber(EVP_PKEY* key, const char* name, int size = 0) {
  BIGNUM* bn = nullptr;
  Require(EVP_PKEY_get_bn_param(key, name, &bn) == 1, name);
  std::string out(static_cast<size_t>(size > 0 ? size : BN_num_bytes(bn)), '\0');
  Require(BN_bn2binpad(bn, reinterpret_cast<unsigned char*>(out.data()),
                       static_cast<int>(out.size())) == static_cast<int>(out.size()),
          "bn2binpad");
  BN_free(bn);
  return out;
}

// The public JWK of an RSA or P-256 key, with `kid` when not empty.
inline nlohmann::json PublicJwk(EVP_PKEY* key, const std::string& kid = "") {
  nlohmann::json jwk;
  if (EVP_PKEY_is_a(key, "RSA")) {
    jwk["kty"] = "RSA";
    jwk["n"] = service::EncodeBase64Url(KeyNumber(key, OSSL_PKEY_PARAM_RSA_N));
    jwk["e"] = service::EncodeBase64Url(KeyNumber(key, OSSL_PKEY_PARAM_RSA_E));
  } else {
    jwk["kty"] = "EC";
    jwk["crv"] = "P-256";
    jwk["x"] = service::EncodeBase64Url(KeyNumber(key, OSSL_PKEY_PARAM_EC_PUB_X, 32));
    jwk["y"] = service::EncodeBase64Url(KeyNumber(key, OSSL_PKEY_PARAM_EC_PUB_Y, 32));
  }
  if (!kid.empty()) jwk["kid"] = kid;
  return jwk;
}

// The key's SubjectPublicKeyInfo in PEM: what an alg-confused verifier
// would take for an HMAC secret.
inline std::string PublicPem(EVP_PKEY* key) {
  BIO* bio = BIO_new(BIO_s_mem());
  Require(bio != nullptr && PEM_write_bio_PUBKEY(bio, key) == 1, "PEM_write_bio_PUBKEY");
  char* data = nullptr;
  const long size = BIO_get_mem_data(bio, &data);
  std::string out(data, static_cast<size_t>(size));
  BIO_free(bio);
  return out;
}

// SHA-256 signature of `input` under `key`, as OpenSSL gives it (PKCS #1
// v1.5 for RSA, DER for ECDSA).
inline std::string DigestSign(EVP_PKEY* key, std::string_view input) {
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  size_t size = 0;
  const auto* in = reinterpret_cast<const unsigned char*>(input.data());
  Require(ctx != nullptr && EVP_DigestSignInit(ctx, nullptr, EVP_sha256(), nullptr, key) == 1 &&
              EVP_DigestSign(ctx, nullptr, &size, in, input.size()) == 1,
          "EVP_DigestSign size");
  std::string out(size, '\0');
  Require(EVP_DigestSign(ctx, reinterpret_cast<unsigned char*>(out.data()), &size, in,
                         input.size()) == 1,
          "EVP_DigestSign");
  out.resize(size);
  EVP_MD_CTX_free(ctx);
  return out;
}

inline std::string SignRs256(EVP_PKEY* key, std::string_view input) {
  return DigestSign(key, input);
}

// ECDSA's DER (SEQUENCE of two INTEGERs) rewritten as JWS wants it: r and
// s as 32 big-endian bytes each.
inline std::string SignEs256(EVP_PKEY* key, std::string_view input) {
  const std::string der = DigestSign(key, input);
  const auto* p = reinterpret_cast<const unsigned char*>(der.data());
  ECDSA_SIG* sig = d2i_ECDSA_SIG(nullptr, &p, static_cast<long>(der.size()));
  Require(sig != nullptr, "d2i_ECDSA_SIG");
  std::string out(64, '\0');
  auto* raw = reinterpret_cast<unsigned char*>(out.data());
  Require(BN_bn2binpad(ECDSA_SIG_get0_r(sig), raw, 32) == 32 &&
              BN_bn2binpad(ECDSA_SIG_get0_s(sig), raw + 32, 32) == 32,
          "r || s");
  ECDSA_SIG_free(sig);
  return out;
}

inline std::string SignHs256(std::string_view secret, std::string_view input) {
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  Require(HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()),
               reinterpret_cast<const unsigned char*>(input.data()), input.size(), mac,
               &size) != nullptr,
          "HMAC");
  return std::string(reinterpret_cast<char*>(mac), size);
}

// "header.payload" of a token: the JSON texts as given, base64url'd.
inline std::string SigningInput(std::string_view header_json, std::string_view payload_json) {
  return service::EncodeBase64Url(header_json) + "." + service::EncodeBase64Url(payload_json);
}

// A whole token: the signing input, '.', and `signature` base64url'd.
inline std::string Token(std::string_view signing_input, std::string_view signature) {
  return std::string(signing_input) + "." + service::EncodeBase64Url(signature);
}

}  // namespace floodgate::testing
