// JwtVerifier: see jwt_verifier.h.
//
// The checks run from the cheapest and least trusting up: the token's
// shape, the header (which only chooses a key), the signature, and only
// then the payload, so no claim of an unsigned payload is ever parsed, let
// alone believed. Every OpenSSL failure clears the thread's error queue:
// a verification that fails is an answer here, and a stale error left
// queued would be read by the next TLS call on the same loop thread as
// its own.
#include "service/subjects/jwt_verifier.h"

#include <openssl/bn.h>
#include <openssl/crypto.h>
#include <openssl/ecdsa.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <cmath>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/enum_table.h"
#include "common/text.h"
#include "service/subjects/base64url.h"
#include "service/subjects/strict_json.h"

namespace floodgate::service {
namespace {

using nlohmann::json;

constexpr EnumName<JwtReason> kJwtReasonLabels[] = {
    {JwtReason::kMalformed, "malformed"},      {JwtReason::kUnsupportedAlg, "unsupported_alg"},
    {JwtReason::kUnknownKey, "unknown_key"},   {JwtReason::kBadSignature, "bad_signature"},
    {JwtReason::kExpired, "expired"},          {JwtReason::kNotYetValid, "not_yet_valid"},
    {JwtReason::kWrongIssuer, "wrong_issuer"}, {JwtReason::kWrongAudience, "wrong_audience"}};

constexpr size_t kP256CoordinateBytes = 32;
constexpr size_t kHs256Bytes = 32;

struct MdCtxFree {
  void operator()(EVP_MD_CTX* ctx) const { EVP_MD_CTX_free(ctx); }
};
struct EcdsaSigFree {
  void operator()(ECDSA_SIG* sig) const { ECDSA_SIG_free(sig); }
};

const unsigned char* Bytes(std::string_view s) {
  return reinterpret_cast<const unsigned char*>(s.data());
}

// JWS writes an ES256 signature as r || s, 32 bytes each (RFC 7518
// section 3.4); OpenSSL verifies the DER form of X9.62. nullopt: not 64
// bytes.
std::optional<std::string> EcdsaDer(std::string_view raw) {
  if (raw.size() != 2 * kP256CoordinateBytes) return std::nullopt;
  std::unique_ptr<ECDSA_SIG, EcdsaSigFree> sig(ECDSA_SIG_new());
  BIGNUM* r = BN_bin2bn(Bytes(raw), kP256CoordinateBytes, nullptr);
  BIGNUM* s = BN_bin2bn(Bytes(raw.substr(kP256CoordinateBytes)), kP256CoordinateBytes, nullptr);
  if (!sig || r == nullptr || s == nullptr || ECDSA_SIG_set0(sig.get(), r, s) != 1) {
    BN_free(r);
    BN_free(s);
    return std::nullopt;
  }
  const int size = i2d_ECDSA_SIG(sig.get(), nullptr);
  if (size <= 0) return std::nullopt;
  std::string der(static_cast<size_t>(size), '\0');
  unsigned char* out = reinterpret_cast<unsigned char*>(der.data());
  if (i2d_ECDSA_SIG(sig.get(), &out) != size) return std::nullopt;
  return der;
}

// Whether `signature` (in OpenSSL's form for the key) signs `input` with
// SHA-256 under `key`: PKCS #1 v1.5 for an RSA key, ECDSA for an EC key.
bool VerifiesWith(EVP_PKEY* key, std::string_view input, std::string_view signature) {
  std::unique_ptr<EVP_MD_CTX, MdCtxFree> ctx(EVP_MD_CTX_new());
  const bool ok =
      ctx && EVP_DigestVerifyInit(ctx.get(), nullptr, EVP_sha256(), nullptr, key) == 1 &&
      EVP_DigestVerify(ctx.get(), Bytes(signature), signature.size(), Bytes(input), input.size()) ==
          1;
  if (!ok) ERR_clear_error();
  return ok;
}

bool HmacVerifies(std::string_view secret, std::string_view input, std::string_view signature) {
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int mac_size = 0;
  if (HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()), Bytes(input), input.size(),
           mac, &mac_size) == nullptr) {
    ERR_clear_error();
    return false;
  }
  return mac_size == kHs256Bytes && signature.size() == kHs256Bytes &&
         CRYPTO_memcmp(mac, signature.data(), kHs256Bytes) == 0;
}

