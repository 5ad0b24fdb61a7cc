// Unit tests of the entry blob (engine/entry.h): its layout and sizes, and
// the whole-second expiry arithmetic.
#include "engine/entry.h"

#include <cstdint>
#include <limits>
#include <string>

#include "gtest/gtest.h"

namespace floodgate::engine {
namespace {

TEST(EntryExpiryTest, MillisecondsRoundUpToWholeSeconds) {
  EXPECT_EQ(ExpiryMsToStoredSeconds(1), 1u);
  EXPECT_EQ(ExpiryMsToStoredSeconds(999), 1u);
  EXPECT_EQ(ExpiryMsToStoredSeconds(1'000), 1u);
  EXPECT_EQ(ExpiryMsToStoredSeconds(1'001), 2u);
  EXPECT_EQ(ExpiryMsToStoredSeconds(1'999), 2u);
  EXPECT_EQ(ExpiryMsToStoredSeconds(2'000), 2u);
}

TEST(EntryExpiryTest, OutOfRangeExpiriesAreClamped) {
  constexpr uint32_t kMax = std::numeric_limits<uint32_t>::max();
  EXPECT_EQ(ExpiryMsToStoredSeconds(0), 0u);
  EXPECT_EQ(ExpiryMsToStoredSeconds(-5'000), 0u);
  EXPECT_EQ(ExpiryMsToStoredSeconds(int64_t{kMax} * 1000), kMax);
  EXPECT_EQ(ExpiryMsToStoredSeconds(int64_t{kMax} * 1000 + 1), kMax);
  EXPECT_EQ(ExpiryMsToStoredSeconds(std::numeric_limits<int64_t>::max()), kMax);
}

TEST(EntryExpiryTest, ExpiresAtTheFirstMillisecondOfItsSecond) {
  EXPECT_FALSE(StoredSecondsExpired(5, 4'999));
  EXPECT_TRUE(StoredSecondsExpired(5, 5'000));
  EXPECT_TRUE(StoredSecondsExpired(5, 5'001));
  EXPECT_TRUE(StoredSecondsExpired(0, 0));
  // Never earlier than asked: for any requested expiry T, alive at T - 1.
  for (int64_t t = 1; t < 5'000; t += 7) {
    EXPECT_FALSE(StoredSecondsExpired(ExpiryMsToStoredSeconds(t), t - 1)) << t;
    EXPECT_TRUE(StoredSecondsExpired(ExpiryMsToStoredSeconds(t), t + 999)) << t;
  }
}

TEST(EntryTest, SizesFollowTheLayout) {
  // Header 8, key, padding to 8, state.
  EXPECT_EQ(Entry::AllocSize(0, 1), 16u);
  EXPECT_EQ(Entry::AllocSize(1, 1), 24u);
  EXPECT_EQ(Entry::AllocSize(8, 2), 32u);
  EXPECT_EQ(Entry::AllocSize(16, 2), 40u);
  EXPECT_EQ(Entry::AllocSize(17, 2), 48u);
  EXPECT_EQ(Entry::AllocSize(512, 64), 8u + 512 + 512);
  // glibc: request + 8, rounded up to 16, at least 32.
  EXPECT_EQ(Entry::MallocChunkSize(1), 32u);
  EXPECT_EQ(Entry::MallocChunkSize(24), 32u);
  EXPECT_EQ(Entry::MallocChunkSize(25), 48u);
  EXPECT_EQ(Entry::MallocChunkSize(40), 48u);
  EXPECT_EQ(Entry::MallocChunkSize(41), 64u);
}

TEST(EntryTest, HoldsKeyStateAndHeader) {
  const std::string key("bin\0ary", 7);
  const int64_t state[3] = {-1, 42, INT64_MAX};
  Entry* e = Entry::Create(65'535, key, 3, 123, state);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->variant(), 65'535);
  EXPECT_EQ(e->key(), key);
  EXPECT_EQ(e->expiry_s(), 123u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(e->state()) % 8, 0u);
  EXPECT_EQ(e->state()[0], -1);
  EXPECT_EQ(e->state()[1], 42);
  EXPECT_EQ(e->state()[2], INT64_MAX);
  EXPECT_FALSE(e->ExpiredAt(122'999));
  EXPECT_TRUE(e->ExpiredAt(123'000));
  e->set_expiry_s(200);
  EXPECT_EQ(e->expiry_s(), 200u);
  EXPECT_EQ(e->key(), key);  // the header write did not touch the key
  Entry::Destroy(e);
}

}  // namespace
}  // namespace floodgate::engine
