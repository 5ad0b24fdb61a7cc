// Unit tests of the embedded reservation ledger (ReservationLedger over a
// MemoryStore) on a ManualClock: the golden reservation vectors at their
// instants; a hold taken once and then answered settled; unknown ids, other
// subjects' and other rules' answered unknown with nothing created; every
// record (a settled marker too) freed by its expiry; records counted
// against engine.max_entries and engine.max_memory (a new hold in a full
// store refused, takes unaffected); arguments out of bounds refused; record
// keys that keep every (rule, subject, id) apart; threads racing takes of
// the same ids, each taken exactly once; and records kept across a
// snapshot and a restart of the embedded store.
#include "engine/reservation_ledger.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "engine/embedded_store.h"
#include "floodgate/clock.h"
#include "floodgate/config.h"
#include "floodgate/rule.h"
#include "gtest/gtest.h"
#include "testing/reservation_vectors.h"

namespace floodgate::engine {
namespace {

constexpr uint32_t kLedger = 0;
constexpr int64_t kT0 = 1'700'000'000'000;

EngineConfig TestConfig(int64_t max_entries = 100'000) {
  EngineConfig config;
  config.max_entries = max_entries;
  config.shards = 4;
  config.sweep_interval_ms = 0;  // sweeps only when a test asks
  return config;
}

store::HoldOp HoldOf(std::string_view id, int64_t estimate = 10, int64_t ttl_ms = 1000,
                     std::string_view tier = "", std::string_view subject = "s",
                     std::string_view rule = "r") {
  store::HoldOp op;
  op.rule = rule;
  op.subject = subject;
  op.id = id;
  op.tier = tier;
  op.estimate = estimate;
  op.ttl_ms = ttl_ms;
  return op;
}

store::TakeOp TakeOf(std::string_view id, std::string_view subject = "s",
                     std::string_view rule = "r") {
  return store::TakeOp{rule, subject, id, nullptr};
}

// Through the interface: both answer now, whatever they answer.
Status HoldNow(store::ReservationLedger& ledger, const store::HoldOp& op) {
  Status status;
  const store::Answer answer = ledger.Hold(op, &status, []() -> store::Done<> {
    ADD_FAILURE() << "the embedded ledger answered later";
    return [](const Status&) {};
  });
  EXPECT_EQ(answer, store::Answer::kNow);
  return status;
}

std::pair<Status, store::TakeResult> TakeNow(store::ReservationLedger& ledger,
                                             const store::TakeOp& op) {
  Status status;
  store::TakeResult result;
  result.outcome = store::TakeOutcome::kSettled;  // overwritten, whatever the answer
  const store::Answer answer =
      ledger.Take(op, &result, &status, []() -> store::Done<store::TakeResult> {
        ADD_FAILURE() << "the embedded ledger answered later";
        return [](const Status&, const store::TakeResult&) {};
      });
  EXPECT_EQ(answer, store::Answer::kNow);
  return {status, result};
}

class ReservationLedgerTest : public ::testing::Test {
 protected:
  explicit ReservationLedgerTest(EngineConfig config = TestConfig())
      : memory_(config, {ReservationLedger::Layout()}, clock_), ledger_(memory_, kLedger, clock_) {}

  Status Hold(const store::HoldOp& op) { return HoldNow(ledger_, op); }
  store::TakeResult Take(const store::TakeOp& op) {
    auto [s, r] = TakeNow(ledger_, op);
    EXPECT_TRUE(s.ok()) << s.ToString();
    return r;
  }
  int64_t Entries() const { return memory_.GetStats().entries; }

