// The embedded store's state across a restart (data_dir): what one
// LimiterCore spent, saved by its StateKeeper, is there for the next one
// that loads it — counters of every algorithm, tiers, expiring sets, OTP
// codes and limits, leases — with expired state skipped, rules matched by
// what they are (not by the order they are declared in), and a damaged or
// foreign file refused whole (or set aside with start_empty).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "engine/snapshot.h"
#include "service/limiter/limiter_core.h"
#include "service/snapshots/state_keeper.h"
#include "testing/test_config.h"

namespace floodgate {
namespace {

using service::LimiterCore;
using service::Services;
using service::StateKeeper;
using testing::MakeServices;

constexpr int64_t kT0 = 1'700'000'000'000;  // 2023-11-14T22:13:20Z

const char* kRules = R"(
rules:
  daily: { algorithm: fixed_window, limits: 5/day }
  api:
    algorithm: sliding_window
    limits: [4/minute, 100/day]
    tiers: { pro: [6/minute] }
  exact: { algorithm: sliding_log, limits: [3/minute, 10/hour] }
  bucket: { algorithm: token_bucket, limits: 10/minute, burst: 4 }
  login: { algorithm: gcra, limits: 2/minute }
  exports: { algorithm: concurrency, max_in_flight: 2, lease_ttl: 10m }
otp: { ttl: 5m, issue_limit: 3/5m, verify_limit: 5/15m }
)";

Config MakeConfig(const std::string& yaml) {
  Config config = testing::MakeConfig(yaml);
  config.otp.secret = "state-snapshot-test-secret";
  return config;
}

class StateSnapshotTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/floodgate-state-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // Admitted checks of `rule` for `key` until the first denial (at most 50).
  static int Admitted(LimiterCore& core, std::string_view rule, std::string_view key,
                      std::string_view tier = {}) {
    int n = 0;
    while (n < 50) {
      auto d = core.CheckAndWait(rule, key, 1, tier);
      EXPECT_TRUE(d.ok()) << d.status().ToString();
      if (!d.ok() || !d->allowed) break;
      ++n;
    }
    return n;
  }

  // Saves `core`'s state as a clean shutdown does.
  void Save(Services& services) {
    auto keeper = services.NewStateKeeper(dir_, 0);
    ASSERT_NE(keeper, nullptr);
    ASSERT_TRUE(keeper->Load(false).ok());
    ASSERT_TRUE(keeper->Stop().ok());
    EXPECT_GT(keeper->GetStats().last_save.entries, 0);
  }

  // A new core on `yaml` with the saved state loaded.
  std::unique_ptr<Services> Restart(const std::string& yaml, const Clock& clock,
                                    store::StateFigures* figures = nullptr) {
    auto core = MakeServices(MakeConfig(yaml), clock);
    auto keeper = core->NewStateKeeper(dir_, 0);
    Status s = keeper->Load(false);
    EXPECT_TRUE(s.ok()) << s.ToString();
    if (figures != nullptr) *figures = keeper->GetStats().load;
    return core;
  }

  std::string Path() const { return StateKeeper::SnapshotPath(dir_); }

  std::string dir_;
};

