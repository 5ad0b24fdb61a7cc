// Unit tests of MemoryStore: state round trips, the fresh flag, expiry edges,
// lazy and swept expiry, erase, key limits, identity, the max_entries and
// max_memory bounds, memory accounting and release of owned state. Single-threaded and on a
// ManualClock with the sweep thread off; threads are in
// memory_store_threads_test.cc.
#include "engine/memory_store.h"

#include <malloc.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "floodgate/clock.h"
#include "floodgate/config.h"
#include "floodgate/rule.h"
#include "gtest/gtest.h"

namespace floodgate::engine {
namespace {

// Variants used throughout.
constexpr uint32_t kPlain = 0;     // 2 words, owns nothing
constexpr uint32_t kCounted = 1;   // 2 words, release counts calls
constexpr uint32_t kOwning = 2;    // 1 word: a pointer to a heap array, freed by release
constexpr uint32_t kMeasured = 3;  // 2 words: a heap array and its length, counted by the store

std::atomic<int> g_releases{0};
void CountRelease(int64_t* /*state*/) { g_releases.fetch_add(1); }

void FreeOwned(int64_t* state) {
  delete[] reinterpret_cast<int64_t*>(state[0]);
  state[0] = 0;
}

void FreeMeasured(int64_t* state) {
  delete[] reinterpret_cast<int64_t*>(state[0]);
  state[0] = state[1] = 0;
}
size_t MeasuredBytes(const int64_t* state) {
  return state[0] != 0 ? core::MallocChunkSize(static_cast<size_t>(state[1]) * 8) : 0;
}

std::vector<VariantLayout> TestLayouts() {
  return {VariantLayout{2, nullptr}, VariantLayout{2, &CountRelease}, VariantLayout{1, &FreeOwned},
          VariantLayout{2, &FreeMeasured, &MeasuredBytes}};
}

EngineConfig TestConfig(int64_t max_entries = 1000, int shards = 4,
                        int64_t max_memory = int64_t{1} << 30) {
  EngineConfig config;
  config.max_entries = max_entries;
  config.max_memory = max_memory;
  config.shards = shards;
  config.sweep_interval_ms = 0;  // deterministic: sweeps only when a test calls SweepExpired
  return config;
}

// What one Update saw and left.
struct Seen {
  bool called = false;
  bool fresh = false;
  int64_t before0 = -1;
  int64_t before1 = -1;
};

class MemoryStoreTest : public ::testing::Test {
 protected:
  void SetUp() override { g_releases = 0; }

  // Increments state[0] (and adds 10 to state[1] when the variant has it),
  // asks for `expiry_ms`, and reports what the state held before.
  Seen Bump(MemoryStore& store, uint32_t variant, std::string_view key, int64_t now_ms,
            int64_t expiry_ms, Status* status = nullptr) {
    Seen seen;
    Status s =
        store.Update(variant, key, now_ms, [&](int64_t* state, bool fresh, core::MemoryRoom*) {
          seen.called = true;
          seen.fresh = fresh;
          seen.before0 = state[0];
          state[0] += 1;
          if (variant != kOwning) {
            seen.before1 = state[1];
            state[1] += 10;
          }
          return expiry_ms;
        });
    if (status != nullptr) *status = s;
    EXPECT_TRUE(status != nullptr || s.ok()) << s.ToString();
    return seen;
  }

  // Reads state[0] without changing anything; -1 when the entry is absent or
  // expired (a peek on it leaves no entry).
  int64_t Read(MemoryStore& store, uint32_t variant, std::string_view key, int64_t now_ms,
               int64_t keep_until_ms) {
    int64_t value = -1;
    Status s = store.Update(variant, key, now_ms,
                            [&](int64_t* state, bool fresh, core::MemoryRoom*) -> int64_t {
                              if (fresh) return 0;  // nothing here: keep nothing
                              value = state[0];
                              return keep_until_ms;
                            });
    EXPECT_TRUE(s.ok()) << s.ToString();
    return value;
  }

