// base64url without padding: RFC 4648's test vectors, every length around
// a group's edges, and what strict decoding refuses (padding, the other
// alphabet, a length of 4k+1, non-zero leftover bits).
#include "service/subjects/base64url.h"

#include <gtest/gtest.h>

#include <string>

namespace floodgate::service {
namespace {

TEST(Base64UrlTest, Rfc4648VectorsWithoutPadding) {
  const std::pair<std::string, std::string> cases[] = {
      {"", ""},           {"f", "Zg"},          {"fo", "Zm8"},         {"foo", "Zm9v"},
      {"foob", "Zm9vYg"}, {"fooba", "Zm9vYmE"}, {"foobar", "Zm9vYmFy"}};
  for (const auto& [bytes, text] : cases) {
    EXPECT_EQ(EncodeBase64Url(bytes), text);
    EXPECT_EQ(DecodeBase64Url(text), bytes) << text;
  }
}

TEST(Base64UrlTest, UsesTheUrlSafeLetters) {
  EXPECT_EQ(EncodeBase64Url("\xfb\xff\xbf"), "-_-_");
  EXPECT_EQ(DecodeBase64Url("-_-_"), std::string("\xfb\xff\xbf"));
  EXPECT_FALSE(DecodeBase64Url("+/+/"));
}

TEST(Base64UrlTest, EveryByteAndLengthRoundTrips) {
  std::string bytes;
  for (int i = 0; i < 300; ++i) {
    bytes.push_back(static_cast<char>(i * 37 + 11));
    const std::string text = EncodeBase64Url(bytes);
    EXPECT_NE(text.size() % 4, 1u);
    EXPECT_EQ(DecodeBase64Url(text), bytes) << i;
  }
}

TEST(Base64UrlTest, RefusesWhatIsNotCanonical) {
  EXPECT_FALSE(DecodeBase64Url("Zg=="));  // padding
  EXPECT_FALSE(DecodeBase64Url("Zm8="));
  EXPECT_FALSE(DecodeBase64Url("Z"));  // 4k+1 letters
  EXPECT_FALSE(DecodeBase64Url("Zm9vY"));
  EXPECT_FALSE(DecodeBase64Url("Zm 9v"));  // white space
  EXPECT_FALSE(DecodeBase64Url("Zm9v\n"));
  EXPECT_FALSE(DecodeBase64Url(std::string("Zm\0v", 4)));
  // "f" is Zg; Zh..Zv hold the same byte with leftover bits set.
  EXPECT_EQ(DecodeBase64Url("Zg"), "f");
  EXPECT_FALSE(DecodeBase64Url("Zh"));
  EXPECT_FALSE(DecodeBase64Url("Zv"));
  // "fo" is Zm8; Zm9 sets a leftover bit.
  EXPECT_FALSE(DecodeBase64Url("Zm9"));
}

}  // namespace
}  // namespace floodgate::service
