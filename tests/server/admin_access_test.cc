// Who may use the control plane (server/context/admin_access.h): an admin
// token sent in clear from another host is refused however good it is,
// unless admin.allow_plaintext; loopback and TLS clients never are. A
// verified client certificate named in admin.client_names is an admin.
#include "server/context/admin_access.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>

#include <cstring>
#include <string>
#include <vector>

namespace floodgate::server {
namespace {

PeerAddress Peer(const char* text) {
  sockaddr_storage storage{};
  if (std::strchr(text, ':') != nullptr) {
    auto* a = reinterpret_cast<sockaddr_in6*>(&storage);
    a->sin6_family = AF_INET6;
    inet_pton(AF_INET6, text, &a->sin6_addr);
  } else {
    auto* a = reinterpret_cast<sockaddr_in*>(&storage);
    a->sin_family = AF_INET;
    inet_pton(AF_INET, text, &a->sin_addr);
  }
  return PeerAddress::From(storage);
}

TEST(AdminAccessTest, ATokenInClearFromAnotherHostIsRefused) {
  ServiceContext service;
  service.admin_token = "s3cret";
  const std::string why = PlaintextTokenRefusal(service, "s3cret", Peer("192.0.2.7"), false);
  EXPECT_EQ(why,
            "an admin token is refused over plaintext from another host (anyone on the path could "
            "read it): connect over TLS (listen_tls) or set admin.allow_plaintext: true");
  // Any token: a wrong one is not told apart from a right one here.
  EXPECT_FALSE(PlaintextTokenRefusal(service, "guess", Peer("2001:db8::7"), false).empty());
}

TEST(AdminAccessTest, LoopbackTlsNoTokenAndAllowPlaintextAreNotRefused) {
  ServiceContext service;
  service.admin_token = "s3cret";
  EXPECT_EQ(PlaintextTokenRefusal(service, "s3cret", Peer("127.0.0.1"), false), "");
  EXPECT_EQ(PlaintextTokenRefusal(service, "s3cret", Peer("::1"), false), "");
  EXPECT_EQ(PlaintextTokenRefusal(service, "s3cret", Peer("::ffff:127.0.0.2"), false), "");
  EXPECT_EQ(PlaintextTokenRefusal(service, "s3cret", Peer("192.0.2.7"), true), "");
  EXPECT_EQ(PlaintextTokenRefusal(service, "", Peer("192.0.2.7"), false), "");
  service.admin_allow_plaintext = true;
  EXPECT_EQ(PlaintextTokenRefusal(service, "s3cret", Peer("192.0.2.7"), false), "");
}

TEST(AdminAccessTest, AListedClientCertificateNameIsAnAdminWithOrWithoutAToken) {
  ServiceContext service;
  service.admin_token = "s3cret";
  service.read_token = "look";
  service.admin_client_names = {"ops.example.com", "spiffe://example.com/deploy"};
  const std::vector<std::string> ops = {"ops.example.com"};
  const std::vector<std::string> deploy = {"ci.example.com", "spiffe://example.com/deploy"};
  const std::vector<std::string> other = {"www.example.com"};
  EXPECT_EQ(AdminAccessOf(service, "", Peer("192.0.2.7"), ops), AdminAccess::kWrite);
  EXPECT_EQ(AdminAccessOf(service, "look", Peer("192.0.2.7"), deploy), AdminAccess::kWrite);
  EXPECT_EQ(AdminClientName(service, deploy), "spiffe://example.com/deploy");
  // Another name is nobody special: its tokens count as they would.
  EXPECT_EQ(AdminAccessOf(service, "", Peer("192.0.2.7"), other), AdminAccess::kNone);
  EXPECT_EQ(AdminAccessOf(service, "look", Peer("192.0.2.7"), other), AdminAccess::kRead);
  EXPECT_EQ(AdminClientName(service, other), "");
  // Names match whole and exactly.
  EXPECT_EQ(AdminAccessOf(service, "", Peer("192.0.2.7"), {"OPS.example.com"}), AdminAccess::kNone);
  EXPECT_EQ(AdminAccessOf(service, "", Peer("192.0.2.7"), {"ops.example.co"}), AdminAccess::kNone);
  // Without an admin token (loopback only), a listed certificate still is.
  service.admin_token.clear();
  EXPECT_EQ(AdminAccessOf(service, "", Peer("192.0.2.7"), ops), AdminAccess::kWrite);
  EXPECT_EQ(AdminAccessOf(service, "", Peer("192.0.2.7"), other), AdminAccess::kNone);
}

}  // namespace
}  // namespace floodgate::server
