// JWK Sets: see jwks.h.
//
// Keys are built with OpenSSL 3's EVP_PKEY_fromdata from named parameters
// (the modulus and exponent; the curve and the uncompressed point), the
// interface that replaces the deprecated RSA_* and EC_KEY_* setters, then
// checked with EVP_PKEY_public_check: for RSA that is the SP 800-56B public
// check (n odd and composite, with no small factors; e odd and above 1),
// for EC that the point lies on the curve and is not the point at infinity.
// An exponent of 1 would make every padded digest its own signature, so
// the check is what stands between a bad file and forged tokens.
#include "service/subjects/jwks.h"

#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/param_build.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "common/enum_table.h"
#include "common/text.h"
#include "service/subjects/base64url.h"
#include "service/subjects/strict_json.h"

namespace floodgate::service {
namespace {

using nlohmann::json;

constexpr EnumName<JwsAlg> kJwsAlgNames[] = {
    {JwsAlg::kRs256, "RS256"}, {JwsAlg::kEs256, "ES256"}, {JwsAlg::kHs256, "HS256"}};

constexpr int kMinRsaBits = 2048;
constexpr int kMaxRsaBits = 8192;
constexpr size_t kP256CoordinateBytes = 32;

// The members of a private JWK (RFC 7518 sections 6.2.2 and 6.3.2).
constexpr std::string_view kPrivateMembers[] = {"d", "p", "q", "dp", "dq", "qi", "oth"};

struct BnFree {
  void operator()(BIGNUM* bn) const { BN_free(bn); }
};
struct ParamBuildFree {
  void operator()(OSSL_PARAM_BLD* bld) const { OSSL_PARAM_BLD_free(bld); }
};
struct ParamsFree {
  void operator()(OSSL_PARAM* params) const { OSSL_PARAM_free(params); }
};
struct PkeyCtxFree {
  void operator()(EVP_PKEY_CTX* ctx) const { EVP_PKEY_CTX_free(ctx); }
};

// One key of the file being read: where errors about it point.
class KeyReader {
 public:
  KeyReader(std::string_view source, size_t index, const json& key)
      : key_(key), where_(std::string(source) + ": keys[" + std::to_string(index) + "]") {}

  Status Fail(const std::string& why) const { return InvalidArgumentError(where_ + ": " + why); }

  // Once the kid is known, errors name it too.
  void NameKid(const std::string& kid) { where_ += " (kid " + text::QuoteForMessage(kid) + ")"; }

  // The string member `name`: nullopt when absent; an error when not a string.
  Result<std::optional<std::string>> OptionalString(std::string_view name) const {
    const auto it = key_.find(name);
    if (it == key_.end()) return std::optional<std::string>();
    if (!it->is_string()) return Fail("'" + std::string(name) + "' is not a string");
    return std::optional<std::string>(it->get<std::string>());
  }

  Result<std::string> RequiredString(std::string_view name) const {
    Result<std::optional<std::string>> value = OptionalString(name);
    if (!value.ok()) return value.status();
    if (!value->has_value()) return Fail("no '" + std::string(name) + "'");
    return std::move(**value);
  }

  // The bytes of the base64url member `name`.
  Result<std::string> RequiredBytes(std::string_view name) const {
    Result<std::string> value = RequiredString(name);
    if (!value.ok()) return value.status();
    std::optional<std::string> bytes = DecodeBase64Url(*value);
    if (!bytes) return Fail("'" + std::string(name) + "' is not base64url");
    if (bytes->empty()) return Fail("'" + std::string(name) + "' is empty");
    return std::move(*bytes);
  }

