// A JWK Set (RFC 7517): the public keys that verify RS256 and ES256 tokens
// (RFC 7518), read from the operator's `jwt.jwks_file`.
//
// Contract:
//  - Each key is usable or the whole set is refused: an RSA key ("kty"
//    "RSA": "n", "e") verifies RS256, a P-256 key ("kty" "EC", "crv"
//    "P-256": "x", "y") ES256, and nothing else is accepted. The file is
//    the operator's, written for floodgate, so a key it cannot use is a
//    mistake to report at load, not one to skip and discover as rejected
//    tokens.
//  - A key's "use", when present, is "sig"; its "alg", when present, is the
//    one its type verifies (RS256 or ES256). "kid" is optional; no two keys
//    of one algorithm share a kid. "key_ops" and X.509 members are ignored.
//    A key holding private members ("d", "p", …) is refused: a verifier
//    needs none, and the file may be readable by more than the issuer.
//  - RSA moduli are 2048 to 8192 bits and pass OpenSSL's public-key check
//    (odd, an odd exponent above 1, no small factors). EC points must lie
//    on P-256; a coordinate shorter than 32 bytes is taken as left-padded
//    with zeros (some encoders drop leading zeros, RFC 7518 says not to).
//  - Bounds: a file of at most kMaxJwksBytes, at most kMaxJwksKeys keys.
//  - Errors are INVALID_ARGUMENT, start with the source (the path), and
//    name the key by index and kid:
//      jwks.json: keys[2] (kid "k2"): 'n' is not base64url
//  - A loaded set never changes: share it (shared_ptr<const Jwks>) across
//    threads freely. A reload (SIGHUP) loads a new set.
#pragma once

#include <openssl/types.h>

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "floodgate/status.h"

namespace floodgate::service {

inline constexpr size_t kMaxJwksBytes = 1 << 20;
inline constexpr size_t kMaxJwksKeys = 32;

// The JWS algorithms floodgate verifies (RFC 7518 section 3.1): exactly
// one per kind of key, so a key never verifies a token of another kind.
enum class JwsAlg { kRs256, kEs256, kHs256 };

// "RS256", "ES256", "HS256".
std::string_view JwsAlgName(JwsAlg alg);
// The algorithm a JWS header's "alg" names, if floodgate verifies it
// (case-sensitive, as RFC 7515 requires).
std::optional<JwsAlg> JwsAlgNamed(std::string_view name);

struct EvpPkeyFree {
  void operator()(EVP_PKEY* key) const;
};
using EvpPkeyPtr = std::unique_ptr<EVP_PKEY, EvpPkeyFree>;

// A public key of the set. Thread-safe to verify with from many threads
// (OpenSSL 3 keys are, while no one changes them).
struct Jwk {
  std::optional<std::string> kid;
  JwsAlg alg;  // kRs256 or kEs256
  EvpPkeyPtr key;
};

// Immutable; thread-safe.
class Jwks {
 public:
  explicit Jwks(std::vector<Jwk> keys) : keys_(std::move(keys)) {}

  // In the file's order.
  const std::vector<Jwk>& keys() const { return keys_; }

  // The key that verifies `alg` and is named `kid`, or nullptr.
  const Jwk* Find(JwsAlg alg, std::string_view kid) const;

 private:
  std::vector<Jwk> keys_;
};

// The set `json` describes; `source` begins every error message.
Result<std::shared_ptr<const Jwks>> ParseJwks(std::string_view json, std::string_view source);

// The set in the file at `path` (errors begin with the path): a file that
// cannot be read, or is larger than kMaxJwksBytes, is refused.
Result<std::shared_ptr<const Jwks>> LoadJwksFile(const std::string& path);

}  // namespace floodgate::service
