// NetworkBlockTable (service/control/network_block_table.h): which blocked
// networks hold an address, on which rule, until when: IPv4, IPv6 and the
// IPv4-mapped form, every overlapping network considered (not only the
// longest), expiry at its exact millisecond, Replace and Add.
#include "service/control/network_block_table.h"

#include <gtest/gtest.h>

#include <atomic>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace floodgate::service {
namespace {

constexpr int64_t kNow = 1'800'000'000'000;

BlockRecord Net(std::string cidr, std::string rule, int64_t until_ms, std::string reason) {
  BlockRecord b{"", std::move(rule), until_ms, std::move(reason)};
  b.cidr = std::move(cidr);
  return b;
}

IpAddress Ip(std::string_view text) {
  const std::optional<IpAddress> a = IpAddress::Parse(text);
  EXPECT_TRUE(a.has_value()) << text;
  return a.value_or(IpAddress());
}

// Until's answer as (until_ms, reason).
struct Hit {
  int64_t until_ms;
  std::string reason;
  friend bool operator==(const Hit&, const Hit&) = default;
  friend std::ostream& operator<<(std::ostream& os, const Hit& h) {
    return os << "{" << h.until_ms << ", '" << h.reason << "'}";
  }
};

Hit Lookup(const NetworkBlockTable& t, std::string_view address, std::string_view rule,
           int64_t now_ms = kNow) {
  std::string_view reason = "(untouched)";
  const int64_t until = t.Until(Ip(address), rule, now_ms, &reason);
  return Hit{until, until == 0 ? "" : std::string(reason)};
}

TEST(NetworkBlockTableTest, EmptyBlocksNothing) {
  NetworkBlockTable t;
  EXPECT_FALSE(t.any());
  EXPECT_EQ(Lookup(t, "203.0.113.7", "api"), (Hit{0, ""}));
  t.Replace({});
  EXPECT_FALSE(t.any());
}

TEST(NetworkBlockTableTest, AnIPv4NetworkHoldsItsAddressesAndNoOthers) {
  NetworkBlockTable t;
  t.Replace({Net("203.0.113.0/24", "", kNow + 60'000, "botnet")});
  EXPECT_TRUE(t.any());
  EXPECT_EQ(Lookup(t, "203.0.113.0", "api"), (Hit{kNow + 60'000, "botnet"}));
  EXPECT_EQ(Lookup(t, "203.0.113.77", "login"), (Hit{kNow + 60'000, "botnet"}));
  EXPECT_EQ(Lookup(t, "203.0.113.255", "api"), (Hit{kNow + 60'000, "botnet"}));
  EXPECT_EQ(Lookup(t, "203.0.112.255", "api").until_ms, 0);
  EXPECT_EQ(Lookup(t, "203.0.114.1", "api").until_ms, 0);
  // The mapped form of an address inside is that address.
  EXPECT_EQ(Lookup(t, "::ffff:203.0.113.7", "api"), (Hit{kNow + 60'000, "botnet"}));
  EXPECT_EQ(Lookup(t, "::ffff:203.0.114.7", "api").until_ms, 0);
  // An IPv6 address whose last 32 bits are those of one inside is not.
  EXPECT_EQ(Lookup(t, "::203.0.113.7", "api").until_ms, 0);
  EXPECT_EQ(Lookup(t, "64:ff9b::203.0.113.7", "api").until_ms, 0);
}

TEST(NetworkBlockTableTest, AnIPv6NetworkHoldsItsAddresses) {
  NetworkBlockTable t;
  t.Replace({Net("2001:db8::/32", "api", kNow + 5'000, "v6")});
  EXPECT_EQ(Lookup(t, "2001:db8::1", "api"), (Hit{kNow + 5'000, "v6"}));
  EXPECT_EQ(Lookup(t, "2001:db8:ffff:ffff:ffff:ffff:ffff:ffff", "api"), (Hit{kNow + 5'000, "v6"}));
  EXPECT_EQ(Lookup(t, "2001:db9::1", "api").until_ms, 0);
  EXPECT_EQ(Lookup(t, "2001:db7:ffff::1", "api").until_ms, 0);
  EXPECT_EQ(Lookup(t, "2001:db8::1", "login").until_ms, 0);  // its rule only
}

TEST(NetworkBlockTableTest, TheFamiliesAreApartAtEveryLength) {
  NetworkBlockTable t;
  t.Replace({Net("::/0", "", kNow + 1'000, "every IPv6"),
             Net("10.0.0.0/8", "", kNow + 2'000, "ten"),
             Net("2001:db8::1/128", "", kNow + 3'000, "one host")});
  // ::/0 is every IPv6 address and no IPv4 one, mapped form included.
  EXPECT_EQ(Lookup(t, "2001:db8::2", "api"), (Hit{kNow + 1'000, "every IPv6"}));
  EXPECT_EQ(Lookup(t, "192.0.2.1", "api").until_ms, 0);
  EXPECT_EQ(Lookup(t, "::ffff:192.0.2.1", "api").until_ms, 0);
  EXPECT_EQ(Lookup(t, "10.200.0.1", "api"), (Hit{kNow + 2'000, "ten"}));
  EXPECT_EQ(Lookup(t, "2001:db8::1", "api"), (Hit{kNow + 3'000, "one host"}));
  t.Replace({Net("0.0.0.0/0", "", kNow + 1'000, "every IPv4")});
  EXPECT_EQ(Lookup(t, "192.0.2.1", "api"), (Hit{kNow + 1'000, "every IPv4"}));
  EXPECT_EQ(Lookup(t, "::ffff:192.0.2.1", "api"), (Hit{kNow + 1'000, "every IPv4"}));
  EXPECT_EQ(Lookup(t, "::1", "api").until_ms, 0);
  EXPECT_EQ(Lookup(t, "::", "api").until_ms, 0);
}

// Every network holding the address counts: the latest end of those of
// the rule (or of every rule) wins, whichever network is longest.
TEST(NetworkBlockTableTest, OverlappingNetworksAreAllConsidered) {
  NetworkBlockTable t;
  t.Replace({Net("203.0.0.0/16", "", kNow + 10'000, "wide"),
             Net("203.0.113.0/24", "api", kNow + 60'000, "narrow on api"),
             Net("203.0.113.7/32", "login", kNow + 20'000, "one on login")});
  // On api: the /24's block ends last.
  EXPECT_EQ(Lookup(t, "203.0.113.7", "api"), (Hit{kNow + 60'000, "narrow on api"}));
  // On login the /24 does not apply; the /32's ends after the /16's.
  EXPECT_EQ(Lookup(t, "203.0.113.7", "login"), (Hit{kNow + 20'000, "one on login"}));
  EXPECT_EQ(Lookup(t, "203.0.113.8", "login"), (Hit{kNow + 10'000, "wide"}));
  // Another rule: the /16 alone.
  EXPECT_EQ(Lookup(t, "203.0.113.7", "search"), (Hit{kNow + 10'000, "wide"}));
  // Inside the /16, outside the /24: the /16 on every rule.
  EXPECT_EQ(Lookup(t, "203.0.7.1", "api"), (Hit{kNow + 10'000, "wide"}));
  // Past the /16's end, each narrower block is left on its rule...
  EXPECT_EQ(Lookup(t, "203.0.113.7", "login", kNow + 10'000), (Hit{kNow + 20'000, "one on login"}));
  EXPECT_EQ(Lookup(t, "203.0.113.7", "api", kNow + 10'000), (Hit{kNow + 60'000, "narrow on api"}));
  EXPECT_EQ(Lookup(t, "203.0.113.7", "search", kNow + 10'000).until_ms, 0);
  EXPECT_EQ(Lookup(t, "203.0.7.1", "api", kNow + 10'000).until_ms, 0);
  // ... until its own.
  EXPECT_EQ(Lookup(t, "203.0.113.7", "login", kNow + 20'000).until_ms, 0);
  EXPECT_EQ(Lookup(t, "203.0.113.7", "api", kNow + 59'999).until_ms, kNow + 60'000);
  EXPECT_EQ(Lookup(t, "203.0.113.7", "api", kNow + 60'000).until_ms, 0);

  // A longer network whose block ends first does not hide a shorter one's.
  t.Replace({Net("198.51.0.0/16", "", kNow + 90'000, "long"),
             Net("198.51.100.0/24", "", kNow + 1'000, "short")});
  EXPECT_EQ(Lookup(t, "198.51.100.1", "api"), (Hit{kNow + 90'000, "long"}));
}

TEST(NetworkBlockTableTest, ABlockEndsAtItsExactMillisecond) {
  NetworkBlockTable t;
  t.Replace({Net("192.0.2.0/24", "", kNow + 1'000, "x")});
  EXPECT_EQ(Lookup(t, "192.0.2.9", "api", kNow + 999).until_ms, kNow + 1'000);
  EXPECT_EQ(Lookup(t, "192.0.2.9", "api", kNow + 1'000).until_ms, 0);
  EXPECT_EQ(Lookup(t, "192.0.2.9", "api", kNow + 1'001).until_ms, 0);
  // any() says a lookup may find one, not that one is running: it stays
  // until the records are loaded again without it.
  EXPECT_TRUE(t.any());
}

TEST(NetworkBlockTableTest, ReplaceDropsTheOldAndSkipsKeysAndDamagedNetworks) {
  NetworkBlockTable t;
  t.Replace({Net("192.0.2.0/24", "", kNow + 1'000, "old")});
  BlockRecord key_block{"203.0.113.7", "", kNow + 1'000, "a key's"};
  t.Replace({key_block, Net("not a network", "", kNow + 1'000, "bad"),
             Net("2001:db8::/33", "", kNow + 1'000, "v6")});
  EXPECT_EQ(Lookup(t, "192.0.2.1", "api").until_ms, 0);
  // A key block of the text of an address is BlockTable's, not this table's.
  EXPECT_EQ(Lookup(t, "203.0.113.7", "api").until_ms, 0);
  EXPECT_EQ(Lookup(t, "2001:db8:7fff::1", "api").until_ms, kNow + 1'000);
  EXPECT_EQ(Lookup(t, "2001:db8:8000::1", "api").until_ms, 0);
  t.Replace({key_block});
  EXPECT_FALSE(t.any());
}

TEST(NetworkBlockTableTest, AddReplacesTheBlockOfTheSameNetworkAndRule) {
  NetworkBlockTable t;
  t.Add(Net("192.0.2.0/24", "api", kNow + 1'000, "first"));
  EXPECT_TRUE(t.any());
  t.Add(Net("192.0.2.0/24", "api", kNow + 500, "second"));  // shorter: replaced, not kept
  EXPECT_EQ(Lookup(t, "192.0.2.1", "api"), (Hit{kNow + 500, "second"}));
  t.Add(Net("192.0.2.0/24", "", kNow + 2'000, "every rule"));
  EXPECT_EQ(Lookup(t, "192.0.2.1", "api"), (Hit{kNow + 2'000, "every rule"}));
  t.Add(BlockRecord{"192.0.2.1", "", kNow + 9'000, "a key: ignored"});
  EXPECT_EQ(Lookup(t, "192.0.2.1", "login"), (Hit{kNow + 2'000, "every rule"}));
}

// Every prefix length of both families at once: each network holds the
// addresses of its own length, probed once per length present.
TEST(NetworkBlockTableTest, EveryPrefixLength) {
  std::vector<BlockRecord> blocks;
  for (int len = 1; len <= 32; ++len) {
    blocks.push_back(
        Net("10.0.0.0/" + std::to_string(len), "r" + std::to_string(len), kNow + len, "v4"));
  }
  for (int len = 1; len <= 128; ++len) {
    blocks.push_back(
        Net("2001:db8::/" + std::to_string(len), "r" + std::to_string(len), kNow + len, "v6"));
  }
  NetworkBlockTable t;
  t.Replace(blocks);
  for (int len = 1; len <= 32; ++len) {
    EXPECT_EQ(Lookup(t, "10.0.0.1", "r" + std::to_string(len)).until_ms, len == 32 ? 0 : kNow + len)
        << len;
  }
  EXPECT_EQ(Lookup(t, "10.0.0.0", "r32").until_ms, kNow + 32);
  EXPECT_EQ(Lookup(t, "128.0.0.0", "r1").until_ms, 0);
  EXPECT_EQ(Lookup(t, "2001:db8::", "r128").until_ms, kNow + 128);
  EXPECT_EQ(Lookup(t, "2001:db8::1", "r128").until_ms, 0);
  EXPECT_EQ(Lookup(t, "2001:db8::1", "r127").until_ms, kNow + 127);
  EXPECT_EQ(Lookup(t, "2001:db8::1", "r32").until_ms, kNow + 32);
  EXPECT_EQ(Lookup(t, "2001:db9::1", "r32").until_ms, 0);
  EXPECT_EQ(Lookup(t, "2001:db9::1", "r31").until_ms, kNow + 31);
}

// Lookups on many threads while the table is replaced: each sees the old
// table or the new, never a torn one (run under TSan by scripts/test.sh).
TEST(NetworkBlockTableTest, LookupsWhileReplacing) {
  NetworkBlockTable t;
  const std::vector<BlockRecord> a = {Net("192.0.2.0/24", "", kNow + 1'000, "a")};
  const std::vector<BlockRecord> b = {Net("192.0.2.0/25", "", kNow + 2'000, "b")};
  t.Replace(a);
  std::atomic<bool> stop{false};
  std::atomic<int> wrong{0};
  std::vector<std::thread> readers;
  for (int i = 0; i < 4; ++i) {
    readers.emplace_back([&] {
      const IpAddress address = *IpAddress::Parse("192.0.2.1");
      while (!stop.load()) {
        std::string_view reason;
        const int64_t until = t.Until(address, "api", kNow, &reason);
        const bool ok =
            (until == kNow + 1'000 && reason == "a") || (until == kNow + 2'000 && reason == "b");
        if (!ok) wrong.fetch_add(1);
      }
    });
  }
  for (int i = 0; i < 2000; ++i) t.Replace(i % 2 == 0 ? b : a);
  stop = true;
  for (std::thread& r : readers) r.join();
  EXPECT_EQ(wrong.load(), 0);
}

}  // namespace
}  // namespace floodgate::service
