// Blocks of networks (CIDR) in the control plane, on the embedded store: a
// check whose subject is an address inside a blocked network is denied as a
// blocked subject's is (IPv4, IPv6, the IPv4-mapped form), overlapping
// blocks of different rules and ends, expiry, removal, refusals that change
// nothing, the records kept in data_dir, the change log, and the blocks
// table's encoding read back (a key block's records unchanged).
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <functional>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "api/open_services.h"
#include "common/length_fields.h"
#include "floodgate/clock.h"
#include "service/control/control_plane.h"
#include "service/limiter/limiter_core.h"
#include "testing/control_world.h"
#include "testing/fake_store.h"

namespace floodgate::service {
namespace {

constexpr const char* kRules =
    "rules:\n"
    "  api: { algorithm: fixed_window, limits: [3/hour] }\n"
    "  login: { algorithm: sliding_window, limits: [5/hour] }\n";

class CidrBlocksTest : public testing::ControlWorld {
 protected:
  CidrBlocksTest() : ControlWorld(kRules) {}
  Status Block(std::string_view network, std::string_view rule, int64_t ttl_ms,
               std::string reason = "") {
    return Answer([&](auto done) {
             cp().BlockNetwork(who_, network, rule, ttl_ms, std::move(reason), done);
           })
        .first;
  }
  std::vector<std::string> Log(size_t n) {
    std::promise<std::vector<std::string>> log;
    cp().RecentLog(n, [&](const Status&, std::vector<std::string> entries) {
      log.set_value(std::move(entries));
    });
    return log.get_future().get();
  }
};

TEST_F(CidrBlocksTest, AnAddressInsideABlockedNetworkIsDeniedAsABlockedSubject) {
  ASSERT_TRUE(Block("203.0.113.0/24", "", 10'000, "botnet").ok());
  Decision d = Check("api", "203.0.113.77");
  EXPECT_FALSE(d.allowed);
  EXPECT_TRUE(d.blocked);
  EXPECT_EQ(d.block_reason, "botnet");
  EXPECT_EQ(d.remaining, 0);
  EXPECT_EQ(d.retry_after_ms, 10'000);
  EXPECT_EQ(d.reset_after_ms, 10'000);
  EXPECT_EQ(d.limits[0].remaining, 0);
  EXPECT_EQ(d.limits[0].retry_after_ms, 10'000);
  // Every rule, the mapped form of an address inside, and its edges.
  EXPECT_TRUE(Check("login", "203.0.113.0").blocked);
  EXPECT_TRUE(Check("api", "203.0.113.255").blocked);
  Decision mapped = Check("api", "::ffff:203.0.113.7");
  EXPECT_TRUE(mapped.blocked);
  EXPECT_EQ(mapped.block_reason, "botnet");
  // Outside it, or not an address: counted as ever.
  Decision outside = Check("api", "203.0.114.1");
  EXPECT_TRUE(outside.allowed);
  EXPECT_FALSE(outside.blocked);
  EXPECT_EQ(outside.remaining, 2);
  EXPECT_TRUE(Check("api", "203.0.112.255").allowed);
  EXPECT_TRUE(Check("api", "user:203.0.113.7").allowed);
  EXPECT_TRUE(Check("api", "203.0.113.0/24").allowed);  // a key, not an address
  EXPECT_TRUE(Check("api", " 203.0.113.7").allowed);
  // The block spent nothing: a peek sees the subject's units untouched.
  const Decision s = Peek("api", "203.0.113.77");
  EXPECT_FALSE(s.blocked);
  EXPECT_EQ(s.remaining, 3);
  // The time left runs down, and the block ends at its millisecond.
  clock_.AdvanceMs(9'999);
  EXPECT_EQ(Check("api", "203.0.113.77").retry_after_ms, 1);
  clock_.AdvanceMs(1);
  Decision after = Check("api", "203.0.113.77");
  EXPECT_TRUE(after.allowed);
  EXPECT_FALSE(after.blocked);
}

TEST_F(CidrBlocksTest, AnIPv6NetworkOnOneRule) {
  ASSERT_TRUE(Block("2001:db8::/32", "login", 60'000, "v6 range").ok());
  Decision d = Check("login", "2001:db8:1:2::5");
  EXPECT_TRUE(d.blocked);
  EXPECT_EQ(d.block_reason, "v6 range");
  EXPECT_EQ(d.retry_after_ms, 60'000);
  EXPECT_TRUE(Check("login", "2001:DB8::1").blocked);  // any spelling of an address
  EXPECT_FALSE(Check("api", "2001:db8::1").blocked);   // that rule only
  EXPECT_FALSE(Check("login", "2001:db9::1").blocked);
  EXPECT_FALSE(Check("login", "203.0.113.7").blocked);
  std::vector<BlockRecord> listed = cp().ListBlocks();
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_EQ(listed[0].cidr, "2001:db8::/32");
  EXPECT_EQ(listed[0].key, "");
  EXPECT_EQ(listed[0].rule, "login");
  EXPECT_EQ(cp().BlockJson(listed[0]),
            "{\"cidr\":\"2001:db8::/32\",\"rule\":\"login\",\"expires_in_ms\":60000,"
            "\"reason\":\"v6 range\"}");
}

// A /16 on every rule and a /24 on one rule, ending apart: each applies
// where it should, the later end winning; a key block of the address too.
TEST_F(CidrBlocksTest, OverlappingBlocksOfDifferentRulesAndEnds) {
  ASSERT_TRUE(Block("198.51.0.0/16", "", 10'000, "wide").ok());
  ASSERT_TRUE(Block("198.51.100.0/24", "api", 30'000, "narrow").ok());
  Decision d = Check("api", "198.51.100.9");
  EXPECT_EQ(d.block_reason, "narrow");
  EXPECT_EQ(d.retry_after_ms, 30'000);
  d = Check("login", "198.51.100.9");
  EXPECT_EQ(d.block_reason, "wide");
  EXPECT_EQ(d.retry_after_ms, 10'000);
  EXPECT_EQ(Check("api", "198.51.7.7").block_reason, "wide");
  // A key block of the address itself, ending later still on login.
  ASSERT_TRUE(Answer([&](auto done) {
                cp().Block(who_, "198.51.100.9", "login", 20'000, "key", done);
              }).first.ok());
  d = Check("login", "198.51.100.9");
  EXPECT_EQ(d.block_reason, "key");
  EXPECT_EQ(d.retry_after_ms, 20'000);
  // The network's, when it ends after the key's.
  EXPECT_EQ(Check("api", "198.51.100.9").block_reason, "narrow");

  clock_.AdvanceMs(10'000);  // the /16's end
  EXPECT_TRUE(Check("login", "198.51.7.7").allowed);
  EXPECT_EQ(Check("login", "198.51.100.9").block_reason, "key");
  d = Check("api", "198.51.100.9");
  EXPECT_EQ(d.block_reason, "narrow");
  EXPECT_EQ(d.retry_after_ms, 20'000);
  clock_.AdvanceMs(10'000);  // the key's end
  EXPECT_FALSE(Check("login", "198.51.100.9").blocked);
  EXPECT_TRUE(Check("api", "198.51.100.9").blocked);
  clock_.AdvanceMs(10'000);  // the /24's end
  EXPECT_FALSE(Check("api", "198.51.100.9").blocked);
  EXPECT_TRUE(cp().ListBlocks().empty());
}

TEST_F(CidrBlocksTest, UnblockRemovesOneRulesBlockOrAll) {
  ASSERT_TRUE(Block("192.0.2.0/24", "", 60'000, "all").ok());
  ASSERT_TRUE(Block("192.0.2.0/24", "api", 60'000, "api").ok());
  ASSERT_TRUE(Block("192.0.2.128/25", "", 60'000, "half").ok());
  EXPECT_EQ(cp().BlocksOfNetwork("192.0.2.0/24").size(), 2u);
  EXPECT_EQ(cp().BlocksOfNetwork("192.0.2.128/25").size(), 1u);
  // One rule's: the answer lists what went.
  auto [s, json] =
      Answer([&](auto done) { cp().UnblockNetwork(who_, "192.0.2.0/24", "api", done); });
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(json,
            "{\"cidr\":\"192.0.2.0/24\",\"blocks\":[{\"cidr\":\"192.0.2.0/24\",\"rule\":\"api\","
            "\"expires_in_ms\":60000,\"reason\":\"api\"}]}");
  EXPECT_EQ(Check("api", "192.0.2.1").block_reason, "all");
  // The rest of it, written another way (the mapped form).
  std::tie(s, json) =
      Answer([&](auto done) { cp().UnblockNetwork(who_, "::ffff:192.0.2.0/120", "", done); });
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_NE(json.find("\"reason\":\"all\""), std::string::npos) << json;
  EXPECT_TRUE(cp().BlocksOfNetwork("192.0.2.0/24").empty());
  EXPECT_TRUE(Check("api", "192.0.2.1").allowed);
  // The /25 was another network's block: still in force.
  EXPECT_EQ(Check("api", "192.0.2.200").block_reason, "half");
  // Nothing left to remove: 404.
  EXPECT_EQ(
      Answer([&](auto done) { cp().UnblockNetwork(who_, "192.0.2.0/24", "", done); }).first.code(),
      StatusCode::kNotFound);
  EXPECT_EQ(Answer([&](auto done) {
              cp().UnblockNetwork(who_, "192.0.2.128/25", "api", done);
            }).first.code(),
            StatusCode::kNotFound);
  EXPECT_EQ(cp().ListBlocks().size(), 1u);
}

// A network block and a key block of the same text are two records: the
// key "203.0.113.0/24" (a rule keyed by {ip/24}) is not the network.
TEST_F(CidrBlocksTest, ANetworkAndAKeyOfTheSameTextAreApart) {
  ASSERT_TRUE(Block("203.0.113.0/24", "", 60'000, "network").ok());
  ASSERT_TRUE(Answer([&](auto done) {
                cp().Block(who_, "203.0.113.0/24", "", 60'000, "key", done);
              }).first.ok());
  EXPECT_EQ(cp().ListBlocks().size(), 2u);
  ASSERT_EQ(cp().BlocksOf("203.0.113.0/24").size(), 1u);
  EXPECT_EQ(cp().BlocksOf("203.0.113.0/24")[0].reason, "key");
  ASSERT_EQ(cp().BlocksOfNetwork("203.0.113.0/24").size(), 1u);
  EXPECT_EQ(cp().BlocksOfNetwork("203.0.113.0/24")[0].reason, "network");
  EXPECT_EQ(Check("api", "203.0.113.0/24").block_reason, "key");
  EXPECT_EQ(Check("api", "203.0.113.1").block_reason, "network");
  ASSERT_TRUE(
      Answer([&](auto done) { cp().Unblock(who_, "203.0.113.0/24", "", done); }).first.ok());
  EXPECT_TRUE(Check("api", "203.0.113.0/24").allowed);
  EXPECT_EQ(Check("api", "203.0.113.1").block_reason, "network");
  // An empty key has no blocks, the network's included.
  EXPECT_TRUE(cp().BlocksOf("").empty());
}

TEST_F(CidrBlocksTest, ParseNetworkNamesTheNetworkMeant) {
  auto ok = [](std::string_view text) {
    Result<std::string> r = ControlPlane::ParseNetwork(text);
    EXPECT_TRUE(r.ok()) << text << ": " << r.status().message();
    return r.ok() ? *r : "";
  };
  EXPECT_EQ(ok("203.0.113.0/24"), "203.0.113.0/24");
  EXPECT_EQ(ok("203.0.113.7/32"), "203.0.113.7/32");
  EXPECT_EQ(ok("203.0.113.7"), "203.0.113.7/32");
  EXPECT_EQ(ok("0.0.0.0/0"), "0.0.0.0/0");
  EXPECT_EQ(ok("2001:DB8:0::/32"), "2001:db8::/32");
  EXPECT_EQ(ok("::/0"), "::/0");
  EXPECT_EQ(ok("::ffff:203.0.113.0/120"), "203.0.113.0/24");
  auto refused = [](std::string_view text) {
    Result<std::string> r = ControlPlane::ParseNetwork(text);
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << text;
    return r.ok() ? std::string() : r.status().message();
  };
  EXPECT_EQ(refused("203.0.113.7/24"),
            "network: '203.0.113.7/24' has host bits set; the network is 203.0.113.0/24");
  EXPECT_EQ(refused("2001:db8::1/32"),
            "network: '2001:db8::1/32' has host bits set; the network is 2001:db8::/32");
  EXPECT_EQ(refused("::ffff:203.0.113.7/120"),
            "network: '::ffff:203.0.113.7/120' has host bits set; the network is 203.0.113.0/24");
  EXPECT_EQ(refused("203.0.113.0/33"),
            "network: '203.0.113.0/33': prefix length 33 is past 32 for IPv4");
  EXPECT_EQ(refused("2001:db8::/129"),
            "network: '2001:db8::/129': prefix length 129 is past 128 for IPv6");
  EXPECT_EQ(refused("not-an-ip/8"), "network: 'not-an-ip/8': 'not-an-ip' is not an IPv4 address");
  EXPECT_EQ(refused("203.0.113.0/08"),
            "network: '203.0.113.0/08': prefix length '08' has a leading zero");
  EXPECT_EQ(refused("203.0.113.0/"), "network: '203.0.113.0/': no prefix length after '/'");
  EXPECT_EQ(refused(""), "network: '': no address");
}

TEST_F(CidrBlocksTest, BadChangesAreRefusedAndChangeNothing) {
  EXPECT_EQ(Block("203.0.113.7/24", "", 60'000).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(Block("203.0.113.0/33", "", 60'000).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(Block("not-an-ip/8", "", 60'000).code(), StatusCode::kInvalidArgument);
  Status s = Block("203.0.113.0/24", "", 0);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("ttl_ms"), std::string::npos) << s.message();
  EXPECT_EQ(Block("203.0.113.0/24", "", ControlPlane::kMaxTtlMs + 1).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(Block("203.0.113.0/24", "nope", 60'000).code(), StatusCode::kNotFound);
  EXPECT_EQ(Answer([&](auto done) {
              cp().UnblockNetwork(who_, "203.0.113.7/24", "", done);
            }).first.code(),
            StatusCode::kInvalidArgument);
  EXPECT_TRUE(cp().ListBlocks().empty());
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/control.db"));
  EXPECT_TRUE(Check("api", "203.0.113.7").allowed);
  // The longest ttl is taken.
  EXPECT_TRUE(Block("203.0.113.0/24", "", ControlPlane::kMaxTtlMs).ok());
  EXPECT_EQ(Check("api", "203.0.113.7").retry_after_ms, ControlPlane::kMaxTtlMs);
}

TEST_F(CidrBlocksTest, NetworkBlocksSurviveANewLimiterAndAreLogged) {
  ASSERT_TRUE(Block("203.0.113.0/24", "api", 60'000, "kept").ok());
  ASSERT_TRUE(Block("2001:db8::/48", "", 60'000, "kept too").ok());
  ASSERT_TRUE(Block("203.0.113.0/24", "api", 90'000, "longer").ok());  // replaces it
  Open();
  Decision d = Check("api", "203.0.113.9");
  EXPECT_EQ(d.block_reason, "longer");
  EXPECT_EQ(d.retry_after_ms, 90'000);
  EXPECT_EQ(Check("login", "2001:db8:0:1::1").block_reason, "kept too");
  EXPECT_EQ(cp().ListBlocks().size(), 2u);
  ASSERT_TRUE(
      Answer([&](auto done) { cp().UnblockNetwork(who_, "2001:db8::/48", "", done); }).first.ok());
  const std::vector<std::string> entries = Log(10);
  ASSERT_EQ(entries.size(), 4u);
  EXPECT_NE(entries[0].find("\"action\":\"block.delete\",\"target\":\"cidr:2001:db8::/48\""),
            std::string::npos)
      << entries[0];
  EXPECT_NE(entries[0].find("\"before\":{\"cidr\":\"2001:db8::/48\""), std::string::npos)
      << entries[0];
  EXPECT_NE(entries[1].find("\"action\":\"block.set\",\"target\":\"api/cidr:203.0.113.0/24\""),
            std::string::npos)
      << entries[1];
  // The change's before: the block it replaced.
  EXPECT_NE(entries[1].find("\"before\":{\"cidr\":\"203.0.113.0/24\",\"rule\":\"api\""),
            std::string::npos)
      << entries[1];
  EXPECT_NE(entries[3].find("\"before\":null"), std::string::npos) << entries[3];
  Open();
  EXPECT_FALSE(Check("login", "2001:db8::1").blocked);
  EXPECT_TRUE(Check("api", "203.0.113.9").blocked);
}

// The blocks table as a store holds it: a key block's entry key is its key
// and rule as length-prefixed fields (unchanged), a network's the same after
// "cidr:", so a reader that knows only key blocks skips it. A network entry
// that is not a network's canonical text is damage, skipped.
class FixedControlStore final : public store::ControlStore {
 public:
  explicit FixedControlStore(std::vector<store::ControlEntry> entries)
      : entries_(std::move(entries)) {}
  Result<uint64_t> Version() override { return 1; }
  Result<store::ControlSnapshot> Load(int64_t) override {
    return store::ControlSnapshot{1, entries_};
  }
  Result<uint64_t> Apply(const store::ControlWrite&, int64_t) override { return 1; }
  Result<std::vector<std::string>> RecentLog(size_t) override { return std::vector<std::string>{}; }

 private:
  std::vector<store::ControlEntry> entries_;
};

std::string Fields(std::initializer_list<std::string_view> parts) {
  std::string out;
  for (std::string_view p : parts) fields::Append(&out, p);
  return out;
}

TEST(CidrBlocksEncodingTest, KeyAndNetworkRecordsAreReadBack) {
  ManualClock clock(1'800'000'000'000);
  const int64_t until = clock.NowMs() + 60'000;
  auto fake = std::make_unique<testing::FakeStore>(clock);
  fake->GiveControlStore(std::make_unique<FixedControlStore>(std::vector<store::ControlEntry>{
      {store::kBlocksTable, Fields({"user:1", ""}), "an old key block", until},
      {store::kBlocksTable, Fields({"203.0.113.7", "api"}), "a key that is an address", until},
      {store::kBlocksTable, "cidr:" + Fields({"10.0.0.0/8", "api"}), "a network", until},
      {store::kBlocksTable, "cidr:" + Fields({"2001:db8::/32", ""}), "a v6 network", until},
      {store::kBlocksTable, "cidr:" + Fields({"10.1.0.0/8", ""}), "host bits", until},
      {store::kBlocksTable, "cidr:" + Fields({"2001:DB8::/32", ""}), "not canonical", until},
      {store::kBlocksTable, "cidr:" + Fields({"nope", ""}), "no network", until},
      {store::kBlocksTable, "cidr:" + Fields({"10.0.0.0/8"}), "no rule", until},
  }));
  const store::Rooms rooms = testing::FakeStore::RoomsOf(std::move(fake));
  std::vector<BlockRecord> applied;
  ControlPlane::Hooks hooks;
  hooks.apply = [&](const ControlRecords& r) { applied = r.blocks; };
  hooks.file_rule = [](std::string_view) -> const Rule* { return nullptr; };
  hooks.rule = [](std::string_view) -> std::optional<Rule> { return std::nullopt; };
  hooks.add_block = [](const BlockRecord&) {};
  ControlPlane cp(clock, hooks);
  ASSERT_TRUE(cp.Start(rooms.control, {}).ok());
  ASSERT_EQ(applied.size(), 4u);
  EXPECT_EQ(applied[0].key, "user:1");
  EXPECT_EQ(applied[0].cidr, "");
  EXPECT_EQ(applied[0].rule, "");
  EXPECT_EQ(applied[0].reason, "an old key block");
  EXPECT_EQ(applied[1].key, "203.0.113.7");
  EXPECT_EQ(applied[1].cidr, "");
  EXPECT_EQ(applied[2].key, "");
  EXPECT_EQ(applied[2].cidr, "10.0.0.0/8");
  EXPECT_EQ(applied[2].rule, "api");
  EXPECT_EQ(applied[2].reason, "a network");
  EXPECT_EQ(applied[2].expires_at_ms, until);
  EXPECT_EQ(applied[3].cidr, "2001:db8::/32");
  EXPECT_EQ(cp.BlocksOf("203.0.113.7").size(), 1u);
  EXPECT_EQ(cp.BlocksOfNetwork("10.0.0.0/8").size(), 1u);
  EXPECT_TRUE(cp.BlocksOfNetwork("203.0.113.7/32").empty());
}

}  // namespace
}  // namespace floodgate::service
