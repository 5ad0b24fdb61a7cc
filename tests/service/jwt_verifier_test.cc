// JwtVerifier with real keys: RS256, ES256 and HS256 tokens signed here
// with OpenSSL and by PyJWT, each check's refusal with its reason and exact
// message, the time checks at their edges, every single-bit change of a
// token refused, the classic attacks (alg none, a public key taken for an
// HMAC secret, a key carried in the header), and the bounds.
#include "service/subjects/jwt_verifier.h"

#include <gtest/gtest.h>
#include <openssl/err.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "service/subjects/base64url.h"
#include "testing/jose_keys.h"

namespace floodgate::service {
namespace {

using nlohmann::json;
using testing::NewP256Key;
using testing::NewRsaKey;
using testing::PublicJwk;
using testing::SigningInput;
using testing::Token;

constexpr int64_t kNow = 1700000000;
constexpr char kIssuer[] = "https://id.example.com";
constexpr char kSecret[] = "floodgate-test-hs256-secret-0123";  // 32 bytes

// Made with PyJWT 2.6.0 (Python's cryptography for the keys): a JWK Set of
// an RSA-2048 key ("py-rsa", as PyJWT writes it, with key_ops) and a P-256
// key ("py-ec"), and one token per algorithm with the claims
//   {"sub":"py-user","iss":"https://id.example.com","aud":["api","other"],
//    "exp":2000000000,"nbf":1600000000,"iat":1600000000,"n":7,"admin":false}
// HS256 under kPySecret.
constexpr char kPySecret[] = "floodgate-pyjwt-cross-check-32by";
constexpr char kPyJwks[] =
    R"({"keys":[{"kty":"RSA","key_ops":["verify"],"n":"oEw4C_ytnh9K9wkqHJIFE9wRhopQhck11XRz8)"
    R"(r9irJmmNftEExBfu_reRsXAWOURzAB3MJd7g6SgffCfdWD-fOO8Y-uwrReW40pk_0VA28ci32OXtVmF9PdjcC)"
    R"(hVZZd8vat8IhZfHyxwWJprHXTyccSq05C7BfrE8l7yumvPkhP3umky87Y1lrneacc50x72eAO3BOdatT-fctB)"
    R"(M9HqTlej1EPHqrjgFpIL7zh4JTnX3fV9_JfyZ7g6i1TAVSNZTlsNPWXioG7cl5DAUGEaWmLVr1x05RMC6DmU_)"
    R"(Aq49luSb60C2SrC_a8Wpc4zlP7DTMpToI0ij77QTDpKYnIoLLQ","e":"AQAB","kid":"py-rsa","use":")"
    R"(sig","alg":"RS256"},{"kty":"EC","crv":"P-256","x":"M2LIf1dn6q6tBHAt9DhCXHdcXqFqnmP3Kd)"
    R"(DYPeZ38SY","y":"feiunf7i7igxI_MuJfGoxNiSH2za_3P4g97vPy1iFJQ","kid":"py-ec"}]})";
constexpr char kPyRs256[] =
    "eyJhbGciOiJSUzI1NiIsImtpZCI6InB5LXJzYSIsInR5cCI6IkpXVCJ9.eyJzdWIiOiJweS11c2VyIiwiaXNzIjo"
    "iaHR0cHM6Ly9pZC5leGFtcGxlLmNvbSIsImF1ZCI6WyJhcGkiLCJvdGhlciJdLCJleHAiOjIwMDAwMDAwMDAsIm5"
    "iZiI6MTYwMDAwMDAwMCwiaWF0IjoxNjAwMDAwMDAwLCJuIjo3LCJhZG1pbiI6ZmFsc2V9.T5TUiXf2r6S4TEr-xk"
    "vnyrXY7MtBjcp4pjcvBwgcc2BTchiW8ek9zwCWqQwHb6cv6FkjvuxfZbpQrynC2IAExrv8T81ZEJ6R9VHoigovKl"
    "BOHt5wTPz23NRnJor5f7T9j6FGx01nW_eHtH5t-8KRBpacU_cwLyY7i8xUEsnNoR3Qp_9fysRgUniBzhZzcMDuUs"
    "IJKsiLUJGfk2Sr659OEFKyr1-Mhh5VWLdOb6p7tIAATlBtDGFDV0CLcbCkbfb1qE9qV6VGYy1pXm0Xy_T1G9iVbd"
    "IniN-98O-ubwoLCcczAhP2bZvsz0V7g3i4L-fo1sC5aorzud2LDDxO-dtFDA";
constexpr char kPyEs256[] =
    "eyJhbGciOiJFUzI1NiIsImtpZCI6InB5LWVjIiwidHlwIjoiSldUIn0.eyJzdWIiOiJweS11c2VyIiwiaXNzIjoi"
    "aHR0cHM6Ly9pZC5leGFtcGxlLmNvbSIsImF1ZCI6WyJhcGkiLCJvdGhlciJdLCJleHAiOjIwMDAwMDAwMDAsIm5i"
    "ZiI6MTYwMDAwMDAwMCwiaWF0IjoxNjAwMDAwMDAwLCJuIjo3LCJhZG1pbiI6ZmFsc2V9.2DcT3bi8SfU8FAGpg2d"
    "4qHYNz9vb0klvcUrtJQhPiwHcHDUNa9FHs3JiO89GjeCUl1ThULbR-HnHqn1pEosctg";
