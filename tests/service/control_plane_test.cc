// The control plane on the embedded store: overrides, blocks, block_for and
// runtime rules in force for checks, validation that changes nothing, and
// the records kept in data_dir across a new limiter; and the poll of a
// shared store's records, which a ManualClock drives.
#include "service/control/control_plane.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "api/open_services.h"
#include "floodgate/clock.h"
#include "service/limiter/limiter_core.h"
#include "testing/control_world.h"
#include "testing/eventually.h"
#include "testing/fake_store.h"

namespace floodgate::service {
namespace {

constexpr const char* kRules =
    "rules:\n"
    "  api: { algorithm: fixed_window, limits: [3/hour] }\n"
    "  login: { algorithm: sliding_window, limits: [1/hour], block_for: 30s }\n"
    "  g: { algorithm: gcra, limits: [10/s] }\n";

class ControlPlaneTest : public testing::ControlWorld {
 protected:
  ControlPlaneTest() : ControlWorld(kRules) {}
  // Runs a change and waits for its answer.
  Status Wait(const std::function<void(ControlPlane::Done)>& change) {
    return Answer(change).first;
  }
};

TEST_F(ControlPlaneTest, AnOverrideIsInForceForItsSubjectOnly) {
  ControlPlane& cp = (*core_->control);
  ASSERT_TRUE(Wait([&](auto done) {
                cp.SetOverride(who_, "api", "vip", {"5/hour"}, 60'000, "launch", done);
              }).ok());
  EXPECT_TRUE(core_->rules->HasOverride("api", "vip", core_->clock.NowMs()));
  int admitted = 0;
  for (int i = 0; i < 7; ++i) admitted += Check("api", "vip").allowed ? 1 : 0;
  EXPECT_EQ(admitted, 5);
  EXPECT_EQ(Check("api", "other").limit, 3);
  // It expires with its ttl: the subject is back on the rule's own count.
  clock_.AdvanceMs(60'000);
  EXPECT_FALSE(core_->rules->HasOverride("api", "vip", core_->clock.NowMs()));
  EXPECT_EQ(Check("api", "vip").limit, 3);
}

TEST_F(ControlPlaneTest, ABlockDeniesWithTheTimeLeftAndTheReason) {
  ControlPlane& cp = (*core_->control);
  ASSERT_TRUE(Wait([&](auto done) { cp.Block(who_, "m", "", 10'000, "spam", done); }).ok());
  Decision d = Check("api", "m");
  EXPECT_FALSE(d.allowed);
  EXPECT_TRUE(d.blocked);
  EXPECT_EQ(d.block_reason, "spam");
  EXPECT_EQ(d.retry_after_ms, 10'000);
  EXPECT_EQ(d.remaining, 0);
  clock_.AdvanceMs(4'000);
  EXPECT_EQ(Check("g", "m").retry_after_ms, 6'000);
  // A state read sees the usage, which the block did not touch.
  const Decision s = Peek("api", "m");
  EXPECT_FALSE(s.blocked);
  EXPECT_EQ(s.remaining, 3);
  clock_.AdvanceMs(6'000);
  EXPECT_TRUE(Check("api", "m").allowed);
}

TEST_F(ControlPlaneTest, BlockForBlocksADeniedSubjectOnItsRule) {
  EXPECT_TRUE(Check("login", "p").allowed);
  // The denial that starts the block answers as the block does.
  Decision first = Check("login", "p");
  EXPECT_FALSE(first.allowed);
  EXPECT_TRUE(first.blocked);
  EXPECT_FALSE(first.block_reason.empty());
  EXPECT_EQ(first.retry_after_ms, 30'000);
  EXPECT_EQ(first.reset_after_ms, 30'000);
  EXPECT_EQ(first.remaining, 0);
  EXPECT_FALSE(DeniedByLimit(first));
  const std::string reason(first.block_reason);
  clock_.AdvanceMs(1'000);
  Decision d = Check("login", "p");
  EXPECT_TRUE(d.blocked);
  EXPECT_EQ(d.block_reason, reason);
  EXPECT_EQ(d.retry_after_ms, 29'000);
  EXPECT_EQ(d.limits[0].retry_after_ms, 29'000);
  EXPECT_EQ(first.limits[0].retry_after_ms, 30'000);
  EXPECT_EQ(d.limits[0].remaining, first.limits[0].remaining);
  EXPECT_EQ(d.limits[0].period_ms, first.limits[0].period_ms);
  EXPECT_TRUE(Check("api", "p").allowed);  // that rule only
}

TEST_F(ControlPlaneTest, ABlockForIsListedAsSoonAsItsDenialIsAnswered) {
  ControlPlane& cp = (*core_->control);
  EXPECT_TRUE(Check("login", "p").allowed);
  EXPECT_TRUE(Check("login", "p").blocked);
  // Listed now, without waiting for the store: marked pending until stored.
  std::vector<BlockRecord> listed = cp.ListBlocks();
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_EQ(listed[0].key, "p");
  EXPECT_EQ(listed[0].rule, "login");
  EXPECT_EQ(listed[0].expires_at_ms, clock_.NowMs() + 30'000);
  EXPECT_EQ(cp.BlocksOf("p").size(), 1u);
  // Once stored (the change log, read after it on the control thread,
  // lists it), it is listed as stored, once.
  std::promise<std::vector<std::string>> log;
  cp.RecentLog(10, [&](const Status&, std::vector<std::string> entries) {
    log.set_value(std::move(entries));
  });
  const auto entries = log.get_future().get();
  ASSERT_EQ(entries.size(), 1u);
  EXPECT_NE(entries[0].find("\"who\":\"rule\""), std::string::npos) << entries[0];
  listed = cp.ListBlocks();
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_FALSE(listed[0].pending);
  EXPECT_EQ(listed[0].expires_at_ms, clock_.NowMs() + 30'000);
  // And it survives a new limiter, as any block does.
  Open();
  EXPECT_TRUE(Check("login", "p").blocked);
  EXPECT_EQ((*core_->control).ListBlocks().size(), 1u);
}

TEST_F(ControlPlaneTest, ABlockForStillPendingIsKeptThroughAReloadAndCanBeLifted) {
  ControlPlane& cp = (*core_->control);
  // Hold the control thread: the change queued next reloads the records
  // before the block_for made meanwhile reaches the store.
  std::promise<void> release;
  std::promise<void> held;
  cp.RecentLog(1, [&](const Status&, std::vector<std::string>) {
    held.set_value();
    release.get_future().wait();
  });
  held.get_future().wait();
  std::promise<Status> blocked;
  cp.Block(who_, "other", "api", 60'000, "why",
           [&](const Status& s, const std::string&) { blocked.set_value(s); });
  EXPECT_TRUE(Check("login", "p").allowed);
  EXPECT_TRUE(Check("login", "p").blocked);
  release.set_value();
  ASSERT_TRUE(blocked.get_future().get().ok());
  // That reload's records lacked the block_for; it is in force and listed.
  EXPECT_TRUE(Check("login", "p").blocked);
  bool listed = false;
  for (const BlockRecord& b : cp.BlocksOf("p")) listed = listed || b.rule == "login";
  EXPECT_TRUE(listed);
  // Lifting it works as for any block (a peek: a check would be denied by
  // the limit, and blocked again).
  ASSERT_TRUE(Wait([&](auto done) { cp.Unblock(who_, "p", "login", done); }).ok());
  EXPECT_TRUE(cp.BlocksOf("p").empty());
  auto peek = core_->core->CheckAndWait("login", "p", 0);
  ASSERT_TRUE(peek.ok());
  EXPECT_FALSE(peek->blocked);
  EXPECT_EQ(peek->remaining, 0);
}

TEST_F(ControlPlaneTest, BadChangesAreRefusedAndChangeNothing) {
  ControlPlane& cp = (*core_->control);
  auto set = [&](std::string rule, std::vector<std::string> limits, int64_t ttl = 0) {
    return Wait([&](auto done) { cp.SetOverride(who_, rule, "k", limits, ttl, "", done); });
  };
  EXPECT_EQ(set("nope", {"1/s"}).code(), StatusCode::kNotFound);
  Status s = set("api", {"1/fortnight"});
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("limits[0]"), std::string::npos) << s.message();
  EXPECT_EQ(set("api", {}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(set("api", {"1/s"}, -1).code(), StatusCode::kInvalidArgument);
  s = set("g", {"10000/ms"});
  EXPECT_NE(s.message().find("too fine for gcra"), std::string::npos) << s.message();
  EXPECT_EQ(Wait([&](auto done) { cp.Block(who_, "k", "", 0, "", done); }).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(Wait([&](auto done) { cp.Block(who_, "k", "nope", 10, "", done); }).code(),
            StatusCode::kNotFound);
  EXPECT_EQ(
      Wait([&](auto done) { cp.PutRule(who_, "api", "{\"limits\":[\"1/s\"]}", done); }).code(),
      StatusCode::kInvalidArgument);
  EXPECT_EQ(Wait([&](auto done) { cp.PutRule(who_, "x", "{\"limits\":[\"1/q\"]}", done); }).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(Wait([&](auto done) { cp.DeleteOverride(who_, "api", "k", done); }).code(),
            StatusCode::kNotFound);
  EXPECT_TRUE(cp.ListOverrides("").empty());
  EXPECT_TRUE(cp.ListBlocks().empty());
  EXPECT_TRUE(cp.RuntimeRules().empty());
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/control.db"));
}

TEST_F(ControlPlaneTest, RecordsSurviveANewLimiterAndARuntimeRuleAReload) {
  ControlPlane& cp = (*core_->control);
  ASSERT_TRUE(Wait([&](auto done) {
                cp.PutRule(who_, "rt", "{\"algorithm\":\"token_bucket\",\"limits\":[\"2/hour\"]}",
                           done);
              }).ok());
  ASSERT_TRUE(
      Wait([&](auto done) { cp.SetOverride(who_, "api", "vip", {"4/hour"}, 0, "", done); }).ok());
  ASSERT_TRUE(Wait([&](auto done) { cp.Block(who_, "b", "api", 60'000, "why", done); }).ok());
  EXPECT_TRUE(Check("rt", "x").allowed);
  Open();
  EXPECT_EQ(Check("api", "vip").limit, 4);
  EXPECT_EQ(Check("api", "b").block_reason, "why");
  EXPECT_EQ(Check("rt", "y").limit, 2);
  auto file = ParseConfig(ConfigText(), "test");
  ASSERT_TRUE(core_->Reload(*file).ok());
  EXPECT_EQ(Check("rt", "z").limit, 2);
  // The change log lists each change, newest first.
  std::promise<std::vector<std::string>> log;
  (*core_->control).RecentLog(10, [&](const Status&, std::vector<std::string> entries) {
    log.set_value(std::move(entries));
  });
  const auto entries = log.get_future().get();
  ASSERT_EQ(entries.size(), 3u);
  EXPECT_NE(entries[0].find("\"action\":\"block.set\""), std::string::npos) << entries[0];
  EXPECT_NE(entries[2].find("\"action\":\"rule.put\""), std::string::npos) << entries[2];
}

// A ControlStore another server shares: the test moves its version, as
// that server's change would, and counts what the control plane asks.
class SharedControlStore final : public store::ControlStore {
 public:
  std::atomic<uint64_t> version{1};
  std::atomic<bool> down{false};  // every call fails, as an unreachable Redis's
  std::atomic<int> version_reads{0};
  std::atomic<int> loads{0};

  Result<uint64_t> Version() override {
    ++version_reads;
    if (down) return UnavailableError("connection refused");
    return version.load();
  }
  Result<store::ControlSnapshot> Load(int64_t) override {
    ++loads;
    if (down) return UnavailableError("connection refused");
    store::ControlSnapshot snapshot;
    snapshot.version = version.load();
    return snapshot;
  }
  Result<uint64_t> Apply(const store::ControlWrite&, int64_t) override { return version.load(); }
  Result<std::vector<std::string>> RecentLog(size_t) override { return std::vector<std::string>{}; }
};

ControlPlane::Hooks NoRules(std::atomic<int>* applied) {
  ControlPlane::Hooks hooks;
  hooks.apply = [applied](const ControlRecords&) { ++*applied; };
  hooks.file_rule = [](std::string_view) -> const Rule* { return nullptr; };
  hooks.rule = [](std::string_view) -> std::optional<Rule> { return std::nullopt; };
  hooks.add_block = [](const BlockRecord&) {};
  return hooks;
}

// The poll runs on the control plane's Clock: a ManualClock moved by the
// test is what makes it come, to the nanosecond, never real time passing.
TEST(ControlPlanePollTest, TheClockDrivesThePollAndANewVersionReloads) {
  ManualClock clock(1'800'000'000'000);
  auto fake = std::make_unique<testing::FakeStore>(clock);
  auto shared = std::make_unique<SharedControlStore>();
  SharedControlStore& records = *shared;
  fake->GiveControlStore(std::move(shared));
  const store::Rooms rooms = testing::FakeStore::RoomsOf(std::move(fake));
  std::atomic<int> applied{0};
  ControlPlane cp(clock, NoRules(&applied));
  ASSERT_TRUE(cp.Start(rooms.control, {}).ok());
  EXPECT_EQ(records.loads.load(), 1);  // Start loads the records once
  EXPECT_EQ(applied.load(), 1);
  // The first poll comes at once; the version is the one loaded.
  ASSERT_TRUE(testing::Eventually([&] { return records.version_reads.load() == 1; }));
  // Another server's change: seen at the next poll, kPollMs later on the
  // clock, and not before: real time passing does not bring the poll.
  records.version = 2;
  clock.AdvanceNs(ControlPlane::kPollMs * 1'000'000 - 1);
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_EQ(records.version_reads.load(), 1);
  EXPECT_EQ(records.loads.load(), 1);
  clock.AdvanceNs(1);
  ASSERT_TRUE(testing::Eventually([&] { return records.loads.load() == 2; }));
  EXPECT_EQ(records.version_reads.load(), 2);
  EXPECT_TRUE(testing::Eventually([&] { return applied.load() == 2; }));
  // Unchanged at the next poll: no reload.
  clock.AdvanceMs(ControlPlane::kPollMs);
  ASSERT_TRUE(testing::Eventually([&] { return records.version_reads.load() == 3; }));
  EXPECT_EQ(records.loads.load(), 2);
}

// The line saying a store is unreachable is spaced per control plane:
// one whose store has just failed says so, whatever another said.
TEST(ControlPlanePollTest, EachControlPlaneLogsItsOwnUnreachableStore) {
  ManualClock clock(1'800'000'000'000);
  ::testing::internal::CaptureStderr();
  for (int i = 0; i < 2; ++i) {
    auto fake = std::make_unique<testing::FakeStore>(clock);
    auto shared = std::make_unique<SharedControlStore>();
    shared->down = true;
    SharedControlStore& records = *shared;
    fake->GiveControlStore(std::move(shared));
    const store::Rooms rooms = testing::FakeStore::RoomsOf(std::move(fake));
    std::atomic<int> applied{0};
    ControlPlane cp(clock, NoRules(&applied));
    ASSERT_TRUE(cp.Start(rooms.control, {}).ok());
    ASSERT_TRUE(testing::Eventually([&] { return records.version_reads.load() == 1; }));
  }  // each control plane's thread has ended: its lines are written
  const std::string log = ::testing::internal::GetCapturedStderr();
  size_t lines = 0;
  for (size_t at = log.find("control records unreachable"); at != std::string::npos;
       at = log.find("control records unreachable", at + 1)) {
    ++lines;
  }
  EXPECT_EQ(lines, 2u) << log;
}

}  // namespace
}  // namespace floodgate::service