// A NumericDate as whole seconds, a fraction rounded toward refusing the
// token; nullopt when `value` is not a number.
std::optional<int64_t> NumericDate(const json& value, bool round_up) {
  if (value.is_number_unsigned()) {
    const uint64_t u = value.get<uint64_t>();
    return u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())
               ? std::numeric_limits<int64_t>::max()
               : static_cast<int64_t>(u);
  }
  if (value.is_number_integer()) return value.get<int64_t>();
  if (!value.is_number_float()) return std::nullopt;
  const double d = round_up ? std::ceil(value.get<double>()) : std::floor(value.get<double>());
  // 2^63: the first double past every int64.
  constexpr double kTwo63 = 9223372036854775808.0;
  if (d >= kTwo63) return std::numeric_limits<int64_t>::max();
  if (d < -kTwo63) return std::numeric_limits<int64_t>::min();
  return static_cast<int64_t>(d);
}

// The value of a claim as a subject part, if it can be one.
std::optional<std::string> ClaimText(const json& value) {
  if (value.is_string()) return value.get<std::string>();
  if (value.is_boolean()) return value.get<bool>() ? "true" : "false";
  if (value.is_number_unsigned()) return std::to_string(value.get<uint64_t>());
  if (value.is_number_integer()) return std::to_string(value.get<int64_t>());
  return std::nullopt;
}

std::string Quote(std::string_view text) { return text::QuoteForMessage(text); }

}  // namespace

std::string_view JwtReasonLabel(JwtReason reason) {
  return ValueIn(kJwtReasonLabels, reason, "unknown");
}

Result<std::shared_ptr<const JwtVerifier>> JwtVerifier::Open(const JwtOptions& options) {
  std::shared_ptr<const Jwks> keys;
  if (!options.jwks_file.empty()) {
    Result<std::shared_ptr<const Jwks>> loaded = LoadJwksFile(options.jwks_file);
    if (!loaded.ok()) return loaded.status();
    keys = std::move(*loaded);
  }
  return Create(options, std::move(keys));
}

Result<std::shared_ptr<const JwtVerifier>> JwtVerifier::Create(const JwtOptions& options,
                                                               std::shared_ptr<const Jwks> keys) {
  if (options.leeway_s < 0 || options.leeway_s > kMaxJwtLeewayS) {
    return InvalidArgumentError("jwt: leeway must be 0 to " + std::to_string(kMaxJwtLeewayS) +
                                " s, not " + std::to_string(options.leeway_s));
  }
  if (!options.hs256_secret.empty() && options.hs256_secret.size() < kMinHs256SecretBytes) {
    return InvalidArgumentError("jwt: the HS256 secret is " +
                                std::to_string(options.hs256_secret.size()) + " bytes; at least " +
                                std::to_string(kMinHs256SecretBytes) + " are required");
  }
  if (keys == nullptr && options.hs256_secret.empty()) {
    return InvalidArgumentError(
        "jwt: neither a jwks_file nor an HS256 secret: no token can verify");
  }
  return std::shared_ptr<const JwtVerifier>(new JwtVerifier(options, std::move(keys)));
}

JwtVerifier::JwtVerifier(const JwtOptions& options, std::shared_ptr<const Jwks> keys)
    : options_(options), keys_(std::move(keys)) {}

JwtVerifier::~JwtVerifier() {
  OPENSSL_cleanse(options_.hs256_secret.data(), options_.hs256_secret.size());
}

