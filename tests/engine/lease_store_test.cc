// Unit tests of the embedded leases (LeaseStore over a MemoryStore) on a
// ManualClock: tables counted against engine.max_entries and max_memory (a
// first lease of a new subject in a full store refused, known subjects
// unaffected), releases and renewals that never create a table, an emptied
// table dropped at once, the sweep freeing expired tables at the second
// after their last lease, table keys that keep every (rule, subject) apart,
// and threads on one subject never holding more than max_in_flight.
#include "engine/lease_store.h"

#include <atomic>
#include <chrono>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "floodgate/clock.h"
#include "floodgate/config.h"
#include "gtest/gtest.h"

namespace floodgate::engine {
namespace {

constexpr uint32_t kLeases = 0;
constexpr int64_t kT0 = 1'700'000'000'000;

EngineConfig TestConfig(int64_t max_entries = 1000) {
  EngineConfig config;
  config.max_entries = max_entries;
  config.shards = 4;
  config.sweep_interval_ms = 0;  // sweeps only when a test asks
  return config;
}

class LeaseStoreTest : public ::testing::Test {
 protected:
  explicit LeaseStoreTest(EngineConfig config = TestConfig())
      : memory_(config, {LeaseStore::Layout()}, clock_), leases_(memory_, kLeases, clock_) {}

  Status Run(store::LeaseOpKind kind, std::string_view subject, std::string_view lease,
             store::LeaseResult* result, int64_t max_in_flight = 3, int64_t ttl_ms = 1000,
             std::string_view rule = "r") {
    store::LeaseOp op;
    op.kind = kind;
    op.rule = rule;
    op.subject = subject;
    op.lease = lease;
    op.ttl_ms = ttl_ms;
    op.max_in_flight = max_in_flight;
    return leases_.Run(op, clock_.NowMs(), result);
  }
  store::LeaseResult Acquire(std::string_view subject, std::string_view lease,
                             int64_t max_in_flight = 3, int64_t ttl_ms = 1000,
                             std::string_view rule = "r") {
    store::LeaseResult r;
    const Status s =
        Run(store::LeaseOpKind::kAcquire, subject, lease, &r, max_in_flight, ttl_ms, rule);
    EXPECT_TRUE(s.ok()) << s.ToString();
    return r;
  }
  store::LeaseResult Release(std::string_view subject, std::string_view lease,
                             std::string_view rule = "r") {
    store::LeaseResult r;
    const Status s = Run(store::LeaseOpKind::kRelease, subject, lease, &r, 0, 0, rule);
    EXPECT_TRUE(s.ok()) << s.ToString();
    return r;
  }
  store::LeaseResult Renew(std::string_view subject, std::string_view lease, int64_t ttl_ms) {
    store::LeaseResult r;
    const Status s = Run(store::LeaseOpKind::kRenew, subject, lease, &r, 0, ttl_ms);
    EXPECT_TRUE(s.ok()) << s.ToString();
    return r;
  }
  int64_t Entries() const { return memory_.GetStats().entries; }

  ManualClock clock_{kT0};
  MemoryStore memory_;
  LeaseStore leases_;
};

TEST_F(LeaseStoreTest, AcquireReportsTheStoresInstant) {
  clock_.SetMs(kT0 + 7);
  const store::LeaseResult r = Acquire("s", "a");
  EXPECT_TRUE(r.ok);
  EXPECT_EQ(r.in_flight, 1);
  EXPECT_EQ(r.ms, 1000);
  EXPECT_EQ(r.now_ms, kT0 + 7);
  EXPECT_EQ(Entries(), 1);
}

TEST_F(LeaseStoreTest, ReleaseAndRenewOfAnUnknownSubjectCreateNothing) {
  store::LeaseResult r = Release("nobody", "a");
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.in_flight, 0);
  EXPECT_EQ(r.now_ms, kT0);
  r = Renew("nobody", "a", 1000);
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.ms, 0);
  EXPECT_EQ(Entries(), 0);
  // Nor does a refused acquisition (max_in_flight 0) of a new subject.
  r = Acquire("nobody", "a", /*max_in_flight=*/0);
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.ms, -1);
  EXPECT_EQ(Entries(), 0);
}