constexpr char kPyHs256[] =
    "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiJweS11c2VyIiwiaXNzIjoiaHR0cHM6Ly9pZC5leGF"
    "tcGxlLmNvbSIsImF1ZCI6WyJhcGkiLCJvdGhlciJdLCJleHAiOjIwMDAwMDAwMDAsIm5iZiI6MTYwMDAwMDAwMCw"
    "iaWF0IjoxNjAwMDAwMDAwLCJuIjo3LCJhZG1pbiI6ZmFsc2V9.h3HK1lCFD3ItWZV9UU4YlaCqBR4plZteQD-A9v"
    "HLAII";

class JwtVerifierTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    rsa_ = NewRsaKey(2048).release();
    rsa2_ = NewRsaKey(2048).release();
    ec_ = NewP256Key().release();
    outsider_rsa_ = NewRsaKey(2048).release();
    outsider_ec_ = NewP256Key().release();
    json set = json::object();
    set["keys"] = {PublicJwk(rsa_, "r1"), PublicJwk(ec_, "e1"), PublicJwk(rsa2_, "r2")};
    Result<std::shared_ptr<const Jwks>> keys = ParseJwks(set.dump(), "jwks.json");
    ASSERT_TRUE(keys.ok()) << keys.status().message();
    keys_ = new std::shared_ptr<const Jwks>(*keys);
  }
  static void TearDownTestSuite() {
    for (EVP_PKEY* key : {rsa_, rsa2_, ec_, outsider_rsa_, outsider_ec_}) EVP_PKEY_free(key);
    delete keys_;
  }

  static JwtOptions Options() {
    JwtOptions options;
    options.issuer = kIssuer;
    options.audience = "api";
    options.hs256_secret = kSecret;
    return options;
  }

  static std::shared_ptr<const JwtVerifier> Verifier(const JwtOptions& options = Options(),
                                                     bool with_keys = true) {
    Result<std::shared_ptr<const JwtVerifier>> verifier =
        JwtVerifier::Create(options, with_keys ? *keys_ : nullptr);
    EXPECT_TRUE(verifier.ok()) << verifier.status().message();
    return verifier.ok() ? *verifier : nullptr;
  }

  // Claims that pass every check at kNow.
  static json Claims() {
    return {{"sub", "ana"},      {"iss", kIssuer},   {"aud", "api"},
            {"exp", kNow + 600}, {"nbf", kNow - 60}, {"iat", kNow - 60}};
  }

  static json Header(const std::string& alg, const std::string& kid) {
    json header = {{"alg", alg}, {"typ", "JWT"}};
    if (!kid.empty()) header["kid"] = kid;
    return header;
  }

  static std::string Rs(const json& claims, const std::string& kid = "r1", EVP_PKEY* key = rsa_) {
    const std::string input = SigningInput(Header("RS256", kid).dump(), claims.dump());
    return Token(input, testing::SignRs256(key, input));
  }
  static std::string Es(const json& claims, const std::string& kid = "e1", EVP_PKEY* key = ec_) {
    const std::string input = SigningInput(Header("ES256", kid).dump(), claims.dump());
    return Token(input, testing::SignEs256(key, input));
  }
  static std::string Hs(const json& claims, std::string_view secret = kSecret,
                        const json& header = Header("HS256", "")) {
    return HsRaw(header.dump(), claims.dump(), secret);
  }
  // An HS256 token of the texts as given, so that what a JSON library
  // would not write can still be signed.
  static std::string HsRaw(std::string_view header, std::string_view payload,
                           std::string_view secret = kSecret) {
    const std::string input = SigningInput(header, payload);
    return Token(input, testing::SignHs256(secret, input));
  }

  // "ok", or the refusal as "<reason label>: <message>".
  static std::string Why(std::string_view token, int64_t now = kNow,
                         const JwtVerifier* verifier = nullptr) {
    static const std::shared_ptr<const JwtVerifier> standard = Verifier();
    JwtReason reason = JwtReason::kMalformed;
    Result<JwtClaims> claims = (verifier ? verifier : standard.get())->Verify(token, now, &reason);
    if (claims.ok()) return "ok";
    EXPECT_EQ(claims.status().code(), StatusCode::kInvalidArgument);
    return std::string(JwtReasonLabel(reason)) + ": " + claims.status().message();
  }

  static EVP_PKEY* rsa_;
  static EVP_PKEY* rsa2_;
  static EVP_PKEY* ec_;
  static EVP_PKEY* outsider_rsa_;
  static EVP_PKEY* outsider_ec_;
  static std::shared_ptr<const Jwks>* keys_;
};

EVP_PKEY* JwtVerifierTest::rsa_ = nullptr;
EVP_PKEY* JwtVerifierTest::rsa2_ = nullptr;
EVP_PKEY* JwtVerifierTest::ec_ = nullptr;
EVP_PKEY* JwtVerifierTest::outsider_rsa_ = nullptr;
EVP_PKEY* JwtVerifierTest::outsider_ec_ = nullptr;
std::shared_ptr<const Jwks>* JwtVerifierTest::keys_ = nullptr;