Result<JwtClaims> JwtVerifier::Verify(std::string_view token, int64_t now_s,
                                      JwtReason* reason) const {
  auto fail = [reason](JwtReason why, std::string message) -> Status {
    if (reason != nullptr) *reason = why;
    return InvalidArgumentError(std::move(message));
  };
  if (token.size() > kMaxJwtBytes) {
    return fail(JwtReason::kMalformed, "token is " + std::to_string(token.size()) +
                                           " bytes; at most " + std::to_string(kMaxJwtBytes));
  }
  const size_t dot1 = token.find('.');
  const size_t dot2 = dot1 == std::string_view::npos ? dot1 : token.find('.', dot1 + 1);
  if (dot2 == std::string_view::npos || token.find('.', dot2 + 1) != std::string_view::npos) {
    return fail(JwtReason::kMalformed, "not a compact JWS (header.payload.signature)");
  }
  const std::string_view signing_input = token.substr(0, dot2);
  const std::optional<std::string> header_bytes = DecodeBase64Url(token.substr(0, dot1));
  const std::optional<std::string> payload_bytes =
      DecodeBase64Url(token.substr(dot1 + 1, dot2 - dot1 - 1));
  const std::optional<std::string> signature = DecodeBase64Url(token.substr(dot2 + 1));
  if (!header_bytes) return fail(JwtReason::kMalformed, "header is not base64url");
  if (!payload_bytes) return fail(JwtReason::kMalformed, "payload is not base64url");
  if (!signature) return fail(JwtReason::kMalformed, "signature is not base64url");

  Result<json> header = ParseJsonObject(*header_bytes);
  if (!header.ok()) return fail(JwtReason::kMalformed, "header: " + header.status().message());
  const auto alg_member = header->find("alg");
  if (alg_member == header->end() || !alg_member->is_string()) {
    return fail(JwtReason::kMalformed, "header has no \"alg\" string");
  }
  const std::string& alg_name = alg_member->get_ref<const std::string&>();
  const std::optional<JwsAlg> alg = JwsAlgNamed(alg_name);
  if (!alg) {
    return fail(JwtReason::kUnsupportedAlg,
                "alg " + Quote(alg_name) +
                    (alg_name == "none" ? " is refused: every token must be signed"
                                        : " is not supported (RS256, ES256, HS256)"));
  }
  if (header->contains("crit")) {
    return fail(JwtReason::kMalformed, "header has \"crit\": floodgate knows no extension");
  }
  const auto kid_member = header->find("kid");
  if (kid_member != header->end() && !kid_member->is_string()) {
    return fail(JwtReason::kMalformed, "header \"kid\" is not a string");
  }
  const std::string* kid =
      kid_member == header->end() ? nullptr : kid_member->get_ptr<const std::string*>();

  if (*alg == JwsAlg::kHs256) {
    if (options_.hs256_secret.empty()) {
      return fail(JwtReason::kUnknownKey, "HS256: no secret is configured");
    }
    if (!HmacVerifies(options_.hs256_secret, signing_input, *signature)) {
      return fail(JwtReason::kBadSignature, "HS256 signature does not verify");
    }
  } else {
    // The keys to try: the one the kid names, or every key of the algorithm.
    std::vector<const Jwk*> candidates;
    if (keys_ != nullptr && kid != nullptr) {
      if (const Jwk* key = keys_->Find(*alg, *kid)) candidates.push_back(key);
    } else if (keys_ != nullptr) {
      for (const Jwk& key : keys_->keys()) {
        if (key.alg == *alg) candidates.push_back(&key);
      }
    }
    const std::string alg_text(JwsAlgName(*alg));
    if (candidates.empty()) {
      return fail(JwtReason::kUnknownKey,
                  "no " + alg_text + " key" + (kid != nullptr ? " with kid " + Quote(*kid) : ""));
    }
    std::string der;
    std::string_view presented = *signature;
    if (*alg == JwsAlg::kEs256) {
      std::optional<std::string> converted = EcdsaDer(*signature);
      if (!converted) return fail(JwtReason::kBadSignature, "ES256 signature is not 64 bytes");
      der = std::move(*converted);
      presented = der;
    }
    bool verified = false;
    for (const Jwk* key : candidates) {
      if (VerifiesWith(key->key.get(), signing_input, presented)) {
        verified = true;
        break;
      }
    }
    if (!verified) return fail(JwtReason::kBadSignature, alg_text + " signature does not verify");
  }

  Result<json> payload = ParseJsonObject(*payload_bytes);
  if (!payload.ok()) return fail(JwtReason::kMalformed, "payload: " + payload.status().message());

  const auto exp_member = payload->find("exp");
  if (exp_member == payload->end()) return fail(JwtReason::kMalformed, "no \"exp\" claim");
  const std::optional<int64_t> exp = NumericDate(*exp_member, /*round_up=*/false);
  if (!exp) return fail(JwtReason::kMalformed, "\"exp\" is not a number");
  const __int128 now = now_s;
  const int64_t leeway = options_.leeway_s;
  if (now >= static_cast<__int128>(*exp) + leeway) {
    return fail(JwtReason::kExpired, "expired at " + std::to_string(*exp) + " (now " +
                                         std::to_string(now_s) + ", leeway " +
                                         std::to_string(leeway) + " s)");
  }
  const auto nbf_member = payload->find("nbf");
  if (nbf_member != payload->end()) {
    const std::optional<int64_t> nbf = NumericDate(*nbf_member, /*round_up=*/true);
    if (!nbf) return fail(JwtReason::kMalformed, "\"nbf\" is not a number");
    if (now < static_cast<__int128>(*nbf) - leeway) {
      return fail(JwtReason::kNotYetValid, "not valid before " + std::to_string(*nbf) + " (now " +
                                               std::to_string(now_s) + ", leeway " +
                                               std::to_string(leeway) + " s)");
    }
  }

  if (!options_.issuer.empty()) {
    const auto iss = payload->find("iss");
    if (iss == payload->end()) {
      return fail(JwtReason::kWrongIssuer, "no \"iss\"; the issuer is " + Quote(options_.issuer));
    }
    if (!iss->is_string()) {
      return fail(JwtReason::kWrongIssuer,
                  "iss is not a string; the issuer is " + Quote(options_.issuer));
    }
    if (iss->get_ref<const std::string&>() != options_.issuer) {
      return fail(JwtReason::kWrongIssuer, "iss " + Quote(iss->get_ref<const std::string&>()) +
                                               " is not " + Quote(options_.issuer));
    }
  }
  if (!options_.audience.empty()) {
    const auto aud = payload->find("aud");
    bool named = false;
    if (aud != payload->end() && aud->is_string()) {
      named = aud->get_ref<const std::string&>() == options_.audience;
    } else if (aud != payload->end() && aud->is_array()) {
      for (const json& one : *aud) {
        if (one.is_string() && one.get_ref<const std::string&>() == options_.audience) named = true;
      }
    }
    if (!named) {
      const std::string audience = Quote(options_.audience);
      if (aud == payload->end()) {
        return fail(JwtReason::kWrongAudience, "no \"aud\"; the audience is " + audience);
      }
      if (aud->is_string()) {
        return fail(JwtReason::kWrongAudience,
                    "aud " + Quote(aud->get_ref<const std::string&>()) + " is not " + audience);
      }
      if (aud->is_array()) {
        return fail(JwtReason::kWrongAudience, "aud (an array of " + std::to_string(aud->size()) +
                                                   ") does not hold " + audience);
      }
      return fail(JwtReason::kWrongAudience,
                  "aud is neither a string nor an array; the audience is " + audience);
    }
  }

  JwtClaims claims;
  for (const auto& [name, value] : payload->items()) {
    if (std::optional<std::string> text = ClaimText(value)) claims.emplace(name, std::move(*text));
  }
  return claims;
}

}  // namespace floodgate::service
