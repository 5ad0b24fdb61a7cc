// TlsContext (server/net/tls_context.h): certificates made here with the
// openssl CLI, handshakes run in memory between an OpenSSL client and the
// context's connections: TLS 1.2+ only, ALPN per listener, mTLS, each bad
// file's message, the expiry warnings, and a reload that keeps the old
// context when the new files are bad.
#include "server/net/tls_context.h"

#include <gtest/gtest.h>
#include <openssl/err.h>
#include <openssl/ssl.h>

#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "testing/test_certs.h"

namespace floodgate::server {
namespace {

class TlsContextTest : public testing::CertsTest {
 protected:
  static TlsFiles Files(const std::string& cert = "server.pem",
                        const std::string& key = "server.key") {
    return TlsFiles{Path(cert), Path(key), "", false};
  }
  static int64_t Now() { return static_cast<int64_t>(std::time(nullptr)); }
  static std::string Error(const TlsFiles& files) {
    auto c = TlsContext::Load(files, Now());
    return c.ok() ? "" : c.status().message();
  }

  // A handshake between an OpenSSL client (`client_ctx`, configured by the
  // caller) and a connection of `server`'s for a listener speaking
  // `protocol`, through memory. Whether it completed; the negotiated
  // version and ALPN into *version and *alpn.
  static bool Handshake(const TlsContext& server, SSL_CTX* client_ctx, const std::string& protocol,
                        std::string* version = nullptr, std::string* alpn = nullptr,
                        std::vector<std::string>* client_names = nullptr) {
    SSL* s = server.NewConnection(AlpnFor(protocol));
    SSL* c = SSL_new(client_ctx);
    BIO* to_server = BIO_new(BIO_s_mem());
    BIO* to_client = BIO_new(BIO_s_mem());
    // Each BIO is held by both ends: one more reference each, which the
    // second SSL_set_bio takes over (SSL_free releases them).
    BIO_up_ref(to_server);
    BIO_up_ref(to_client);
    SSL_set_bio(s, to_server, to_client);
    SSL_set_bio(c, to_client, to_server);
    SSL_set_connect_state(c);
    bool done_c = false, done_s = false, failed = false;
    for (int round = 0; round < 20 && !(done_c && done_s) && !failed; ++round) {
      if (!done_c) {
        const int r = SSL_do_handshake(c);
        done_c = r == 1;
        failed |= r <= 0 && SSL_get_error(c, r) != SSL_ERROR_WANT_READ;
      }
      if (!done_s) {
        const int r = SSL_do_handshake(s);
        done_s = r == 1;
        failed |= r <= 0 && SSL_get_error(s, r) != SSL_ERROR_WANT_READ;
      }
    }
    ERR_clear_error();
    if (version != nullptr) *version = SSL_get_version(s);
    if (alpn != nullptr) {
      const unsigned char* p = nullptr;
      unsigned int n = 0;
      SSL_get0_alpn_selected(s, &p, &n);
      alpn->assign(reinterpret_cast<const char*>(p), n);
    }
    const bool ok = done_c && done_s && !failed;
    if (client_names != nullptr) *client_names = VerifiedClientNames(s);
    SSL_free(c);
    SSL_free(s);
    return ok;
  }

