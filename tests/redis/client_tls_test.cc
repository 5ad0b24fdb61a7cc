// The Redis client over TLS (rediss://) against a redis-server with a TLS
// port: certificates made here with the openssl CLI (a CA, a server
// certificate for 127.0.0.1, a client certificate, and an untrusted CA).
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "redis/client.h"
#include "redis/client_helpers.h"
#include "testing/redis_server.h"

namespace floodgate::redis {
namespace {

using client_testing::Latch;
using client_testing::MakeClient;
using client_testing::OptionsFor;
using client_testing::Text;
using floodgate::testing::RedisServer;

// Certificates and a TLS redis-server, shared by the suite (making them
// takes a moment).
class ClientTlsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    char tmpl[] = "/tmp/floodgate-tls-XXXXXX";
    if (::mkdtemp(tmpl) == nullptr) {
      error_ = "mkdtemp failed";
      return;
    }
    dir_ = tmpl;
    const std::string ec = " -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
    const std::string script =
        "cd " + dir_ + " && printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\\n' > server.ext" +
        " && openssl req -x509" + ec +
        " -keyout ca.key -out ca.pem -days 2 -subj /CN=floodgate-test-ca" +  //
        " && openssl req" + ec + " -keyout server.key -out server.csr -subj /CN=localhost" +
        " && openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial" +
        " -out server.pem -days 2 -extfile server.ext" + " && openssl req" + ec +
        " -keyout client.key -out client.csr -subj /CN=floodgate" +
        " && openssl x509 -req -in client.csr -CA ca.pem -CAkey ca.key -CAcreateserial" +
        " -out client.pem -days 2" + " && openssl req -x509" + ec +
        " -keyout other-ca.key -out other-ca.pem -days 2 -subj /CN=untrusted-ca" +
        " > openssl.log 2>&1";
    if (std::system(script.c_str()) != 0) {
      error_ = "making certificates with the openssl CLI failed (is openssl installed? see " +
               dir_ + "/openssl.log)";
      return;
    }
    tls_port_ = floodgate::testing::FreePort();
    server_ = new RedisServer();
    // A plain port too, for the fixture's readiness check.
    if (!server_->Start({"--tls-port", std::to_string(tls_port_), "--tls-cert-file",
                         dir_ + "/server.pem", "--tls-key-file", dir_ + "/server.key",
                         "--tls-ca-cert-file", dir_ + "/ca.pem", "--tls-auth-clients", "yes"})) {
      error_ = "TLS redis-server: " + server_->error();
    }
  }

  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }

  void SetUp() override { ASSERT_TRUE(error_.empty()) << error_; }

  // rediss:// to the TLS port with `query` options.
  static std::string Url(const std::string& query) {
    return "rediss://127.0.0.1:" + std::to_string(tls_port_) + "?" + query;
  }
  static std::string TrustedWithClientCert() {
    return "tls_ca_file=" + dir_ + "/ca.pem&tls_cert_file=" + dir_ +
           "/client.pem&tls_key_file=" + dir_ + "/client.key";
  }

  static std::string dir_;
  static std::string error_;
  static int tls_port_;
  static RedisServer* server_;
};

std::string ClientTlsTest::dir_;
std::string ClientTlsTest::error_;
int ClientTlsTest::tls_port_ = -1;
RedisServer* ClientTlsTest::server_ = nullptr;

TEST_F(ClientTlsTest, ConnectsVerifiesAndServesConcurrentRequests) {
  auto client = MakeClient(OptionsFor(Url(TrustedWithClientCert())));
  ASSERT_NE(client, nullptr);
  ASSERT_EQ(Text(client->Call("", {"PING"})), "PONG");

  constexpr int kThreads = 4;
  constexpr int kPerThread = 1000;
  std::atomic<int> bad{0};
  Latch latch(kThreads * kPerThread);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      const std::string key = "tls:" + std::to_string(t);
      for (int i = 0; i < kPerThread; ++i) {
        client->Send(key, {"INCR", key}, [&](Status s, const redisReply* r) {
          if (!s.ok() || r->type != REDIS_REPLY_INTEGER) bad.fetch_add(1);
          latch.CountDown();
        });
      }
    });
  }
  for (auto& th : threads) th.join();
  ASSERT_TRUE(latch.Wait());
  EXPECT_EQ(bad.load(), 0);
  for (int t = 0; t < kThreads; ++t) {
    const std::string key = "tls:" + std::to_string(t);
    EXPECT_EQ(Text(client->Call(key, {"GET", key})), "\"1000\"");
  }
  // Large values cross several TLS records both ways.
  const std::string big(300'000, 'x');
  EXPECT_EQ(Text(client->Call("big", {"SET", "big", big})), "OK");
  Result<OwnedReply> r = client->Call("big", {"GET", "big"});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(std::string((*r)->str, (*r)->len), big);
}

TEST_F(ClientTlsTest, UntrustedCertificateIsAClearError) {
  auto client = MakeClient(OptionsFor(Url("tls_ca_file=" + dir_ + "/other-ca.pem")));
  Result<OwnedReply> r = client->Call("", {"PING"});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(r.status().message().find("certificate verify failed"), std::string::npos)
      << r.status().message();
}

TEST_F(ClientTlsTest, NameMismatchIsRefused) {
  auto client =
      MakeClient(OptionsFor(Url(TrustedWithClientCert() + "&tls_server_name=redis.example.com")));
  Result<OwnedReply> r = client->Call("", {"PING"});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("certificate verify failed"), std::string::npos)
      << r.status().message();
  EXPECT_NE(r.status().message().find("mismatch"), std::string::npos) << r.status().message();
  // The name the certificate does hold.
  auto ok = MakeClient(OptionsFor(Url(TrustedWithClientCert() + "&tls_server_name=localhost")));
  EXPECT_EQ(Text(ok->Call("", {"PING"})), "PONG");
}

TEST_F(ClientTlsTest, VerificationOffAcceptsAnyCertificate) {
  auto client = MakeClient(
      OptionsFor(Url("tls_verify=no&tls_ca_file=" + dir_ + "/other-ca.pem&tls_cert_file=" + dir_ +
                     "/client.pem&tls_key_file=" + dir_ + "/client.key")));
  EXPECT_EQ(Text(client->Call("", {"PING"})), "PONG");
}

TEST_F(ClientTlsTest, ServerRefusingTheClientIsAnError) {
  // The server requires a client certificate; without one it ends the session.
  auto client = MakeClient(OptionsFor(Url("tls_ca_file=" + dir_ + "/ca.pem")));
  Result<OwnedReply> r = client->Call("", {"PING"});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(r.status().message().find("redis 127.0.0.1:"), std::string::npos)
      << r.status().message();
}

TEST_F(ClientTlsTest, UnreadableFilesFailCreate) {
  ClientOptions options = OptionsFor(Url("tls_ca_file=/nonexistent/ca.pem"));
  Result<std::unique_ptr<Client>> client = Client::Create(options);
  ASSERT_FALSE(client.ok());
  EXPECT_EQ(client.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(client.status().message().find("cannot load CA file '/nonexistent/ca.pem'"),
            std::string::npos)
      << client.status().message();

  options = OptionsFor(Url("tls_ca_file=" + dir_ + "/ca.pem&tls_cert_file=" + dir_ +
                           "/client.pem&tls_key_file=" + dir_ + "/server.key"));
  client = Client::Create(options);
  ASSERT_FALSE(client.ok());
  EXPECT_NE(client.status().message().find("mismatch"), std::string::npos)
      << client.status().message();
}

}  // namespace
}  // namespace floodgate::redis
