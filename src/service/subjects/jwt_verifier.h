// JwtVerifier: the claims of a signed JWT (RFC 7519) that a rule's key may
// use as a subject part (`{jwt:sub}`), after the token has been verified.
// There is no unverified mode: a token that fails any check has no claims.
//
// Contract of Verify:
//  - Compact JWS only (RFC 7515 section 7.1): three base64url parts with
//    no padding, at most kMaxJwtBytes in all. The header and the payload
//    are JSON objects naming no member twice (strict_json.h).
//  - The header's "alg" is RS256, ES256 or HS256 and picks the key: RS256
//    and ES256 verify only with the key set's keys of that algorithm, HS256
//    only with the configured secret. A public key is never an HMAC secret
//    (the confusion of RFC 8725 section 2.1) and "none" is refused. A
//    header with "crit" is refused (no extension is understood); "jwk",
//    "jku", "x5u" and "x5c" are ignored: keys come from the configuration
//    only.
//  - "kid", when present, selects the one key of the set with that kid and
//    algorithm. When absent, every key of the set with the token's
//    algorithm is tried in the file's order (at most kMaxJwksKeys). HS256
//    ignores "kid": there is one secret.
//  - The signature is checked before the payload is read as JSON.
//  - Claims, with `leeway` seconds of clock skew allowed either way:
//    "exp" is required (a token that never expires would name a subject
//    for ever once leaked) and the token is expired when now >= exp +
//    leeway; "nbf", when present, makes it not yet valid when now < nbf -
//    leeway. Both are JSON numbers (NumericDate); a fraction counts
//    against the token (exp rounded down, nbf up). "iat" is not checked.
//    "iss" must equal `issuer` when one is configured; "aud" must equal
//    `audience`, or be an array holding it, when one is configured
//    (without one, "aud" is not read).
//  - The answer maps each top-level claim to text: a string as it is (any
//    UTF-8, escapes decoded, NUL included: bounding and escaping it is
//    the key template's business), an integer in decimal, a boolean as
//    "true"/"false". Claims of any other
//    type (null, a fraction, an object, an array such as a list "aud")
//    are left out: they cannot be a subject part, so such a part is
//    missing.
//  - `now_s` is the caller's clock reading (seconds since the epoch):
//    Verify reads no clock.
//
// Immutable and thread-safe. A reload (SIGHUP) makes a new verifier (Open
// reads the key set file again) and publishes it in place of the old one.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>

#include "floodgate/status.h"
#include "service/subjects/jwks.h"

namespace floodgate::service {

inline constexpr size_t kMaxJwtBytes = 8 * 1024;
inline constexpr int64_t kDefaultJwtLeewayS = 30;
inline constexpr int64_t kMaxJwtLeewayS = 300;
// RFC 7518 section 3.2: an HS256 key is at least as long as the hash.
inline constexpr size_t kMinHs256SecretBytes = 32;

// The `jwt:` section of the config, field for field; the HS256 secret is
// read from the environment by whoever reads the config.
struct JwtOptions {
  std::string jwks_file;                  // a JWK Set (jwks.h); empty: no RS256 or ES256
  std::string issuer;                     // empty: "iss" is not checked
  std::string audience;                   // empty: "aud" is not checked
  int64_t leeway_s = kDefaultJwtLeewayS;  // 0 to kMaxJwtLeewayS
  std::string hs256_secret;               // raw bytes; empty: no HS256
};

// Why a token was refused: one metric label each (JwtReasonLabel).
enum class JwtReason {
  kMalformed,       // not a compact JWS, bad base64url or JSON, too large, no exp, "crit"
  kUnsupportedAlg,  // "alg" is none, or one floodgate does not verify
  kUnknownKey,      // no key for the token's algorithm and kid
  kBadSignature,    // no key of the token's algorithm and kid verifies it
  kExpired,
  kNotYetValid,
  kWrongIssuer,
  kWrongAudience,
};

// "malformed", "unsupported_alg", "unknown_key", "bad_signature", "expired",
// "not_yet_valid", "wrong_issuer", "wrong_audience".
std::string_view JwtReasonLabel(JwtReason reason);

// Top-level claim name -> its value as text (see the contract above).
using JwtClaims = std::map<std::string, std::string, std::less<>>;

class JwtVerifier {
 public:
  // Reads options.jwks_file (when set) and makes the verifier. Errors:
  // the file's (jwks.h), or the options' (as Create).
  static Result<std::shared_ptr<const JwtVerifier>> Open(const JwtOptions& options);

  // A verifier for `keys` (null: none) and the options, whose jwks_file is
  // not read (it names where `keys` came from). INVALID_ARGUMENT, starting
  // "jwt: ", when there is neither a key set nor a secret, the secret is
  // shorter than kMinHs256SecretBytes, or the leeway is out of range.
  static Result<std::shared_ptr<const JwtVerifier>> Create(const JwtOptions& options,
                                                           std::shared_ptr<const Jwks> keys);

  JwtVerifier(const JwtVerifier&) = delete;
  JwtVerifier& operator=(const JwtVerifier&) = delete;
  // Wipes the secret's copy.
  ~JwtVerifier();

  // The claims of `token` at `now_s`, or INVALID_ARGUMENT with a short
  // message (of the token, only header and claim values, quoted and cut
  // to 64 bytes) and, when `reason` is given, why (a Status has no room
  // for it; metrics count by it).
  Result<JwtClaims> Verify(std::string_view token, int64_t now_s,
                           JwtReason* reason = nullptr) const;

 private:
  JwtVerifier(const JwtOptions& options, std::shared_ptr<const Jwks> keys);

  JwtOptions options_;
  std::shared_ptr<const Jwks> keys_;
};

}  // namespace floodgate::service