  // A client trusting the test CA, presenting `cert`.pem (none: "").
  static SSL_CTX* Client(bool with_cert = false, const std::string& cert = "client") {
    SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
    SSL_CTX_load_verify_locations(ctx, Path("ca.pem").c_str(), nullptr);
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nullptr);
    if (with_cert) {
      SSL_CTX_use_certificate_file(ctx, Path(cert + ".pem").c_str(), SSL_FILETYPE_PEM);
      SSL_CTX_use_PrivateKey_file(ctx, Path(cert + ".key").c_str(), SSL_FILETYPE_PEM);
    }
    return ctx;
  }
};

TEST_F(TlsContextTest, LoadsAndNamesItsCertificate) {
  auto c = TlsContext::Load(Files(), Now());
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  std::ifstream serial(Path("server.serial"));
  std::string line;
  std::getline(serial, line);
  EXPECT_EQ("serial=" + (*c)->serial(), line);
  EXPECT_TRUE((*c)->warnings().empty());
  EXPECT_GT((*c)->not_after_s(), Now() + 29 * 86'400);
}

TEST_F(TlsContextTest, Tls12And13OnlyWithAlpnPerListener) {
  auto c = TlsContext::Load(Files(), Now());
  ASSERT_TRUE(c.ok());
  SSL_CTX* client = Client();
  std::string version, alpn;
  ASSERT_TRUE(Handshake(**c, client, "resp", &version, &alpn));
  EXPECT_EQ(version, "TLSv1.3");
  EXPECT_EQ(alpn, "");
  // A client offering h2 and http/1.1: HTTP answers http/1.1, gRPC h2.
  const unsigned char offer[] = "\x02h2\x08http/1.1";
  SSL_CTX_set_alpn_protos(client, offer, sizeof(offer) - 1);
  ASSERT_TRUE(Handshake(**c, client, "http", &version, &alpn));
  EXPECT_EQ(alpn, "http/1.1");
  ASSERT_TRUE(Handshake(**c, client, "grpc", &version, &alpn));
  EXPECT_EQ(alpn, "h2");
  // A client offering only what the listener does not speak is served
  // without ALPN.
  const unsigned char other[] = "\x06spdy/3";
  SSL_CTX_set_alpn_protos(client, other, sizeof(other) - 1);
  ASSERT_TRUE(Handshake(**c, client, "http", &version, &alpn));
  EXPECT_EQ(alpn, "");
  // TLS 1.2 still; 1.1 and below refused.
  SSL_CTX_set_max_proto_version(client, TLS1_2_VERSION);
  ASSERT_TRUE(Handshake(**c, client, "resp", &version));
  EXPECT_EQ(version, "TLSv1.2");
  SSL_CTX_set_min_proto_version(client, TLS1_VERSION);
  SSL_CTX_set_max_proto_version(client, TLS1_1_VERSION);
  SSL_CTX_set_security_level(client, 0);
  EXPECT_FALSE(Handshake(**c, client, "resp"));
  SSL_CTX_free(client);
}

TEST_F(TlsContextTest, ClientCertificatesWhenRequired) {
  TlsFiles files = Files();
  files.client_ca_file = Path("ca.pem");
  files.require_client_cert = true;
  auto c = TlsContext::Load(files, Now());
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  SSL_CTX* anonymous = Client(false);
  SSL_CTX* known = Client(true);
  EXPECT_FALSE(Handshake(**c, anonymous, "http"));
  EXPECT_TRUE(Handshake(**c, known, "http"));
  // Asked but not required: both are served.
  files.require_client_cert = false;
  auto optional = TlsContext::Load(files, Now());
  ASSERT_TRUE(optional.ok());
  EXPECT_TRUE(Handshake(**optional, anonymous, "http"));
  EXPECT_TRUE(Handshake(**optional, known, "http"));
  SSL_CTX_free(anonymous);
  SSL_CTX_free(known);
}

TEST_F(TlsContextTest, AVerifiedClientCertificateGivesItsNames) {
  // Two CAs in one file: a client of either verifies.
  ASSERT_EQ(std::system(("cat " + Path("other-ca.pem") + " " + Path("ca.pem") + " > " +
                         Path("both-cas.pem"))
                            .c_str()),
            0);
  TlsFiles files = Files();
  files.client_ca_file = Path("ca.pem");
  auto c = TlsContext::Load(files, Now());
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  std::vector<std::string> names;
  SSL_CTX* cn_client = Client(true, "client");
  ASSERT_TRUE(Handshake(**c, cn_client, "http", nullptr, nullptr, &names));
  EXPECT_EQ(names, std::vector<std::string>{"ops.example.com"});
  SSL_CTX* san_client = Client(true, "san-client");
  ASSERT_TRUE(Handshake(**c, san_client, "http", nullptr, nullptr, &names));
  EXPECT_EQ(names, (std::vector<std::string>{"ci.example.com", "spiffe://example.com/deploy"}));
  // Asked, not required: a certificate another CA signed is refused (not
  // served as anonymous: its client meant to be someone); no certificate is
  // served, with no names.
  SSL_CTX* stranger = Client(true, "stranger");
  EXPECT_FALSE(Handshake(**c, stranger, "http", nullptr, nullptr, &names));
  EXPECT_TRUE(names.empty());
  SSL_CTX* anonymous = Client(false);
  ASSERT_TRUE(Handshake(**c, anonymous, "http", nullptr, nullptr, &names));
  EXPECT_TRUE(names.empty());
  files.client_ca_file = Path("both-cas.pem");
  auto both = TlsContext::Load(files, Now());
  ASSERT_TRUE(both.ok()) << both.status().ToString();
  ASSERT_TRUE(Handshake(**both, stranger, "http", nullptr, nullptr, &names));
  EXPECT_EQ(names, std::vector<std::string>{"ops.example.com"});
  // The PEM text gRPC is given is the files'.
  EXPECT_NE((*both)->pem().client_cas.find("BEGIN CERTIFICATE"), std::string::npos);
  EXPECT_NE((*both)->pem().key.find("PRIVATE KEY"), std::string::npos);
  for (SSL_CTX* ctx : {cn_client, san_client, stranger, anonymous}) SSL_CTX_free(ctx);
}

TEST_F(TlsContextTest, EachBadFileIsNamedWithWhatIsWrong) {
  EXPECT_EQ(Error(Files("missing.pem")),
            "tls.cert_file '" + Path("missing.pem") + "': No such file or directory");
  EXPECT_EQ(Error(Files("server.pem", "missing.key")),
            "tls.key_file '" + Path("missing.key") + "': No such file or directory");
  EXPECT_EQ(Error(Files("server.pem", "next.key")), "tls.key_file '" + Path("next.key") +
                                                        "': does not match the certificate in '" +
                                                        Path("server.pem") + "'");
  EXPECT_EQ(
      Error(Files("garbage.pem"))
          .rfind("tls.cert_file '" + Path("garbage.pem") + "': not a PEM certificate (chain): ", 0),
      0u)
      << Error(Files("garbage.pem"));
  EXPECT_EQ(Error(Files("server.pem", "garbage.pem"))
                .rfind("tls.key_file '" + Path("garbage.pem") + "': not a PEM private key: ", 0),
            0u);
  TlsFiles files = Files();
  files.require_client_cert = true;
  EXPECT_EQ(Error(files),
            "tls.require_client_cert needs tls.client_ca_file (the CAs client certificates "
            "chain to)");
  files.client_ca_file = Path("garbage.pem");
  EXPECT_EQ(Error(files).rfind("tls.client_ca_file '" + Path("garbage.pem") + "': not PEM CA", 0),
            0u)
      << Error(files);
  EXPECT_EQ(Error(TlsFiles{}), "tls.cert_file is required");
}

TEST_F(TlsContextTest, AnExpiredOrExpiringCertificateLoadsWithAWarning) {
  auto soon = TlsContext::Load(Files(), Now() + 20 * 86'400 + 3'600);
  ASSERT_TRUE(soon.ok());
  ASSERT_EQ((*soon)->warnings().size(), 1u);
  // 30 days of validity, 20 and an hour of them gone: 9 whole days left.
  EXPECT_NE((*soon)->warnings()[0].find("expires in 9 days"), std::string::npos)
      << (*soon)->warnings()[0];
  auto expired = TlsContext::Load(Files(), Now() + 40 * 86'400);
  ASSERT_TRUE(expired.ok());
  ASSERT_EQ((*expired)->warnings().size(), 1u);
  EXPECT_NE((*expired)->warnings()[0].find("expired 10 days ago"), std::string::npos)
      << (*expired)->warnings()[0];
}

TEST_F(TlsContextTest, AReloadKeepsTheOldContextWhenTheNewFilesAreBad) {
  auto first = TlsContext::Load(Files(), Now());
  ASSERT_TRUE(first.ok());
  TlsContextHolder holder(*first);
  const std::string old_serial = holder.Current()->serial();
  // A connection made before the reload keeps its context.
  std::shared_ptr<const TlsContext> in_use = holder.Current();
  EXPECT_FALSE(holder.Reload(Files("server.pem", "next.key"), Now()).ok());
  EXPECT_EQ(holder.Current()->serial(), old_serial);
  ASSERT_TRUE(holder.Reload(Files("next.pem", "next.key"), Now()).ok());
  EXPECT_NE(holder.Current()->serial(), old_serial);
  EXPECT_EQ(in_use->serial(), old_serial);
  SSL_CTX* client = Client();
  EXPECT_TRUE(Handshake(*in_use, client, "resp"));
  EXPECT_TRUE(Handshake(*holder.Current(), client, "resp"));
  SSL_CTX_free(client);
}

}  // namespace
}  // namespace floodgate::server
