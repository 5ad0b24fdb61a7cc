// CidrSet: the longest match at the edges (/0, /32, /128, nested, adjacent
// networks), mapped clients on IPv4 networks, duplicates, the order of
// Networks(), readers on many threads, and a randomized comparison with a
// linear scan of the same networks.
#include "service/lists/cidr_set.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace floodgate::service {
namespace {

IpAddress Ip(std::string_view text) { return IpAddress::Parse(text).value(); }

CidrSet SetOf(const std::vector<std::string>& texts) {
  std::vector<Cidr> networks;
  for (const std::string& t : texts) networks.push_back(ParseCidr(t).value());
  return CidrSet::Build(std::move(networks)).value();
}

// The longest match as text, or "-".
std::string Match(const CidrSet& set, std::string_view address) {
  const std::optional<Cidr> m = set.LongestMatch(Ip(address));
  EXPECT_EQ(set.Contains(Ip(address)), m.has_value()) << address;
  return m ? m->ToString() : "-";
}

std::vector<std::string> Texts(const std::vector<Cidr>& networks) {
  std::vector<std::string> out;
  for (const Cidr& c : networks) out.push_back(c.ToString());
  return out;
}

TEST(CidrSetTest, EmptyMatchesNothing) {
  const CidrSet set;
  EXPECT_TRUE(set.empty());
  EXPECT_EQ(Match(set, "10.0.0.1"), "-");
  EXPECT_EQ(Match(set, "::1"), "-");
  const CidrSet built = CidrSet::Build({}).value();
  EXPECT_EQ(built.size(), 0u);
  EXPECT_EQ(Match(built, "0.0.0.0"), "-");
  EXPECT_TRUE(built.Networks().empty());
}

TEST(CidrSetTest, LongestMatchAmongNestedNetworks) {
  const CidrSet set = SetOf({"10.0.0.0/8", "10.1.0.0/16", "10.1.2.0/24", "10.1.2.3/32"});
  EXPECT_EQ(Match(set, "10.1.2.3"), "10.1.2.3/32");
  EXPECT_EQ(Match(set, "10.1.2.4"), "10.1.2.0/24");
  EXPECT_EQ(Match(set, "10.1.2.2"), "10.1.2.0/24");
  EXPECT_EQ(Match(set, "10.1.3.3"), "10.1.0.0/16");
  EXPECT_EQ(Match(set, "10.2.2.3"), "10.0.0.0/8");
  EXPECT_EQ(Match(set, "10.255.255.255"), "10.0.0.0/8");
  EXPECT_EQ(Match(set, "9.255.255.255"), "-");
  EXPECT_EQ(Match(set, "11.0.0.0"), "-");
  EXPECT_EQ(Match(set, "::ffff:10.1.2.3"), "10.1.2.3/32");
  EXPECT_EQ(Match(set, "::a01:203"), "-");  // the same bits, IPv4-compatible: IPv6
}

TEST(CidrSetTest, SlashZeroHoldsItsFamilyOnly) {
  const CidrSet v4 = SetOf({"0.0.0.0/0"});
  EXPECT_EQ(Match(v4, "0.0.0.0"), "0.0.0.0/0");
  EXPECT_EQ(Match(v4, "255.255.255.255"), "0.0.0.0/0");
  EXPECT_EQ(Match(v4, "::ffff:1.2.3.4"), "0.0.0.0/0");
  EXPECT_EQ(Match(v4, "::"), "-");
  EXPECT_EQ(Match(v4, "2001:db8::1"), "-");

  const CidrSet v6 = SetOf({"::/0"});
  EXPECT_EQ(Match(v6, "::"), "::/0");
  EXPECT_EQ(Match(v6, "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"), "::/0");
  EXPECT_EQ(Match(v6, "1.2.3.4"), "-");
  EXPECT_EQ(Match(v6, "::ffff:1.2.3.4"), "-");

  const CidrSet both = SetOf({"0.0.0.0/0", "::/0", "10.0.0.0/8", "2001:db8::/32"});
  EXPECT_EQ(Match(both, "10.9.9.9"), "10.0.0.0/8");
  EXPECT_EQ(Match(both, "11.9.9.9"), "0.0.0.0/0");
  EXPECT_EQ(Match(both, "2001:db8::9"), "2001:db8::/32");
  EXPECT_EQ(Match(both, "2001:db9::9"), "::/0");
}

TEST(CidrSetTest, HostNetworksMatchOneAddress) {
  const CidrSet set = SetOf({"192.0.2.1/32", "2001:db8::1/128", "0.0.0.0/32", "255.255.255.255/32",
                             "::/128", "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff/128"});
  EXPECT_EQ(Match(set, "192.0.2.1"), "192.0.2.1/32");
  EXPECT_EQ(Match(set, "192.0.2.0"), "-");
  EXPECT_EQ(Match(set, "192.0.2.2"), "-");
  EXPECT_EQ(Match(set, "192.0.2.129"), "-");
  EXPECT_EQ(Match(set, "0.0.0.0"), "0.0.0.0/32");
  EXPECT_EQ(Match(set, "0.0.0.1"), "-");
  EXPECT_EQ(Match(set, "255.255.255.255"), "255.255.255.255/32");
  EXPECT_EQ(Match(set, "255.255.255.254"), "-");
  EXPECT_EQ(Match(set, "2001:db8::1"), "2001:db8::1/128");
  EXPECT_EQ(Match(set, "2001:db8::"), "-");
  EXPECT_EQ(Match(set, "2001:db8::3"), "-");
  EXPECT_EQ(Match(set, "2001:db8:0:0:8000::1"), "-");
  EXPECT_EQ(Match(set, "::"), "::/128");
  EXPECT_EQ(Match(set, "::1"), "-");
  EXPECT_EQ(Match(set, "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"),
            "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff/128");
  EXPECT_EQ(Match(set, "ffff:ffff:ffff:ffff:ffff:ffff:ffff:fffe"), "-");
  EXPECT_EQ(Match(set, "ffff:ffff:ffff:ffff:7fff:ffff:ffff:ffff"), "-");
}

TEST(CidrSetTest, MappedClientsMatchIPv4Networks) {
  // The IPv4 client as a dual-stack socket reports it.
  std::array<uint8_t, 16> from_socket{};
  from_socket[10] = from_socket[11] = 0xff;
  from_socket[12] = 1;
  from_socket[13] = 2;
  from_socket[14] = 3;
  from_socket[15] = 4;
  const CidrSet set = SetOf({"1.2.3.0/24"});
  EXPECT_EQ(set.LongestMatch(IpAddress::FromV6Bytes(from_socket))->ToString(), "1.2.3.0/24");
  EXPECT_EQ(Match(set, "::ffff:1.2.3.4"), "1.2.3.0/24");
  EXPECT_EQ(Match(set, "1.2.3.4"), "1.2.3.0/24");
  EXPECT_EQ(Match(set, "::ffff:1.2.4.4"), "-");

  // A network written in the mapped range is the IPv4 network.
  const CidrSet mapped = SetOf({"::ffff:1.2.3.0/120"});
  EXPECT_EQ(Match(mapped, "1.2.3.4"), "1.2.3.0/24");
  EXPECT_EQ(Match(mapped, "::ffff:1.2.3.4"), "1.2.3.0/24");

  // Shorter than the mapped prefix it is IPv6, and IPv4 clients miss it.
  const CidrSet wide = SetOf({"::ffff:0:0/95", "::/64"});
  EXPECT_EQ(Match(wide, "1.2.3.4"), "-");
  EXPECT_EQ(Match(wide, "::fffe:1.2.3.4"), "::fffe:0:0/95");
  EXPECT_EQ(Match(wide, "::1"), "::/64");
}

TEST(CidrSetTest, OverlapsAndNeighbours) {
  const CidrSet set = SetOf({"10.0.0.0/9", "10.128.0.0/9", "10.0.0.0/8", "10.64.0.0/10",
                             "10.0.0.0/16", "10.0.1.0/24", "10.0.0.0/24"});
  EXPECT_EQ(set.size(), 7u);
  EXPECT_EQ(Match(set, "10.0.0.9"), "10.0.0.0/24");
  EXPECT_EQ(Match(set, "10.0.1.9"), "10.0.1.0/24");
  EXPECT_EQ(Match(set, "10.0.2.9"), "10.0.0.0/16");
  EXPECT_EQ(Match(set, "10.1.0.0"), "10.0.0.0/9");
  EXPECT_EQ(Match(set, "10.64.0.1"), "10.64.0.0/10");
  EXPECT_EQ(Match(set, "10.127.255.255"), "10.64.0.0/10");
  EXPECT_EQ(Match(set, "10.128.0.0"), "10.128.0.0/9");
  EXPECT_EQ(Match(set, "11.0.0.0"), "-");
  // Contains stops at the first network on the path: the same answer.
  EXPECT_TRUE(set.Contains(Ip("10.0.0.9")));
}

TEST(CidrSetTest, DuplicatesAreHeldOnce) {
  const CidrSet set = SetOf({"10.0.0.0/8", "10.1.2.3/8", "10.0.0.0/8", "::ffff:10.0.0.0/104",
                             "2001:db8::/32", "2001:db8:1::/32", "2001:DB8::/32"});
  EXPECT_EQ(set.size(), 2u);
  EXPECT_EQ(Texts(set.Networks()), (std::vector<std::string>{"10.0.0.0/8", "2001:db8::/32"}));
}

TEST(CidrSetTest, NetworksInOrder) {
  const CidrSet set =
      SetOf({"2001:db8::/48", "192.0.2.0/24", "::/0", "10.0.0.0/8", "10.0.0.0/16", "192.0.2.128/25",
             "2001:db8::/32", "0.0.0.0/0", "1.0.0.0/32", "fe80::/10"});
  EXPECT_EQ(Texts(set.Networks()),
            (std::vector<std::string>{"0.0.0.0/0", "1.0.0.0/32", "10.0.0.0/8", "10.0.0.0/16",
                                      "192.0.2.0/24", "192.0.2.128/25", "::/0", "2001:db8::/32",
                                      "2001:db8::/48", "fe80::/10"}));
}

TEST(CidrSetTest, MemoryBytesCountsTheNodes) {
  const CidrSet empty;
  const CidrSet one = SetOf({"10.0.0.0/8"});
  const CidrSet two = SetOf({"10.0.0.0/8", "11.0.0.0/8", "2001:db8::/32"});
  EXPECT_EQ(empty.MemoryBytes(), sizeof(CidrSet));
  EXPECT_GT(one.MemoryBytes(), empty.MemoryBytes());
  EXPECT_GT(two.MemoryBytes(), one.MemoryBytes());
}

// Networks drawn near each other so that they nest and overlap, as real
// lists do: a few hundred base addresses, each prefix of a random length.
// Confined, every base and network is in 10.0.0.0/8 or 2001:db8::/32, so
// the trie's root has a prefix of its own; random lookups still roam.
struct RandomNetworks {
  RandomNetworks(uint64_t seed, bool confined)
      : rng(seed), kept_v4(confined ? 8 : 0), kept_v6(confined ? 32 : 8) {
    for (int i = 0; i < 300; ++i) {
      IpAddress base = RandomAddress(i % 2 == 0);
      if (confined && base.is_v4()) {
        base = IpAddress::FromV4((base.v4() & 0x00ffffff) | 0x0a000000);
      } else if (confined) {
        base = IpAddress::FromV6Words((base.high64() & 0xffffffff) | 0x20010db8'00000000,
                                      base.low64());
      }
      bases.push_back(base);
    }
  }

