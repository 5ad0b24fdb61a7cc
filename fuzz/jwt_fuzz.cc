// Fuzzes the JWT verifier and the JWK Set reader with any bytes. The first
// byte picks what the rest is:
//   0  a token, verified against a fixed key set and secret: it must be
//      refused (no input here is signed, so an admitted one is a forgery),
//      with a reason;
//   1  a header and a payload (split at the first NUL), signed here with
//      the fixed HS256 secret, so that the claim checks behind the
//      signature are reached: an admitted token's header said HS256, and
//      the same token is judged the same way twice;
//   2  a JWK Set document: whatever it accepts holds 1 to kMaxJwksKeys
//      keys, each with an OpenSSL key.
// Nothing may crash, hang or leak.
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "service/subjects/base64url.h"
#include "service/subjects/jwks.h"
#include "service/subjects/jwt_verifier.h"
#include "service/subjects/strict_json.h"

namespace {

using floodgate::service::JwtReason;

constexpr char kSecret[] = "floodgate-fuzz-hs256-secret-0123";

// Public keys only (an RSA-2048 and a P-256 key): the fuzzer holds no
// private key, so it cannot sign for them.
constexpr char kJwks[] =
    R"({"keys":[{"kty":"RSA","kid":"r1","e":"AQAB","n":"oEw4C_ytnh9K9wkqHJIFE9wRhopQhck11)"
    R"(XRz8r9irJmmNftEExBfu_reRsXAWOURzAB3MJd7g6SgffCfdWD-fOO8Y-uwrReW40pk_0VA28ci32OXtVmF9)"
    R"(PdjcChVZZd8vat8IhZfHyxwWJprHXTyccSq05C7BfrE8l7yumvPkhP3umky87Y1lrneacc50x72eAO3BOdat)"
    R"(T-fctBM9HqTlej1EPHqrjgFpIL7zh4JTnX3fV9_JfyZ7g6i1TAVSNZTlsNPWXioG7cl5DAUGEaWmLVr1x05R)"
    R"(MC6DmU_Aq49luSb60C2SrC_a8Wpc4zlP7DTMpToI0ij77QTDpKYnIoLLQ"},)"
    R"({"kty":"EC","kid":"e1","crv":"P-256","x":"M2LIf1dn6q6tBHAt9DhCXHdcXqFqnmP3KdDYPeZ38SY",)"
    R"("y":"feiunf7i7igxI_MuJfGoxNiSH2za_3P4g97vPy1iFJQ"}]})";

const floodgate::service::JwtVerifier& Verifier() {
  static const std::shared_ptr<const floodgate::service::JwtVerifier> verifier = [] {
    auto keys = floodgate::service::ParseJwks(kJwks, "fuzz");
    if (!keys.ok()) __builtin_trap();
    floodgate::service::JwtOptions options;
    options.issuer = "https://id.example.com";
    options.audience = "api";
    options.hs256_secret = kSecret;
    auto made = floodgate::service::JwtVerifier::Create(options, *keys);
    if (!made.ok()) __builtin_trap();
    return *made;
  }();
  return *verifier;
}

constexpr int64_t kNows[] = {0, 1700000000, INT64_MIN, INT64_MAX};

void RefusedWithAReason(std::string_view token) {
  for (int64_t now : kNows) {
    auto reason = static_cast<JwtReason>(-1);
    if (Verifier().Verify(token, now, &reason).ok()) __builtin_trap();
    if (floodgate::service::JwtReasonLabel(reason) == "unknown") __builtin_trap();
  }
}

void SignedHere(std::string_view rest) {
  const size_t split = rest.find('\0');
  const std::string_view header = rest.substr(0, split);
  const std::string_view payload = split == std::string_view::npos ? "" : rest.substr(split + 1);
  const std::string input = floodgate::service::EncodeBase64Url(header) + "." +
                            floodgate::service::EncodeBase64Url(payload);
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  if (HMAC(EVP_sha256(), kSecret, sizeof(kSecret) - 1,
           reinterpret_cast<const unsigned char*>(input.data()), input.size(), mac,
           &size) == nullptr) {
    __builtin_trap();
  }
  const std::string token =
      input + "." +
      floodgate::service::EncodeBase64Url(std::string_view(reinterpret_cast<char*>(mac), size));
  for (int64_t now : kNows) {
    auto first = Verifier().Verify(token, now);
    auto second = Verifier().Verify(token, now);
    if (first.ok() != second.ok()) __builtin_trap();
    if (!first.ok()) continue;
    if (*first != *second) __builtin_trap();
    auto parsed = floodgate::service::ParseJsonObject(header);
    if (!parsed.ok() || (*parsed)["alg"] != "HS256") __builtin_trap();
  }
}

void KeySet(std::string_view text) {
  auto keys = floodgate::service::ParseJwks(text, "fuzz");
  if (!keys.ok()) return;
  const auto& all = (*keys)->keys();
  if (all.empty() || all.size() > floodgate::service::kMaxJwksKeys) __builtin_trap();
  for (const auto& key : all) {
    if (key.key == nullptr) __builtin_trap();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (data[0] % 3) {
    case 0:
      RefusedWithAReason(rest);
      break;
    case 1:
      SignedHere(rest);
      break;
    default:
      KeySet(rest);
      break;
  }
  return 0;
}