TEST_F(JwtVerifierTest, AdmitsEachAlgorithmWithItsClaims) {
  json claims = Claims();
  claims["tenant"] = 42;
  claims["neg"] = -7;
  claims["big"] = std::numeric_limits<uint64_t>::max();
  claims["admin"] = true;
  claims["guest"] = false;
  claims["empty"] = "";
  claims["ratio"] = 0.5;
  claims["none"] = nullptr;
  claims["roles"] = {"reader", "writer"};
  claims["org"] = {{"id", "o1"}};
  const JwtClaims expected = {
      {"sub", "ana"},        {"iss", kIssuer},      {"aud", "api"},
      {"exp", "1700000600"}, {"nbf", "1699999940"}, {"iat", "1699999940"},
      {"tenant", "42"},      {"neg", "-7"},         {"big", "18446744073709551615"},
      {"admin", "true"},     {"guest", "false"},    {"empty", ""}};
  const std::shared_ptr<const JwtVerifier> verifier = Verifier();
  for (const std::string& token : {Rs(claims), Es(claims), Hs(claims)}) {
    JwtReason reason = JwtReason::kExpired;
    Result<JwtClaims> got = verifier->Verify(token, kNow, &reason);
    ASSERT_TRUE(got.ok()) << got.status().message();
    EXPECT_EQ(*got, expected);
    EXPECT_EQ(reason, JwtReason::kExpired);  // left as it was
    // The reason is optional.
    EXPECT_TRUE(verifier->Verify(token, kNow).ok());
  }
  // A list "aud" holding the audience passes, and is no subject part.
  claims["aud"] = {"web", "api"};
  Result<JwtClaims> got = verifier->Verify(Es(claims), kNow);
  ASSERT_TRUE(got.ok()) << got.status().message();
  EXPECT_FALSE(got->contains("aud"));
  // Claim values are bytes as the issuer wrote them, escapes decoded.
  got = verifier->Verify(
      HsRaw(R"({"alg":"HS256"})", R"({"exp":1700000600,"iss":"https://id.example.com",)"
                                  R"("aud":"api","sub":"\u00e9\u0000x"})"),
      kNow);
  ASSERT_TRUE(got.ok()) << got.status().message();
  EXPECT_EQ(got->at("sub"), std::string("\xc3\xa9\0x", 4));
}

TEST_F(JwtVerifierTest, KidSelectsAndItsAbsenceTriesEveryKeyOfTheAlgorithm) {
  EXPECT_EQ(Why(Rs(Claims(), "r2", rsa2_)), "ok");
  EXPECT_EQ(Why(Rs(Claims(), "", rsa_)), "ok");
  EXPECT_EQ(Why(Rs(Claims(), "", rsa2_)), "ok");  // r1 is tried, then r2
  EXPECT_EQ(Why(Es(Claims(), "", ec_)), "ok");
  // The kid names the key: another key of the set does not stand in.
  EXPECT_EQ(Why(Rs(Claims(), "r1", rsa2_)), "bad_signature: RS256 signature does not verify");
  EXPECT_EQ(Why(Rs(Claims(), "zz")), R"(unknown_key: no RS256 key with kid "zz")");
  EXPECT_EQ(Why(Es(Claims(), "k-1")), R"(unknown_key: no ES256 key with kid "k-1")");
  // HS256 has one secret: a kid changes nothing.
  EXPECT_EQ(Why(Hs(Claims(), kSecret, Header("HS256", "any"))), "ok");
}

TEST_F(JwtVerifierTest, ExpiryAndNotBeforeAtTheirEdges) {
  json claims = Claims();
  claims["exp"] = kNow - 29;
  EXPECT_EQ(Why(Rs(claims)), "ok");
  claims["exp"] = kNow - 30;
  EXPECT_EQ(Why(Rs(claims)), "expired: expired at 1699999970 (now 1700000000, leeway 30 s)");
  EXPECT_EQ(Why(Rs(claims), kNow - 1), "ok");
  claims["exp"] = kNow + 600;
  EXPECT_EQ(Why(Rs(claims), kNow + 629), "ok");
  EXPECT_EQ(Why(Rs(claims), kNow + 630),
            "expired: expired at 1700000600 (now 1700000630, leeway 30 s)");

  claims = Claims();
  claims["nbf"] = kNow + 30;
  EXPECT_EQ(Why(Es(claims)), "ok");
  claims["nbf"] = kNow + 31;
  EXPECT_EQ(Why(Es(claims)),
            "not_yet_valid: not valid before 1700000031 (now 1700000000, leeway 30 s)");
  EXPECT_EQ(Why(Es(claims), kNow + 1), "ok");
  claims.erase("nbf");  // optional
  EXPECT_EQ(Why(Es(claims)), "ok");

  // No leeway: valid from nbf to just before exp.
  JwtOptions strict = Options();
  strict.leeway_s = 0;
  const std::shared_ptr<const JwtVerifier> verifier = Verifier(strict);
  claims = Claims();
  claims["nbf"] = kNow;
  claims["exp"] = kNow + 1;
  EXPECT_EQ(Why(Hs(claims), kNow, verifier.get()), "ok");
  EXPECT_EQ(Why(Hs(claims), kNow - 1, verifier.get()),
            "not_yet_valid: not valid before 1700000000 (now 1699999999, leeway 0 s)");
  EXPECT_EQ(Why(Hs(claims), kNow + 1, verifier.get()),
            "expired: expired at 1700000001 (now 1700000001, leeway 0 s)");
}

