// JWK Sets: real RSA-2048 and P-256 keys read back from their public JWKs,
// the file's bounds at their edges, and every refusal's exact message.
#include "service/subjects/jwks.h"

#include <gtest/gtest.h>
#include <openssl/err.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "service/subjects/base64url.h"
#include "testing/jose_keys.h"

namespace floodgate::service {
namespace {

using nlohmann::json;
using testing::NewP256Key;
using testing::NewRsaKey;
using testing::PublicJwk;

class JwksTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    rsa_ = NewRsaKey(2048).release();
    ec_ = NewP256Key().release();
  }
  static void TearDownTestSuite() {
    EVP_PKEY_free(rsa_);
    EVP_PKEY_free(ec_);
  }

  static json Rsa(const std::string& kid = "") { return PublicJwk(rsa_, kid); }
  static json Ec(const std::string& kid = "") { return PublicJwk(ec_, kid); }

  // The error of reading a set of `keys`, or "ok".
  // (A vector: a braced list of one JWK would be taken for the JWK.)
  static std::string Error(const std::vector<json>& keys) {
    json set = json::object();
    set["keys"] = keys;
    return ErrorOf(set.dump());
  }
  static std::string ErrorOf(std::string_view text) {
    Result<std::shared_ptr<const Jwks>> set = ParseJwks(text, "jwks.json");
    return set.ok() ? "ok" : set.status().message();
  }

  static EVP_PKEY* rsa_;
  static EVP_PKEY* ec_;
};

EVP_PKEY* JwksTest::rsa_ = nullptr;
EVP_PKEY* JwksTest::ec_ = nullptr;

TEST_F(JwksTest, ReadsRsaAndP256Keys) {
  json rsa = Rsa("r1");
  rsa["use"] = "sig";
  rsa["alg"] = "RS256";
  rsa["key_ops"] = {"verify"};
  json ec = Ec("e1");
  ec["alg"] = "ES256";
  json bare = Ec();
  Result<std::shared_ptr<const Jwks>> set =
      ParseJwks(json{{"keys", {rsa, ec, bare}}}.dump(), "jwks.json");
  ASSERT_TRUE(set.ok()) << set.status().message();
  const Jwks& jwks = **set;
  ASSERT_EQ(jwks.keys().size(), 3u);
  EXPECT_EQ(jwks.keys()[0].kid, "r1");
  EXPECT_EQ(jwks.keys()[0].alg, JwsAlg::kRs256);
  EXPECT_EQ(jwks.keys()[1].kid, "e1");
  EXPECT_EQ(jwks.keys()[1].alg, JwsAlg::kEs256);
  EXPECT_FALSE(jwks.keys()[2].kid.has_value());
  // The keys are the generated ones.
  EXPECT_EQ(EVP_PKEY_eq(jwks.keys()[0].key.get(), rsa_), 1);
  EXPECT_EQ(EVP_PKEY_eq(jwks.keys()[1].key.get(), ec_), 1);
  EXPECT_EQ(EVP_PKEY_eq(jwks.keys()[2].key.get(), ec_), 1);

  EXPECT_EQ(jwks.Find(JwsAlg::kRs256, "r1"), &jwks.keys()[0]);
  EXPECT_EQ(jwks.Find(JwsAlg::kEs256, "e1"), &jwks.keys()[1]);
  // A kid finds only a key of the algorithm asked for.
  EXPECT_EQ(jwks.Find(JwsAlg::kEs256, "r1"), nullptr);
  EXPECT_EQ(jwks.Find(JwsAlg::kHs256, "r1"), nullptr);
  EXPECT_EQ(jwks.Find(JwsAlg::kRs256, "R1"), nullptr);
  EXPECT_EQ(jwks.Find(JwsAlg::kEs256, ""), nullptr);
}

TEST_F(JwksTest, AlgNames) {
  EXPECT_EQ(JwsAlgName(JwsAlg::kRs256), "RS256");
  EXPECT_EQ(JwsAlgName(JwsAlg::kEs256), "ES256");
  EXPECT_EQ(JwsAlgName(JwsAlg::kHs256), "HS256");
  EXPECT_EQ(JwsAlgNamed("ES256"), JwsAlg::kEs256);
  EXPECT_EQ(JwsAlgNamed("rs256"), std::nullopt);
  EXPECT_EQ(JwsAlgNamed("none"), std::nullopt);
  EXPECT_EQ(JwsAlgNamed("RS384"), std::nullopt);
}

