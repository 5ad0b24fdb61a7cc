// The alert spool file: round trips of any bytes, atomic replacement,
// damaged files, and a directory that cannot be written.
#include "service/alerts/alert_spool.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace floodgate::service {
namespace {

class AlertSpoolTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/floodgate-spool-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string dir_;
};

PendingAlert Alert(const std::string& id, const std::string& body) {
  return PendingAlert{id, "http://127.0.0.1:9/h?x=1", body, "sha256=" + id, 1709251200000 + 7, 3,
                      ""};
}

TEST_F(AlertSpoolTest, RoundTripsAnyBytes) {
  const std::string path = dir_ + "/state/alerts.spool";
  ASSERT_TRUE(PrepareAlertSpool(path).ok());  // creates state/
  const std::vector<PendingAlert> alerts = {
      Alert("a", "{\"key\":\"x\"}"),
      Alert("b", std::string("line\nbreaks\r\n and a NUL \0 here", 30)),
      Alert("c", ""),
  };
  ASSERT_TRUE(WriteAlertSpool(path, alerts).ok());
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
  std::string warning;
  auto read = ReadAlertSpool(path, &warning);
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  EXPECT_TRUE(warning.empty()) << warning;
  ASSERT_EQ(read->size(), 3u);
  for (size_t i = 0; i < alerts.size(); ++i) {
    EXPECT_EQ((*read)[i].event_id, alerts[i].event_id);
    EXPECT_EQ((*read)[i].url, alerts[i].url);
    EXPECT_EQ((*read)[i].body, alerts[i].body);
    EXPECT_EQ((*read)[i].signature, alerts[i].signature);
    EXPECT_EQ((*read)[i].created_ms, alerts[i].created_ms);
    EXPECT_EQ((*read)[i].attempts, 3);
  }
  struct stat st;
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);  // events name subjects

  // Nothing pending: no file.
  ASSERT_TRUE(WriteAlertSpool(path, {}).ok());
  EXPECT_FALSE(std::filesystem::exists(path));
  read = ReadAlertSpool(path, &warning);
  ASSERT_TRUE(read.ok());
  EXPECT_TRUE(read->empty());
}

TEST_F(AlertSpoolTest, ADamagedTailKeepsTheEventsBeforeIt) {
  const std::string path = dir_ + "/alerts.spool";
  ASSERT_TRUE(WriteAlertSpool(path, {Alert("a", "{}"), Alert("b", "{}")}).ok());
  {
    std::ofstream out(path, std::ios::app | std::ios::binary);
    out << "2 9999 1 1 5 0\nxx";  // a length past the end
  }
  std::string warning;
  auto read = ReadAlertSpool(path, &warning);
  ASSERT_TRUE(read.ok());
  EXPECT_EQ(read->size(), 2u);
  EXPECT_NE(warning.find("after 2 good ones"), std::string::npos) << warning;

  {
    std::ofstream out(path, std::ios::trunc | std::ios::binary);
    out << "something else entirely\n";
  }
  read = ReadAlertSpool(path, &warning);
  ASSERT_TRUE(read.ok());
  EXPECT_TRUE(read->empty());
  EXPECT_NE(warning.find("not an alert spool"), std::string::npos);
}

TEST_F(AlertSpoolTest, AnUnwritableDirectoryIsAClearError) {
  // A read-only directory stops everyone but root; sysfs refuses new files
  // to root too, so the test means the same whoever runs it.
  std::string dir = dir_;
  if (::geteuid() == 0) {
    dir = "/sys/kernel";
  } else {
    ASSERT_EQ(::chmod(dir.c_str(), 0500), 0);
  }
  const Status s = PrepareAlertSpool(dir + "/alerts.spool");
  ::chmod(dir_.c_str(), 0700);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("alert_delivery.spool"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("cannot write in " + dir), std::string::npos) << s.message();
}

TEST_F(AlertSpoolTest, ADirectoryThatCannotBeCreatedIsAClearError) {
  const std::string file = dir_ + "/file";
  std::ofstream(file) << "x";
  const Status s = PrepareAlertSpool(file + "/sub/alerts.spool");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("cannot create the directory"), std::string::npos) << s.message();
}

TEST(AlertSpoolPathTest, DefaultsToTheStateDirectory) {
  ::setenv("STATE_DIRECTORY", "/run/x:/run/y", 1);
  EXPECT_EQ(DefaultAlertSpoolPath(), "/run/x/alerts.spool");
  ::unsetenv("STATE_DIRECTORY");
  EXPECT_EQ(DefaultAlertSpoolPath(), "/var/lib/floodgate/alerts.spool");
}

}  // namespace
}  // namespace floodgate::service