  IpAddress RandomAddress(bool v4) {
    if (v4) return IpAddress::FromV4(static_cast<uint32_t>(rng()));
    // A random first byte other than 0 is never mapped: IPv6 by
    // construction.
    const uint64_t high = rng();
    return IpAddress::FromV6Words(high >> 56 == 0 ? high | uint64_t{0x20} << 56 : high, rng());
  }

  // `base` with its bits from `from` on replaced by random ones, those of
  // the confining prefix kept.
  IpAddress Near(const IpAddress& base, int from) {
    const IpAddress noise = RandomAddress(base.is_v4());
    if (base.is_v4()) {
      from = std::max(from, kept_v4);
      const uint32_t keep = from == 0 ? 0 : ~uint32_t{0} << (32 - from);
      return IpAddress::FromV4((base.v4() & keep) | (noise.v4() & ~keep));
    }
    std::array<uint8_t, 16> bytes = base.bytes();
    for (int bit = std::max(from, kept_v6); bit < 128; ++bit) {
      const uint8_t m = static_cast<uint8_t>(0x80 >> (bit % 8));
      bytes[bit / 8] = static_cast<uint8_t>((bytes[bit / 8] & ~m) | (noise.bytes()[bit / 8] & m));
    }
    return IpAddress::FromV6Bytes(bytes);
  }

