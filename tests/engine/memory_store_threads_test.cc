// MemoryStore with threads: the background sweep thread, prompt destruction,
// and exact totals under concurrent updates (run under TSan as well).
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "engine/memory_store.h"
#include "floodgate/clock.h"
#include "floodgate/config.h"
#include "gtest/gtest.h"

namespace floodgate::engine {
namespace {

using std::chrono::milliseconds;
using std::chrono::steady_clock;

std::vector<VariantLayout> OneLayout() { return {VariantLayout{2, nullptr}}; }

Status Increment(MemoryStore& store, std::string_view key, int64_t now_ms, int64_t expiry_ms) {
  return store.Update(0, key, now_ms, [&](int64_t* state, bool, core::MemoryRoom*) {
    ++state[0];
    return expiry_ms;
  });
}

TEST(MemoryStoreThreadsTest, SweepThreadFreesExpiredEntries) {
  ManualClock clock(1'000'000);
  EngineConfig config;
  config.shards = 16;
  config.sweep_interval_ms = 10;
  MemoryStore store(config, OneLayout(), clock);
  for (int i = 0; i < 100; ++i) {
    ASSERT_TRUE(Increment(store, "k" + std::to_string(i), clock.NowMs(), 1'005'000).ok());
  }
  ASSERT_TRUE(Increment(store, "survivor", clock.NowMs(), 1'060'000).ok());

  clock.SetMs(1'005'000);
  // Bounded poll: the sweeper should act within a few 10 ms intervals; 2 s
  // leaves room for a loaded machine without letting a broken sweeper hang.
  const auto deadline = steady_clock::now() + milliseconds(2'000);
  while (store.GetStats().entries > 1 && steady_clock::now() < deadline) {
    std::this_thread::sleep_for(milliseconds(5));
  }
  MemoryStore::Stats stats = store.GetStats();
  EXPECT_EQ(stats.entries, 1);
  EXPECT_EQ(stats.expired_freed, 100);
}

TEST(MemoryStoreThreadsTest, DestructorDoesNotWaitForTheSweepInterval) {
  ManualClock clock(1'000'000);
  EngineConfig config;
  config.sweep_interval_ms = 3'600'000;  // an hour: only a wake-up can stop it in time
  auto store = std::make_unique<MemoryStore>(config, OneLayout(), clock);
  ASSERT_TRUE(Increment(*store, "k", clock.NowMs(), 1'060'000).ok());
  std::this_thread::sleep_for(milliseconds(20));  // let the thread start waiting

  const auto start = steady_clock::now();
  store.reset();
  EXPECT_LT(steady_clock::now() - start, milliseconds(500));
}

// 4 threads x 100k increments over a few hot keys (heavy contention on the
// same shards) and many cold keys (creation, table growth), while another
// thread sweeps, reads stats and prefetches. Every increment must land
// exactly once.
TEST(MemoryStoreThreadsTest, ConcurrentIncrementsAreExact) {
  constexpr int kThreads = 4;
  constexpr int kOpsPerThread = 100'000;
  constexpr int kHotKeys = 4;
  constexpr int kColdKeys = 5'000;
  ManualClock clock(1'000'000);
  EngineConfig config;
  config.shards = 8;
  config.sweep_interval_ms = 0;
  MemoryStore store(config, OneLayout(), clock);

  std::vector<std::string> hot, cold;
  for (int i = 0; i < kHotKeys; ++i) hot.push_back("hot:" + std::to_string(i));
  for (int i = 0; i < kColdKeys; ++i) cold.push_back("cold:" + std::to_string(i));
  // Op i of thread t: every 4th op goes to a cold key, the rest to a hot one.
  auto key_of = [&](int t, int i) -> const std::string& {
    return i % 4 == 0 ? cold[(i / 4 + t * 7) % kColdKeys] : hot[(i + t) % kHotKeys];
  };

  std::atomic<bool> done{false};
  std::atomic<int> failures{0};
  std::thread observer([&] {
    for (int i = 0; !done.load(); ++i) {
      store.SweepExpired(clock.NowMs());  // nothing has expired: must free nothing
      (void)store.GetStats();
      (void)store.ApproximateMemoryBytes();
      // Reads the tables' published arrays without a lock while the workers
      // grow them: must be race-free under TSan.
      store.Prefetch(0, cold[i % kColdKeys]);
      std::this_thread::yield();
    }
  });
  std::vector<std::thread> workers;
  for (int t = 0; t < kThreads; ++t) {
    workers.emplace_back([&, t] {
      for (int i = 0; i < kOpsPerThread; ++i) {
        if (!Increment(store, key_of(t, i), clock.NowMs(), 1'060'000).ok()) failures.fetch_add(1);
      }
    });
  }
  for (std::thread& w : workers) w.join();
  done = true;
  observer.join();
  ASSERT_EQ(failures, 0);

  std::vector<int64_t> expected_hot(kHotKeys, 0), expected_cold(kColdKeys, 0);
  for (int t = 0; t < kThreads; ++t) {
    for (int i = 0; i < kOpsPerThread; ++i) {
      if (i % 4 == 0) {
        ++expected_cold[(i / 4 + t * 7) % kColdKeys];
      } else {
        ++expected_hot[(i + t) % kHotKeys];
      }
    }
  }
  auto read = [&](const std::string& key) {
    int64_t value = -1;
    EXPECT_TRUE(store
                    .Update(0, key, clock.NowMs(),
                            [&](int64_t* state, bool fresh, core::MemoryRoom*) -> int64_t {
                              value = fresh ? -1 : state[0];
                              return fresh ? 0 : 1'060'000;
                            })
                    .ok());
    return value;
  };
  int64_t total = 0;
  for (int i = 0; i < kHotKeys; ++i) {
    EXPECT_EQ(read(hot[i]), expected_hot[i]) << hot[i];
    total += read(hot[i]);
  }
  for (int i = 0; i < kColdKeys; ++i) {
    EXPECT_EQ(read(cold[i]), expected_cold[i]) << cold[i];
    total += read(cold[i]);
  }
  EXPECT_EQ(total, int64_t{kThreads} * kOpsPerThread);
  MemoryStore::Stats stats = store.GetStats();
  EXPECT_EQ(stats.entries, kHotKeys + kColdKeys);
  EXPECT_EQ(stats.expired_freed, 0);
}

// Many threads racing to create the last free entries: max_entries is a hard
// bound, and exactly the refused creations are counted.
TEST(MemoryStoreThreadsTest, MaxEntriesHoldsUnderConcurrentCreation) {
  constexpr int kThreads = 4;
  constexpr int kKeysPerThread = 2'000;
  constexpr int64_t kMax = 3'000;
  ManualClock clock(1'000'000);
  EngineConfig config;
  config.max_entries = kMax;
  config.shards = 16;
  config.sweep_interval_ms = 0;
  MemoryStore store(config, OneLayout(), clock);

  std::atomic<int64_t> created{0}, refused{0};
  std::vector<std::thread> workers;
  for (int t = 0; t < kThreads; ++t) {
    workers.emplace_back([&, t] {
      for (int i = 0; i < kKeysPerThread; ++i) {
        Status s = Increment(store, "t" + std::to_string(t) + ":" + std::to_string(i),
                             clock.NowMs(), 1'060'000);
        if (s.ok()) {
          created.fetch_add(1);
        } else if (s.code() == StatusCode::kResourceExhausted) {
          refused.fetch_add(1);
        }
      }
    });
  }
  for (std::thread& w : workers) w.join();
  EXPECT_EQ(created, kMax);
  EXPECT_EQ(refused, kThreads * kKeysPerThread - kMax);
  MemoryStore::Stats stats = store.GetStats();
  EXPECT_EQ(stats.entries, kMax);
  EXPECT_EQ(stats.rejected_full, kThreads * kKeysPerThread - kMax);
}

// The same race against max_memory: the bytes in use never pass it, every
// refusal is counted, and once everything expires the count is back to 0
// (no path forgets to give bytes back).
TEST(MemoryStoreThreadsTest, MaxMemoryHoldsUnderConcurrentCreation) {
  constexpr int kThreads = 4;
  constexpr int kKeysPerThread = 2'000;
  constexpr int64_t kMaxBytes = 200'000;
  ManualClock clock(1'000'000);
  EngineConfig config;
  config.max_memory = kMaxBytes;
  config.shards = 16;
  config.sweep_interval_ms = 0;
  MemoryStore store(config, OneLayout(), clock);

  std::atomic<int64_t> created{0}, refused{0}, peak{0};
  std::vector<std::thread> workers;
  for (int t = 0; t < kThreads; ++t) {
    workers.emplace_back([&, t] {
      for (int i = 0; i < kKeysPerThread; ++i) {
        // Keys of varying length, so entries differ in size.
        const std::string key = std::string(static_cast<size_t>(i % 64), 'k') + std::to_string(t) +
                                ":" + std::to_string(i);
        Status s = Increment(store, key, clock.NowMs(), 1'060'000);
        if (s.ok()) {
          created.fetch_add(1);
        } else if (s.code() == StatusCode::kResourceExhausted) {
          refused.fetch_add(1);
        }
        int64_t seen = store.GetStats().bytes;
        int64_t old = peak.load();
        while (seen > old && !peak.compare_exchange_weak(old, seen)) {
        }
      }
    });
  }
  for (std::thread& w : workers) w.join();
  EXPECT_GT(created, 0);
  EXPECT_GT(refused, 0);
  EXPECT_EQ(created + refused, kThreads * kKeysPerThread);
  EXPECT_LE(peak, kMaxBytes);
  MemoryStore::Stats stats = store.GetStats();
  EXPECT_LE(stats.bytes, kMaxBytes);
  EXPECT_GT(stats.bytes, kMaxBytes * 9 / 10);  // the bound, not something else, stopped it
  EXPECT_EQ(stats.entries, created);
  EXPECT_EQ(stats.rejected_full, refused);
  EXPECT_EQ(store.SweepExpired(1'060'000), created);
  EXPECT_EQ(store.GetStats().bytes, 0);
}

}  // namespace
}  // namespace floodgate::engine