TEST_F(LeaseStoreTest, ATableEmptiedByAReleaseIsDroppedAtOnce) {
  Acquire("s", "a");
  Acquire("s", "b");
  EXPECT_EQ(Release("s", "a").in_flight, 1);
  EXPECT_EQ(Entries(), 1);
  const store::LeaseResult r = Release("s", "b");
  EXPECT_TRUE(r.ok);
  EXPECT_EQ(r.in_flight, 0);
  EXPECT_EQ(Entries(), 0);  // not kept until b's expiry
  // A release that finds its lease expired drops the table too.
  Acquire("s", "c");
  clock_.AdvanceMs(1000);
  EXPECT_FALSE(Release("s", "c").ok);
  EXPECT_EQ(Entries(), 0);
}

TEST_F(LeaseStoreTest, TheSweepFreesTablesWhoseLeasesAllExpired) {
  for (int i = 0; i < 10; ++i) Acquire("s" + std::to_string(i), "a", 3, 1500);
  Acquire("keep", "a", 3, 60'000);
  EXPECT_EQ(Entries(), 11);
  // Expiry is kept in whole seconds: the tables go at the second boundary
  // after their last lease, never before it.
  EXPECT_EQ(memory_.SweepExpired(kT0 + 1499), 0);
  EXPECT_EQ(memory_.SweepExpired(kT0 + 2000), 10);
  EXPECT_EQ(Entries(), 1);
  EXPECT_EQ(Release("keep", "a").in_flight, 0);
}

TEST_F(LeaseStoreTest, ARenewalMovesTheTablesExpiry) {
  Acquire("s", "a", 3, 1000);
  clock_.SetMs(kT0 + 900);
  EXPECT_TRUE(Renew("s", "a", 5000).ok);
  // Without the renewal the table would have gone at kT0 + 1000.
  EXPECT_EQ(memory_.SweepExpired(kT0 + 2000), 0);
  EXPECT_EQ(memory_.SweepExpired(kT0 + 6000), 1);
}

TEST_F(LeaseStoreTest, RuleNamesAndSubjectsNeverRunIntoOneAnother) {
  // Each pair would meet another under a plain concatenation.
  const std::vector<std::pair<std::string, std::string>> pairs = {
      {"a:b", "c"},
      {"a", "b:c"},
      {"a:", "bc"},
      {"a", ":bc"},
      {"ab", "c"},
      {"a", "bc"},
      {"", "abc"},
      {"abc", ""},
      {std::string("a\0", 2), "bc"},
      {"a", std::string("\0bc", 3)},
      {"a%3Ab", "c"},
      {"a}", "{b"},
      {"a", std::string(509, 'x')},
      {"a", std::string(510, 'x')},
      {"ab", std::string(509, 'x')},
      {"a", std::string(512, 'x')},
      {"a", std::string(511, 'x') + "y"}};
  std::set<std::string> keys;
  for (const auto& [rule, subject] : pairs) {
    const std::string key = LeaseStore::TableKey(rule, subject);
    EXPECT_LE(key.size(), kMaxKeyBytes);
    EXPECT_TRUE(keys.insert(key).second) << "rule '" << rule << "' subject of " << subject.size();
  }
  // And through the store: one lease each, all apart.
  for (const auto& [rule, subject] : pairs) {
    const store::LeaseResult r = Acquire(subject, "id", /*max_in_flight=*/1, 1000, rule);
    EXPECT_TRUE(r.ok) << "rule '" << rule << "'";
    EXPECT_EQ(r.in_flight, 1);
  }
  EXPECT_EQ(Entries(), static_cast<int64_t>(pairs.size()));
}

TEST_F(LeaseStoreTest, TheLongestSubjectWithALongRuleNameIsAKeyLikeAnyOther) {
  const std::string subject(kMaxKeyBytes, 's');
  const std::string rule(64, 'r');
  EXPECT_TRUE(Acquire(subject, "a", 1, 1000, rule).ok);
  EXPECT_FALSE(Acquire(subject, "b", 1, 1000, rule).ok);
  EXPECT_TRUE(Release(subject, "a", rule).ok);
  EXPECT_EQ(Entries(), 0);
}

TEST_F(LeaseStoreTest, ThreadsOnOneSubjectNeverHoldMoreThanMaxInFlight) {
  constexpr int kThreads = 8;
  constexpr int kPerThread = 500;
  constexpr int64_t kMax = 3;
  std::atomic<int> holders{0}, most{0}, granted{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        const std::string id = std::to_string(t) + ":" + std::to_string(i);
        store::LeaseOp op{store::LeaseOpKind::kAcquire, "r", "shared", id, 60'000, kMax};
        store::LeaseResult r;
        ASSERT_TRUE(leases_.Run(op, kT0, &r).ok());
        if (!r.ok) continue;
        ++granted;
        const int now_holding = ++holders;
        int seen = most.load();
        while (now_holding > seen && !most.compare_exchange_weak(seen, now_holding)) {
        }
        EXPECT_LE(now_holding, kMax);
        EXPECT_LE(r.in_flight, kMax);
        std::this_thread::sleep_for(std::chrono::microseconds(50));  // the work it guards
        --holders;
        op.kind = store::LeaseOpKind::kRelease;
        ASSERT_TRUE(leases_.Run(op, kT0, &r).ok());
        EXPECT_TRUE(r.ok);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_LE(most.load(), kMax);
  EXPECT_GT(granted.load(), 0);
  EXPECT_LT(granted.load(), kThreads * kPerThread);  // they did contend
  EXPECT_EQ(Entries(), 0);                           // every lease released: no table left
}

class LeaseStoreBoundTest : public LeaseStoreTest {
 protected:
  LeaseStoreBoundTest() : LeaseStoreTest(TestConfig(/*max_entries=*/2)) {}
};

TEST_F(LeaseStoreBoundTest, AFirstLeaseOfANewSubjectInAFullStoreIsRefused) {
  Acquire("a", "1");
  Acquire("b", "1");
  store::LeaseResult r;
  const Status s = Run(store::LeaseOpKind::kAcquire, "c", "1", &r);
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(s.message(),
            "cannot hold the leases of a new subject: store is full (engine.max_entries: 2)");
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.in_flight, 0);
  EXPECT_EQ(r.ms, 0);
  EXPECT_EQ(memory_.GetStats().rejected_full, 1);
  // Known subjects keep working; releases and renewals of unknown ones keep
  // nothing, so they are answered, not refused.
  EXPECT_TRUE(Acquire("a", "2").ok);
  EXPECT_FALSE(Release("c", "1").ok);
  EXPECT_FALSE(Renew("c", "1", 1000).ok);
  EXPECT_EQ(memory_.GetStats().rejected_full, 1);
  // Room again once a table goes.
  Release("b", "1");
  EXPECT_TRUE(Acquire("c", "1").ok);
}

class LeaseStoreMemoryTest : public LeaseStoreTest {
 protected:
  static EngineConfig SmallMemory() {
    EngineConfig config = TestConfig();
    config.max_memory = 4096;
    return config;
  }
  LeaseStoreMemoryTest() : LeaseStoreTest(SmallMemory()) {}
};

TEST_F(LeaseStoreMemoryTest, TablesCountAgainstMaxMemory) {
  int granted = 0;
  Status refused;
  for (int i = 0; i < 1000 && refused.ok(); ++i) {
    store::LeaseResult r;
    refused = Run(store::LeaseOpKind::kAcquire, std::string(200, 'k') + std::to_string(i), "a", &r);
    if (refused.ok()) ++granted;
  }
  EXPECT_EQ(refused.code(), StatusCode::kResourceExhausted);
  EXPECT_NE(refused.message().find("engine.max_memory"), std::string::npos) << refused.message();
  EXPECT_GT(granted, 0);
  EXPECT_LT(granted, 1000);
  EXPECT_EQ(Entries(), granted);
}

}  // namespace
}  // namespace floodgate::engine