 private:
  const json& key_;
  std::string where_;
};

// A public key made of `params` for `type` ("RSA", "EC"), and checked.
EvpPkeyPtr CheckedKey(const char* type, OSSL_PARAM_BLD* bld) {
  std::unique_ptr<OSSL_PARAM, ParamsFree> params(OSSL_PARAM_BLD_to_param(bld));
  std::unique_ptr<EVP_PKEY_CTX, PkeyCtxFree> ctx(
      EVP_PKEY_CTX_new_from_name(nullptr, type, nullptr));
  if (!params || !ctx || EVP_PKEY_fromdata_init(ctx.get()) != 1) return nullptr;
  EVP_PKEY* raw = nullptr;
  if (EVP_PKEY_fromdata(ctx.get(), &raw, EVP_PKEY_PUBLIC_KEY, params.get()) != 1) return nullptr;
  EvpPkeyPtr key(raw);
  std::unique_ptr<EVP_PKEY_CTX, PkeyCtxFree> check(
      EVP_PKEY_CTX_new_from_pkey(nullptr, key.get(), nullptr));
  if (!check || EVP_PKEY_public_check(check.get()) != 1) return nullptr;
  return key;
}

// CheckedKey, or null with OpenSSL's error queue cleared: the refusal is
// reported here, and a reload may run on a thread that also does TLS,
// which would read a stale error as its own.
EvpPkeyPtr KeyFromParams(const char* type, OSSL_PARAM_BLD* bld) {
  EvpPkeyPtr key = CheckedKey(type, bld);
  if (!key) ERR_clear_error();
  return key;
}

BIGNUM* Bignum(const std::string& big_endian) {
  return BN_bin2bn(reinterpret_cast<const unsigned char*>(big_endian.data()),
                   static_cast<int>(big_endian.size()), nullptr);
}

Result<EvpPkeyPtr> RsaKey(const KeyReader& reader) {
  Result<std::string> n = reader.RequiredBytes("n");
  if (!n.ok()) return n.status();
  Result<std::string> e = reader.RequiredBytes("e");
  if (!e.ok()) return e.status();
  std::unique_ptr<BIGNUM, BnFree> n_bn(Bignum(*n));
  std::unique_ptr<BIGNUM, BnFree> e_bn(Bignum(*e));
  if (!n_bn || !e_bn) return InternalError("out of memory reading an RSA key");
  // Before anything costs: a huge modulus is refused by its length alone.
  const int bits = BN_num_bits(n_bn.get());
  if (bits < kMinRsaBits || bits > kMaxRsaBits) {
    return reader.Fail("an RSA key of " + std::to_string(bits) + " bits; " +
                       std::to_string(kMinRsaBits) + " to " + std::to_string(kMaxRsaBits) +
                       " are accepted");
  }
  std::unique_ptr<OSSL_PARAM_BLD, ParamBuildFree> bld(OSSL_PARAM_BLD_new());
  if (!bld || OSSL_PARAM_BLD_push_BN(bld.get(), OSSL_PKEY_PARAM_RSA_N, n_bn.get()) != 1 ||
      OSSL_PARAM_BLD_push_BN(bld.get(), OSSL_PKEY_PARAM_RSA_E, e_bn.get()) != 1) {
    return InternalError("out of memory reading an RSA key");
  }
  EvpPkeyPtr key = KeyFromParams("RSA", bld.get());
  if (!key) return reader.Fail("'n' and 'e' are not a valid RSA public key");
  return key;
}

// A coordinate as the 32 bytes of the uncompressed point.
Result<std::string> P256Coordinate(const KeyReader& reader, std::string_view name) {
  Result<std::string> bytes = reader.RequiredBytes(name);
  if (!bytes.ok()) return bytes.status();
  size_t zeros = 0;
  while (zeros < bytes->size() && (*bytes)[zeros] == '\0') ++zeros;
  if (bytes->size() - zeros > kP256CoordinateBytes) {
    return reader.Fail("'" + std::string(name) + "' is " + std::to_string(bytes->size()) +
                       " bytes; a P-256 coordinate is 32");
  }
  std::string out(kP256CoordinateBytes - (bytes->size() - zeros), '\0');
  out.append(*bytes, zeros);
  return out;
}

Result<EvpPkeyPtr> EcKey(const KeyReader& reader) {
  Result<std::string> crv = reader.RequiredString("crv");
  if (!crv.ok()) return crv.status();
  if (*crv != "P-256") {
    return reader.Fail("crv " + text::QuoteForMessage(*crv) + " is not supported (P-256 is)");
  }
  Result<std::string> x = P256Coordinate(reader, "x");
  if (!x.ok()) return x.status();
  Result<std::string> y = P256Coordinate(reader, "y");
  if (!y.ok()) return y.status();
  const std::string point = "\x04" + *x + *y;  // SEC 1's uncompressed form
  std::unique_ptr<OSSL_PARAM_BLD, ParamBuildFree> bld(OSSL_PARAM_BLD_new());
  if (!bld ||
      OSSL_PARAM_BLD_push_utf8_string(bld.get(), OSSL_PKEY_PARAM_GROUP_NAME, "prime256v1", 0) !=
          1 ||
      OSSL_PARAM_BLD_push_octet_string(bld.get(), OSSL_PKEY_PARAM_PUB_KEY, point.data(),
                                       point.size()) != 1) {
    return InternalError("out of memory reading an EC key");
  }
  EvpPkeyPtr key = KeyFromParams("EC", bld.get());
  if (!key) return reader.Fail("'x' and 'y' are not a point on P-256");
  return key;
}

Result<Jwk> ReadKey(std::string_view source, size_t index, const json& entry) {
  KeyReader reader(source, index, entry);
  if (!entry.is_object()) return reader.Fail("not a JSON object");
  Result<std::optional<std::string>> kid = reader.OptionalString("kid");
  if (!kid.ok()) return kid.status();
  if (kid->has_value()) reader.NameKid(**kid);
  Result<std::string> kty = reader.RequiredString("kty");
  if (!kty.ok()) return kty.status();
  JwsAlg alg;
  if (*kty == "RSA") {
    alg = JwsAlg::kRs256;
  } else if (*kty == "EC") {
    alg = JwsAlg::kEs256;
  } else {
    return reader.Fail("kty " + text::QuoteForMessage(*kty) + " is not supported (RSA or EC)");
  }
  for (std::string_view name : kPrivateMembers) {
    if (entry.contains(name)) {
      return reader.Fail("holds a private key ('" + std::string(name) +
                         "'); a JWK Set for verification holds public keys only");
    }
  }
  Result<std::optional<std::string>> use = reader.OptionalString("use");
  if (!use.ok()) return use.status();
  if (use->has_value() && **use != "sig") {
    return reader.Fail("use " + text::QuoteForMessage(**use) + " is not \"sig\"");
  }
  Result<std::optional<std::string>> named_alg = reader.OptionalString("alg");
  if (!named_alg.ok()) return named_alg.status();
  if (named_alg->has_value() && **named_alg != JwsAlgName(alg)) {
    return reader.Fail(
        "alg " + text::QuoteForMessage(**named_alg) + " does not fit a " +
        (alg == JwsAlg::kRs256 ? "kty \"RSA\" key (RS256)" : "kty \"EC\" key (ES256)"));
  }
  Result<EvpPkeyPtr> key = alg == JwsAlg::kRs256 ? RsaKey(reader) : EcKey(reader);
  if (!key.ok()) return key.status();
  return Jwk{std::move(*kid), alg, std::move(*key)};
}

}  // namespace

void EvpPkeyFree::operator()(EVP_PKEY* key) const { EVP_PKEY_free(key); }

std::string_view JwsAlgName(JwsAlg alg) { return ValueIn(kJwsAlgNames, alg, "unknown"); }

std::optional<JwsAlg> JwsAlgNamed(std::string_view name) { return KeyIn(kJwsAlgNames, name); }

const Jwk* Jwks::Find(JwsAlg alg, std::string_view kid) const {
  for (const Jwk& key : keys_) {
    if (key.alg == alg && key.kid && *key.kid == kid) return &key;
  }
  return nullptr;
}

Result<std::shared_ptr<const Jwks>> ParseJwks(std::string_view text, std::string_view source) {
  const std::string prefix = std::string(source) + ": ";
  if (text.size() > kMaxJwksBytes) {
    return InvalidArgumentError(prefix + "larger than " + std::to_string(kMaxJwksBytes >> 20) +
                                " MiB");
  }
  Result<json> root = ParseJsonObject(text);
  if (!root.ok()) return InvalidArgumentError(prefix + root.status().message());
  const auto keys = root->find("keys");
  if (keys == root->end() || !keys->is_array()) {
    return InvalidArgumentError(prefix + "'keys' is not an array (a JWK Set is {\"keys\": [...]})");
  }
  if (keys->empty()) return InvalidArgumentError(prefix + "no keys");
  if (keys->size() > kMaxJwksKeys) {
    return InvalidArgumentError(prefix + std::to_string(keys->size()) + " keys; at most " +
                                std::to_string(kMaxJwksKeys));
  }
  std::vector<Jwk> out;
  out.reserve(keys->size());
  for (size_t i = 0; i < keys->size(); ++i) {
    Result<Jwk> key = ReadKey(source, i, (*keys)[i]);
    if (!key.ok()) return key.status();
    for (size_t j = 0; j < out.size(); ++j) {
      if (key->kid && out[j].kid == key->kid && out[j].alg == key->alg) {
        return InvalidArgumentError(prefix + "keys[" + std::to_string(i) + "] (kid " +
                                    text::QuoteForMessage(*key->kid) + "): the kid of keys[" +
                                    std::to_string(j) + "] too");
      }
    }
    out.push_back(std::move(*key));
  }
  return std::shared_ptr<const Jwks>(std::make_shared<Jwks>(std::move(out)));
}

Result<std::shared_ptr<const Jwks>> LoadJwksFile(const std::string& path) {
  std::FILE* file = std::fopen(path.c_str(), "rb");
  if (file == nullptr) return InvalidArgumentError(path + ": cannot open: " + std::strerror(errno));
  // One byte past the bound is enough to know the file is too large.
  std::string text;
  char buffer[1 << 16];
  while (text.size() <= kMaxJwksBytes) {
    const size_t n = std::fread(buffer, 1, sizeof(buffer), file);
    text.append(buffer, n);
    if (n < sizeof(buffer)) break;
  }
  const bool failed = std::ferror(file) != 0;
  std::fclose(file);
  if (failed) return InvalidArgumentError(path + ": cannot read");
  return ParseJwks(text, path);
}

}  // namespace floodgate::service
