// ClientAddress (service/subjects/client_address.h): the client behind
// trusted proxies, and nothing a client writes believed from anyone else.
#include "service/subjects/client_address.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace floodgate::service {
namespace {

IpAddress Ip(const char* text) { return *IpAddress::Parse(text); }

CidrSet Trusted(const std::vector<const char*>& cidrs) {
  std::vector<Cidr> networks;
  for (const char* c : cidrs) networks.push_back(*ParseCidr(c));
  return *CidrSet::Build(std::move(networks));
}

std::string Client(const char* peer, const CidrSet& trusted, std::string_view xff,
                   std::string_view forwarded = "") {
  return ClientAddress(Ip(peer), trusted, {xff, forwarded}).ToString();
}

TEST(ClientAddressTest, AnUntrustedPeerIsTheClientWhateverItSends) {
  const CidrSet proxies = Trusted({"10.0.0.0/8"});
  EXPECT_EQ(Client("203.0.113.9", proxies, "198.51.100.1"), "203.0.113.9");
  EXPECT_EQ(Client("203.0.113.9", proxies, "", "for=198.51.100.1"), "203.0.113.9");
  // No trusted proxies at all (the default): the peer, always.
  EXPECT_EQ(Client("10.0.0.1", CidrSet(), "198.51.100.1"), "10.0.0.1");
}

TEST(ClientAddressTest, TheRightmostUntrustedHopIsTheClient) {
  const CidrSet proxies = Trusted({"10.0.0.0/8", "2001:db8:ffff::/48"});
  EXPECT_EQ(Client("10.0.0.1", proxies, "198.51.100.7"), "198.51.100.7");
  // A client's own "X-Forwarded-For: 1.1.1.1" arrives with its real address
  // appended by the proxy: the spoofed hop is to the left and not read.
  EXPECT_EQ(Client("10.0.0.1", proxies, "1.1.1.1, 198.51.100.7"), "198.51.100.7");
  // Two proxies of ours: both passed over.
  EXPECT_EQ(Client("10.0.0.1", proxies, "1.1.1.1, 198.51.100.7, 10.2.3.4"), "198.51.100.7");
  EXPECT_EQ(Client("10.0.0.1", proxies, "2001:db8::5,2001:db8:ffff::1"), "2001:db8::5");
  // Every hop trusted: the left-most.
  EXPECT_EQ(Client("10.0.0.1", proxies, "10.9.9.9, 10.2.3.4"), "10.9.9.9");
  // Several header lines arrive joined by commas; spaces and tabs around.
  EXPECT_EQ(Client("10.0.0.1", proxies, " 1.1.1.1 ,\t198.51.100.7 "), "198.51.100.7");
  // Nothing listed: the peer.
  EXPECT_EQ(Client("10.0.0.1", proxies, " "), "10.0.0.1");
}

TEST(ClientAddressTest, AHopThatIsNoAddressEndsTheWalkOnItsRight) {
  const CidrSet proxies = Trusted({"10.0.0.0/8"});
  EXPECT_EQ(Client("10.0.0.1", proxies, "198.51.100.7, garbage"), "10.0.0.1");
  EXPECT_EQ(Client("10.0.0.1", proxies, "198.51.100.7, garbage, 10.2.3.4"), "10.2.3.4");
  EXPECT_EQ(Client("10.0.0.1", proxies, "198.51.100.7,,10.2.3.4"), "10.2.3.4");
  EXPECT_EQ(Client("10.0.0.1", proxies, "", "for=unknown"), "10.0.0.1");
  EXPECT_EQ(Client("10.0.0.1", proxies, "", "for=198.51.100.7, for=_hidden"), "10.0.0.1");
}

TEST(ClientAddressTest, PortsBracketsAndMappedAddresses) {
  const CidrSet proxies = Trusted({"127.0.0.0/8", "::1/128"});
  EXPECT_EQ(Client("127.0.0.1", proxies, "198.51.100.7:4711"), "198.51.100.7");
  EXPECT_EQ(Client("127.0.0.1", proxies, "[2001:db8::7]:443"), "2001:db8::7");
  EXPECT_EQ(Client("127.0.0.1", proxies, "[2001:db8::7]"), "2001:db8::7");
  EXPECT_EQ(Client("127.0.0.1", proxies, "2001:db8::7"), "2001:db8::7");
  EXPECT_EQ(Client("127.0.0.1", proxies, "::ffff:198.51.100.7"), "198.51.100.7");
  // A peer on a dual-stack socket is its IPv4 self, and trusted as such.
  EXPECT_EQ(Client("::ffff:127.0.0.1", proxies, "198.51.100.7"), "198.51.100.7");
  EXPECT_EQ(Client("::1", proxies, "2001:db8::9"), "2001:db8::9");
  EXPECT_FALSE(ParseForwardedHop("[2001:db8::7").has_value());
  EXPECT_FALSE(ParseForwardedHop("[2001:db8::7]x").has_value());
}

TEST(ClientAddressTest, ForwardedIsReadWhenThereIsNoXForwardedFor) {
  const CidrSet proxies = Trusted({"10.0.0.0/8"});
  EXPECT_EQ(Client("10.0.0.1", proxies, "", "for=198.51.100.7;proto=https;by=10.0.0.1"),
            "198.51.100.7");
  EXPECT_EQ(Client("10.0.0.1", proxies, "", "For=\"[2001:db8::7]:4711\""), "2001:db8::7");
  EXPECT_EQ(Client("10.0.0.1", proxies, "", "for=1.1.1.1, proto=http;for=198.51.100.7"),
            "198.51.100.7");
  EXPECT_EQ(Client("10.0.0.1", proxies, "", "for=198.51.100.7, for=10.3.3.3"), "198.51.100.7");
  // Both: X-Forwarded-For is the one read.
  EXPECT_EQ(Client("10.0.0.1", proxies, "203.0.113.1", "for=198.51.100.7"), "203.0.113.1");
}

TEST(ClientAddressTest, ALongListIsReadOnlySoFarFromTheRight) {
  const CidrSet proxies = Trusted({"10.0.0.0/8"});
  std::string list = "198.51.100.7";
  for (size_t i = 0; i < kMaxForwardedHops + 5; ++i) list += ", 10.0.0." + std::to_string(i % 250);
  // The walk stops at the bound among trusted hops: the last one read.
  const std::string client = Client("10.0.0.1", proxies, list);
  EXPECT_NE(client, "198.51.100.7");
  EXPECT_EQ(client.rfind("10.0.0.", 0), 0u) << client;
}

}  // namespace
}  // namespace floodgate::service
