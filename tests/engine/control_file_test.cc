// LocalControlStore: the embedded store's control records, in memory and in
// data_dir/control.db across reopening, written atomically, refused whole
// when the file is damaged.
#include "engine/control_file.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace floodgate::engine {
namespace {

class ControlFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/floodgate-control-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  store::ControlWrite Put(std::string table, std::string key, std::string value,
                          int64_t expires = 0, std::string log = "") {
    store::ControlWrite w;
    w.entry = {std::move(table), std::move(key), std::move(value), expires};
    w.log = std::move(log);
    return w;
  }

  std::string dir_;
};

TEST_F(ControlFileTest, RecordsOfAnyBytesSurviveReopening) {
  const std::string key("a\0b:\n{x}", 8), value("1:2\r\n\xff\x00z", 9);
  {
    auto s = LocalControlStore::Open(dir_);
    ASSERT_TRUE(s.ok()) << s.status().message();
    ASSERT_EQ(*(*s)->Apply(Put("overrides", key, value), 1000), 1u);
    ASSERT_EQ(*(*s)->Apply(Put("blocks", "k", "why", 5000), 1000), 2u);
    ASSERT_EQ(*(*s)->Apply(Put("rules", "r", "{}"), 1000), 3u);
  }
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/control.db.tmp"));
  auto s = LocalControlStore::Open(dir_);
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(*(*s)->Version(), 3u);
  auto snap = (*s)->Load(1000);
  ASSERT_TRUE(snap.ok());
  ASSERT_EQ(snap->entries.size(), 3u);
  bool found = false;
  for (const auto& e : snap->entries) {
    if (e.table == "overrides") {
      EXPECT_EQ(e.key, key);
      EXPECT_EQ(e.value, value);
      found = true;
    }
  }
  EXPECT_TRUE(found);
  // The block expires at 5000: gone from a load at 5000, and from the file
  // with the next write.
  EXPECT_EQ((*s)->Load(5000)->entries.size(), 2u);
}

TEST_F(ControlFileTest, EraseAndLogNewestFirst) {
  auto s = LocalControlStore::Open(dir_);
  ASSERT_TRUE(s.ok());
  ASSERT_TRUE((*s)->Apply(Put("blocks", "k", "v", 0, "{\"n\":1}"), 1).ok());
  store::ControlWrite del = Put("blocks", "k", "");
  del.erase = true;
  del.log = "{\"n\":2}";
  ASSERT_TRUE((*s)->Apply(del, 2).ok());
  ASSERT_TRUE((*s)->Apply(del, 3).ok());  // absent: no error
  EXPECT_TRUE((*s)->Load(3)->entries.empty());
  auto log = (*s)->RecentLog(2);
  ASSERT_TRUE(log.ok());
  EXPECT_EQ(*log, (std::vector<std::string>{"{\"n\":2}", "{\"n\":2}"}));
  EXPECT_EQ((*s)->RecentLog(10)->size(), 3u);
}

TEST_F(ControlFileTest, AnUnknownTableIsRefusedAndChangesNothing) {
  auto s = LocalControlStore::Open(dir_);
  ASSERT_TRUE(s.ok());
  auto r = (*s)->Apply(Put("secrets", "k", "v"), 1);
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(*(*s)->Version(), 0u);
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/control.db"));
}

TEST_F(ControlFileTest, ADamagedFileIsRefusedNamingIt) {
  for (const std::string text : {"garbage\n", "floodgate-control 1 2\n6:blocks1:k\n",
                                 "floodgate-control 1 2\n5:magic1:k1:v1:0\n"}) {
    std::ofstream(dir_ + "/control.db") << text;
    auto s = LocalControlStore::Open(dir_);
    ASSERT_FALSE(s.ok()) << text;
    EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(s.status().message().find(dir_ + "/control.db is corrupt"), std::string::npos)
        << s.status().message();
  }
}

TEST_F(ControlFileTest, AWriteThatCannotBeKeptIsNotApplied) {
  auto s = LocalControlStore::Open(dir_ + "/missing");
  ASSERT_TRUE(s.ok());  // no file yet: a first start
  auto r = (*s)->Apply(Put("blocks", "k", "v"), 1);
  EXPECT_EQ(r.status().code(), StatusCode::kInternal);
  EXPECT_EQ(*(*s)->Version(), 0u);
  EXPECT_TRUE((*s)->Load(1)->entries.empty());
}

TEST_F(ControlFileTest, WithoutADataDirRecordsLiveInMemory) {
  auto s = LocalControlStore::Open("");
  ASSERT_TRUE(s.ok());
  ASSERT_TRUE((*s)->Apply(Put("rules", "r", "{}"), 1).ok());
  EXPECT_EQ((*s)->Load(1)->entries.size(), 1u);
}

}  // namespace
}  // namespace floodgate::engine