  Cidr Network() {
    const IpAddress& base = bases[rng() % bases.size()];
    const int bits = base.is_v4() ? 32 : 128;
    // Half are hosts, half of a length from a quarter of the bits up (/0
    // has tests of its own: here it would hold every lookup).
    int len = rng() % 2 ? bits : bits / 4 + static_cast<int>(rng() % (bits - bits / 4 + 1));
    // Confined, none is the confining prefix: it would hold every lookup.
    if (kept_v4 > 0) len = std::max(len, (base.is_v4() ? kept_v4 : kept_v6) + 8);
    return *Cidr::Of(Near(base, static_cast<int>(rng() % (bits + 1))), len);
  }

  IpAddress Lookup() {
    const IpAddress& base = bases[rng() % bases.size()];
    const int bits = base.is_v4() ? 32 : 128;
    return Near(base, static_cast<int>(rng() % (bits + 1)));
  }

  std::mt19937_64 rng;
  const int kept_v4, kept_v6;
  std::vector<IpAddress> bases;
};

std::optional<Cidr> LinearLongestMatch(const std::vector<Cidr>& networks, const IpAddress& a) {
  std::optional<Cidr> best;
  for (const Cidr& c : networks) {
    if (c.Contains(a) && (!best || c.prefix_len() > best->prefix_len())) best = c;
  }
  return best;
}

void ExpectAgreesWithALinearScan(RandomNetworks& random) {
  std::vector<Cidr> networks;
  for (int i = 0; i < 4000; ++i) networks.push_back(random.Network());
  const CidrSet set = CidrSet::Build(networks).value();

  std::vector<Cidr> distinct = networks;
  std::sort(distinct.begin(), distinct.end());
  distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
  EXPECT_EQ(set.size(), distinct.size());
  std::vector<Cidr> listed = set.Networks();
  std::sort(listed.begin(), listed.end());
  EXPECT_EQ(listed, distinct);

  int hits = 0;
  for (int i = 0; i < 20000; ++i) {
    const IpAddress a = i % 10 == 0 ? random.RandomAddress(i % 20 == 0) : random.Lookup();
    const std::optional<Cidr> want = LinearLongestMatch(distinct, a);
    ASSERT_EQ(set.LongestMatch(a), want) << a.ToString();
    ASSERT_EQ(set.Contains(a), want.has_value()) << a.ToString();
    hits += want.has_value();
  }
  // Both answers were probed, not one alone.
  EXPECT_GT(hits, 2000);
  EXPECT_LT(hits, 18000);
  // Every network's own address matches it or a longer network.
  for (const Cidr& c : distinct) {
    const std::optional<Cidr> m = set.LongestMatch(c.address());
    ASSERT_TRUE(m.has_value()) << c.ToString();
    EXPECT_GE(m->prefix_len(), c.prefix_len()) << c.ToString();
    EXPECT_TRUE(c.Contains(m->address())) << c.ToString();
  }
}

TEST(CidrSetTest, AgreesWithALinearScan) {
  RandomNetworks random(0x5eed'c1d2, /*confined=*/false);
  ExpectAgreesWithALinearScan(random);
}

TEST(CidrSetTest, AgreesWithALinearScanUnderACommonPrefix) {
  RandomNetworks random(0x5eed'c1d3, /*confined=*/true);
  ExpectAgreesWithALinearScan(random);
}

TEST(CidrSetTest, ReadersOnManyThreadsAgree) {
  RandomNetworks random(77, /*confined=*/false);
  std::vector<Cidr> networks;
  for (int i = 0; i < 2000; ++i) networks.push_back(random.Network());
  const CidrSet set = CidrSet::Build(networks).value();
  std::vector<IpAddress> lookups;
  std::vector<std::optional<Cidr>> want;
  for (int i = 0; i < 5000; ++i) {
    lookups.push_back(random.Lookup());
    want.push_back(set.LongestMatch(lookups.back()));
  }
  std::vector<int> mismatches(4, 0);
  std::vector<std::thread> readers;
  for (int t = 0; t < 4; ++t) {
    readers.emplace_back([&, t] {
      for (int round = 0; round < 4; ++round) {
        for (size_t i = 0; i < lookups.size(); ++i) {
          if (set.LongestMatch(lookups[i]) != want[i]) ++mismatches[t];
        }
      }
    });
  }
  for (std::thread& r : readers) r.join();
  EXPECT_EQ(mismatches, std::vector<int>(4, 0));
}

}  // namespace
}  // namespace floodgate::service