TEST_F(JwksTest, OneKidPerAlgorithm) {
  EXPECT_EQ(Error({Rsa("a"), Ec("a")}), "ok");
  EXPECT_EQ(Error({Rsa("a"), Ec("b"), Rsa("a")}),
            R"(jwks.json: keys[2] (kid "a"): the kid of keys[0] too)");
  EXPECT_EQ(Error({Rsa(), Rsa()}), "ok");
}

TEST_F(JwksTest, ShortCoordinatesAreLeftPaddedAndLeadingZerosDropped) {
  // A key whose x begins with a zero byte, written without it as some
  // encoders do (about one key in 256).
  EvpPkeyPtr key;
  std::string x;
  for (int i = 0; i < 20000 && (x.empty() || x[0] != '\0'); ++i) {
    key = NewP256Key();
    x = testing::KeyNumber(key.get(), OSSL_PKEY_PARAM_EC_PUB_X, 32);
  }
  ASSERT_EQ(x[0], '\0');
  json jwk = PublicJwk(key.get());
  jwk["x"] = EncodeBase64Url(x.substr(1));
  Result<std::shared_ptr<const Jwks>> set =
      ParseJwks(R"({"keys":[)" + jwk.dump() + "]}", "jwks.json");
  ASSERT_TRUE(set.ok()) << set.status().message();
  EXPECT_EQ(EVP_PKEY_eq((*set)->keys()[0].key.get(), key.get()), 1);
  // And with a zero byte too many in front (a sign byte).
  jwk = Ec();
  jwk["y"] =
      EncodeBase64Url(std::string(1, '\0') + testing::KeyNumber(ec_, OSSL_PKEY_PARAM_EC_PUB_Y, 32));
  EXPECT_EQ(Error({jwk}), "ok");
}

TEST_F(JwksTest, RefusesTheDocument) {
  EXPECT_EQ(ErrorOf("{\"keys\": ["), "jwks.json: not JSON (it ends too early)");
  EXPECT_EQ(ErrorOf("{\"keys\" [] }"), "jwks.json: not JSON (syntax error at byte 9)");
  EXPECT_EQ(ErrorOf("[]"), "jwks.json: not a JSON object");
  EXPECT_EQ(ErrorOf(R"({"keys":[],"keys":[]})"), R"(jwks.json: names "keys" twice)");
  EXPECT_EQ(ErrorOf("{}"), R"(jwks.json: 'keys' is not an array (a JWK Set is {"keys": [...]}))");
  EXPECT_EQ(ErrorOf(R"({"keys":{}})"),
            R"(jwks.json: 'keys' is not an array (a JWK Set is {"keys": [...]}))");
  EXPECT_EQ(ErrorOf(R"({"keys":[]})"), "jwks.json: no keys");
  std::vector<json> many;
  for (size_t i = 0; i < kMaxJwksKeys; ++i) many.push_back(Ec("k" + std::to_string(i)));
  EXPECT_EQ(Error(many), "ok");
  many.push_back(Ec("last"));
  EXPECT_EQ(Error(many), "jwks.json: 33 keys; at most 32");
}

TEST_F(JwksTest, SizeBoundAtItsEdge) {
  std::string text = json{{"keys", {Rsa("r")}}}.dump();
  text.append(kMaxJwksBytes - text.size(), ' ');  // white space after the object
  EXPECT_EQ(ErrorOf(text), "ok");
  text.push_back(' ');
  EXPECT_EQ(ErrorOf(text), "jwks.json: larger than 1 MiB");
}

