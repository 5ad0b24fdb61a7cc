// Unit tests of the embedded expiring sets (SetStore over a MemoryStore) on
// a ManualClock: member TTL 999 ms vs 1000 ms, refresh on re-add, the set
// expiring with its last member (freed on access and by the sweep), the cap
// on members, the store's max_entries bound, and threads on one set.
#include "engine/set_store.h"

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "floodgate/clock.h"
#include "floodgate/config.h"
#include "gtest/gtest.h"

namespace floodgate::engine {
namespace {

constexpr uint32_t kSets = 0;
constexpr int64_t kT0 = 1'700'000'000'000;

EngineConfig TestConfig(int64_t max_entries = 1000) {
  EngineConfig config;
  config.max_entries = max_entries;
  config.shards = 4;
  config.sweep_interval_ms = 0;  // sweeps only when a test asks
  return config;
}

class SetStoreTest : public ::testing::Test {
 protected:
  explicit SetStoreTest(int64_t max_entries = 1000)
      : memory_(TestConfig(max_entries), {SetStore::Layout()}, clock_),
        sets_(memory_, kSets, clock_) {}

  SetReply Run(SetOp op, std::string_view key, std::string_view member = {}, int64_t ttl = 0,
               int64_t max_members = 100) {
    SetReply reply;
    const Status s =
        sets_.Run(SetRequest{op, key, member, ttl}, max_members, clock_.NowMs(), &reply);
    EXPECT_TRUE(s.ok()) << s.ToString();
    return reply;
  }
  int64_t Add(std::string_view key, std::string_view member, int64_t ttl) {
    return Run(SetOp::kAdd, key, member, ttl).value;
  }
  int64_t Count(std::string_view key) { return Run(SetOp::kCount, key).value; }
  std::vector<std::string> Names(std::string_view key) {
    std::vector<std::string> out;
    for (const SetMember& m : Run(SetOp::kMembers, key).members) out.push_back(m.member);
    return out;
  }