  ManualClock clock_{kT0};
  MemoryStore memory_;
  ReservationLedger ledger_;
};

TEST_F(ReservationLedgerTest, MatchesTheReservationVectors) {
  const auto cases = testing::LoadReservationVectors();
  ASSERT_GE(cases.size(), 8u);
  int steps = 0, index = 0;
  for (const auto& rc : cases) {
    SCOPED_TRACE(rc.name);
    const std::string prefix = "case" + std::to_string(index++) + ":";
    for (size_t i = 0; i < rc.steps.size(); ++i) {
      SCOPED_TRACE("step " + std::to_string(i));
      const auto& step = rc.steps[i];
      const std::string rule = prefix + step.rule;
      const std::string subject = step.key;
      if (step.hold) {
        const Status s = Hold(testing::HoldOpOf(step, rule, subject, &step.t_ms));
        testing::ExpectReservationMatches(step, s, nullptr);
      } else {
        const auto [s, r] = TakeNow(ledger_, testing::TakeOpOf(step, rule, subject, &step.t_ms));
        testing::ExpectReservationMatches(step, s, &r);
      }
      ++steps;
    }
  }
  EXPECT_GE(steps, 45);
}

TEST_F(ReservationLedgerTest, AHoldIsTakenOnceThenAnsweredSettled) {
  ASSERT_TRUE(Hold(HoldOf("id1", 120, 60'000, "pro")).ok());
  EXPECT_EQ(Entries(), 1);
  store::TakeResult r = Take(TakeOf("id1"));
  EXPECT_EQ(r.outcome, store::TakeOutcome::kTaken);
  EXPECT_EQ(r.estimate, 120);
  EXPECT_EQ(r.tier, "pro");
  r = Take(TakeOf("id1"));
  EXPECT_EQ(r.outcome, store::TakeOutcome::kSettled);
  EXPECT_EQ(r.estimate, 0);
  EXPECT_EQ(r.tier, "");
  EXPECT_EQ(Take(TakeOf("id1")).outcome, store::TakeOutcome::kSettled);
  EXPECT_EQ(Entries(), 1);  // the marker, until the record's expiry
}

TEST_F(ReservationLedgerTest, UnknownIdsAreUnknownAndCreateNothing) {
  EXPECT_EQ(Take(TakeOf("never")).outcome, store::TakeOutcome::kUnknown);
  EXPECT_EQ(Entries(), 0);
  ASSERT_TRUE(Hold(HoldOf("mine", 5)).ok());
  EXPECT_EQ(Take(TakeOf("mine", "other subject")).outcome, store::TakeOutcome::kUnknown);
  EXPECT_EQ(Take(TakeOf("mine", "s", "other rule")).outcome, store::TakeOutcome::kUnknown);
  EXPECT_EQ(Take(TakeOf("MINE")).outcome, store::TakeOutcome::kUnknown);
  EXPECT_EQ(Entries(), 1);
  // None of them touched the record.
  const store::TakeResult r = Take(TakeOf("mine"));
  EXPECT_EQ(r.outcome, store::TakeOutcome::kTaken);
  EXPECT_EQ(r.estimate, 5);
}

TEST_F(ReservationLedgerTest, AHoldTwiceIsRefusedAndTheFirstKept) {
  ASSERT_TRUE(Hold(HoldOf("d", 10, 2000, "free")).ok());
  const Status again = Hold(HoldOf("d", 99, 60'000, "pro"));
  EXPECT_EQ(again.code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(again.message(), "a reservation of this id is held already");
  const store::TakeResult r = Take(TakeOf("d"));
  EXPECT_EQ(r.outcome, store::TakeOutcome::kTaken);
  EXPECT_EQ(r.estimate, 10);
  EXPECT_EQ(r.tier, "free");
  // A settled marker is refused too: the id's settle already happened.
  EXPECT_EQ(Hold(HoldOf("d")).code(), StatusCode::kAlreadyExists);
  // The first record's TTL, not the refused one's: gone at kT0 + 2000.
  clock_.SetMs(kT0 + 2000);
  EXPECT_TRUE(Hold(HoldOf("d", 3)).ok());
  EXPECT_EQ(Take(TakeOf("d")).estimate, 3);
}

TEST_F(ReservationLedgerTest, ATakeAfterTheTtlIsUnknownAtTheMillisecond) {
  ASSERT_TRUE(Hold(HoldOf("a", 1, 1000)).ok());
  ASSERT_TRUE(Hold(HoldOf("b", 1, 1000)).ok());
  clock_.SetMs(kT0 + 999);
  EXPECT_EQ(Take(TakeOf("a")).outcome, store::TakeOutcome::kTaken);
  clock_.SetMs(kT0 + 1000);
  // The entries are still there (their expiry is kept in whole seconds);
  // the records are not live.
  EXPECT_EQ(Take(TakeOf("a")).outcome, store::TakeOutcome::kUnknown);
  EXPECT_EQ(Take(TakeOf("b")).outcome, store::TakeOutcome::kUnknown);
  // A take that finds a dead record frees its entry at once.
  EXPECT_EQ(Entries(), 0);
}

TEST_F(ReservationLedgerTest, TheShortestTtlLivesOneMillisecond) {
  ASSERT_TRUE(Hold(HoldOf("one", 4, 1)).ok());
  store::TakeOp op = TakeOf("one");
  const int64_t at = kT0 + 1;
  op.at_ms = &at;
  EXPECT_EQ(TakeNow(ledger_, op).second.outcome, store::TakeOutcome::kUnknown);
  ASSERT_TRUE(Hold(HoldOf("two", 4, 1)).ok());
  EXPECT_EQ(Take(TakeOf("two")).outcome, store::TakeOutcome::kTaken);
}

TEST_F(ReservationLedgerTest, EveryRecordAndMarkerGoesWithItsTtl) {
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(Hold(HoldOf("h" + std::to_string(i), 1, 1500)).ok());
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(Take(TakeOf("h" + std::to_string(i))).outcome, store::TakeOutcome::kTaken);
  }
  ASSERT_TRUE(Hold(HoldOf("keep", 1, 60'000)).ok());
  EXPECT_EQ(Entries(), 11);
  // Expiry is kept in whole seconds: the entries go at the second boundary
  // after their record's expiry, held and settled alike, never before it.
  EXPECT_EQ(memory_.SweepExpired(kT0 + 1499), 0);
  EXPECT_EQ(memory_.SweepExpired(kT0 + 2000), 10);
  EXPECT_EQ(Entries(), 1);
  EXPECT_EQ(memory_.SweepExpired(kT0 + 60'000), 1);
  EXPECT_EQ(Entries(), 0);
}

TEST_F(ReservationLedgerTest, ArgumentsOutOfBoundsAreRefusedBeforeAnyWrite) {
  const std::string long_id(store::kMaxReservationIdBytes + 1, 'i');
  const std::string long_tier(store::kMaxReservationTierBytes + 1, 't');
  for (const store::HoldOp& op :
       {HoldOf(""), HoldOf(long_id), HoldOf("a", 0), HoldOf("a", -1),
        HoldOf("a", kMaxLimitCount + 1), HoldOf("a", 1, 0), HoldOf("a", 1, -5),
        HoldOf("a", 1, store::kMaxReservationTtlMs + 1), HoldOf("a", 1, 1000, long_tier)}) {
    EXPECT_EQ(Hold(op).code(), StatusCode::kInvalidArgument)
        << op.id.size() << " " << op.estimate << " " << op.ttl_ms << " " << op.tier.size();
  }
  for (const int64_t at : {int64_t{-1}, INT64_MAX, INT64_MAX - store::kMaxReservationTtlMs + 2}) {
    store::HoldOp op = HoldOf("a", 1, store::kMaxReservationTtlMs);
    op.at_ms = &at;
    EXPECT_EQ(Hold(op).code(), StatusCode::kInvalidArgument) << at;
  }
  for (const std::string& id : {std::string(), long_id}) {
    const auto [s, r] = TakeNow(ledger_, TakeOf(id));
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(r.outcome, store::TakeOutcome::kUnknown);
  }
  EXPECT_EQ(Entries(), 0);
  // The bounds themselves are taken.
  const std::string id(store::kMaxReservationIdBytes, 'i');
  const std::string tier(store::kMaxReservationTierBytes, 't');
  ASSERT_TRUE(Hold(HoldOf(id, kMaxLimitCount, store::kMaxReservationTtlMs, tier)).ok());
  const store::TakeResult r = Take(TakeOf(id));
  EXPECT_EQ(r.outcome, store::TakeOutcome::kTaken);
  EXPECT_EQ(r.estimate, kMaxLimitCount);
  EXPECT_EQ(r.tier, tier);
}

TEST_F(ReservationLedgerTest, RecordKeysKeepEveryTripleApart) {
  struct Triple {
    std::string rule, subject, id;
  };
  // Each would meet another under a plain concatenation.
  const std::vector<Triple> triples = {
      {"a", "bc", "d"},
      {"a", "b", "cd"},
      {"ab", "c", "d"},
      {"a", "", "bcd"},
      {"", "a", "bcd"},
      {"a", std::string("b\0", 2), "c"},
      {"a", "b", std::string("\0c", 2)},
      {"a", "b}:c", "d"},
      {"a", "b", "c}:d"},
      {"a", std::string(379, 'x'), std::string(64, 'i')},
      {"a", std::string(380, 'x'), std::string(64, 'i')},
      {"a", std::string(379, 'x') + "i", std::string(63, 'i')},
      {std::string(64, 'r'), std::string(kMaxKeyBytes, 's'), "a"},
      {std::string(64, 'r'), std::string(kMaxKeyBytes, 's'), "b"},
      {std::string(64, 'r'), std::string(kMaxKeyBytes - 1, 's'), "sa"}};
  std::set<std::string> keys;
  for (const Triple& t : triples) {
    const std::string key = ReservationLedger::RecordKey(t.rule, t.subject, t.id);
    EXPECT_LE(key.size(), kMaxKeyBytes);
    EXPECT_TRUE(keys.insert(key).second)
        << "rule of " << t.rule.size() << ", subject of " << t.subject.size() << ", id " << t.id;
  }
  // The direct form runs up to kMaxKeyBytes; past it, the digest's.
  EXPECT_EQ(ReservationLedger::RecordKey(std::string(64, 'r'), std::string(379, 's'),
                                         std::string(64, 'i'))
                .size(),
            kMaxKeyBytes);
  EXPECT_EQ(ReservationLedger::RecordKey(std::string(64, 'r'), std::string(380, 's'),
                                         std::string(64, 'i'))
                .size(),
            33u);
  // And through the ledger: one record each, all apart.
  for (size_t i = 0; i < triples.size(); ++i) {
    const Triple& t = triples[i];
    ASSERT_TRUE(Hold(HoldOf(t.id, static_cast<int64_t>(i) + 1, 1000, "", t.subject, t.rule)).ok())
        << i;
  }
  EXPECT_EQ(Entries(), static_cast<int64_t>(triples.size()));
  for (size_t i = 0; i < triples.size(); ++i) {
    const Triple& t = triples[i];
    const store::TakeResult r = Take(TakeOf(t.id, t.subject, t.rule));
    EXPECT_EQ(r.outcome, store::TakeOutcome::kTaken) << i;
    EXPECT_EQ(r.estimate, static_cast<int64_t>(i) + 1);
  }
}

// Threads racing takes of the same reservations: each is taken by exactly
// one of them, and the others find it settled.
TEST_F(ReservationLedgerTest, RacingTakesTakeEachReservationExactlyOnce) {
  constexpr int kThreads = 8;
  constexpr int kReservations = 8 * 200;
  for (int i = 0; i < kReservations; ++i) {
    ASSERT_TRUE(Hold(HoldOf("r" + std::to_string(i), i + 1, 60'000, "", "shared")).ok());
  }
  std::vector<std::atomic<int>> taken(kReservations);
  std::atomic<int> settled{0}, other{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      // Each thread starts at another place, so that they meet everywhere.
      for (int k = 0; k < kReservations; ++k) {
        const int i = (k + t * kReservations / kThreads) % kReservations;
        const std::string id = "r" + std::to_string(i);
        store::TakeResult r;
        const Status s = ledger_.TakeAt(TakeOf(id, "shared"), kT0, &r);
        if (!s.ok()) {
          ++other;
        } else if (r.outcome == store::TakeOutcome::kTaken) {
          taken[i].fetch_add(1);
          if (r.estimate != i + 1) ++other;
        } else if (r.outcome == store::TakeOutcome::kSettled) {
          ++settled;
        } else {
          ++other;
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int i = 0; i < kReservations; ++i) EXPECT_EQ(taken[i].load(), 1) << "r" << i;
  EXPECT_EQ(settled.load(), kReservations * (kThreads - 1));
  EXPECT_EQ(other.load(), 0);
}

class ReservationLedgerBoundTest : public ReservationLedgerTest {
 protected:
  ReservationLedgerBoundTest() : ReservationLedgerTest(TestConfig(/*max_entries=*/2)) {}
};

TEST_F(ReservationLedgerBoundTest, ANewHoldInAFullStoreIsRefused) {
  ASSERT_TRUE(Hold(HoldOf("a")).ok());
  ASSERT_TRUE(Hold(HoldOf("b")).ok());
  const Status s = Hold(HoldOf("c"));
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(s.message(), "cannot hold a new reservation: store is full (engine.max_entries: 2)");
  EXPECT_EQ(memory_.GetStats().rejected_full, 1);
  // Takes keep working, even of ids the store does not hold (they keep
  // nothing); a refused hold left nothing to take.
  EXPECT_EQ(Take(TakeOf("c")).outcome, store::TakeOutcome::kUnknown);
  EXPECT_EQ(Take(TakeOf("a")).outcome, store::TakeOutcome::kTaken);
  EXPECT_EQ(memory_.GetStats().rejected_full, 1);
  // A settled marker holds its place until its expiry, when the sweep frees
  // it with the record that is still held.
  EXPECT_EQ(Hold(HoldOf("c")).code(), StatusCode::kResourceExhausted);
  clock_.SetMs(kT0 + 1000);
  EXPECT_EQ(memory_.SweepExpired(kT0 + 1000), 2);
  EXPECT_TRUE(Hold(HoldOf("c")).ok());
}

class ReservationLedgerMemoryTest : public ReservationLedgerTest {
 protected:
  static EngineConfig SmallMemory() {
    EngineConfig config = TestConfig();
    config.max_memory = 4096;
    return config;
  }
  ReservationLedgerMemoryTest() : ReservationLedgerTest(SmallMemory()) {}
};

TEST_F(ReservationLedgerMemoryTest, RecordsCountAgainstMaxMemory) {
  int held = 0;
  Status s;
  while ((s = Hold(HoldOf("id" + std::to_string(held)))).ok()) ++held;
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted);
  EXPECT_NE(s.message().find("cannot hold a new reservation: store is full (engine.max_memory"),
            std::string::npos)
      << s.message();
  EXPECT_GT(held, 5);  // a record is a few hundred bytes at most
  EXPECT_LT(held, 40);
  EXPECT_LE(memory_.GetStats().bytes, 4096);
  EXPECT_EQ(Take(TakeOf("id0")).outcome, store::TakeOutcome::kTaken);
}

// The embedded store as it is opened: its Rooms carry the ledger, and the
// records go into a snapshot and come back from it.
class EmbeddedReservationsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/floodgate-ledger-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  store::Rooms Open() {
    return EmbeddedStore::RoomsOf(std::make_unique<EmbeddedStore>(TestConfig(), clock_));
  }

  ManualClock clock_{kT0};
  std::string dir_;
};

TEST_F(EmbeddedReservationsTest, TheRoomsCarryTheLedgerAndSnapshotsKeepItsRecords) {
  const std::string path = dir_ + "/state";
  {
    store::Rooms rooms = Open();
    ASSERT_NE(rooms.reservations, nullptr);
    store::ReservationLedger& ledger = *rooms.reservations;
    ASSERT_TRUE(HoldNow(ledger, HoldOf("held", 42, 60'000, "pro:eu")).ok());
    ASSERT_TRUE(HoldNow(ledger, HoldOf("settled", 7, 60'000)).ok());
    ASSERT_TRUE(HoldNow(ledger, HoldOf("short", 1, 1500)).ok());
    EXPECT_EQ(TakeNow(ledger, TakeOf("settled")).second.outcome, store::TakeOutcome::kTaken);
    auto saved = rooms.snapshots->Save(path);
    ASSERT_TRUE(saved.ok()) << saved.status().ToString();
    EXPECT_EQ(saved->entries, 3);
  }
  clock_.SetMs(kT0 + 2000);  // "short" is gone by the restart
  store::Rooms rooms = Open();
  auto loaded = rooms.snapshots->Load(path);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  EXPECT_EQ(loaded->entries, 2);
  EXPECT_EQ(loaded->skipped_expired, 1);
  store::ReservationLedger& ledger = *rooms.reservations;
  const auto [s, r] = TakeNow(ledger, TakeOf("held"));
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(r.outcome, store::TakeOutcome::kTaken);
  EXPECT_EQ(r.estimate, 42);
  EXPECT_EQ(r.tier, "pro:eu");
  EXPECT_EQ(TakeNow(ledger, TakeOf("settled")).second.outcome, store::TakeOutcome::kSettled);
  EXPECT_EQ(TakeNow(ledger, TakeOf("short")).second.outcome, store::TakeOutcome::kUnknown);
  // Their expiry came back with them.
  EXPECT_EQ(HoldNow(ledger, HoldOf("held")).code(), StatusCode::kAlreadyExists);
  clock_.SetMs(kT0 + 60'000);
  EXPECT_EQ(TakeNow(ledger, TakeOf("settled")).second.outcome, store::TakeOutcome::kUnknown);
  EXPECT_TRUE(HoldNow(ledger, HoldOf("held")).ok());
}

}  // namespace
}  // namespace floodgate::engine
