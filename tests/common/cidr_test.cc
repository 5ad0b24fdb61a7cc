// ParseCidr and Cidr: the forms read, host bits cleared, the mapped range
// read as IPv4, every refusal's exact message, and Contains across families.
#include "common/cidr.h"

#include <gtest/gtest.h>

#include <string>

namespace floodgate {
namespace {

IpAddress Ip(std::string_view text) { return IpAddress::Parse(text).value(); }

std::string Canonical(std::string_view text) {
  Result<Cidr> c = ParseCidr(text);
  if (!c.ok()) return "error: " + c.status().message();
  return c->ToString();
}

TEST(CidrTest, Forms) {
  EXPECT_EQ(Canonical("10.0.0.0/8"), "10.0.0.0/8");
  EXPECT_EQ(Canonical("0.0.0.0/0"), "0.0.0.0/0");
  EXPECT_EQ(Canonical("192.0.2.7/32"), "192.0.2.7/32");
  EXPECT_EQ(Canonical("192.0.2.7"), "192.0.2.7/32");  // a bare address: one host
  EXPECT_EQ(Canonical("2001:db8::/32"), "2001:db8::/32");
  EXPECT_EQ(Canonical("2001:DB8:0:0::/32"), "2001:db8::/32");
  EXPECT_EQ(Canonical("::/0"), "::/0");
  EXPECT_EQ(Canonical("2001:db8::1"), "2001:db8::1/128");
  EXPECT_EQ(Canonical("2001:db8::1/128"), "2001:db8::1/128");

  const Cidr c = ParseCidr("10.0.0.0/8").value();
  EXPECT_TRUE(c.is_v4());
  EXPECT_EQ(c.prefix_len(), 8);
  EXPECT_EQ(c.address(), Ip("10.0.0.0"));
  EXPECT_FALSE(ParseCidr("2001:db8::/32")->is_v4());
  EXPECT_EQ(ParseCidr("2001:db8::/32")->prefix_len(), 32);
}

TEST(CidrTest, HostBitsAreCleared) {
  EXPECT_EQ(Canonical("10.1.2.3/8"), "10.0.0.0/8");
  EXPECT_EQ(Canonical("192.0.2.1/24"), "192.0.2.0/24");
  EXPECT_EQ(Canonical("255.255.255.255/1"), "128.0.0.0/1");
  EXPECT_EQ(Canonical("255.255.255.255/0"), "0.0.0.0/0");
  EXPECT_EQ(Canonical("192.0.2.255/31"), "192.0.2.254/31");
  EXPECT_EQ(Canonical("2001:db8:ffff::1/32"), "2001:db8::/32");
  EXPECT_EQ(Canonical("2001:db8::ff/121"), "2001:db8::80/121");
  EXPECT_EQ(Canonical("ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff/65"),
            "ffff:ffff:ffff:ffff:8000::/65");
  EXPECT_EQ(Canonical("ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff/64"), "ffff:ffff:ffff:ffff::/64");
  EXPECT_EQ(Canonical("ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff/0"), "::/0");
  EXPECT_EQ(ParseCidr("10.1.2.3/8").value(), ParseCidr("10.0.0.0/8").value());
}

TEST(CidrTest, TheMappedRangeIsIPv4) {
  EXPECT_EQ(Canonical("::ffff:192.0.2.0/120"), "192.0.2.0/24");
  EXPECT_EQ(Canonical("::ffff:192.0.2.1"), "192.0.2.1/32");
  EXPECT_EQ(Canonical("::ffff:c000:201/128"), "192.0.2.1/32");
  EXPECT_EQ(Canonical("::ffff:192.0.2.1/104"), "192.0.0.0/8");
  EXPECT_EQ(Canonical("::ffff:0:0/96"), "0.0.0.0/0");  // the whole IPv4 space
  EXPECT_TRUE(ParseCidr("::ffff:192.0.2.0/120")->is_v4());
  // Shorter than the mapped prefix: more than the IPv4 space, so IPv6.
  EXPECT_EQ(Canonical("::ffff:192.0.2.1/95"), "::fffe:0:0/95");
  EXPECT_EQ(Canonical("::ffff:0:0/80"), "::/80");
  EXPECT_FALSE(ParseCidr("::ffff:0:0/95")->is_v4());
  // Other embeddings are IPv6 networks.
  EXPECT_EQ(Canonical("64:ff9b::192.0.2.0/120"), "64:ff9b::c000:200/120");
  EXPECT_EQ(Canonical("::192.0.2.0/120"), "::c000:200/120");
}

TEST(CidrTest, RefusalsSayWhatIsWrong) {
  const std::pair<std::string_view, const char*> cases[] = {
      {"", "'': no address"},
      {"/8", "'/8': no address before '/'"},
      {"10.0.0.0/", "'10.0.0.0/': no prefix length after '/'"},
      {"10.0.0.0/33", "'10.0.0.0/33': prefix length 33 is past 32 for IPv4"},
      {"10.0.0.0/999", "'10.0.0.0/999': prefix length 999 is past 32 for IPv4"},
      {"10.0.0.0/1000", "'10.0.0.0/1000': prefix length 1000 is past 32 for IPv4"},
      {"10.0.0.0/12345678901234567890",
       "'10.0.0.0/12345678901234567890': prefix length 1234567890123456... is past 32 for IPv4"},
      {"2001:db8::/129", "'2001:db8::/129': prefix length 129 is past 128 for IPv6"},
      // A mapped text counts over 128 bits, as it is written.
      {"::ffff:1.2.3.4/129", "'::ffff:1.2.3.4/129': prefix length 129 is past 128 for IPv6"},
      {"10.0.0.0/08", "'10.0.0.0/08': prefix length '08' has a leading zero"},
      {"10.0.0.0/00", "'10.0.0.0/00': prefix length '00' has a leading zero"},
      {"10.0.0.0/x", "'10.0.0.0/x': prefix length 'x' is not a decimal number"},
      {"10.0.0.0/-1", "'10.0.0.0/-1': prefix length '-1' is not a decimal number"},
      {"10.0.0.0/+8", "'10.0.0.0/+8': prefix length '+8' is not a decimal number"},
      {"10.0.0.0/ 8", "'10.0.0.0/ 8': prefix length ' 8' is not a decimal number"},
      {"10.0.0.0/8 ", "'10.0.0.0/8 ': prefix length '8 ' is not a decimal number"},
      {"10.0.0.0/8/8", "'10.0.0.0/8/8': prefix length '8/8' is not a decimal number"},
      {"10.0.0.0/0x8", "'10.0.0.0/0x8': prefix length '0x8' is not a decimal number"},
      {"10.0.0.0/8\n", "'10.0.0.0/8\\x0a': prefix length '8\\x0a' is not a decimal number"},
      {"10.0.0/8", "'10.0.0/8': '10.0.0' is not an IPv4 address"},
      {"10.0.0", "'10.0.0': not an IPv4 address"},
      {"010.0.0.0/8", "'010.0.0.0/8': '010.0.0.0' is not an IPv4 address"},
      {"256.0.0.0/8", "'256.0.0.0/8': '256.0.0.0' is not an IPv4 address"},
      {" 10.0.0.0/8", "' 10.0.0.0/8': ' 10.0.0.0' is not an IPv4 address"},
      {"example.com", "'example.com': not an IPv4 address"},
      {"2001:db8::g/32", "'2001:db8::g/32': '2001:db8::g' is not an IPv6 address"},
      {"fe80::1%eth0/64", "'fe80::1%eth0/64': 'fe80::1%eth0' is not an IPv6 address"},
      {"[2001:db8::]/32", "'[2001:db8::]/32': '[2001:db8::]' is not an IPv6 address"},
      {"2001:db8:::/32", "'2001:db8:::/32': '2001:db8:::' is not an IPv6 address"},
      {"::1:", "'::1:': not an IPv6 address"},
      {"'/8", "'\\'/8': '\\'' is not an IPv4 address"},
      {std::string_view("1.2.3.4\0/8", 10),
       "'1.2.3.4\\x00/8': '1.2.3.4\\x00' is not an IPv4 address"},
  };
  for (const auto& [text, want] : cases) {
    Result<Cidr> c = ParseCidr(text);
    ASSERT_FALSE(c.ok()) << text;
    EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(c.status().message(), want);
  }
  // Long text is cut in the message, at 64 bytes.
  const std::string ones(70, '1');
  const std::string cut = "'" + std::string(64, '1') + "...'";
  EXPECT_EQ(ParseCidr(ones + "/8").status().message(),
            cut + ": " + cut + " is not an IPv4 address");
}

TEST(CidrTest, OfBoundsAndMasks) {
  EXPECT_FALSE(Cidr::Of(Ip("10.0.0.0"), -1).has_value());
  EXPECT_FALSE(Cidr::Of(Ip("10.0.0.0"), 33).has_value());
  EXPECT_FALSE(Cidr::Of(Ip("::1"), 129).has_value());
  EXPECT_FALSE(Cidr::Of(Ip("::1"), -1).has_value());
  EXPECT_EQ(Cidr::Of(Ip("10.9.8.7"), 16)->ToString(), "10.9.0.0/16");
  EXPECT_EQ(Cidr::Of(Ip("::ffff:10.9.8.7"), 32)->ToString(), "10.9.8.7/32");
  EXPECT_EQ(Cidr::Of(Ip("2001:db8::1"), 33)->ToString(), "2001:db8::/33");
  EXPECT_EQ(Cidr::Of(Ip("2001:db8:8000::1"), 33)->ToString(), "2001:db8:8000::/33");
  EXPECT_EQ(Cidr().ToString(), "0.0.0.0/0");
}

TEST(CidrTest, ContainsKeepsFamiliesApart) {
  const Cidr all_v4 = ParseCidr("0.0.0.0/0").value();
  const Cidr all_v6 = ParseCidr("::/0").value();
  EXPECT_TRUE(all_v4.Contains(Ip("1.2.3.4")));
  EXPECT_TRUE(all_v4.Contains(Ip("::ffff:1.2.3.4")));
  EXPECT_FALSE(all_v4.Contains(Ip("::1")));
  EXPECT_TRUE(all_v6.Contains(Ip("::1")));
  EXPECT_FALSE(all_v6.Contains(Ip("1.2.3.4")));
  EXPECT_FALSE(all_v6.Contains(Ip("::ffff:1.2.3.4")));

  const Cidr net = ParseCidr("192.0.2.0/24").value();
  EXPECT_TRUE(net.Contains(Ip("192.0.2.0")));
  EXPECT_TRUE(net.Contains(Ip("192.0.2.255")));
  EXPECT_TRUE(net.Contains(Ip("::ffff:192.0.2.9")));
  EXPECT_FALSE(net.Contains(Ip("192.0.3.0")));
  EXPECT_FALSE(net.Contains(Ip("192.0.1.255")));

  const Cidr v6 = ParseCidr("2001:db8::/32").value();
  EXPECT_TRUE(v6.Contains(Ip("2001:db8:ffff:ffff:ffff:ffff:ffff:ffff")));
  EXPECT_FALSE(v6.Contains(Ip("2001:db9::")));
  EXPECT_FALSE(v6.Contains(Ip("2001:db7:ffff:ffff:ffff:ffff:ffff:ffff")));
}

}  // namespace
}  // namespace floodgate
