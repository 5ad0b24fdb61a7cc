// Network list files and inline lists: comments, blanks and whitespace;
// each error naming its file and line (or list and index); each bound at
// its edge; a file read in chunks reads as its text does.
#include "service/lists/cidr_list_file.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace floodgate::service {
namespace {

std::vector<std::string> Texts(const CidrSet& set) {
  std::vector<std::string> out;
  for (const Cidr& c : set.Networks()) out.push_back(c.ToString());
  return out;
}

class CidrListFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/floodgate-lists-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string Write(const std::string& name, const std::string& text) {
    const std::string path = dir_ + "/" + name;
    std::ofstream(path, std::ios::binary) << text;
    return path;
  }

  std::string dir_;
};

TEST_F(CidrListFileTest, CommentsBlanksAndWhitespace) {
  const std::string text =
      "# deny list, 2024-05\n"
      "\n"
      "10.0.0.0/8\n"
      "   192.0.2.0/24   \n"
      "\t203.0.113.7\t# one scanner\n"
      "2001:db8::/32# no space before the comment\n"
      "   # an indented comment\n"
      "198.51.100.0/24\r\n"  // written on Windows
      "  \t \r\n"
      "#\n"
      "::ffff:100.64.0.0/106";  // no newline at the end
  const std::vector<std::string> want = {"10.0.0.0/8",      "100.64.0.0/10",  "192.0.2.0/24",
                                         "198.51.100.0/24", "203.0.113.7/32", "2001:db8::/32"};
  Result<CidrSet> from_text = ParseCidrListText(text, "deny.txt");
  ASSERT_TRUE(from_text.ok()) << from_text.status().ToString();
  EXPECT_EQ(Texts(*from_text), want);
  Result<CidrSet> from_file = LoadCidrListFile(Write("deny.txt", text));
  ASSERT_TRUE(from_file.ok()) << from_file.status().ToString();
  EXPECT_EQ(Texts(*from_file), want);
  EXPECT_TRUE(from_file->Contains(IpAddress::Parse("::ffff:100.127.1.1").value()));
}

TEST_F(CidrListFileTest, EmptyListsAreEmptySets) {
  for (const char* text : {"", "\n", "# nothing yet\n", "\n\n  \n"}) {
    Result<CidrSet> set = ParseCidrListText(text, "empty.txt");
    ASSERT_TRUE(set.ok()) << text;
    EXPECT_TRUE(set->empty());
    Result<CidrSet> file = LoadCidrListFile(Write("empty.txt", text));
    ASSERT_TRUE(file.ok()) << text;
    EXPECT_TRUE(file->empty());
  }
  Result<CidrSet> inline_list = BuildCidrList({}, "lists.none.cidrs");
  ASSERT_TRUE(inline_list.ok());
  EXPECT_TRUE(inline_list->empty());
}