TEST_F(JwtVerifierTest, FractionsAndExtremeDatesCountAgainstTheToken) {
  json claims = Claims();
  claims["exp"] = kNow - 28.5;  // read as kNow - 29
  EXPECT_EQ(Why(Hs(claims)), "ok");
  claims["exp"] = kNow - 29.5;  // read as kNow - 30
  EXPECT_EQ(Why(Hs(claims)), "expired: expired at 1699999970 (now 1700000000, leeway 30 s)");
  claims = Claims();
  claims["nbf"] = kNow + 29.5;  // read as kNow + 30
  EXPECT_EQ(Why(Hs(claims)), "ok");
  claims["nbf"] = kNow + 30.5;  // read as kNow + 31
  EXPECT_EQ(Why(Hs(claims)),
            "not_yet_valid: not valid before 1700000031 (now 1700000000, leeway 30 s)");

  claims = Claims();
  claims.erase("nbf");
  claims["exp"] = 1e300;  // read as INT64_MAX: the leeway added does not overflow
  EXPECT_EQ(Why(Hs(claims)), "ok");
  EXPECT_EQ(Why(Hs(claims), std::numeric_limits<int64_t>::max()), "ok");
  claims["exp"] = std::numeric_limits<uint64_t>::max();
  EXPECT_EQ(Why(Hs(claims)), "ok");
  claims["exp"] = -1e300;
  EXPECT_EQ(Why(Hs(claims)),
            "expired: expired at -9223372036854775808 (now 1700000000, leeway 30 s)");
  claims["exp"] = std::numeric_limits<int64_t>::min();
  const int64_t earliest = std::numeric_limits<int64_t>::min();
  EXPECT_EQ(Why(Hs(claims), earliest + 29), "ok");
  EXPECT_EQ(Why(Hs(claims), earliest + 30),
            "expired: expired at -9223372036854775808 (now -9223372036854775778, leeway 30 s)");
  claims = Claims();
  claims["nbf"] = std::numeric_limits<int64_t>::min();
  EXPECT_EQ(Why(Hs(claims), std::numeric_limits<int64_t>::min()), "ok");
  claims["nbf"] = 1e300;
  EXPECT_EQ(Why(Hs(claims)),
            "not_yet_valid: not valid before 9223372036854775807 (now "
            "1700000000, leeway 30 s)");
}

TEST_F(JwtVerifierTest, ExpIsRequiredAndDatesAreNumbers) {
  json claims = Claims();
  claims.erase("exp");
  EXPECT_EQ(Why(Rs(claims)), R"(malformed: no "exp" claim)");
  claims["exp"] = "1700000600";
  EXPECT_EQ(Why(Rs(claims)), R"(malformed: "exp" is not a number)");
  claims["exp"] = true;
  EXPECT_EQ(Why(Rs(claims)), R"(malformed: "exp" is not a number)");
  claims = Claims();
  claims["nbf"] = nullptr;
  EXPECT_EQ(Why(Rs(claims)), R"(malformed: "nbf" is not a number)");
  claims = Claims();
  claims["iat"] = "yesterday";  // not checked
  EXPECT_EQ(Why(Rs(claims)), "ok");
}

