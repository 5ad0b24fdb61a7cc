// EventLoop on a TLS listener (ListenerSpec::tls): an OpenSSL client's
// lines echoed through the loop, a reply far larger than a socket buffer
// written in pieces, plaintext sent to the TLS port refused and counted, a
// handshake that never starts closed by the request timeout (on a
// ManualClock), and a certificate reload seen by new connections while an
// open one keeps its own.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <ctime>
#include <memory>
#include <string>
#include <thread>

#include "floodgate/clock.h"
#include "server/net/event_loop.h"
#include "server/net/tls_context.h"
#include "testing/eventually.h"
#include "testing/line_loop.h"
#include "testing/test_certs.h"

namespace floodgate::server {
namespace {

using floodgate::testing::Eventually;

int64_t Now() { return static_cast<int64_t>(std::time(nullptr)); }

class EventLoopTlsTest : public testing::CertsTest {
 protected:
  void Start(const ConnectionPolicy& policy = {}) {
    auto context = TlsContext::Load({Path("server.pem"), Path("server.key"), "", false}, Now());
    ASSERT_TRUE(context.ok()) << context.status().ToString();
    holder_ = std::make_unique<TlsContextHolder>(*context);
    loop_ = std::make_unique<testing::LineLoop>(clock_, policy, holder_.get());
  }

  // A TLS client on a new connection, trusting the test CA; null if the
  // handshake failed.
  struct Client {
    SSL_CTX* ctx = nullptr;
    SSL* ssl = nullptr;
    int fd = -1;
    ~Client() {
      SSL_free(ssl);
      SSL_CTX_free(ctx);
      if (fd >= 0) ::close(fd);
    }
    std::string Serial() const {
      X509* cert = SSL_get1_peer_certificate(ssl);
      if (cert == nullptr) return "";
      BIGNUM* bn = ASN1_INTEGER_to_BN(X509_get0_serialNumber(cert), nullptr);
      char* hex = BN_bn2hex(bn);
      std::string out(hex);
      OPENSSL_free(hex);
      BN_free(bn);
      X509_free(cert);
      return out;
    }
    bool Send(const std::string& data) {
      return SSL_write(ssl, data.data(), static_cast<int>(data.size())) ==
             static_cast<int>(data.size());
    }
    std::string Read(size_t n) {
      std::string got;
      char buf[16384];
      while (got.size() < n) {
        const int r = SSL_read(ssl, buf, sizeof(buf));
        if (r <= 0) break;
        got.append(buf, static_cast<size_t>(r));
      }
      return got;
    }
  };
  std::unique_ptr<Client> TlsClient() {
    auto c = std::make_unique<Client>();
    c->ctx = SSL_CTX_new(TLS_client_method());
    SSL_CTX_load_verify_locations(c->ctx, Path("ca.pem").c_str(), nullptr);
    SSL_CTX_set_verify(c->ctx, SSL_VERIFY_PEER, nullptr);
    c->fd = loop_->Connect();
    c->ssl = SSL_new(c->ctx);
    SSL_set_fd(c->ssl, c->fd);
    SSL_set_tlsext_host_name(c->ssl, "localhost");
    SSL_set1_host(c->ssl, "localhost");
    if (SSL_connect(c->ssl) != 1) {
      ERR_clear_error();
      return nullptr;
    }
    return c;
  }

  const ListenerCounters& counters() const { return loop_->counters(); }

  ManualClock clock_;
  std::unique_ptr<TlsContextHolder> holder_;  // outlives loop_
  std::unique_ptr<testing::LineLoop> loop_;
};

TEST_F(EventLoopTlsTest, EchoesOverTlsIncludingARepliesLargerThanTheSocketTakes) {
  Start();
  auto client = TlsClient();
  ASSERT_NE(client, nullptr);
  ASSERT_TRUE(client->Send("hello\n"));
  EXPECT_EQ(client->Read(6), "hello\n");
  // 4 MiB in one line: read and written in many pieces on both sides.
  const std::string big = std::string(4 << 20, 'x') + "\n";
  std::thread writer([&] { EXPECT_TRUE(client->Send(big)); });
  EXPECT_EQ(client->Read(big.size()), big);
  writer.join();
  EXPECT_EQ(counters().tls_handshake_failures.load(), 0);
}

TEST_F(EventLoopTlsTest, PlaintextOnTheTlsPortIsRefusedAndCounted) {
  Start();
  const int fd = loop_->Connect();
  const std::string ping = "*1\r\n$4\r\nPING\r\n";
  ASSERT_EQ(::send(fd, ping.data(), ping.size(), 0), static_cast<ssize_t>(ping.size()));
  char buf[256];
  pollfd p{fd, POLLIN, 0};
  ASSERT_EQ(::poll(&p, 1, 10'000), 1);
  // No plaintext answer: a TLS alert, or nothing, then the end.
  ssize_t r;
  std::string got;
  while ((r = ::recv(fd, buf, sizeof(buf), 0)) > 0) got.append(buf, static_cast<size_t>(r));
  EXPECT_EQ(got.find("PONG"), std::string::npos);
  EXPECT_TRUE(Eventually([&] { return counters().tls_handshake_failures.load() == 1; }));
  ::close(fd);
  // And the port still serves TLS.
  auto client = TlsClient();
  ASSERT_NE(client, nullptr);
  ASSERT_TRUE(client->Send("ok\n"));
  EXPECT_EQ(client->Read(3), "ok\n");
}

TEST_F(EventLoopTlsTest, AHandshakeThatNeverStartsIsClosedByTheRequestTimeout) {
  ConnectionPolicy policy;
  policy.request_timeout_ms = 500;
  Start(policy);
  const int fd = loop_->Connect();
  EXPECT_TRUE(Eventually([&] { return counters().accepted.load() == 1; }));
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  clock_.AdvanceMs(499);
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  EXPECT_EQ(counters().closed[static_cast<int>(CloseReason::kRequestTimeout)].load(), 0);
  clock_.AdvanceMs(125);
  EXPECT_TRUE(Eventually([&] {
    return counters().closed[static_cast<int>(CloseReason::kRequestTimeout)].load() == 1;
  }));
  char c;
  pollfd p{fd, POLLIN, 0};
  ASSERT_EQ(::poll(&p, 1, 10'000), 1);
  EXPECT_EQ(::recv(fd, &c, 1, 0), 0);  // closed, no plaintext timeout reply
  ::close(fd);
}

TEST_F(EventLoopTlsTest, NewConnectionsGetAReloadedCertificateOpenOnesKeepTheirs) {
  Start();
  auto before = TlsClient();
  ASSERT_NE(before, nullptr);
  const std::string old_serial = before->Serial();
  ASSERT_TRUE(holder_->Reload({Path("next.pem"), Path("next.key"), "", false}, Now()).ok());
  auto after = TlsClient();
  ASSERT_NE(after, nullptr);
  EXPECT_NE(after->Serial(), old_serial);
  EXPECT_EQ(after->Serial(), holder_->Current()->serial());
  // The open one goes on with its own.
  ASSERT_TRUE(before->Send("still\n"));
  EXPECT_EQ(before->Read(6), "still\n");
}

}  // namespace
}  // namespace floodgate::server