  ManualClock clock_{kT0};
  MemoryStore memory_;
  SetStore sets_;
};

TEST_F(SetStoreTest, MemberTtl999And1000AtTheEdge) {
  EXPECT_EQ(Add("s", "short", 999), 1);
  EXPECT_EQ(Add("s", "long", 1000), 1);
  clock_.SetMs(kT0 + 998);
  EXPECT_EQ(Names("s"), (std::vector<std::string>{"short", "long"}));
  clock_.SetMs(kT0 + 999);
  EXPECT_EQ(Names("s"), (std::vector<std::string>{"long"}));
  EXPECT_EQ(Count("s"), 1);
  EXPECT_EQ(Run(SetOp::kContains, "s", "short").value, 0);
  EXPECT_EQ(Run(SetOp::kContains, "s", "long").value, 1);
  clock_.SetMs(kT0 + 1000);
  EXPECT_EQ(Count("s"), 0);
  EXPECT_EQ(Names("s"), std::vector<std::string>{});
  EXPECT_EQ(memory_.GetStats().entries, 0);  // the set went with its last member
}

TEST_F(SetStoreTest, MembersCarryTheirExpiryAndTheInstant) {
  Add("s", "a", 5000);
  clock_.AdvanceMs(10);
  const SetReply r = Run(SetOp::kMembers, "s");
  EXPECT_EQ(r.now_ms, kT0 + 10);
  EXPECT_EQ(r.value, 1);
  ASSERT_EQ(r.members.size(), 1u);
  EXPECT_EQ(r.members[0], (SetMember{"a", kT0 + 5000}));
}

TEST_F(SetStoreTest, ReAddingRefreshesTheExpiry) {
  EXPECT_EQ(Add("s", "m", 1000), 1);
  clock_.SetMs(kT0 + 900);
  EXPECT_EQ(Add("s", "m", 1000), 0);  // refreshed, not new
  clock_.SetMs(kT0 + 1899);
  EXPECT_EQ(Count("s"), 1);
  clock_.SetMs(kT0 + 1900);
  EXPECT_EQ(Count("s"), 0);
  // A shorter TTL on re-add shortens it.
  EXPECT_EQ(Add("s", "m", 10'000), 1);
  EXPECT_EQ(Add("s", "m", 5), 0);
  clock_.AdvanceMs(5);
  EXPECT_EQ(Count("s"), 0);
}

TEST_F(SetStoreTest, RemoveAndContains) {
  Add("s", "a", 1000);
  Add("s", "b", 2000);
  EXPECT_EQ(Run(SetOp::kRemove, "s", "a").value, 1);
  EXPECT_EQ(Run(SetOp::kRemove, "s", "a").value, 0);
  EXPECT_EQ(Run(SetOp::kRemove, "nope", "a").value, 0);
  EXPECT_EQ(Run(SetOp::kContains, "s", "b").value, 1);
  EXPECT_EQ(Run(SetOp::kRemove, "s", "b").value, 1);
  // Removing the last member frees the set at once.
  EXPECT_EQ(memory_.GetStats().entries, 0);
}

TEST_F(SetStoreTest, ReadsOfAMissingSetAllocateNothing) {
  EXPECT_EQ(Count("missing"), 0);
  EXPECT_EQ(Names("missing"), std::vector<std::string>{});
  EXPECT_EQ(Run(SetOp::kContains, "missing", "x").value, 0);
  EXPECT_EQ(memory_.GetStats().entries, 0);
}

TEST_F(SetStoreTest, TheCapRefusesNewMembersButNotRefreshes) {
  EXPECT_EQ(Add("s", "a", 1000), 1);
  EXPECT_EQ(Add("s", "b", 2000), 1);
  SetReply reply;
  Status s = sets_.Run(SetRequest{SetOp::kAdd, "s", "c", 1000}, 2, clock_.NowMs(), &reply);
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted);
  EXPECT_NE(s.message().find("sets.max_members"), std::string::npos) << s.message();
  EXPECT_EQ(Names("s"), (std::vector<std::string>{"a", "b"}));  // nothing changed
  s = sets_.Run(SetRequest{SetOp::kAdd, "s", "a", 3000}, 2, clock_.NowMs(), &reply);
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(reply.value, 0);
  // Expired members do not count against the cap.
  clock_.SetMs(kT0 + 2000);  // b is gone; a lives to kT0 + 3000
  s = sets_.Run(SetRequest{SetOp::kAdd, "s", "c", 1000}, 2, clock_.NowMs(), &reply);
  EXPECT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(Names("s"), (std::vector<std::string>{"a", "c"}));
}

TEST_F(SetStoreTest, TheSweepFreesSetsWhoseMembersAllExpired) {
  for (int i = 0; i < 10; ++i) Add("s" + std::to_string(i), "m", 1500);
  Add("keep", "m", 60'000);
  EXPECT_EQ(memory_.GetStats().entries, 11);
  // The store keeps expiry in whole seconds: the sets go at the next second
  // boundary after their last member, never before it.
  EXPECT_EQ(memory_.SweepExpired(kT0 + 1499), 0);
  EXPECT_EQ(memory_.SweepExpired(kT0 + 2000), 10);
  EXPECT_EQ(memory_.GetStats().entries, 1);
  EXPECT_EQ(Count("keep"), 1);
}

class SetStoreBoundTest : public SetStoreTest {
 protected:
  SetStoreBoundTest() : SetStoreTest(/*max_entries=*/2) {}
};

TEST_F(SetStoreBoundTest, SetsCountAgainstMaxEntries) {
  Add("a", "m", 1000);
  Add("b", "m", 1000);
  SetReply reply;
  const Status s = sets_.Run(SetRequest{SetOp::kAdd, "c", "m", 1000}, 100, clock_.NowMs(), &reply);
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(s.message(), "cannot create a new set: store is full (engine.max_entries: 2)");
  // Known sets keep working; reads of unknown ones are empty, not errors.
  EXPECT_EQ(Add("a", "m2", 1000), 1);
  EXPECT_EQ(Count("c"), 0);
  // A read keeps nothing, so the store does not count it as refused.
  EXPECT_EQ(memory_.GetStats().rejected_full, 1);
}

TEST_F(SetStoreTest, ThreadsOnOneSetNeverPassTheCap) {
  constexpr int kThreads = 8;
  constexpr int kPerThread = 200;
  constexpr int64_t kCap = 50;
  std::atomic<int> added{0}, full{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        SetReply reply;
        const std::string member = std::to_string(t) + ":" + std::to_string(i);
        const Status s =
            sets_.Run(SetRequest{SetOp::kAdd, "shared", member, 60'000}, kCap, kT0, &reply);
        if (s.ok()) {
          added += static_cast<int>(reply.value);
        } else {
          EXPECT_EQ(s.code(), StatusCode::kResourceExhausted);
          ++full;
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(added.load(), kCap);
  EXPECT_EQ(full.load(), kThreads * kPerThread - kCap);
  EXPECT_EQ(Count("shared"), kCap);
}

}  // namespace
}  // namespace floodgate::engine
