// OTP cryptography and formats: codes of every length with leading zeros
// and an even spread of digits, the HMAC against an independent computation
// (Python's hmac module), event ids, constant-time equality, well-formed
// codes and subjects.
#include "service/otp/otp_codes.h"

#include <gtest/gtest.h>

#include <array>
#include <set>
#include <string>

namespace floodgate::service {
namespace {

TEST(OtpCodesTest, CodesHaveTheirDigitsAndSpreadEvenly) {
  for (int digits = 4; digits <= 10; ++digits) {
    auto code = GenerateCode(digits);
    ASSERT_TRUE(code.ok());
    EXPECT_TRUE(IsWellFormedCode(*code, digits)) << *code;
  }
  EXPECT_FALSE(GenerateCode(3).ok());
  EXPECT_FALSE(GenerateCode(11).ok());
  // 20000 six-digit codes: every leading digit near 1/10 of them (a bias
  // such as dropping leading zeros would show), and nearly all distinct.
  std::array<int, 10> leading{};
  std::set<std::string> seen;
  for (int i = 0; i < 20000; ++i) {
    const std::string code = *GenerateCode(6);
    ++leading[static_cast<size_t>(code[0] - '0')];
    seen.insert(code);
  }
  for (int n : leading) {
    EXPECT_GT(n, 1700);
    EXPECT_LT(n, 2300);
  }
  EXPECT_GT(seen.size(), 19000u);
}

TEST(OtpCodesTest, HmacMatchesAnIndependentComputation) {
  // python3: hmac.new(b'0123456789abcdef0123', b'floodgate-otp-v1\0' +
  //   struct.pack('<Q', 9) + b'+15550100' + b'012345', hashlib.sha256).hexdigest()
  EXPECT_EQ(CodeHmac("0123456789abcdef0123", "+15550100", "012345"),
            "d905a1dacf368b1a740a242335fdf39a061788682cbb7662ae9adc596c4b2001");
  // The subject and the code are both in it, and cannot trade bytes.
  EXPECT_NE(CodeHmac("k", "a1", "23456"), CodeHmac("k", "a", "123456"));
  EXPECT_NE(CodeHmac("k", "a", "123456"), CodeHmac("k2", "a", "123456"));
}

TEST(OtpCodesTest, EventIdsAreRandomHex) {
  auto a = RandomEventId();
  auto b = RandomEventId();
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->size(), 16u);
  EXPECT_EQ(a->find_first_not_of("0123456789abcdef"), std::string::npos);
  EXPECT_NE(*a, *b);
}

TEST(OtpCodesTest, ConstantTimeEqual) {
  EXPECT_TRUE(ConstantTimeEqual("abc", "abc"));
  EXPECT_FALSE(ConstantTimeEqual("abc", "abd"));
  EXPECT_FALSE(ConstantTimeEqual("abc", "ab"));
  EXPECT_TRUE(ConstantTimeEqual("", ""));
}

TEST(OtpCodesTest, WellFormedCodes) {
  EXPECT_TRUE(IsWellFormedCode("000000", 6));
  EXPECT_FALSE(IsWellFormedCode("00000", 6));
  EXPECT_FALSE(IsWellFormedCode("0000000", 6));
  EXPECT_FALSE(IsWellFormedCode("12345a", 6));
  EXPECT_FALSE(IsWellFormedCode(" 12345", 6));
  EXPECT_FALSE(IsWellFormedCode("+12345", 6));
  EXPECT_FALSE(IsWellFormedCode("", 6));
}

TEST(OtpCodesTest, Subjects) {
  for (std::string_view ok :
       {"+15550100", "ana@example.com", "user:42", "\xc3\xa9l\xc3\xa8ve", "\xf0\x9f\x93\xb1"}) {
    EXPECT_TRUE(CheckSubject(ok).ok()) << ok;
  }
  EXPECT_TRUE(CheckSubject(std::string(512, 'x')).ok());
  for (std::string_view bad :
       {std::string_view(""), std::string_view("+1 555 0100"), std::string_view("a\tb"),
        std::string_view("a\nb"), std::string_view("a\x7f"), std::string_view("a\0b", 3),
        std::string_view("\xff"), std::string_view("\xc3"), std::string_view("\xc0\xaf"),
        std::string_view("\xed\xa0\x80"), std::string_view("\xf4\x90\x80\x80"),
        std::string_view("\xc2\x85")}) {
    const Status s = CheckSubject(bad);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(s.message().find("without spaces or control characters"), std::string::npos);
  }
  const Status long_one = CheckSubject(std::string(513, 'x'));
  EXPECT_NE(long_one.message().find("got 513 bytes"), std::string::npos) << long_one.message();
}

}  // namespace
}  // namespace floodgate::service
