// IpAddress: the mapped form is IPv4, RFC 5952 text, and every refusal of
// Parse; a randomized round trip through the text form.
#include "common/ip_address.h"

#include <gtest/gtest.h>

#include <random>
#include <string>

namespace floodgate {
namespace {

IpAddress Must(std::string_view text) {
  std::optional<IpAddress> a = IpAddress::Parse(text);
  EXPECT_TRUE(a.has_value()) << text;
  return a.value_or(IpAddress());
}

TEST(IpAddressTest, IPv4) {
  const IpAddress a = Must("192.0.2.1");
  EXPECT_TRUE(a.is_v4());
  EXPECT_EQ(a.v4(), 0xc0000201u);
  EXPECT_EQ(a, IpAddress::FromV4(0xc0000201u));
  EXPECT_EQ(a.ToString(), "192.0.2.1");
  EXPECT_EQ(a.high64(), 0u);
  EXPECT_EQ(a.low64(), 0x0000ffffc0000201u);
  EXPECT_EQ(Must("0.0.0.0").ToString(), "0.0.0.0");
  EXPECT_EQ(Must("255.255.255.255").v4(), 0xffffffffu);
}

TEST(IpAddressTest, TheMappedFormIsTheIPv4Address) {
  const IpAddress mapped = Must("::ffff:192.0.2.1");
  EXPECT_TRUE(mapped.is_v4());
  EXPECT_EQ(mapped, Must("192.0.2.1"));
  EXPECT_EQ(mapped.ToString(), "192.0.2.1");
  EXPECT_EQ(Must("::FFFF:c000:201"), Must("192.0.2.1"));
  std::array<uint8_t, 16> bytes{};
  bytes[10] = bytes[11] = 0xff;
  bytes[12] = 10;
  bytes[15] = 7;
  const IpAddress from_socket = IpAddress::FromV6Bytes(bytes);
  EXPECT_TRUE(from_socket.is_v4());
  EXPECT_EQ(from_socket.ToString(), "10.0.0.7");
  EXPECT_EQ(from_socket.bytes(), bytes);
  EXPECT_EQ(IpAddress::FromV6Words(from_socket.high64(), from_socket.low64()), from_socket);
  EXPECT_EQ(IpAddress::FromV6Words(0, 0x0000ffff0a000007u), from_socket);
}

TEST(IpAddressTest, OtherEmbeddingsStayIPv6) {
  // IPv4-compatible (deprecated), NAT64, and an all-ones group elsewhere.
  for (const char* text :
       {"::1.2.3.4", "64:ff9b::1.2.3.4", "::ffff:0:1.2.3.4", "::fffe:102:304", "1::ffff:102:304"}) {
    EXPECT_FALSE(Must(text).is_v4()) << text;
  }
  EXPECT_EQ(Must("::1.2.3.4").ToString(), "::102:304");
  EXPECT_EQ(Must("64:ff9b::1.2.3.4").ToString(), "64:ff9b::102:304");
  EXPECT_FALSE(IpAddress().is_v4());
  EXPECT_EQ(IpAddress().ToString(), "::");
}

TEST(IpAddressTest, Rfc5952Text) {
  const std::pair<const char*, const char*> cases[] = {
      {"::", "::"},
      {"::1", "::1"},
      {"1::", "1::"},
      {"2001:DB8::1", "2001:db8::1"},
      {"2001:0db8:0000:0000:0000:0000:0000:0001", "2001:db8::1"},
      // One zero group is written, not folded.
      {"2001:db8:0:1:1:1:1:1", "2001:db8:0:1:1:1:1:1"},
      // The longest run is folded; on a tie, the first.
      {"2001:0:0:1:0:0:0:1", "2001:0:0:1::1"},
      {"2001:db8:0:0:1:0:0:1", "2001:db8::1:0:0:1"},
      {"0:0:1:0:0:0:0:0", "0:0:1::"},
      {"1:0:0:0:0:0:0:0", "1::"},
      {"0:0:0:0:0:0:0:2", "::2"},
      {"0:0:0:0:0:0:2:3", "::2:3"},
      {"ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"},
      {"fe80::0abc:0:0:0", "fe80::abc:0:0:0"},
      {"fe80:0:0:abc:0:0:0:0", "fe80:0:0:abc::"},
  };
  for (const auto& [in, out] : cases) EXPECT_EQ(Must(in).ToString(), out) << in;
}

TEST(IpAddressTest, Refusals) {
  const char* const cases[] = {
      "",
      "1.2.3",
      "1.2.3.4.5",
      "01.2.3.4",  // octal to inet_aton: refused rather than guessed
      "1.2.3.04",
      "256.0.0.0",
      "1.2.3.-1",
      " 1.2.3.4",
      "1.2.3.4 ",
      "1.2.3.4/32",
      "0x7f.0.0.1",
      "localhost",
      "fe80::1%eth0",
      "[::1]",
      "1:2:3:4:5:6:7:8:9",
      "1:2:3:4:5:6:7",
      "12345::",
      ":::",
      "1::2::3",
      "::ffff:01.2.3.4",
      "::ffff:1.2.3",
      "::g",
      // Longer than any address: refused without being copied.
      "ffff:ffff:ffff:ffff:ffff:ffff:255.255.255.2555",
  };
  for (const char* text : cases) EXPECT_FALSE(IpAddress::Parse(text).has_value()) << text;
  // A NUL inside the text must not let its prefix pass for the whole.
  EXPECT_FALSE(IpAddress::Parse(std::string_view("1.2.3.4\0x", 9)).has_value());
  EXPECT_FALSE(IpAddress::Parse(std::string_view("::1\0", 4)).has_value());
  // The longest text an address can have is read.
  EXPECT_TRUE(IpAddress::Parse("ffff:ffff:ffff:ffff:ffff:ffff:255.255.255.255").has_value());
}

TEST(IpAddressTest, TextRoundTripsRandomAddresses) {
  std::mt19937_64 rng(20240601);
  for (int i = 0; i < 20000; ++i) {
    std::array<uint8_t, 16> bytes{};
    const uint64_t high = rng(), low = rng();
    for (int b = 0; b < 8; ++b) {
      bytes[b] = static_cast<uint8_t>(high >> (8 * b));
      bytes[8 + b] = static_cast<uint8_t>(low >> (8 * b));
    }
    // Zero groups are where the text is subtle: clear some at random, and
    // make a quarter of the addresses mapped ones.
    const uint64_t zeros = rng();
    for (int g = 0; g < 8; ++g) {
      if ((zeros >> g) & (zeros >> (g + 8)) & 1) bytes[2 * g] = bytes[2 * g + 1] = 0;
    }
    if (i % 4 == 0) {
      for (int b = 0; b < 10; ++b) bytes[b] = 0;
      bytes[10] = bytes[11] = 0xff;
    }
    const IpAddress a = IpAddress::FromV6Bytes(bytes);
    ASSERT_EQ(IpAddress::FromV6Words(a.high64(), a.low64()), a);
    const std::string text = a.ToString();
    ASSERT_EQ(IpAddress::Parse(text), a) << text;
    EXPECT_EQ(a.is_v4(), i % 4 == 0) << text;
  }
}

}  // namespace
}  // namespace floodgate
