// Unit tests of ExpiringSet: the expiry edge (live at T - 1, gone at T),
// refreshing (later and earlier), ordering by expiry then bytes, the order
// statistics the OTP limits use, and byte accounting.
#include "engine/expiring_set.h"

#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"

namespace floodgate::engine {
namespace {

std::vector<std::pair<std::string, int64_t>> Listed(const ExpiringSet& set) {
  std::vector<std::pair<std::string, int64_t>> out;
  set.ForEach([&](std::string_view m, int64_t e) { out.emplace_back(std::string(m), e); });
  return out;
}

TEST(ExpiringSetTest, MemberIsLiveUntilOneMillisecondBeforeItsExpiry) {
  ExpiringSet set;
  EXPECT_TRUE(set.Upsert("a", 1000));
  EXPECT_EQ(set.Prune(999), 0u);
  EXPECT_EQ(set.ExpiryOf("a"), 1000);
  EXPECT_EQ(set.Prune(1000), 1u);
  EXPECT_EQ(set.ExpiryOf("a"), 0);
  EXPECT_TRUE(set.empty());
  EXPECT_EQ(set.LastExpiry(), 0);
}

TEST(ExpiringSetTest, UpsertRefreshesBothWays) {
  ExpiringSet set;
  EXPECT_TRUE(set.Upsert("a", 1000));
  EXPECT_FALSE(set.Upsert("a", 5000));  // later
  EXPECT_EQ(set.LastExpiry(), 5000);
  EXPECT_EQ(set.Prune(1000), 0u);
  EXPECT_FALSE(set.Upsert("a", 3000));  // earlier
  EXPECT_FALSE(set.Upsert("a", 3000));  // the same: nothing moves
  EXPECT_EQ(set.size(), 1u);
  EXPECT_EQ(Listed(set), (std::vector<std::pair<std::string, int64_t>>{{"a", 3000}}));
  EXPECT_EQ(set.Prune(2999), 0u);
  EXPECT_EQ(set.Prune(3000), 1u);
}

TEST(ExpiringSetTest, ListsByExpiryThenBytesAsRedisSortedSets) {
  ExpiringSet set;
  set.Upsert("b", 20);
  set.Upsert("c", 10);
  set.Upsert("a", 20);
  set.Upsert(std::string("\xff", 1), 10);
  set.Upsert(std::string("\x01", 1), 10);
  EXPECT_EQ(Listed(set), (std::vector<std::pair<std::string, int64_t>>{
                             {"\x01", 10}, {"c", 10}, {"\xff", 10}, {"a", 20}, {"b", 20}}));
  EXPECT_EQ(set.NthExpiry(0), 10);
  EXPECT_EQ(set.NthExpiry(3), 20);
  EXPECT_EQ(set.NthExpiry(5), 0);
  EXPECT_EQ(set.LastExpiry(), 20);
  set.EraseFirst();
  EXPECT_EQ(set.ExpiryOf(std::string("\x01", 1)), 0);
  EXPECT_EQ(set.size(), 4u);
}

TEST(ExpiringSetTest, EraseAndPruneKeepBothIndexesInStep) {
  ExpiringSet set;
  for (int i = 0; i < 100; ++i) set.Upsert("m" + std::to_string(i), 1000 + i);
  EXPECT_TRUE(set.Erase("m50"));
  EXPECT_FALSE(set.Erase("m50"));
  EXPECT_EQ(set.Prune(1049), 50u);  // m0..m49 expire at 1000..1049
  EXPECT_EQ(set.size(), 49u);
  EXPECT_EQ(set.NthExpiry(0), 1051);
  EXPECT_EQ(set.ExpiryOf("m99"), 1099);
  EXPECT_EQ(set.Prune(1099), 49u);
  EXPECT_TRUE(set.empty());
  EXPECT_EQ(set.HeapBytes(), 0u);
}

TEST(ExpiringSetTest, BytesFollowMembers) {
  ExpiringSet set;
  set.Upsert("short", 10);
  // A map node (32 + 40 bytes: an 80-byte chunk) and a set node (32 + 16:
  // a 64-byte chunk); a member of up to 15 bytes lives inside its string.
  const size_t one = set.HeapBytes();
  EXPECT_EQ(one, 144u);
  EXPECT_EQ(ExpiringSet::MemberBytes("short"), one);
  EXPECT_EQ(ExpiringSet::MemberBytes(std::string(15, 'x')), one);
  EXPECT_EQ(ExpiringSet::MemberBytes(std::string(16, 'x')), one + 32);  // 17 bytes: a 32 chunk
  set.Upsert(std::string(400, 'x'), 10);
  EXPECT_EQ(set.HeapBytes(), 2 * one + 416);  // 401 bytes: a 416-byte chunk
  set.Upsert("short", 20);                    // a new expiry takes no memory
  EXPECT_EQ(set.HeapBytes(), 2 * one + 416);
  EXPECT_TRUE(set.Erase("short"));
  EXPECT_EQ(set.HeapBytes(), one + 416);
  set.Clear();
  EXPECT_EQ(set.HeapBytes(), 0u);
  EXPECT_TRUE(set.empty());
}

}  // namespace
}  // namespace floodgate::engine