TEST_F(JwksTest, RefusesAKeyNamingItByIndexAndKid) {
  EXPECT_EQ(Error({Rsa("k0"), "RSA"}), "jwks.json: keys[1]: not a JSON object");
  EXPECT_EQ(Error({json{{"kty", "RSA"}, {"kid", 7}}}), "jwks.json: keys[0]: 'kid' is not a string");
  EXPECT_EQ(Error({json{{"kid", "a"}}}), R"(jwks.json: keys[0] (kid "a"): no 'kty')");
  EXPECT_EQ(Error({json{{"kty", 1}}}), "jwks.json: keys[0]: 'kty' is not a string");
  EXPECT_EQ(Error({Rsa("k0"), json{{"kty", "oct"}, {"kid", "k1"}, {"k", "c2VjcmV0"}}}),
            R"(jwks.json: keys[1] (kid "k1"): kty "oct" is not supported (RSA or EC))");
  EXPECT_EQ(Error({json{{"kty", "OKP"}, {"crv", "Ed25519"}, {"x", "AA"}}}),
            R"(jwks.json: keys[0]: kty "OKP" is not supported (RSA or EC))");

  json key = Rsa("k0");
  key["use"] = "enc";
  EXPECT_EQ(Error({key}), R"(jwks.json: keys[0] (kid "k0"): use "enc" is not "sig")");
  key["use"] = true;
  EXPECT_EQ(Error({key}), R"(jwks.json: keys[0] (kid "k0"): 'use' is not a string)");
  key = Rsa("k0");
  key["alg"] = "RS384";
  EXPECT_EQ(Error({key}),
            R"(jwks.json: keys[0] (kid "k0"): alg "RS384" does not fit a kty "RSA" key (RS256))");
  key["alg"] = "HS256";
  EXPECT_EQ(Error({key}),
            R"(jwks.json: keys[0] (kid "k0"): alg "HS256" does not fit a kty "RSA" key (RS256))");
  key = Ec("k0");
  key["alg"] = "RS256";
  EXPECT_EQ(Error({key}),
            R"(jwks.json: keys[0] (kid "k0"): alg "RS256" does not fit a kty "EC" key (ES256))");
  key = Rsa("k0");
  key["d"] = "AQAB";
  EXPECT_EQ(Error({key}), R"(jwks.json: keys[0] (kid "k0"): holds a private key ('d'); )"
                          "a JWK Set for verification holds public keys only");
}

TEST_F(JwksTest, RefusesAnRsaKeyItCannotUse) {
  json key = Rsa("k2");
  key["n"] = key["n"].get<std::string>() + "=";
  EXPECT_EQ(Error({Rsa("k0"), Ec("k1"), key}),
            R"(jwks.json: keys[2] (kid "k2"): 'n' is not base64url)");
  key = Rsa("k2");
  key.erase("n");
  EXPECT_EQ(Error({key}), R"(jwks.json: keys[0] (kid "k2"): no 'n')");
  key = Rsa("k2");
  key["e"] = 65537;
  EXPECT_EQ(Error({key}), R"(jwks.json: keys[0] (kid "k2"): 'e' is not a string)");
  key["e"] = "";
  EXPECT_EQ(Error({key}), R"(jwks.json: keys[0] (kid "k2"): 'e' is empty)");

  // The size: 2048 bits at least, 8192 at most, counted without leading zeros.
  EvpPkeyPtr small = NewRsaKey(1024);
  EXPECT_EQ(
      Error({PublicJwk(small.get(), "old")}),
      R"(jwks.json: keys[0] (kid "old"): an RSA key of 1024 bits; 2048 to 8192 are accepted)");
  key = PublicJwk(small.get(), "old");
  key["n"] =
      EncodeBase64Url(std::string(200, '\0') + *DecodeBase64Url(key["n"].get<std::string>()));
  EXPECT_EQ(
      Error({key}),
      R"(jwks.json: keys[0] (kid "old"): an RSA key of 1024 bits; 2048 to 8192 are accepted)");
  key["n"] = EncodeBase64Url(std::string(1025, '\xff'));
  EXPECT_EQ(
      Error({key}),
      R"(jwks.json: keys[0] (kid "old"): an RSA key of 8200 bits; 2048 to 8192 are accepted)");

  // Numbers no RSA key has: they would verify forgeries or nothing.
  const std::string bad =
      R"(jwks.json: keys[0] (kid "k"): 'n' and 'e' are not a valid RSA public key)";
  key = Rsa("k");
  key["e"] = EncodeBase64Url("\x01");  // every padded digest its own signature
  EXPECT_EQ(Error({key}), bad);
  key["e"] = EncodeBase64Url("\x01\x00\x00");  // even
  EXPECT_EQ(Error({key}), bad);
  key = Rsa("k");
  std::string n = *DecodeBase64Url(key["n"].get<std::string>());
  n.back() = static_cast<char>(n.back() & ~1);  // an even modulus
  key["n"] = EncodeBase64Url(n);
  EXPECT_EQ(Error({key}), bad);
  EXPECT_EQ(ERR_peek_error(), 0u);  // OpenSSL's refusals are not left queued
}

