// FileReplacement: the new contents replace the file only at Commit; a
// replacement dropped or failed leaves the file as it was and no temporary
// file behind, and says which step failed.
#include "common/file_replacement.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

namespace floodgate {
namespace {

std::string Read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

class FileReplacementTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/floodgate-replace-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    path_ = dir_ + "/file";
    std::ofstream(path_) << "old";
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string dir_, path_;
};

TEST_F(FileReplacementTest, CommitReplacesTheFile) {
  FileReplacement file(path_);
  ASSERT_TRUE(file.Append("new "));
  ASSERT_TRUE(file.Append("contents"));
  EXPECT_EQ(Read(path_), "old");  // nothing shows before the commit
  ASSERT_TRUE(file.Commit());
  EXPECT_EQ(file.failed_step(), nullptr);
  EXPECT_EQ(Read(path_), "new contents");
  EXPECT_FALSE(std::filesystem::exists(path_ + ".tmp"));
}

TEST_F(FileReplacementTest, AReplacementNotCommittedLeavesTheFileAndNoTemporary) {
  {
    FileReplacement file(path_);
    ASSERT_TRUE(file.Append("half"));
    EXPECT_TRUE(std::filesystem::exists(path_ + ".tmp"));
  }
  EXPECT_EQ(Read(path_), "old");
  EXPECT_FALSE(std::filesystem::exists(path_ + ".tmp"));
}

TEST_F(FileReplacementTest, AFailedStepIsNamedAndEveryLaterOneRefused) {
  FileReplacement file(dir_ + "/no-such-dir/file");
  EXPECT_STREQ(file.failed_step(), "open");
  EXPECT_EQ(file.error(), ENOENT);
  EXPECT_EQ(file.tmp_path(), dir_ + "/no-such-dir/file.tmp");
  EXPECT_FALSE(file.Append("x"));
  EXPECT_FALSE(file.Commit());
  EXPECT_STREQ(file.failed_step(), "open");
}

TEST_F(FileReplacementTest, ARenameOntoADirectoryFailsAndKeepsIt) {
  std::filesystem::create_directory(dir_ + "/taken");
  std::ofstream(dir_ + "/taken/inside") << "x";
  {
    FileReplacement file(dir_ + "/taken");
    ASSERT_TRUE(file.Append("contents"));
    EXPECT_FALSE(file.Commit());
    EXPECT_STREQ(file.failed_step(), "rename");
  }
  EXPECT_TRUE(std::filesystem::is_directory(dir_ + "/taken"));
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/taken.tmp"));  // removed as the replacement goes
}

}  // namespace
}  // namespace floodgate