  ManualClock clock_{1'000'000};
};

TEST_F(MemoryStoreTest, CreatesUpdatesAndReadsBackState) {
  MemoryStore store(TestConfig(), TestLayouts(), clock_);
  const int64_t now = clock_.NowMs();

  Seen first = Bump(store, kPlain, "user:1", now, now + 60'000);
  EXPECT_TRUE(first.called);
  EXPECT_EQ(first.before0, 0);
  EXPECT_EQ(first.before1, 0);

  Seen second = Bump(store, kPlain, "user:1", now + 1, now + 60'000);
  EXPECT_EQ(second.before0, 1);
  EXPECT_EQ(second.before1, 10);

  Seen third = Bump(store, kPlain, "user:1", now + 2, now + 60'000);
  EXPECT_EQ(third.before0, 2);
  EXPECT_EQ(third.before1, 20);
  EXPECT_EQ(store.GetStats().entries, 1);
}

TEST_F(MemoryStoreTest, FreshIsTrueOnlyForANewEntry) {
  MemoryStore store(TestConfig(), TestLayouts(), clock_);
  const int64_t now = clock_.NowMs();
  EXPECT_TRUE(Bump(store, kPlain, "k", now, now + 5'000).fresh);
  EXPECT_FALSE(Bump(store, kPlain, "k", now, now + 5'000).fresh);
  EXPECT_FALSE(Bump(store, kPlain, "k", now + 4'000, now + 5'000).fresh);
}

TEST_F(MemoryStoreTest, PeekOrDenialOnANewKeyAllocatesNothing) {
  MemoryStore store(TestConfig(), TestLayouts(), clock_);
  const int64_t now = clock_.NowMs();
  const size_t bytes_before = store.ApproximateMemoryBytes();

  // A peek: fn returns 0 ("keep nothing").
  Seen peek;
  ASSERT_TRUE(store
                  .Update(kPlain, "new", now,
                          [&](int64_t* state, bool fresh, core::MemoryRoom*) -> int64_t {
                            peek.called = true;
                            peek.fresh = fresh;
                            peek.before0 = state[0];
                            return 0;
                          })
                  .ok());
  EXPECT_TRUE(peek.called);
  EXPECT_TRUE(peek.fresh);
  EXPECT_EQ(peek.before0, 0);

  // A denial that scribbles on the state but returns now_ms: still nothing kept.
  Seen deny = Bump(store, kPlain, "new", now, now);
  EXPECT_TRUE(deny.fresh);
  EXPECT_EQ(deny.before0, 0);  // the scribble of the first call was not kept either

  EXPECT_EQ(store.GetStats().entries, 0);
  EXPECT_EQ(store.ApproximateMemoryBytes(), bytes_before);
}

// Expiry is stored in whole seconds rounded up, so an expiry of T ms takes
// effect at ceil(T / 1000) * 1000 ms: exactly at T when T is a whole second,
// up to 999 ms later otherwise. Never earlier than T.
TEST_F(MemoryStoreTest, ExpiryOnAWholeSecondTakesEffectExactlyThen) {
  MemoryStore store(TestConfig(), TestLayouts(), clock_);
  Bump(store, kPlain, "k", 1'000'000, 1'005'000);
  EXPECT_EQ(Read(store, kPlain, "k", 1'004'999, 1'005'000), 1);   // 1 ms before: alive
  EXPECT_EQ(Read(store, kPlain, "k", 1'005'000, 1'005'001), -1);  // at expiry: gone
  EXPECT_EQ(store.GetStats().entries, 0);
}

TEST_F(MemoryStoreTest, ExpiryBetweenSecondsIsRoundedUp) {
  MemoryStore store(TestConfig(), TestLayouts(), clock_);
  Bump(store, kPlain, "k", 1'000'000, 1'004'001);  // stored as second 1005
  // Past the requested 1'004'001 but before 1'005'000: the entry is kept,
  // not fresh (the algorithms handle the stale state from their timestamps).
  EXPECT_EQ(Read(store, kPlain, "k", 1'004'001, 1'004'001 + 1), 1);
  EXPECT_EQ(Read(store, kPlain, "k", 1'004'999, 1'004'001 + 1), 1);
  EXPECT_EQ(Read(store, kPlain, "k", 1'005'000, 1'006'000), -1);
}

TEST_F(MemoryStoreTest, ExpiredEntryIsFreshOnAccessAndReleasedOnce) {
  MemoryStore store(TestConfig(), TestLayouts(), clock_);
  Bump(store, kCounted, "k", 1'000'000, 1'002'000);
  Bump(store, kCounted, "k", 1'000'500, 1'002'000);
  EXPECT_EQ(g_releases, 0);

  Seen after = Bump(store, kCounted, "k", 1'002'000, 1'010'000);
  EXPECT_TRUE(after.fresh);
  EXPECT_EQ(after.before0, 0);  // zeroed
  EXPECT_EQ(after.before1, 0);
  EXPECT_EQ(g_releases, 1);
  EXPECT_EQ(store.GetStats().entries, 1);

  Seen again = Bump(store, kCounted, "k", 1'002'001, 1'010'000);
  EXPECT_FALSE(again.fresh);
  EXPECT_EQ(again.before0, 1);
  EXPECT_EQ(g_releases, 1);
}

TEST_F(MemoryStoreTest, ReturningNowOrEarlierRemovesAnExistingEntry) {
  MemoryStore store(TestConfig(), TestLayouts(), clock_);
  const int64_t now = clock_.NowMs();
  Bump(store, kCounted, "a", now, now + 60'000);
  Bump(store, kCounted, "b", now, now + 60'000);
  EXPECT_EQ(store.GetStats().entries, 2);

  Bump(store, kCounted, "a", now + 10, now + 10);  // == now: keep nothing
  Bump(store, kCounted, "b", now + 10, 0);         // < now
  EXPECT_EQ(store.GetStats().entries, 0);
  EXPECT_EQ(g_releases, 2);
  EXPECT_TRUE(Bump(store, kCounted, "a", now + 20, now + 60'000).fresh);
}

TEST_F(MemoryStoreTest, SweepFreesExactlyTheExpiredEntries) {
  MemoryStore store(TestConfig(), TestLayouts(), clock_);
  const int64_t now = 1'000'000;
  for (int i = 0; i < 30; ++i) {
    // Expiries at whole seconds 1001, 1002, 1003 (10 keys each).
    Bump(store, kCounted, "key" + std::to_string(i), now, now + 1'000 * (1 + i % 3));
  }
  EXPECT_EQ(store.GetStats().entries, 30);

  EXPECT_EQ(store.SweepExpired(now + 999), 0);
  EXPECT_EQ(store.SweepExpired(now + 1'000), 10);
  EXPECT_EQ(g_releases, 10);
  EXPECT_EQ(store.SweepExpired(now + 1'000), 0);
  EXPECT_EQ(store.SweepExpired(now + 2'500), 10);
  EXPECT_EQ(g_releases, 20);

  MemoryStore::Stats stats = store.GetStats();
  EXPECT_EQ(stats.entries, 10);
  EXPECT_EQ(stats.expired_freed, 20);
  for (int i = 0; i < 30; ++i) {
    const int64_t expected = (i % 3 == 2) ? 1 : -1;
    EXPECT_EQ(Read(store, kCounted, "key" + std::to_string(i), now + 2'500, now + 3'000), expected)
        << i;
  }
}

TEST_F(MemoryStoreTest, SweepGivesTableMemoryBackAfterAFlood) {
  MemoryStore store(TestConfig(100'000, 1), TestLayouts(), clock_);
  const int64_t now = clock_.NowMs();
  const size_t empty_bytes = store.ApproximateMemoryBytes();
  for (int i = 0; i < 5'000; ++i) Bump(store, kPlain, "flood:" + std::to_string(i), now, now + 1);
  const size_t full_bytes = store.ApproximateMemoryBytes();
  EXPECT_GT(full_bytes, empty_bytes + 5'000 * 48);

  EXPECT_EQ(store.SweepExpired(now + 1'000), 5'000);
  EXPECT_EQ(store.ApproximateMemoryBytes(), empty_bytes);
}

TEST_F(MemoryStoreTest, EraseRemovesAndReleases) {
  MemoryStore store(TestConfig(), TestLayouts(), clock_);
  const int64_t now = clock_.NowMs();
  Bump(store, kCounted, "k", now, now + 60'000);
  Bump(store, kCounted, "k", now, now + 60'000);

  EXPECT_TRUE(store.Erase(kCounted, "k"));
  EXPECT_EQ(g_releases, 1);
  EXPECT_EQ(store.GetStats().entries, 0);
  EXPECT_FALSE(store.Erase(kCounted, "k"));
  EXPECT_FALSE(store.Erase(kPlain, "never"));
  EXPECT_FALSE(store.Erase(99, "k"));                        // unknown variant
  EXPECT_FALSE(store.Erase(kPlain, std::string(513, 'x')));  // too long to exist
  EXPECT_TRUE(Bump(store, kCounted, "k", now, now + 60'000).fresh);
}

TEST_F(MemoryStoreTest, KeyOf512BytesIsAcceptedAnd513Refused) {
  MemoryStore store(TestConfig(), TestLayouts(), clock_);
  const int64_t now = clock_.NowMs();
  ASSERT_EQ(kMaxKeyBytes, 512u);

  const std::string max_key(512, 'k');
  Bump(store, kPlain, max_key, now, now + 60'000);
  EXPECT_EQ(Read(store, kPlain, max_key, now, now + 60'000), 1);

  bool called = false;
  Status s = store.Update(kPlain, std::string(513, 'k'), now,
                          [&](int64_t*, bool, core::MemoryRoom*) -> int64_t {
                            called = true;
                            return now + 60'000;
                          });
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "key is 513 bytes; the limit is 512");
  EXPECT_FALSE(called);
  EXPECT_EQ(store.GetStats().entries, 1);
}

TEST_F(MemoryStoreTest, EmptyKeyIsAKeyLikeAnyOther) {
  MemoryStore store(TestConfig(), TestLayouts(), clock_);
  const int64_t now = clock_.NowMs();
  Bump(store, kPlain, "", now, now + 60'000);
  EXPECT_EQ(Read(store, kPlain, "", now, now + 60'000), 1);
  EXPECT_EQ(Read(store, kPlain, std::string_view("\0", 1), now, now + 60'000), -1);
}

TEST_F(MemoryStoreTest, UnknownVariantIsRefused) {
  MemoryStore store(TestConfig(), TestLayouts(), clock_);
  bool called = false;
  const auto unknown = static_cast<uint32_t>(TestLayouts().size());
  Status s =
      store.Update(unknown, "k", clock_.NowMs(), [&](int64_t*, bool, core::MemoryRoom*) -> int64_t {
        called = true;
        return 0;
      });
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_FALSE(called);
  EXPECT_EQ(store
                .Update(70'000, "k", clock_.NowMs(),
                        [](int64_t*, bool, core::MemoryRoom*) -> int64_t { return 0; })
                .code(),
            StatusCode::kInvalidArgument);
}

TEST_F(MemoryStoreTest, BinaryKeysAndVariantsAreDistinctEntries) {
  MemoryStore store(TestConfig(), TestLayouts(), clock_);
  const int64_t now = clock_.NowMs();
  const std::string a_nul_b("a\0b", 3);
  const std::string a_nul_c("a\0c", 3);
  const std::string a_nul("a\0", 2);

  Bump(store, kPlain, a_nul_b, now, now + 60'000);
  Bump(store, kPlain, a_nul_b, now, now + 60'000);
  Bump(store, kPlain, a_nul_c, now, now + 60'000);
  Bump(store, kPlain, "a", now, now + 60'000);
  Bump(store, kCounted, a_nul_b, now, now + 60'000);  // same bytes, other variant

  EXPECT_EQ(store.GetStats().entries, 4);
  EXPECT_EQ(Read(store, kPlain, a_nul_b, now, now + 60'000), 2);
  EXPECT_EQ(Read(store, kPlain, a_nul_c, now, now + 60'000), 1);
  EXPECT_EQ(Read(store, kPlain, "a", now, now + 60'000), 1);
  EXPECT_EQ(Read(store, kPlain, a_nul, now, now + 60'000), -1);
  EXPECT_EQ(Read(store, kCounted, a_nul_b, now, now + 60'000), 1);
  EXPECT_EQ(Read(store, kCounted, "a", now, now + 60'000), -1);
}

TEST_F(MemoryStoreTest, StateIsEightByteAlignedForEveryKeyLength) {
  MemoryStore store(TestConfig(), TestLayouts(), clock_);
  const int64_t now = clock_.NowMs();
  for (size_t len = 0; len <= 24; ++len) {
    uintptr_t address = 0;
    ASSERT_TRUE(store
                    .Update(kPlain, std::string(len, 'x'), now,
                            [&](int64_t* state, bool, core::MemoryRoom*) {
                              address = reinterpret_cast<uintptr_t>(state);
                              return now + 60'000;
                            })
                    .ok());
    EXPECT_EQ(address % 8, 0u) << len;
    // And the stored (not the temporary) state.
    EXPECT_TRUE(store
                    .Update(kPlain, std::string(len, 'x'), now,
                            [&](int64_t* state, bool fresh, core::MemoryRoom*) {
                              EXPECT_FALSE(fresh);
                              EXPECT_EQ(reinterpret_cast<uintptr_t>(state) % 8, 0u) << len;
                              return now + 60'000;
                            })
                    .ok());
  }
}

TEST_F(MemoryStoreTest, HugeExpiryIsKeptAsNever) {
  MemoryStore store(TestConfig(), TestLayouts(), clock_);
  Bump(store, kPlain, "k", clock_.NowMs(), INT64_MAX);
  EXPECT_EQ(store.SweepExpired(int64_t{4'000'000'000} * 1000), 0);
  EXPECT_EQ(Read(store, kPlain, "k", int64_t{4'000'000'000} * 1000, INT64_MAX), 1);
}

TEST_F(MemoryStoreTest, FullStoreRefusesNewKeysButUpdatesExistingOnes) {
  MemoryStore store(TestConfig(/*max_entries=*/3), TestLayouts(), clock_);
  const int64_t now = 1'000'000;
  for (int i = 0; i < 3; ++i) Bump(store, kPlain, "k" + std::to_string(i), now, now + 5'000);

  // fn runs on a zeroed copy (whether it keeps anything is known only once
  // it ran); what it wanted to keep is refused and not kept.
  bool called = false;
  Status s = store.Update(kPlain, "k3", now,
                          [&](int64_t* state, bool fresh, core::MemoryRoom*) -> int64_t {
                            called = true;
                            EXPECT_TRUE(fresh);
                            EXPECT_EQ(state[0], 0);
                            state[0] = 7;
                            return now + 5'000;
                          });
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(s.message(), "store is full (engine.max_entries: 3)");
  EXPECT_TRUE(called);
  EXPECT_EQ(Read(store, kPlain, "k3", now, now + 5'000), -1);
  // A peek or a denial on a new key keeps nothing: a full store answers it.
  Status peek = store.Update(kPlain, "k4", now,
                             [](int64_t*, bool, core::MemoryRoom*) -> int64_t { return 0; });
  EXPECT_TRUE(peek.ok()) << peek.ToString();
  Status denial;
  EXPECT_TRUE(Bump(store, kPlain, "k5", now, now, &denial).called);
  EXPECT_TRUE(denial.ok()) << denial.ToString();

  MemoryStore::Stats stats = store.GetStats();
  EXPECT_EQ(stats.entries, 3);
  EXPECT_EQ(stats.rejected_full, 1);

  // Existing keys keep working.
  EXPECT_EQ(Bump(store, kPlain, "k1", now + 1, now + 5'000).before0, 1);

  // After expiry and a sweep, new keys are admitted again.
  EXPECT_EQ(store.SweepExpired(now + 5'000), 3);
  Status again;
  EXPECT_TRUE(Bump(store, kPlain, "k3", now + 5'000, now + 10'000, &again).fresh);
  EXPECT_TRUE(again.ok()) << again.ToString();
  EXPECT_EQ(store.GetStats().entries, 1);
  EXPECT_EQ(store.GetStats().rejected_full, 1);
}

TEST_F(MemoryStoreTest, FullStoreReleasesWhatARefusedStateOwned) {
  MemoryStore store(TestConfig(/*max_entries=*/1), TestLayouts(), clock_);
  const int64_t now = 1'000'000;
  Bump(store, kCounted, "held", now, now + 60'000);
  Status s;
  EXPECT_TRUE(Bump(store, kCounted, "refused", now, now + 60'000, &s).called);
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(g_releases, 1);  // the refused copy's release ran
  // Under ASan: an owned array given to a refused copy must not leak.
  s = store.Update(kOwning, "refused", now,
                   [&](int64_t* state, bool, core::MemoryRoom*) -> int64_t {
                     state[0] = reinterpret_cast<int64_t>(new int64_t[4]{1, 2, 3, 4});
                     return now + 60'000;
                   });
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted);
}

TEST_F(MemoryStoreTest, FullStoreFreesExpiredEntriesOfTheShardBeforeRefusing) {
  // One shard, so the lazy scan sees every entry.
  MemoryStore store(TestConfig(/*max_entries=*/2, /*shards=*/1), TestLayouts(), clock_);
  const int64_t now = 1'000'000;
  Bump(store, kCounted, "old", now, now + 1'000);
  Bump(store, kCounted, "live", now, now + 60'000);

  Status s;
  Seen seen = Bump(store, kCounted, "new", now + 1'000, now + 60'000, &s);
  EXPECT_TRUE(s.ok()) << s.ToString();
  EXPECT_TRUE(seen.called);
  MemoryStore::Stats stats = store.GetStats();
  EXPECT_EQ(stats.entries, 2);
  EXPECT_EQ(stats.expired_freed, 1);
  EXPECT_EQ(stats.rejected_full, 0);
  EXPECT_EQ(g_releases, 1);
  EXPECT_EQ(Read(store, kCounted, "live", now + 1'000, now + 60'000), 1);
  EXPECT_FALSE(store.Erase(kCounted, "old"));  // gone
}

TEST_F(MemoryStoreTest, FullStoreRescansAShardAtMostOncePerSecond) {
  // Entries written after a scan expire in a later second than the scan's, so
  // a second scan in the same second is skipped. To observe the skip, write
  // with a lagging clock (as a slow thread might) an expiry in the scan's
  // second.
  MemoryStore store(TestConfig(/*max_entries=*/1, /*shards=*/1), TestLayouts(), clock_);
  Bump(store, kPlain, "a", 1'000'000, 1'060'000);

  Status s;
  Bump(store, kPlain, "b", 1'002'500, 1'060'000, &s);  // full: scans in second 1002, frees nothing
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted);
  Bump(store, kPlain, "a", 1'001'000, 1'002'000);  // lagging writer: "a" now expires at 1'002'000
  Bump(store, kPlain, "b", 1'002'600, 1'060'000, &s);  // same second: no rescan, still full
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(store.GetStats().expired_freed, 0);
  Bump(store, kPlain, "b", 1'003'000, 1'060'000, &s);  // second 1003: rescans, frees "a"
  EXPECT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(store.GetStats().expired_freed, 1);
  EXPECT_EQ(store.GetStats().rejected_full, 2);
}

// One shard, 16-byte keys and 2-word states: each entry is a 48-byte chunk;
// the first entry brings an 8-slot array (an 80-byte chunk), which holds 6
// entries; the 7th doubles it to 16 slots (a 144-byte chunk: 64 more).
constexpr int64_t kEntryChunk = 48;
constexpr int64_t kFirstArray = 80;
constexpr int64_t kArrayGrowthTo16 = 144 - 80;

TEST_F(MemoryStoreTest, MaxMemoryBoundsBytesOfEntriesAndSlots) {
  const int64_t max_memory = kFirstArray + 6 * kEntryChunk;  // exactly six entries
  MemoryStore store(TestConfig(/*max_entries=*/1'000, /*shards=*/1, max_memory), TestLayouts(),
                    clock_);
  const int64_t now = 1'000'000;
  for (int i = 0; i < 6; ++i)
    Bump(store, kPlain, "0123456789abcd:" + std::to_string(i), now, now + 60'000);
  EXPECT_EQ(store.GetStats().bytes, max_memory);
  EXPECT_EQ(store.ApproximateMemoryBytes(), static_cast<size_t>(max_memory));

  // The 7th needs its chunk and the array's growth.
  Status s;
  Bump(store, kPlain, "0123456789abcd:6", now, now + 60'000, &s);
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(s.message(),
            "store is full (engine.max_memory: 368 bytes; 368 in use, a new entry "
            "needs 112)");  // 48 for the entry, 64 for the array's growth
  EXPECT_EQ(store.GetStats().entries, 6);
  EXPECT_EQ(store.GetStats().rejected_full, 1);
  // Known keys keep working.
  EXPECT_EQ(Bump(store, kPlain, "0123456789abcd:0", now, now + 60'000).before0, 1);

  // Freeing one entry gives its 48 bytes back: a new one fits in the array.
  EXPECT_TRUE(store.Erase(kPlain, "0123456789abcd:0"));
  EXPECT_EQ(store.GetStats().bytes, max_memory - kEntryChunk);
  Bump(store, kPlain, "0123456789abcd:7", now, now + 60'000, &s);
  EXPECT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(store.GetStats().bytes, max_memory);
}

TEST_F(MemoryStoreTest, MaxMemoryCountsKeyBytes) {
  // Room for the array and one byte short of 3 entries of 512-byte keys
  // (8 + 512 + 16 = 536 bytes requested, a 544-byte chunk): only 2 fit,
  // where 6 entries of 16-byte keys would. The entry count is no bound here.
  const int64_t max_memory = kFirstArray + 3 * 544 - 1;
  MemoryStore store(TestConfig(/*max_entries=*/1'000, /*shards=*/1, max_memory), TestLayouts(),
                    clock_);
  const int64_t now = 1'000'000;
  int created = 0;
  for (int i = 0; i < 10; ++i) {
    std::string key(kMaxKeyBytes, 'k');
    key.replace(0, 1, std::to_string(i));
    Status s;
    Bump(store, kPlain, key, now, now + 60'000, &s);
    if (s.ok()) ++created;
  }
  EXPECT_EQ(created, 2);
  EXPECT_EQ(store.GetStats().bytes, kFirstArray + 2 * 544);
  EXPECT_EQ(store.GetStats().rejected_full, 8);
  // A short key still fits in what is left.
  Status s;
  Bump(store, kPlain, "short", now, now + 60'000, &s);
  EXPECT_TRUE(s.ok()) << s.ToString();
}

TEST_F(MemoryStoreTest, FullMemoryFreesExpiredEntriesOfTheShardBeforeRefusing) {
  const int64_t max_memory = kFirstArray + 2 * kEntryChunk;
  MemoryStore store(TestConfig(/*max_entries=*/1'000, /*shards=*/1, max_memory), TestLayouts(),
                    clock_);
  const int64_t now = 1'000'000;
  Bump(store, kCounted, "0123456789abcdef", now, now + 1'000);  // "old"
  Bump(store, kCounted, "0123456789abcdeg", now, now + 60'000);
  Status s;
  Bump(store, kCounted, "0123456789abcdeh", now + 999, now + 60'000, &s);  // not yet expired
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted);
  Bump(store, kCounted, "0123456789abcdeh", now + 1'000, now + 60'000, &s);
  EXPECT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(store.GetStats().expired_freed, 1);
  EXPECT_EQ(store.GetStats().bytes, max_memory);
  EXPECT_EQ(g_releases, 2);  // the refused copy, then the expired entry
}

TEST_F(MemoryStoreTest, BytesReturnToZeroWhenEverythingIsFreed) {
  MemoryStore store(TestConfig(100'000, 4), TestLayouts(), clock_);
  const int64_t now = 1'000'000;
  for (int i = 0; i < 3'000; ++i) {
    Bump(store, kPlain, std::string(static_cast<size_t>(i % 300), 'x') + std::to_string(i), now,
         now + 1'000 + (i % 3) * 1'000);
  }
  for (int i = 0; i < 100; ++i)
    EXPECT_TRUE(
        store.Erase(kPlain, std::string(static_cast<size_t>(i % 300), 'x') + std::to_string(i)));
  EXPECT_GT(store.GetStats().bytes, 0);
  store.SweepExpired(now + 2'000);
  EXPECT_GT(store.GetStats().bytes, 0);
  store.SweepExpired(now + 3'000);
  EXPECT_EQ(store.GetStats().entries, 0);
  EXPECT_EQ(store.GetStats().bytes, 0);
}

TEST_F(MemoryStoreTest, ZeroMaxEntriesRefusesEveryNewKey) {
  MemoryStore store(TestConfig(/*max_entries=*/0), TestLayouts(), clock_);
  Status s;
  Bump(store, kPlain, "k", clock_.NowMs(), clock_.NowMs() + 1'000, &s);
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(store.GetStats().entries, 0);
}

TEST_F(MemoryStoreTest, PrefetchIsAHintThatChangesNothing) {
  MemoryStore store(TestConfig(), TestLayouts(), clock_);
  const int64_t now = clock_.NowMs();
  store.Prefetch(kPlain, "k");  // before any table exists
  Bump(store, kPlain, "k", now, now + 60'000);
  store.Prefetch(kPlain, "k");
  store.Prefetch(kPlain, "absent");
  store.Prefetch(70'000, "k");                    // unknown variant
  store.Prefetch(kPlain, std::string(513, 'x'));  // too long to exist
  EXPECT_EQ(Read(store, kPlain, "k", now, now + 60'000), 1);
  EXPECT_EQ(store.GetStats().entries, 1);
  EXPECT_TRUE(store.Erase(kPlain, "k"));
  store.Prefetch(kPlain, "k");
  EXPECT_EQ(store.SweepExpired(now), 0);  // shrinks the emptied tables away
  store.Prefetch(kPlain, "k");
  EXPECT_EQ(store.ApproximateMemoryBytes(), 0u);
}

TEST_F(MemoryStoreTest, MemoryEstimateFollowsEntries) {
  MemoryStore store(TestConfig(1000, 1), TestLayouts(), clock_);
  const int64_t now = clock_.NowMs();
  EXPECT_EQ(store.ApproximateMemoryBytes(), 0u);
  // Ten entries grow the table to 16 slots, which hold 12 without growing.
  for (int i = 0; i < 10; ++i) {
    Bump(store, kPlain, "0123456789abcde" + std::to_string(i), now, now + 60'000);
  }
  const size_t ten = store.ApproximateMemoryBytes();
  EXPECT_GE(ten, 10 * 48u);
  // 16-byte key, 2 words: 8 + 16 + 16 = 40 bytes requested, a 48-byte chunk.
  Bump(store, kPlain, "0123456789abcdef", now, now + 60'000);
  EXPECT_EQ(store.ApproximateMemoryBytes(), ten + 48);
  EXPECT_TRUE(store.Erase(kPlain, "0123456789abcdef"));
  EXPECT_EQ(store.ApproximateMemoryBytes(), ten);
}

// Gives a kMeasured state an array of `words` (none for 0), claiming it
// first as a state that owns memory must; asks for `expiry_ms` (or keeps
// nothing when refused on a new key).
Status Resize(MemoryStore& store, std::string_view key, int64_t now_ms, int64_t words,
              int64_t expiry_ms) {
  return store.Update(kMeasured, key, now_ms, [&](int64_t* state, bool, core::MemoryRoom* room) {
    if (words > 0 && !core::Claim(room, core::MallocChunkSize(static_cast<size_t>(words) * 8))) {
      return state[0] != 0 ? expiry_ms : 0;  // refused: as it was
    }
    FreeMeasured(state);
    if (words > 0) {
      state[0] = reinterpret_cast<int64_t>(new int64_t[words]());
      state[1] = words;
    }
    return expiry_ms;
  });
}

TEST_F(MemoryStoreTest, WhatAStateOwnsCountsAsItGrowsShrinksAndGoes) {
  MemoryStore store(TestConfig(/*max_entries=*/1'000, /*shards=*/1), TestLayouts(), clock_);
  const int64_t now = 1'000'000;
  ASSERT_TRUE(Resize(store, "k", now, 0, now + 60'000).ok());  // an entry that owns nothing
  const int64_t base = store.GetStats().bytes;
  ASSERT_TRUE(Resize(store, "k", now, 4, now + 60'000).ok());
  EXPECT_EQ(store.GetStats().bytes, base + 48);  // 32 bytes: a 48-byte chunk
  ASSERT_TRUE(Resize(store, "k", now, 100, now + 60'000).ok());
  EXPECT_EQ(store.GetStats().bytes, base + 816);  // 800 bytes: an 816-byte chunk
  ASSERT_TRUE(Resize(store, "k", now, 2, now + 60'000).ok());
  EXPECT_EQ(store.GetStats().bytes, base + 32);  // shrinking gives back
  ASSERT_TRUE(Resize(store, "k", now, 0, now + 60'000).ok());
  EXPECT_EQ(store.GetStats().bytes, base);

  // Whatever frees an entry gives back what its state owned: the fn
  // dropping it, an erase, expiry on access, the sweep.
  ASSERT_TRUE(Resize(store, "dropped", now, 10, now + 60'000).ok());
  ASSERT_TRUE(Resize(store, "dropped", now, 10, now).ok());
  ASSERT_TRUE(Resize(store, "erased", now, 10, now + 60'000).ok());
  EXPECT_TRUE(store.Erase(kMeasured, "erased"));
  ASSERT_TRUE(Resize(store, "swept", now, 10, now + 1'000).ok());
  EXPECT_EQ(store.SweepExpired(now + 1'000), 1);
  EXPECT_EQ(store.GetStats().bytes, base);
  // An expired entry met by Update is released, then grows anew.
  ASSERT_TRUE(Resize(store, "k", now, 10, now + 1'000).ok());
  ASSERT_TRUE(Resize(store, "k", now + 1'000, 3, now + 60'000).ok());
  EXPECT_EQ(store.GetStats().bytes, base + 32);
  EXPECT_TRUE(store.Erase(kMeasured, "k"));
  store.SweepExpired(now + 60'000);  // gives the slot array back
  EXPECT_EQ(store.GetStats().entries, 0);
  EXPECT_EQ(store.GetStats().bytes, 0);
}

TEST_F(MemoryStoreTest, AGrowthPastMaxMemoryIsRefusedAndChangesNothing) {
  // Room for the slot array, one entry (key "k": a 48-byte chunk) and 48
  // bytes more: an array of 4 words (32 bytes, a 48-byte chunk) fits, and
  // no larger one beside it (a growth claims the new array whole: both are
  // held while it moves).
  const int64_t max_memory = kFirstArray + 48 + 48;
  MemoryStore store(TestConfig(/*max_entries=*/1'000, /*shards=*/1, max_memory), TestLayouts(),
                    clock_);
  const int64_t now = 1'000'000;
  ASSERT_TRUE(Resize(store, "k", now, 4, now + 60'000).ok());
  EXPECT_EQ(store.GetStats().bytes, max_memory);
  int64_t* array_before = nullptr;
  ASSERT_TRUE(store
                  .Update(kMeasured, "k", now,
                          [&](int64_t* state, bool, core::MemoryRoom*) {
                            array_before = reinterpret_cast<int64_t*>(state[0]);
                            return now + 60'000;
                          })
                  .ok());

  const Status s = Resize(store, "k", now, 6, now + 60'000);
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(s.message(),
            "store is full (engine.max_memory: 176 bytes; 176 in use, the state "
            "needs 64 more)");
  EXPECT_EQ(store.GetStats().rejected_full, 1);
  EXPECT_EQ(store.GetStats().bytes, max_memory);
  ASSERT_TRUE(store
                  .Update(kMeasured, "k", now,
                          [&](int64_t* state, bool, core::MemoryRoom*) {
                            EXPECT_EQ(reinterpret_cast<int64_t*>(state[0]), array_before);
                            EXPECT_EQ(state[1], 4);
                            return now + 60'000;
                          })
                  .ok());

  // A new key's state that does not fit is not kept, even though its entry
  // fits: nothing stays counted.
  EXPECT_TRUE(store.Erase(kMeasured, "k"));
  EXPECT_EQ(Resize(store, "new", now, 100, now + 60'000).code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(store.GetStats().entries, 0);
  EXPECT_EQ(store.GetStats().bytes, kFirstArray);
  EXPECT_EQ(store.GetStats().rejected_full, 2);
  // What fits still does.
  ASSERT_TRUE(Resize(store, "new", now, 4, now + 60'000).ok());
  EXPECT_EQ(store.GetStats().bytes, max_memory);
}

TEST_F(MemoryStoreTest, ReleaseFreesOwnedMemoryOnEveryPath) {
  // Run under ASan: any path that forgets `release` leaks an array.
  auto own = [](int64_t* state) {
    if (state[0] == 0) state[0] = reinterpret_cast<int64_t>(new int64_t[4]{1, 2, 3, 4});
  };
  {
    MemoryStore store(TestConfig(), TestLayouts(), clock_);
    const int64_t now = 1'000'000;
    auto keep = [&](std::string_view key, int64_t t, int64_t expiry) {
      ASSERT_TRUE(store
                      .Update(kOwning, key, t,
                              [&](int64_t* state, bool, core::MemoryRoom*) {
                                own(state);
                                return expiry;
                              })
                      .ok());
    };
    keep("new-then-dropped", now, now);  // temporary state released
    keep("expire-on-access", now, now + 1'000);
    keep("expire-on-access", now + 1'000, now + 60'000);  // released, then owns anew
    keep("removed-by-fn", now, now + 60'000);
    keep("removed-by-fn", now, 0);
    keep("erased", now, now + 60'000);
    EXPECT_TRUE(store.Erase(kOwning, "erased"));
    keep("swept", now, now + 1'000);
    EXPECT_EQ(store.SweepExpired(now + 1'000), 1);
    for (int i = 0; i < 100; ++i) keep("live" + std::to_string(i), now, now + 60'000);
    keep("expired-not-swept", now, now + 2'000);
    // The destructor releases the 101 live entries and the expired one.
  }
  SUCCEED();
}

TEST_F(MemoryStoreTest, DestructorReleasesEveryEntry) {
  {
    MemoryStore store(TestConfig(), TestLayouts(), clock_);
    const int64_t now = clock_.NowMs();
    for (int i = 0; i < 50; ++i) Bump(store, kCounted, "k" + std::to_string(i), now, now + 60'000);
    EXPECT_EQ(g_releases, 0);
  }
  EXPECT_EQ(g_releases, 50);
}

#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
// The memory target: with 16-byte keys and 2-word states an entry costs at
// most 64 bytes + key = 80 bytes of heap, table included, as glibc counts it.
// (Sanitizers replace malloc, so this only runs in plain builds; the 1M-entry
// figure is in bench/engine_bench.cc.)
TEST_F(MemoryStoreTest, EntryOf16ByteKeyAnd2WordStateCostsAtMost80Bytes) {
  constexpr int kEntries = 200'000;
  std::vector<std::string> keys;
  keys.reserve(kEntries);
  char buf[32];
  for (int i = 0; i < kEntries; ++i) {
    std::snprintf(buf, sizeof(buf), "user:%011d", i);
    keys.emplace_back(buf);
  }
  ASSERT_EQ(keys[0].size(), 16u);

  auto store = std::make_unique<MemoryStore>(TestConfig(10'000'000, 256), TestLayouts(), clock_);
  const int64_t now = clock_.NowMs();
  const size_t before = mallinfo2().uordblks + mallinfo2().hblkhd;
  for (const std::string& key : keys) {
    ASSERT_TRUE(store
                    ->Update(kPlain, key, now,
                             [&](int64_t* state, bool, core::MemoryRoom*) {
                               ++state[0];
                               return now + 60'000;
                             })
                    .ok());
  }
  const size_t after = mallinfo2().uordblks + mallinfo2().hblkhd;
  const double per_entry = static_cast<double>(after - before) / kEntries;
  const double estimate = static_cast<double>(store->ApproximateMemoryBytes()) / kEntries;
  std::printf("bytes per entry: measured %.1f, estimated %.1f\n", per_entry, estimate);
  EXPECT_LE(per_entry, 80.0);
  EXPECT_NEAR(estimate, per_entry, 4.0);
}
#endif

}  // namespace
}  // namespace floodgate::engine

namespace floodgate::engine {
namespace {

TEST(MemoryStoreVariantsTest, AddVariantAppendsIdsUsableAtOnce) {
  ManualClock clock(1'000'000);
  EngineConfig config;
  config.sweep_interval_ms = 0;
  MemoryStore store(config, {VariantLayout{1, nullptr}}, clock);
  EXPECT_EQ(store.Update(1, "k", clock.NowMs(), [](int64_t*, bool, core::MemoryRoom*) { return 0; })
                .code(),
            StatusCode::kInvalidArgument);
  auto id = store.AddVariant(VariantLayout{3, nullptr});
  ASSERT_TRUE(id.ok());
  EXPECT_EQ(*id, 1u);
  ASSERT_TRUE(store
                  .Update(1, "k", clock.NowMs(),
                          [](int64_t* s, bool fresh, core::MemoryRoom*) {
                            EXPECT_TRUE(fresh);
                            s[2] = 42;  // the third word exists
                            return int64_t{2'000'000};
                          })
                  .ok());
  EXPECT_EQ(store.GetStats().entries, 1);
  EXPECT_EQ(store.AddVariant(VariantLayout{0, nullptr}).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(store.AddVariant(VariantLayout{65, nullptr}).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(*store.AddVariant(VariantLayout{1, nullptr}), 2u);  // refusals used no id
}

TEST(MemoryStoreVariantsTest, AddVariantWhileOtherThreadsUpdate) {
  ManualClock clock(1'000'000);
  EngineConfig config;
  config.sweep_interval_ms = 0;
  MemoryStore store(config, {VariantLayout{1, nullptr}}, clock);
  std::atomic<bool> stop{false};
  std::atomic<int64_t> errors{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 2; ++t) {
    threads.emplace_back([&, t] {
      int i = 0;
      while (!stop.load()) {
        Status s = store.Update(0, "k" + std::to_string(t * 1000 + i++ % 500), clock.NowMs(),
                                [](int64_t* st, bool, core::MemoryRoom*) {
                                  ++st[0];
                                  return int64_t{2'000'000};
                                });
        if (!s.ok()) ++errors;
      }
    });
  }
  for (int v = 0; v < 500; ++v) {
    auto id = store.AddVariant(VariantLayout{2, nullptr});
    ASSERT_TRUE(id.ok());
    ASSERT_TRUE(store
                    .Update(*id, "new", clock.NowMs(),
                            [](int64_t* st, bool, core::MemoryRoom*) {
                              st[1] = 1;
                              return int64_t{2'000'000};
                            })
                    .ok());
  }
  stop = true;
  for (auto& th : threads) th.join();
  EXPECT_EQ(errors.load(), 0);
}

}  // namespace
}  // namespace floodgate::engine
