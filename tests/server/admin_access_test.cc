// Who may use the control plane (server/context/admin_access.h): an admin
// token sent in clear from another host is refused however good it is,
// unless admin.allow_plaintext; loopback and TLS clients never are.
#include "server/context/admin_access.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>

#include <cstring>
#include <string>

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

}  // namespace
}  // namespace floodgate::server