TEST_F(StateSnapshotTest, ARestartKeepsEveryKindOfState) {
  ManualClock clock(kT0);
  std::string code;
  std::string lease;
  {
    auto core = MakeServices(MakeConfig(kRules), clock);
    for (int i = 0; i < 3; ++i) ASSERT_TRUE(core->core->CheckAndWait("daily", "user:1")->allowed);
    for (int i = 0; i < 3; ++i) ASSERT_TRUE(core->core->CheckAndWait("api", "user:1")->allowed);
    for (int i = 0; i < 5; ++i)
      ASSERT_TRUE(core->core->CheckAndWait("api", "user:1", 1, "pro")->allowed);
    for (int i = 0; i < 2; ++i) ASSERT_TRUE(core->core->CheckAndWait("exact", "user:1")->allowed);
    ASSERT_TRUE(core->core->CheckAndWait("bucket", "user:1", 3)->allowed);
    ASSERT_TRUE(core->core->CheckAndWait("login", "user:1")->allowed);
    ASSERT_TRUE((*core->sets).Add("seen", "a", 60'000).ok());
    ASSERT_TRUE((*core->sets).Add("seen", "b", 1'000).ok());
    auto issued = (*core->otp).Issue("+15550100");
    ASSERT_TRUE(issued.ok() && issued->issued);
    code = issued->code;
    auto held =
        core->leases->AndWait(store::LeaseOpKind::kAcquire, {.rule = "exports", .key = "c"});
    ASSERT_TRUE(held.ok() && held->ok);
    lease = held->lease;
    clock.AdvanceMs(500);
    Save(*core);
  }
  clock.AdvanceMs(1'000);  // the restart; set member "b" expires meanwhile
  store::StateFigures loaded;
  auto core = Restart(kRules, clock, &loaded);
  EXPECT_GE(loaded.entries, 9);
  EXPECT_EQ(loaded.skipped_unknown, 0);

  EXPECT_EQ(Admitted(*core->core, "daily", "user:1"), 2);
  EXPECT_EQ(Admitted(*core->core, "api", "user:1"), 1);
  EXPECT_EQ(Admitted(*core->core, "api", "user:1", "pro"), 1);
  EXPECT_EQ(Admitted(*core->core, "exact", "user:1"), 1);
  EXPECT_EQ(Admitted(*core->core, "bucket", "user:1"), 1);  // 4 - 3, and no refill within 1.5 s
  EXPECT_EQ(Admitted(*core->core, "login", "user:1"), 1);   // a burst of 2, one spent
  EXPECT_EQ(Admitted(*core->core, "login", "user:2"), 2);   // other subjects are untouched
  EXPECT_EQ(Admitted(*core->core, "daily", "user:2"), 5);

  auto members = (*core->sets).Members("seen");
  ASSERT_TRUE(members.ok());
  ASSERT_EQ(members->size(), 1u);
  EXPECT_EQ((*members)[0].member, "a");
  EXPECT_EQ((*members)[0].expires_at_ms, kT0 + 60'000);

  auto verified = (*core->otp).Verify("+15550100", code);
  ASSERT_TRUE(verified.ok());
  EXPECT_TRUE(verified->valid);

  // The lease is still held: one more fits under max_in_flight 2, not two,
  // and the saved lease id still releases.
  auto second =
      core->leases->AndWait(store::LeaseOpKind::kAcquire, {.rule = "exports", .key = "c"});
  ASSERT_TRUE(second.ok());
  EXPECT_TRUE(second->ok);
  EXPECT_EQ(second->in_flight, 2);
  auto third = core->leases->AndWait(store::LeaseOpKind::kAcquire, {.rule = "exports", .key = "c"});
  ASSERT_TRUE(third.ok());
  EXPECT_FALSE(third->ok);
  auto released = core->leases->AndWait(store::LeaseOpKind::kRelease,
                                        {.rule = "exports", .key = "c", .lease = lease});
  ASSERT_TRUE(released.ok());
  EXPECT_TRUE(released->ok);
}

TEST_F(StateSnapshotTest, RulesAreMatchedByWhatTheyAreNotByTheirOrder) {
  ManualClock clock(kT0);
  {
    auto core = MakeServices(MakeConfig(kRules), clock);
    for (int i = 0; i < 3; ++i) ASSERT_TRUE(core->core->CheckAndWait("daily", "user:1")->allowed);
    for (int i = 0; i < 2; ++i) ASSERT_TRUE(core->core->CheckAndWait("exact", "user:1")->allowed);
    Save(*core);
  }
  // Another rule first, `exact` before `daily`, and `daily`'s limit changed:
  // `exact` keeps its state; `daily` starts afresh, as on Redis.
  const char* edited = R"(
rules:
  fresh: { algorithm: gcra, limits: 1/s }
  exact: { algorithm: sliding_log, limits: [3/minute, 10/hour] }
  daily: { algorithm: fixed_window, limits: 6/day }
)";
  store::StateFigures loaded;
  auto core = Restart(edited, clock, &loaded);
  EXPECT_EQ(loaded.entries, 1);
  EXPECT_EQ(loaded.skipped_unknown, 1);
  EXPECT_EQ(Admitted(*core->core, "exact", "user:1"), 1);
  EXPECT_EQ(Admitted(*core->core, "daily", "user:1"), 6);
}

TEST_F(StateSnapshotTest, ExpiredStateIsSkipped) {
  ManualClock clock(kT0);
  {
    auto core = MakeServices(MakeConfig(kRules), clock);
    for (int i = 0; i < 3; ++i) ASSERT_TRUE(core->core->CheckAndWait("api", "user:1")->allowed);
    for (int i = 0; i < 3; ++i) ASSERT_TRUE(core->core->CheckAndWait("exact", "user:1")->allowed);
    Save(*core);
  }
  clock.AdvanceMs(3 * 3'600'000);  // past the minute's and the hour's windows, not the day's
  store::StateFigures loaded;
  auto core = Restart(kRules, clock, &loaded);
  EXPECT_EQ(loaded.skipped_expired, 1);  // exact's log; api's day still counts
  EXPECT_EQ(loaded.entries, 1);
  EXPECT_EQ(Admitted(*core->core, "exact", "user:1"), 3);
  auto d = core->core->CheckAndWait("api", "user:1", 0);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->limits[1].remaining, 97);
}

TEST_F(StateSnapshotTest, NoFileIsAFirstStart) {
  ManualClock clock(kT0);
  auto core = MakeServices(MakeConfig(kRules), clock);
  auto keeper = core->NewStateKeeper(dir_, 0);
  ASSERT_TRUE(keeper->Load(false).ok());
  EXPECT_FALSE(keeper->GetStats().loaded);
  EXPECT_EQ(Admitted(*core->core, "daily", "user:1"), 5);
  ASSERT_TRUE(keeper->Stop().ok());
  EXPECT_TRUE(std::filesystem::exists(Path()));
  EXPECT_FALSE(std::filesystem::exists(Path() + ".tmp"));
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void WriteFile(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

TEST_F(StateSnapshotTest, ADamagedOrForeignFileIsRefusedWholeAndKept) {
  ManualClock clock(kT0);
  {
    auto core = MakeServices(MakeConfig(kRules), clock);
    for (int i = 0; i < 3; ++i) ASSERT_TRUE(core->core->CheckAndWait("daily", "user:1")->allowed);
    Save(*core);
  }
  const std::string good = ReadFile(Path());
  ASSERT_GT(good.size(), 40u);

  std::string flipped = good;
  flipped[flipped.size() / 2] ^= 0x40;
  std::string wrong_version = good;
  wrong_version[8] = 2;  // the format version, then a checksum that matches it
  const uint32_t crc = engine::Crc32c(0, wrong_version.data(), wrong_version.size() - 4);
  std::memcpy(wrong_version.data() + wrong_version.size() - 4, &crc, 4);
  std::string swapped = good;
  std::reverse(swapped.begin() + 12, swapped.begin() + 16);  // the byte order mark
  const struct {
    std::string bytes;
    std::string why;
  } cases[] = {
      {flipped, "damaged (checksum mismatch)"},
      {good.substr(0, good.size() - 9), "damaged"},
      {good.substr(0, 10), "damaged (truncated)"},
      {"rules: {}\n", "not a floodgate state snapshot"},
      {"", "not a floodgate state snapshot"},
      {wrong_version, "format version 2; this floodgate reads version 1"},
      {swapped, "written on a machine of another byte order"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.why);
    WriteFile(Path(), c.bytes);
    auto core = MakeServices(MakeConfig(kRules), clock);
    {
      auto keeper = core->NewStateKeeper(dir_, 0);
      const Status s = keeper->Load(false);
      ASSERT_FALSE(s.ok());
      EXPECT_NE(s.message().find(Path()), std::string::npos) << s.message();
      EXPECT_NE(s.message().find(c.why), std::string::npos) << s.message();
      EXPECT_NE(s.message().find("--start-empty"), std::string::npos) << s.message();
      // Nothing loaded, and nothing may replace the file nobody loaded.
      EXPECT_EQ(core->core->GetStats().entries, 0);
      EXPECT_FALSE(keeper->SaveNow().ok());
    }
    EXPECT_EQ(ReadFile(Path()), c.bytes);  // the keeper's end wrote nothing either

    // --start-empty: starts with nothing and replaces the file at the next save.
    auto keeper = core->NewStateKeeper(dir_, 0);
    ASSERT_TRUE(keeper->Load(true).ok());
    EXPECT_EQ(Admitted(*core->core, "daily", "user:1"), 5);
    ASSERT_TRUE(keeper->Stop().ok());
    EXPECT_NE(ReadFile(Path()), c.bytes);
    WriteFile(Path(), good);
  }
}

TEST_F(StateSnapshotTest, AFailedWriteIsCountedAndLeavesThePreviousFile) {
  ManualClock clock(kT0);
  auto core = MakeServices(MakeConfig(kRules), clock);
  ASSERT_TRUE(core->core->CheckAndWait("daily", "user:1")->allowed);
  // A data_dir that is a file: the write cannot even start.
  const std::string not_a_dir = dir_ + "/file";
  WriteFile(not_a_dir, "x");
  auto keeper = core->NewStateKeeper(not_a_dir, 0);
  // Reading it fails too (not a directory): start empty to get to the write.
  ASSERT_TRUE(keeper->Load(true).ok());
  const Status s = keeper->SaveNow();
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("cannot write the state snapshot"), std::string::npos) << s.message();
  EXPECT_EQ(keeper->GetStats().save_failures, 1);
  EXPECT_EQ(ReadFile(not_a_dir), "x");
}

TEST_F(StateSnapshotTest, SavesWhileDecisionsGoOnAreConsistent) {
  SystemClock clock;
  auto core = MakeServices(
      MakeConfig("rules: { daily: { algorithm: fixed_window, limits: 1000/day } }\n"), clock);
  auto keeper = core->NewStateKeeper(dir_, 0);
  ASSERT_TRUE(keeper->Load(false).ok());
  std::atomic<int> admitted{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 200; ++i) {
        auto d = core->core->CheckAndWait("daily", "user:" + std::to_string(i % 50));
        if (d.ok() && d->allowed) admitted.fetch_add(1);
      }
      (void)t;
    });
  }
  int saves = 0;
  while (admitted.load() < 800 && saves < 1000) {
    ASSERT_TRUE(keeper->SaveNow().ok());
    ++saves;
  }
  for (auto& th : threads) th.join();
  ASSERT_TRUE(keeper->Stop().ok());
  EXPECT_EQ(admitted.load(), 800);
  // The final snapshot has every unit: 16 per subject.
  auto again = MakeServices(
      MakeConfig("rules: { daily: { algorithm: fixed_window, limits: 1000/day } }\n"), clock);
  auto loader = again->NewStateKeeper(dir_, 0);
  ASSERT_TRUE(loader->Load(false).ok());
  EXPECT_EQ(loader->GetStats().load.entries, 50);
  for (int k = 0; k < 50; ++k) {
    auto d = again->core->CheckAndWait("daily", "user:" + std::to_string(k), 0);
    ASSERT_TRUE(d.ok());
    EXPECT_EQ(d->remaining, 1000 - 16) << k;
  }
}

}  // namespace
}  // namespace floodgate