TEST_F(JwksTest, RefusesAnEcKeyItCannotUse) {
  json key = Ec("k1");
  key["crv"] = "P-384";
  EXPECT_EQ(Error({key}),
            R"(jwks.json: keys[0] (kid "k1"): crv "P-384" is not supported (P-256 is))");
  key.erase("crv");
  EXPECT_EQ(Error({key}), R"(jwks.json: keys[0] (kid "k1"): no 'crv')");
  key = Ec("k1");
  key.erase("y");
  EXPECT_EQ(Error({key}), R"(jwks.json: keys[0] (kid "k1"): no 'y')");
  key = Ec("k1");
  key["x"] = "not base64";
  EXPECT_EQ(Error({key}), R"(jwks.json: keys[0] (kid "k1"): 'x' is not base64url)");
  key["x"] = EncodeBase64Url("\x01" + std::string(32, '\x02'));
  EXPECT_EQ(Error({key}),
            R"(jwks.json: keys[0] (kid "k1"): 'x' is 33 bytes; a P-256 coordinate is 32)");
  // A point off the curve: y + 1.
  key = Ec("k1");
  std::string y = *DecodeBase64Url(key["y"].get<std::string>());
  y.back() = static_cast<char>(y.back() ^ 1);
  key["y"] = EncodeBase64Url(y);
  EXPECT_EQ(Error({key}), R"(jwks.json: keys[0] (kid "k1"): 'x' and 'y' are not a point on P-256)");
  key["x"] = EncodeBase64Url(std::string(32, '\0'));
  key["y"] = EncodeBase64Url(std::string(32, '\0'));
  EXPECT_EQ(Error({key}), R"(jwks.json: keys[0] (kid "k1"): 'x' and 'y' are not a point on P-256)");
}

TEST_F(JwksTest, KidsInMessagesAreQuotedAndCut) {
  EXPECT_EQ(Error({json{{"kid", "a\"b\n"}}}), R"(jwks.json: keys[0] (kid "a\"b\x0a"): no 'kty')");
  EXPECT_EQ(Error({json{{"kid", std::string(100, 'k')}}}),
            "jwks.json: keys[0] (kid \"" + std::string(64, 'k') + "...\"): no 'kty'");
}

class JwksFileTest : public JwksTest {
 protected:
  void SetUp() override {
    path_ = (std::filesystem::temp_directory_path() /
             ("floodgate_jwks_" + std::to_string(::getpid()) + ".json"))
                .string();
  }
  void TearDown() override { std::filesystem::remove(path_); }
  void Write(const std::string& text) { std::ofstream(path_, std::ios::binary) << text; }
  std::string path_;
};

TEST_F(JwksFileTest, LoadsAFileAndNamesItInErrors) {
  Write(json{{"keys", {Rsa("r1"), Ec("e1")}}}.dump(2));
  Result<std::shared_ptr<const Jwks>> set = LoadJwksFile(path_);
  ASSERT_TRUE(set.ok()) << set.status().message();
  EXPECT_EQ((*set)->keys().size(), 2u);

  Write(R"({"keys":[{"kty":"oct","kid":"s"}]})");
  set = LoadJwksFile(path_);
  ASSERT_FALSE(set.ok());
  EXPECT_EQ(set.status().message(),
            path_ + R"(: keys[0] (kid "s"): kty "oct" is not supported (RSA or EC))");

  Write(std::string(kMaxJwksBytes + 1, ' '));
  set = LoadJwksFile(path_);
  ASSERT_FALSE(set.ok());
  EXPECT_EQ(set.status().message(), path_ + ": larger than 1 MiB");

  std::filesystem::remove(path_);
  set = LoadJwksFile(path_);
  ASSERT_FALSE(set.ok());
  EXPECT_EQ(set.status().message(), path_ + ": cannot open: No such file or directory");
  EXPECT_EQ(set.status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace floodgate::service