TEST_F(JwtVerifierTest, IssuerWhenConfigured) {
  json claims = Claims();
  claims["iss"] = "https://evil.example.com";
  EXPECT_EQ(Why(Es(claims)),
            R"(wrong_issuer: iss "https://evil.example.com" is not "https://id.example.com")");
  claims["iss"] = "https://id.example.com/";
  EXPECT_EQ(Why(Es(claims)),
            R"(wrong_issuer: iss "https://id.example.com/" is not "https://id.example.com")");
  claims["iss"] = 1;
  EXPECT_EQ(Why(Es(claims)),
            R"(wrong_issuer: iss is not a string; the issuer is "https://id.example.com")");
  claims.erase("iss");
  EXPECT_EQ(Why(Es(claims)), R"(wrong_issuer: no "iss"; the issuer is "https://id.example.com")");
  JwtOptions any = Options();
  any.issuer = "";
  EXPECT_EQ(Why(Es(claims), kNow, Verifier(any).get()), "ok");
}

TEST_F(JwtVerifierTest, AudienceWhenConfigured) {
  json claims = Claims();
  claims["aud"] = "web";
  EXPECT_EQ(Why(Hs(claims)), R"(wrong_audience: aud "web" is not "api")");
  claims["aud"] = "API";
  EXPECT_EQ(Why(Hs(claims)), R"(wrong_audience: aud "API" is not "api")");
  claims["aud"] = {"web", "admin"};
  EXPECT_EQ(Why(Hs(claims)), R"(wrong_audience: aud (an array of 2) does not hold "api")");
  claims["aud"] = json::array();
  EXPECT_EQ(Why(Hs(claims)), R"(wrong_audience: aud (an array of 0) does not hold "api")");
  claims["aud"] = {{"api", 1}};
  EXPECT_EQ(Why(Hs(claims)),
            R"(wrong_audience: aud is neither a string nor an array; the audience is "api")");
  claims.erase("aud");
  EXPECT_EQ(Why(Hs(claims)), R"(wrong_audience: no "aud"; the audience is "api")");
  claims["aud"] = {1, "api"};
  EXPECT_EQ(Why(Hs(claims)), "ok");
  claims["aud"] = {"web", "api"};
  EXPECT_EQ(Why(Hs(claims)), "ok");
  JwtOptions any = Options();
  any.audience = "";
  claims["aud"] = 5;
  EXPECT_EQ(Why(Hs(claims), kNow, Verifier(any).get()), "ok");
}

// The signature over `token` with one bit of its bytes flipped.
std::string FlipSignatureBit(const std::string& token, size_t bit) {
  const size_t dot = token.rfind('.');
  std::string signature = *DecodeBase64Url(token.substr(dot + 1));
  signature[bit / 8] = static_cast<char>(signature[bit / 8] ^ (1 << (bit % 8)));
  return token.substr(0, dot + 1) + EncodeBase64Url(signature);
}

TEST_F(JwtVerifierTest, OneBitFlippedInTheSignatureOrThePayload) {
  EXPECT_EQ(Why(FlipSignatureBit(Rs(Claims()), 100)),
            "bad_signature: RS256 signature does not verify");
  EXPECT_EQ(Why(FlipSignatureBit(Es(Claims()), 100)),
            "bad_signature: ES256 signature does not verify");
  EXPECT_EQ(Why(FlipSignatureBit(Hs(Claims()), 100)),
            "bad_signature: HS256 signature does not verify");
  // A failed verification leaves nothing queued for the thread's next
  // OpenSSL call (a TLS read on the same loop) to take as its own.
  EXPECT_EQ(ERR_peek_error(), 0u);
  // "ana" becomes "cna" in the payload; the signature is the original's.
  for (const std::string& token : {Rs(Claims()), Es(Claims()), Hs(Claims())}) {
    const size_t dot1 = token.find('.');
    const size_t dot2 = token.find('.', dot1 + 1);
    std::string payload = *DecodeBase64Url(token.substr(dot1 + 1, dot2 - dot1 - 1));
    const size_t at = payload.find("\"ana\"") + 1;
    payload[at] = static_cast<char>(payload[at] ^ 2);
    ASSERT_NE(payload.find("\"cna\""), std::string::npos);
    const std::string forged =
        token.substr(0, dot1 + 1) + EncodeBase64Url(payload) + token.substr(dot2);
    EXPECT_EQ(Why(forged).substr(0, 14), "bad_signature:") << forged;
  }
}

TEST_F(JwtVerifierTest, EverySingleBitChangeOfTheTokenIsRefused) {
  for (const std::string& token : {Rs(Claims()), Es(Claims()), Hs(Claims())}) {
    ASSERT_EQ(Why(token), "ok");
    for (size_t i = 0; i < token.size(); ++i) {
      for (int bit = 0; bit < 8; ++bit) {
        std::string changed = token;
        changed[i] = static_cast<char>(changed[i] ^ (1 << bit));
        ASSERT_NE(Why(changed), "ok") << "byte " << i << " bit " << bit << ": " << changed;
      }
    }
  }
}

TEST_F(JwtVerifierTest, RefusesAlgNone) {
  const std::string unsigned_input = SigningInput(R"({"alg":"none"})", Claims().dump());
  EXPECT_EQ(Why(unsigned_input + "."),
            R"(unsupported_alg: alg "none" is refused: every token must be signed)");
  EXPECT_EQ(Why(unsigned_input + "." + EncodeBase64Url(std::string(32, 'x'))),
            R"(unsupported_alg: alg "none" is refused: every token must be signed)");
  EXPECT_EQ(Why(SigningInput(R"({"alg":"None"})", Claims().dump()) + "."),
            R"(unsupported_alg: alg "None" is not supported (RS256, ES256, HS256))");
  EXPECT_EQ(Why(HsRaw(R"({"alg":"RS384"})", Claims().dump())),
            R"(unsupported_alg: alg "RS384" is not supported (RS256, ES256, HS256))");
  EXPECT_EQ(Why(HsRaw(R"({"alg":"hs256"})", Claims().dump())),
            R"(unsupported_alg: alg "hs256" is not supported (RS256, ES256, HS256))");
  // A second "alg" cannot turn a refused one into an accepted one.
  EXPECT_EQ(Why(HsRaw(R"({"alg":"none","alg":"HS256"})", Claims().dump())),
            R"(malformed: header: names "alg" twice)");
}

TEST_F(JwtVerifierTest, APublicKeyIsNeverAnHmacSecret) {
  // The key set's RSA key as an attacker can read it, used as an HS256
  // secret: its PEM, and its JWK's text.
  const std::string pem = testing::PublicPem(rsa_);
  const std::string jwk = PublicJwk(rsa_, "r1").dump();
  JwtOptions keys_only = Options();
  keys_only.hs256_secret = "";
  const std::shared_ptr<const JwtVerifier> verifier = Verifier(keys_only);
  for (const std::string& secret : {pem, jwk}) {
    for (const char* kid : {"", "r1"}) {
      const std::string token = Hs(Claims(), secret, Header("HS256", kid));
      EXPECT_EQ(Why(token, kNow, verifier.get()), "unknown_key: HS256: no secret is configured");
      EXPECT_EQ(Why(token), "bad_signature: HS256 signature does not verify");
    }
  }
  // An RS256 header naming the EC key's kid finds no RS256 key, and the
  // reverse.
  EXPECT_EQ(Why(Rs(Claims(), "e1")), R"(unknown_key: no RS256 key with kid "e1")");
  EXPECT_EQ(Why(Es(Claims(), "r1")), R"(unknown_key: no ES256 key with kid "r1")");
  // No key set: RS256 and ES256 have nothing to verify with.
  const std::shared_ptr<const JwtVerifier> secret_only = Verifier(Options(), false);
  EXPECT_EQ(Why(Rs(Claims()), kNow, secret_only.get()),
            R"(unknown_key: no RS256 key with kid "r1")");
  EXPECT_EQ(Why(Es(Claims(), ""), kNow, secret_only.get()), "unknown_key: no ES256 key");
  EXPECT_EQ(Why(Hs(Claims()), kNow, secret_only.get()), "ok");
}

TEST_F(JwtVerifierTest, KeysComeFromTheConfigurationOnly) {
  // Signed by keys outside the set: with a kid of the set, without one,
  // and with the signer's own key carried in the header ("jwk") or named
  // by URL ("jku").
  EXPECT_EQ(Why(Rs(Claims(), "r1", outsider_rsa_)),
            "bad_signature: RS256 signature does not verify");
  EXPECT_EQ(Why(Rs(Claims(), "", outsider_rsa_)), "bad_signature: RS256 signature does not verify");
  EXPECT_EQ(Why(Es(Claims(), "e1", outsider_ec_)),
            "bad_signature: ES256 signature does not verify");
  EXPECT_EQ(Why(Es(Claims(), "", outsider_ec_)), "bad_signature: ES256 signature does not verify");
  json header = Header("ES256", "");
  header["jwk"] = PublicJwk(outsider_ec_);
  header["jku"] = "https://evil.example.com/jwks.json";
  const std::string input = SigningInput(header.dump(), Claims().dump());
  EXPECT_EQ(Why(Token(input, testing::SignEs256(outsider_ec_, input))),
            "bad_signature: ES256 signature does not verify");
}

TEST_F(JwtVerifierTest, RefusesMalformedTokens) {
  const std::string good = Hs(Claims());
  const size_t dot1 = good.find('.');
  const size_t dot2 = good.find('.', dot1 + 1);
  const std::string shape = "malformed: not a compact JWS (header.payload.signature)";
  EXPECT_EQ(Why(""), shape);
  EXPECT_EQ(Why(good.substr(0, dot2)), shape);
  EXPECT_EQ(Why(good + ".e30"), shape);
  EXPECT_EQ(Why(good.substr(0, dot1)), shape);
  EXPECT_EQ(Why("Bearer " + good), "malformed: header is not base64url");
  EXPECT_EQ(Why(good + "\n"), "malformed: signature is not base64url");
  EXPECT_EQ(Why(good + "="), "malformed: signature is not base64url");
  EXPECT_EQ(Why(good.substr(0, dot1) + "=" + good.substr(dot1)),
            "malformed: header is not base64url");
  EXPECT_EQ(Why(good.substr(0, dot1 + 1) + "e30=" + good.substr(dot2)),
            "malformed: payload is not base64url");
  EXPECT_EQ(Why(".."), "malformed: header: not JSON (it ends too early)");

  EXPECT_EQ(Why(HsRaw(R"({"alg":"HS256")", Claims().dump())),
            "malformed: header: not JSON (it ends too early)");
  EXPECT_EQ(Why(HsRaw(R"(["HS256"])", Claims().dump())), "malformed: header: not a JSON object");
  EXPECT_EQ(Why(HsRaw(R"({"typ":"JWT"})", Claims().dump())),
            R"(malformed: header has no "alg" string)");
  EXPECT_EQ(Why(HsRaw(R"({"alg":256})", Claims().dump())),
            R"(malformed: header has no "alg" string)");
  EXPECT_EQ(Why(HsRaw(R"({"alg":"HS256","crit":["exp"],"exp":1})", Claims().dump())),
            R"(malformed: header has "crit": floodgate knows no extension)");
  EXPECT_EQ(Why(HsRaw(R"({"alg":"HS256","kid":7})", Claims().dump())),
            R"(malformed: header "kid" is not a string)");
  // The payload is read only once the signature verifies.
  EXPECT_EQ(Why(HsRaw(R"({"alg":"HS256"})", "not json")),
            "malformed: payload: not JSON (syntax error at byte 2)");
  EXPECT_EQ(Why(HsRaw(R"({"alg":"HS256"})", "not json", "another secret of thirty-two bytes")),
            "bad_signature: HS256 signature does not verify");
  EXPECT_EQ(Why(HsRaw(R"({"alg":"HS256"})", R"("ana")")), "malformed: payload: not a JSON object");
  EXPECT_EQ(Why(HsRaw(R"({"alg":"HS256"})",
                      R"({"sub":"ana","exp":1700000600,"iss":"https://id.example.com",)"
                      R"("aud":"api","sub":"bob"})")),
            R"(malformed: payload: names "sub" twice)");
  // An ES256 signature is r || s, 64 bytes: DER or a short one is refused.
  const std::string es = Es(Claims());
  const std::string es_input = es.substr(0, es.rfind('.'));
  EXPECT_EQ(Why(Token(es_input, testing::DigestSign(ec_, es_input))),
            "bad_signature: ES256 signature is not 64 bytes");
  EXPECT_EQ(Why(Token(es_input, std::string(63, '\x01'))),
            "bad_signature: ES256 signature is not 64 bytes");
  EXPECT_EQ(Why(Token(es_input, std::string(64, '\0'))),
            "bad_signature: ES256 signature does not verify");
  const std::string rs = Rs(Claims());
  EXPECT_EQ(Why(Token(rs.substr(0, rs.rfind('.')), "")),
            "bad_signature: RS256 signature does not verify");
}

TEST_F(JwtVerifierTest, SizeBoundAtItsEdge) {
  // Pad a claim and the header until the token is 8192 bytes, then 8193.
  std::string at_bound;
  std::string past_bound;
  for (size_t pad = 5900; pad < 6100 && (at_bound.empty() || past_bound.empty()); ++pad) {
    for (size_t header_pad = 0; header_pad < 3; ++header_pad) {
      json claims = Claims();
      claims["pad"] = std::string(pad, 'p');
      json header = Header("HS256", std::string(header_pad + 1, 'k'));
      const std::string token = Hs(claims, kSecret, header);
      if (token.size() == kMaxJwtBytes) at_bound = token;
      if (token.size() == kMaxJwtBytes + 1) past_bound = token;
    }
  }
  ASSERT_EQ(at_bound.size(), 8192u);
  ASSERT_EQ(past_bound.size(), 8193u);
  EXPECT_EQ(Why(at_bound), "ok");
  EXPECT_EQ(Why(past_bound), "malformed: token is 8193 bytes; at most 8192");
  EXPECT_EQ(Why(std::string(1 << 20, 'a')), "malformed: token is 1048576 bytes; at most 8192");
}

TEST_F(JwtVerifierTest, CrossCheckedWithPyJwt) {
  Result<std::shared_ptr<const Jwks>> keys = ParseJwks(kPyJwks, "pyjwt.json");
  ASSERT_TRUE(keys.ok()) << keys.status().message();
  JwtOptions options = Options();
  options.hs256_secret = kPySecret;
  Result<std::shared_ptr<const JwtVerifier>> verifier = JwtVerifier::Create(options, *keys);
  ASSERT_TRUE(verifier.ok()) << verifier.status().message();
  const JwtClaims expected = {{"sub", "py-user"},    {"iss", kIssuer},      {"exp", "2000000000"},
                              {"nbf", "1600000000"}, {"iat", "1600000000"}, {"n", "7"},
                              {"admin", "false"}};
  for (const char* token : {kPyRs256, kPyEs256, kPyHs256}) {
    Result<JwtClaims> claims = (*verifier)->Verify(token, kNow);
    ASSERT_TRUE(claims.ok()) << claims.status().message();
    EXPECT_EQ(*claims, expected);
    EXPECT_EQ(Why(token, 2000000030, verifier->get()),
              "expired: expired at 2000000000 (now 2000000030, leeway 30 s)");
    EXPECT_EQ(Why(FlipSignatureBit(token, 7), kNow, verifier->get()).substr(0, 14),
              "bad_signature:");
  }
}

// Whether `python3` (Debian's) can import PyJWT and its cryptography.
bool HavePyJwt() {
  return std::system("/usr/bin/python3 -c 'import jwt, cryptography' >/dev/null 2>&1") == 0;
}

TEST_F(JwtVerifierTest, TokensSignedHereVerifyInPyJwt) {
  if (!HavePyJwt()) GTEST_SKIP() << "no PyJWT (Debian's python3-jwt)";
  const std::string dir =
      (std::filesystem::temp_directory_path() / ("floodgate_pyjwt_" + std::to_string(::getpid())))
          .string();
  std::filesystem::create_directories(dir);
  json keys = {PublicJwk(rsa_, "r1"), PublicJwk(ec_, "e1")};
  json cases = {
      {"keys", keys}, {"secret", kSecret}, {"tokens", {Rs(Claims()), Es(Claims()), Hs(Claims())}}};
  std::ofstream(dir + "/cases.json") << cases.dump();
  std::ofstream(dir + "/check.py") << R"(import json, sys, jwt
cases = json.load(open(sys.argv[1]))
for token in cases["tokens"]:
    header = jwt.get_unverified_header(token)
    if header["alg"] == "HS256":
        key = cases["secret"].encode()
    else:
        key = jwt.PyJWK(next(k for k in cases["keys"] if k["kid"] == header["kid"])).key
    claims = jwt.decode(token, key, algorithms=[header["alg"]], audience="api",
                        issuer="https://id.example.com", options={"verify_exp": False})
    assert claims["sub"] == "ana", claims
print("verified", len(cases["tokens"]))
)";
  const std::string command =
      "/usr/bin/python3 " + dir + "/check.py " + dir + "/cases.json >" + dir + "/out 2>&1";
  const int status = std::system(command.c_str());
  std::ifstream out(dir + "/out");
  const std::string said((std::istreambuf_iterator<char>(out)), std::istreambuf_iterator<char>());
  std::filesystem::remove_all(dir);
  EXPECT_EQ(status, 0) << said;
  EXPECT_EQ(said, "verified 3\n");
}

TEST_F(JwtVerifierTest, ManyThreadsShareOneVerifier) {
  const std::shared_ptr<const JwtVerifier> verifier = Verifier();
  const std::vector<std::string> tokens = {Rs(Claims()), Es(Claims()), Hs(Claims()),
                                           FlipSignatureBit(Rs(Claims()), 9),
                                           FlipSignatureBit(Es(Claims()), 9)};
  std::vector<std::thread> threads;
  std::vector<int> admitted(4, 0);
  for (size_t t = 0; t < admitted.size(); ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 50; ++i) {
        for (const std::string& token : tokens) admitted[t] += verifier->Verify(token, kNow).ok();
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  for (int n : admitted) EXPECT_EQ(n, 150);
}

TEST(JwtVerifierOptionsTest, RefusesOptionsThatCannotWork) {
  auto error = [](const JwtOptions& options) {
    Result<std::shared_ptr<const JwtVerifier>> verifier = JwtVerifier::Create(options, nullptr);
    return verifier.ok() ? "ok" : verifier.status().message();
  };
  JwtOptions options;
  EXPECT_EQ(options.leeway_s, 30);
  EXPECT_EQ(error(options), "jwt: neither a jwks_file nor an HS256 secret: no token can verify");
  options.hs256_secret = std::string(31, 's');
  EXPECT_EQ(error(options), "jwt: the HS256 secret is 31 bytes; at least 32 are required");
  options.hs256_secret = std::string(32, 's');
  EXPECT_EQ(error(options), "ok");
  options.leeway_s = -1;
  EXPECT_EQ(error(options), "jwt: leeway must be 0 to 300 s, not -1");
  options.leeway_s = 301;
  EXPECT_EQ(error(options), "jwt: leeway must be 0 to 300 s, not 301");
  options.leeway_s = 300;
  EXPECT_EQ(error(options), "ok");
  options.leeway_s = 0;
  EXPECT_EQ(error(options), "ok");
}

TEST(JwtVerifierOptionsTest, OpenReadsTheKeySetFile) {
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("floodgate_jwt_" + std::to_string(::getpid()) + ".json"))
                               .string();
  EvpPkeyPtr key = NewP256Key();
  json set = json::object();
  set["keys"] = {PublicJwk(key.get(), "e1")};
  std::ofstream(path) << set.dump();
  JwtOptions options;
  options.jwks_file = path;
  options.audience = "api";
  Result<std::shared_ptr<const JwtVerifier>> verifier = JwtVerifier::Open(options);
  ASSERT_TRUE(verifier.ok()) << verifier.status().message();
  const std::string input = SigningInput(R"({"alg":"ES256","kid":"e1"})",
                                         R"({"sub":"ana","aud":"api","exp":1700000600})");
  Result<JwtClaims> claims =
      (*verifier)->Verify(Token(input, testing::SignEs256(key.get(), input)), kNow);
  ASSERT_TRUE(claims.ok()) << claims.status().message();
  EXPECT_EQ(claims->at("sub"), "ana");

  std::filesystem::remove(path);
  verifier = JwtVerifier::Open(options);
  ASSERT_FALSE(verifier.ok());
  EXPECT_EQ(verifier.status().message(), path + ": cannot open: No such file or directory");
  // Without a file, the secret alone.
  options.jwks_file = "";
  options.hs256_secret = kSecret;
  EXPECT_TRUE(JwtVerifier::Open(options).ok());
}

TEST(JwtReasonTest, Labels) {
  EXPECT_EQ(JwtReasonLabel(JwtReason::kMalformed), "malformed");
  EXPECT_EQ(JwtReasonLabel(JwtReason::kUnsupportedAlg), "unsupported_alg");
  EXPECT_EQ(JwtReasonLabel(JwtReason::kUnknownKey), "unknown_key");
  EXPECT_EQ(JwtReasonLabel(JwtReason::kBadSignature), "bad_signature");
  EXPECT_EQ(JwtReasonLabel(JwtReason::kExpired), "expired");
  EXPECT_EQ(JwtReasonLabel(JwtReason::kNotYetValid), "not_yet_valid");
  EXPECT_EQ(JwtReasonLabel(JwtReason::kWrongIssuer), "wrong_issuer");
  EXPECT_EQ(JwtReasonLabel(JwtReason::kWrongAudience), "wrong_audience");
}

}  // namespace
}  // namespace floodgate::service