TEST_F(CidrListFileTest, ABadLineIsNamedByFileAndLine) {
  std::string text;
  for (int i = 1; i < 17; ++i) text += i % 3 ? "10.0.0." + std::to_string(i) + "\n" : "# x\n";
  text += "  10.0.0.0/33  # typo\n10.0.0.0/8\n";
  Result<CidrSet> set = ParseCidrListText(text, "deny.txt");
  ASSERT_FALSE(set.ok());
  EXPECT_EQ(set.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(set.status().message(),
            "deny.txt:17: '10.0.0.0/33': prefix length 33 is past 32 for IPv4");
  // A file is named as its path is written.
  const std::string path = Write("deny.txt", text);
  EXPECT_EQ(LoadCidrListFile(path).status().message(),
            path + ":17: '10.0.0.0/33': prefix length 33 is past 32 for IPv4");

  const std::pair<std::string, std::string> cases[] = {
      {"2001:db8::/129\n", "l:1: '2001:db8::/129': prefix length 129 is past 128 for IPv6"},
      {"\n\n10.0.0.0 /8\n", "l:3: '10.0.0.0 /8': '10.0.0.0 ' is not an IPv4 address"},
      {"10.0.0.0/8 10.1.0.0/16\n",
       "l:1: '10.0.0.0/8 10.1.0.0/16': prefix length '8 10.1.0.0/16' is not a decimal number"},
      {"10.0.0.0/8,\n", "l:1: '10.0.0.0/8,': prefix length '8,' is not a decimal number"},
      {"deny 10.0.0.0/8\n", "l:1: 'deny 10.0.0.0/8': 'deny 10.0.0.0' is not an IPv4 address"},
      {"10.0.0.0/8;\n", "l:1: '10.0.0.0/8;': prefix length '8;' is not a decimal number"},
      {"/8\n", "l:1: '/8': no address before '/'"},
  };
  for (const auto& [in, want] : cases) {
    EXPECT_EQ(ParseCidrListText(in, "l").status().message(), want) << in;
  }
  // A NUL is text like any other.
  EXPECT_EQ(ParseCidrListText(std::string_view("1.2.3.4\0\n", 9), "l").status().message(),
            "l:1: '1.2.3.4\\x00': not an IPv4 address");
}

TEST_F(CidrListFileTest, AFileThatCannotBeOpened) {
  const std::string path = dir_ + "/missing.txt";
  Result<CidrSet> set = LoadCidrListFile(path);
  ASSERT_FALSE(set.ok());
  EXPECT_EQ(set.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(set.status().message(), path + ": cannot open network list: No such file or directory");
  // A directory opens but cannot be read.
  EXPECT_EQ(LoadCidrListFile(dir_).status().message(),
            dir_ + ": cannot read network list: Is a directory");
}

TEST_F(CidrListFileTest, LineBound) {
  CidrListBounds bounds;
  bounds.max_lines = 3;
  const std::string three = "10.0.0.0/8\n# two\n\n";
  EXPECT_TRUE(ParseCidrListText(three, "l", bounds).ok());
  EXPECT_TRUE(ParseCidrListText("1.1.1.1\n2.2.2.2\n3.3.3.3", "l", bounds).ok());
  EXPECT_TRUE(LoadCidrListFile(Write("three.txt", three), bounds).ok());
  for (const std::string& four : {three + "\n", three + "4.4.4.4", three + "#\n"}) {
    Result<CidrSet> set = ParseCidrListText(four, "l", bounds);
    ASSERT_FALSE(set.ok());
    EXPECT_EQ(set.status().code(), StatusCode::kResourceExhausted);
    EXPECT_EQ(set.status().message(), "l: more than 3 lines (a network list's bound)");
    const std::string path = Write("four.txt", four);
    EXPECT_EQ(LoadCidrListFile(path, bounds).status().message(),
              path + ": more than 3 lines (a network list's bound)");
  }
}

TEST_F(CidrListFileTest, FileSizeBound) {
  CidrListBounds bounds;
  bounds.max_file_bytes = 20;
  const std::string twenty = "10.0.0.0/8\n10.0.0.1\n";
  ASSERT_EQ(twenty.size(), 20u);
  EXPECT_TRUE(ParseCidrListText(twenty, "l", bounds).ok());
  EXPECT_TRUE(LoadCidrListFile(Write("twenty.txt", twenty), bounds).ok());
  const std::string more = twenty + "#";
  Result<CidrSet> set = ParseCidrListText(more, "l", bounds);
  ASSERT_FALSE(set.ok());
  EXPECT_EQ(set.status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(set.status().message(), "l: more than 20 bytes (a network list's bound)");
  const std::string path = Write("more.txt", more);
  EXPECT_EQ(LoadCidrListFile(path, bounds).status().message(),
            path + ": more than 20 bytes (a network list's bound)");
}

TEST_F(CidrListFileTest, LineLengthBound) {
  CidrListBounds bounds;
  bounds.max_line_bytes = 16;
  // 16 bytes, CR and comment included, is the most a line may have.
  const std::string at_bound = "10.0.0.0/8 #123\r\n";
  ASSERT_EQ(at_bound.size(), 16u + 1);
  const std::string text = "1.1.1.1\n" + at_bound.substr(0, 15) + "\n" + at_bound;
  EXPECT_TRUE(ParseCidrListText(text, "l", bounds).ok());
  EXPECT_TRUE(LoadCidrListFile(Write("ok.txt", text), bounds).ok());

  const std::string past = "1.1.1.1\n\n10.0.0.0/8 #12345\n";
  Result<CidrSet> set = ParseCidrListText(past, "l", bounds);
  ASSERT_FALSE(set.ok());
  EXPECT_EQ(set.status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(set.status().message(), "l:3: longer than 16 bytes (a line's bound)");
  const std::string path = Write("past.txt", past);
  EXPECT_EQ(LoadCidrListFile(path, bounds).status().message(),
            path + ":3: longer than 16 bytes (a line's bound)");
  // The last line, with no newline after it.
  EXPECT_EQ(ParseCidrListText("1.1.1.1\n10.0.0.0/8 #12345", "l", bounds).status().message(),
            "l:2: longer than 16 bytes (a line's bound)");
}

TEST_F(CidrListFileTest, AHugeLineIsRefusedBeforeItEnds) {
  // Far longer than a read's buffer: refused with the default bound, named
  // by its line, without the file's whole text in memory.
  const std::string huge = "10.0.0.0/8\n" + std::string(1 << 20, '#') + "\n10.0.0.1\n";
  const std::string path = Write("huge.txt", huge);
  EXPECT_EQ(LoadCidrListFile(path).status().message(),
            path + ":2: longer than 4096 bytes (a line's bound)");
  EXPECT_EQ(ParseCidrListText(huge, "l").status().message(),
            "l:2: longer than 4096 bytes (a line's bound)");
}

TEST_F(CidrListFileTest, LinesAcrossReadBuffersReadAsTheText) {
  // ~300 KiB: lines straddle every 64 KiB read, and the bad line's number
  // is counted across them.
  std::string text;
  char line[64];
  for (int i = 0; i < 20000; ++i) {
    if (i % 7) {
      std::snprintf(line, sizeof(line), "10.%d.%d.0/24\n", i % 256, i / 256);
    } else {
      std::snprintf(line, sizeof(line), "2001:db8:%x::/48   # v6\n", i);
    }
    text += line;
  }
  Result<CidrSet> from_text = ParseCidrListText(text, "l");
  ASSERT_TRUE(from_text.ok()) << from_text.status().ToString();
  Result<CidrSet> from_file = LoadCidrListFile(Write("big.txt", text));
  ASSERT_TRUE(from_file.ok()) << from_file.status().ToString();
  EXPECT_EQ(from_file->Networks(), from_text->Networks());
  EXPECT_EQ(from_file->size(), 20000u);

  text += "10.0.0.0/33\n";
  const std::string path = Write("bad.txt", text);
  EXPECT_EQ(LoadCidrListFile(path).status().message(),
            path + ":20001: '10.0.0.0/33': prefix length 33 is past 32 for IPv4");
}

TEST_F(CidrListFileTest, InlineLists) {
  Result<CidrSet> set =
      BuildCidrList({"192.0.2.0/24", " 2001:db8::/32 ", "198.51.100.7"}, "lists.partners.cidrs");
  ASSERT_TRUE(set.ok()) << set.status().ToString();
  EXPECT_EQ(Texts(*set),
            (std::vector<std::string>{"192.0.2.0/24", "198.51.100.7/32", "2001:db8::/32"}));

  const std::pair<std::vector<std::string>, std::string> cases[] = {
      {{"192.0.2.0/24", "10.0.0.0/33"},
       "lists.partners.cidrs[1]: '10.0.0.0/33': prefix length 33 is past 32 for IPv4"},
      {{""}, "lists.partners.cidrs[0]: '': no address"},
      {{"10.0.0.0/8", "  "}, "lists.partners.cidrs[1]: '': no address"},
      // No comments inline: YAML has its own.
      {{"10.0.0.0/8 # office"},
       "lists.partners.cidrs[0]: '10.0.0.0/8 # office': prefix length '8 # office' is not a "
       "decimal number"},
  };
  for (const auto& [entries, want] : cases) {
    Result<CidrSet> bad = BuildCidrList(entries, "lists.partners.cidrs");
    ASSERT_FALSE(bad.ok());
    EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(bad.status().message(), want);
  }

  CidrListBounds bounds;
  bounds.max_lines = 2;
  EXPECT_TRUE(BuildCidrList({"10.0.0.0/8", "10.0.0.0/8"}, "x", bounds).ok());
  Result<CidrSet> many = BuildCidrList({"10.0.0.0/8", "10.0.0.0/8", "1.1.1.1"}, "x", bounds);
  EXPECT_EQ(many.status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(many.status().message(), "x: more than 2 entries (a network list's bound)");
}

}  // namespace
}  // namespace floodgate::service
