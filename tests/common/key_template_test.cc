// ParseKeyTemplate (common/key_template.h): every part kind and its fields,
// literals between parts, the {ip/N} prefixes at each edge of their ranges,
// and every refusal, its message naming the part as written.
#include "common/key_template.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace floodgate {
namespace {

KeyTemplate Must(std::string_view text) {
  Result<KeyTemplate> t = ParseKeyTemplate(text);
  EXPECT_TRUE(t.ok()) << text << ": " << t.status().ToString();
  return t.ok() ? *std::move(t) : KeyTemplate{};
}

// The one part of a template made of one part.
KeyPart One(std::string_view text) {
  const KeyTemplate t = Must(text);
  EXPECT_EQ(t.parts.size(), 1u) << text;
  return t.parts.empty() ? KeyPart{} : t.parts[0];
}

// The message `text` is refused with; "(accepted)" when it is not.
std::string Error(std::string_view text) {
  Result<KeyTemplate> t = ParseKeyTemplate(text);
  if (t.ok()) return "(accepted)";
  EXPECT_EQ(t.status().code(), StatusCode::kInvalidArgument) << text;
  return t.status().message();
}

constexpr char kUnknownPart[] =
    "unknown part; expected {ip}, {ip/N}, {header:NAME}, {cookie:NAME}, {query:NAME}, {path:N}, "
    "{method}, {host} or {jwt:CLAIM}";
constexpr char kExpectedPrefix[] =
    "expected a prefix length: {ip/24}, {ip/64} or {ip/24,64} (IPv4, IPv6)";

TEST(KeyTemplateTest, EachKindWithItsFields) {
  const KeyPart ip = One("{ip}");
  EXPECT_EQ(ip.kind, KeyPartKind::kIp);
  EXPECT_FALSE(ip.masked);
  EXPECT_EQ(ip.v4_prefix, 32);
  EXPECT_EQ(ip.v6_prefix, 128);
  EXPECT_EQ(ip.written, "{ip}");

  const KeyPart header = One("{header:x-api-key}");
  EXPECT_EQ(header.kind, KeyPartKind::kHeader);
  EXPECT_EQ(header.text, "x-api-key");
  EXPECT_EQ(header.written, "{header:x-api-key}");

  const KeyPart cookie = One("{cookie:sid}");
  EXPECT_EQ(cookie.kind, KeyPartKind::kCookie);
  EXPECT_EQ(cookie.text, "sid");

  const KeyPart query = One("{query:q}");
  EXPECT_EQ(query.kind, KeyPartKind::kQuery);
  EXPECT_EQ(query.text, "q");

  const KeyPart path = One("{path:2}");
  EXPECT_EQ(path.kind, KeyPartKind::kPath);
  EXPECT_EQ(path.index, 2);
  EXPECT_EQ(path.written, "{path:2}");

  const KeyPart method = One("{method}");
  EXPECT_EQ(method.kind, KeyPartKind::kMethod);
  EXPECT_EQ(method.written, "{method}");

  const KeyPart host = One("{host}");
  EXPECT_EQ(host.kind, KeyPartKind::kHost);

  const KeyPart jwt = One("{jwt:sub}");
  EXPECT_EQ(jwt.kind, KeyPartKind::kJwt);
  EXPECT_EQ(jwt.text, "sub");
  EXPECT_EQ(jwt.written, "{jwt:sub}");
}

TEST(KeyTemplateTest, LiteralsBetweenParts) {
  const KeyTemplate t = Must("user:{jwt:sub}/{method}-x");
  EXPECT_EQ(t.text, "user:{jwt:sub}/{method}-x");
  ASSERT_EQ(t.parts.size(), 5u);
  EXPECT_EQ(t.parts[0].kind, KeyPartKind::kLiteral);
  EXPECT_EQ(t.parts[0].text, "user:");
  EXPECT_EQ(t.parts[0].written, "user:");
  EXPECT_EQ(t.parts[1].kind, KeyPartKind::kJwt);
  EXPECT_EQ(t.parts[2].kind, KeyPartKind::kLiteral);
  EXPECT_EQ(t.parts[2].text, "/");
  EXPECT_EQ(t.parts[3].kind, KeyPartKind::kMethod);
  EXPECT_EQ(t.parts[4].kind, KeyPartKind::kLiteral);
  EXPECT_EQ(t.parts[4].text, "-x");
  // The trailing literal is cut where the template ends.
  const KeyTemplate trailing = Must("{method}-x");
  ASSERT_EQ(trailing.parts.size(), 2u);
  EXPECT_EQ(trailing.parts[1].text, "-x");
  // Two parts back to back have no literal between them.
  const KeyTemplate adjacent = Must("{method}{host}");
  ASSERT_EQ(adjacent.parts.size(), 2u);
  EXPECT_EQ(adjacent.parts[0].kind, KeyPartKind::kMethod);
  EXPECT_EQ(adjacent.parts[1].kind, KeyPartKind::kHost);
}

TEST(KeyTemplateTest, ATemplateOfLiteralsAloneIsOneSubject) {
  const KeyTemplate t = Must("everyone");
  ASSERT_EQ(t.parts.size(), 1u);
  EXPECT_EQ(t.parts[0].kind, KeyPartKind::kLiteral);
  EXPECT_EQ(t.parts[0].text, "everyone");
  EXPECT_FALSE(t.from_request());
  EXPECT_FALSE(t.uses_jwt());
}

TEST(KeyTemplateTest, UsesJwtAndFromRequest) {
  EXPECT_TRUE(Must("{ip}").from_request());
  EXPECT_FALSE(Must("{ip}").uses_jwt());
  EXPECT_TRUE(Must("a:{jwt:sub}").uses_jwt());
  EXPECT_TRUE(Must("a:{jwt:sub}").from_request());
  EXPECT_TRUE(Must("{ip}{jwt:tenant}").uses_jwt());
  EXPECT_TRUE(Must("x{method}").from_request());
  EXPECT_FALSE(Must("jwt:sub").uses_jwt());  // no braces: a literal
  EXPECT_FALSE(Must("jwt:sub").from_request());
}

TEST(KeyTemplateTest, IpPrefixes) {
  struct Case {
    const char* text;
    int v4;
    int v6;
  };
  for (const Case& c : std::vector<Case>{
           {"{ip/24}", 24, 64},  // an IPv4 prefix: IPv6 clients by their /64
           {"{ip/1}", 1, 64},
           {"{ip/32}", 32, 64},
           {"{ip/64}", 32, 64},  // an IPv6 prefix: IPv4 clients whole
           {"{ip/48}", 32, 48},
           {"{ip/36}", 32, 36},
           {"{ip/56}", 32, 56},
           {"{ip/128}", 32, 128},
           {"{ip/24,56}", 24, 56},  // both named
           {"{ip/1,1}", 1, 1},
           {"{ip/32,128}", 32, 128},
           {"{ip/16,33}", 16, 33},  // named as IPv6: any length is meant
       }) {
    SCOPED_TRACE(c.text);
    const KeyPart p = One(c.text);
    EXPECT_EQ(p.kind, KeyPartKind::kIp);
    EXPECT_TRUE(p.masked);
    EXPECT_EQ(p.v4_prefix, c.v4);
    EXPECT_EQ(p.v6_prefix, c.v6);
    EXPECT_EQ(p.written, c.text);
  }
}

TEST(KeyTemplateTest, IpPrefixRefusalsNameThePart) {
  EXPECT_EQ(Error("{ip/0}"), std::string("'{ip/0}': ") + kExpectedPrefix);
  EXPECT_EQ(Error("{ip/33}"),
            "'{ip/33}': 33 is past 32 for IPv4, and an IPv6 prefix here is a multiple of 4 (48, "
            "56, 64); write {ip/V4,V6} to name both");
  EXPECT_EQ(Error("{ip/50}"),
            "'{ip/50}': 50 is past 32 for IPv4, and an IPv6 prefix here is a multiple of 4 (48, "
            "56, 64); write {ip/V4,V6} to name both");
  EXPECT_EQ(Error("{ip/127}"),
            "'{ip/127}': 127 is past 32 for IPv4, and an IPv6 prefix here is a multiple of 4 (48, "
            "56, 64); write {ip/V4,V6} to name both");
  EXPECT_EQ(Error("{ip/129}"), "'{ip/129}': 129 is past 128, IPv6's longest prefix");
  EXPECT_EQ(Error("{ip/130}"), "'{ip/130}': 130 is past 128, IPv6's longest prefix");
  EXPECT_EQ(Error("{ip/999}"), "'{ip/999}': 999 is past 128, IPv6's longest prefix");
  EXPECT_EQ(Error("{ip/1000}"), std::string("'{ip/1000}': ") + kExpectedPrefix);
  EXPECT_EQ(Error("{ip/024}"), std::string("'{ip/024}': ") + kExpectedPrefix);
  EXPECT_EQ(Error("{ip/}"), std::string("'{ip/}': ") + kExpectedPrefix);
  EXPECT_EQ(Error("{ip/x}"), std::string("'{ip/x}': ") + kExpectedPrefix);
  EXPECT_EQ(Error("{ip/24 }"), std::string("'{ip/24 }': ") + kExpectedPrefix);
  EXPECT_EQ(Error("{ip/+24}"), std::string("'{ip/+24}': ") + kExpectedPrefix);
  EXPECT_EQ(Error("{ip/24,129}"), "'{ip/24,129}': the IPv6 prefix must be a length from 1 to 128");
  EXPECT_EQ(Error("{ip/24,0}"), "'{ip/24,0}': the IPv6 prefix must be a length from 1 to 128");
  EXPECT_EQ(Error("{ip/24,}"), "'{ip/24,}': the IPv6 prefix must be a length from 1 to 128");
  EXPECT_EQ(Error("{ip/24,64,1}"),
            "'{ip/24,64,1}': the IPv6 prefix must be a length from 1 to 128");
  EXPECT_EQ(Error("{ip/33,64}"), "'{ip/33,64}': the IPv4 prefix must be a length from 1 to 32");
  EXPECT_EQ(Error("{ip/0,64}"), "'{ip/0,64}': the IPv4 prefix must be a length from 1 to 32");
  EXPECT_EQ(Error("{ip/,64}"), "'{ip/,64}': the IPv4 prefix must be a length from 1 to 32");
}

// A sign is not a digit: "-1" must not pass for a length (every request's
// {ip/-1} would be missing, and the config would have passed check-config).
TEST(KeyTemplateTest, NegativeNumbersAreRefused) {
  EXPECT_EQ(Error("{ip/-1}"), std::string("'{ip/-1}': ") + kExpectedPrefix);
  EXPECT_EQ(Error("{ip/-24}"), std::string("'{ip/-24}': ") + kExpectedPrefix);
  EXPECT_EQ(Error("{ip/-8,64}"), "'{ip/-8,64}': the IPv4 prefix must be a length from 1 to 32");
  EXPECT_EQ(Error("{ip/24,-64}"), "'{ip/24,-64}': the IPv6 prefix must be a length from 1 to 128");
  EXPECT_EQ(Error("{path:-1}"), "'{path:-1}': a path segment is a number from 1 to 32");
}

TEST(KeyTemplateTest, PathSegments) {
  EXPECT_EQ(One("{path:1}").index, 1);
  EXPECT_EQ(One("{path:32}").index, 32);
  EXPECT_EQ(Error("{path:0}"), "'{path:0}': a path segment is a number from 1 to 32");
  EXPECT_EQ(Error("{path:33}"), "'{path:33}': a path segment is a number from 1 to 32");
  EXPECT_EQ(Error("{path:01}"), "'{path:01}': a path segment is a number from 1 to 32");
  EXPECT_EQ(Error("{path:a}"), "'{path:a}': a path segment is a number from 1 to 32");
  EXPECT_EQ(Error("{path:}"), "'{path:}': 'path' needs a name: {path:1}");
  EXPECT_EQ(Error("{path}"), "'{path}': 'path' needs a name: {path:1}");
}

TEST(KeyTemplateTest, UnknownAndNamelessParts) {
  EXPECT_EQ(Error("{nope}"), std::string("'{nope}': ") + kUnknownPart);
  EXPECT_EQ(Error("{}"), std::string("'{}': ") + kUnknownPart);
  EXPECT_EQ(Error("{IP}"), std::string("'{IP}': ") + kUnknownPart);
  EXPECT_EQ(Error("{Header:x}"), std::string("'{Header:x}': ") + kUnknownPart);
  EXPECT_EQ(Error("{ip:24}"), std::string("'{ip:24}': ") + kUnknownPart);
  EXPECT_EQ(Error("{method:x}"), std::string("'{method:x}': ") + kUnknownPart);
  EXPECT_EQ(Error("{ header:x}"), std::string("'{ header:x}': ") + kUnknownPart);
  EXPECT_EQ(Error("a{nope}b"), std::string("'{nope}': ") + kUnknownPart);
  EXPECT_EQ(Error("{header:}"), "'{header:}': 'header' needs a name: {header:NAME}");
  EXPECT_EQ(Error("{header}"), "'{header}': 'header' needs a name: {header:NAME}");
  EXPECT_EQ(Error("{cookie:}"), "'{cookie:}': 'cookie' needs a name: {cookie:NAME}");
  EXPECT_EQ(Error("{query:}"), "'{query:}': 'query' needs a name: {query:NAME}");
  EXPECT_EQ(Error("{jwt:}"), "'{jwt:}': 'jwt' needs a name: {jwt:NAME}");
}

TEST(KeyTemplateTest, Names) {
  const std::string bad_name = "a name is made of A-Z, a-z, 0-9, '-', '_', '.' and ':'";
  EXPECT_EQ(Error("{header:a b}"), "'{header:a b}': " + bad_name);
  EXPECT_EQ(Error("{cookie:a;b}"), "'{cookie:a;b}': " + bad_name);
  EXPECT_EQ(Error("{query:a=b}"), "'{query:a=b}': " + bad_name);
  EXPECT_EQ(Error("{jwt:https://x}"), "'{jwt:https://x}': " + bad_name);
  EXPECT_EQ(Error("{header:\xc3\xa9}"), "'{header:\xc3\xa9}': " + bad_name);
  // Every allowed character, and a ':' within the name (a namespaced claim).
  EXPECT_EQ(One("{jwt:org:tenant-id_2.x}").text, "org:tenant-id_2.x");
  // 64 bytes, then 65.
  const std::string n64(64, 'n');
  EXPECT_EQ(One("{query:" + n64 + "}").text, n64);
  const std::string p65 = "{query:" + std::string(65, 'n') + "}";
  EXPECT_EQ(Error(p65), "'" + p65.substr(0, 64) + "...': a name is at most 64 bytes");
}

TEST(KeyTemplateTest, HeaderNamesAreLowerCasedOthersKeptAsWritten) {
  const KeyPart header = One("{header:X-API-Key}");
  EXPECT_EQ(header.text, "x-api-key");
  EXPECT_EQ(header.written, "{header:X-API-Key}");  // messages show it as written
  EXPECT_EQ(One("{cookie:SID}").text, "SID");
  EXPECT_EQ(One("{query:Page}").text, "Page");
  EXPECT_EQ(One("{jwt:Sub}").text, "Sub");
}

TEST(KeyTemplateTest, UnbalancedAndNestedBraces) {
  EXPECT_EQ(Error("{ip"), "'{ip': a '{' is not closed by '}'");
  EXPECT_EQ(Error("{"), "'{': a '{' is not closed by '}'");
  EXPECT_EQ(Error("a{ip}{"), "'a{ip}{': a '{' is not closed by '}'");
  EXPECT_EQ(Error("ip}"), "'ip}': a '}' closes no part (a '{' opens every part)");
  EXPECT_EQ(Error("}"), "'}': a '}' closes no part (a '{' opens every part)");
  EXPECT_EQ(Error("{ip}}"), "'{ip}}': a '}' closes no part (a '{' opens every part)");
  EXPECT_EQ(Error("{{ip}}"), "'{{ip}}': a '{' is not closed by '}'");
  EXPECT_EQ(Error("{ip{method}}"), "'{ip{method}}': a '{' is not closed by '}'");
}

TEST(KeyTemplateTest, AtMostEightParts) {
  const std::string eight = "{ip}:{method}:{host}:{path:1}:{path:2}:{query:a}:{header:b}:{jwt:c}";
  const KeyTemplate t = Must(eight);
  EXPECT_EQ(t.parts.size(), 15u);  // 8 parts and 7 literals: literals do not count
  const std::vector<KeyPartKind> kinds = {
      KeyPartKind::kIp,   KeyPartKind::kMethod, KeyPartKind::kHost,   KeyPartKind::kPath,
      KeyPartKind::kPath, KeyPartKind::kQuery,  KeyPartKind::kHeader, KeyPartKind::kJwt};
  for (size_t i = 0; i < kinds.size(); ++i) EXPECT_EQ(t.parts[2 * i].kind, kinds[i]) << i;
  const std::string nine = eight + "{cookie:d}";
  EXPECT_EQ(Error(nine), "'" + nine.substr(0, 64) + "...': more than 8 parts");
  EXPECT_EQ(Error("{ip}{ip}{ip}{ip}{ip}{ip}{ip}{ip}{ip}"),
            "'{ip}{ip}{ip}{ip}{ip}{ip}{ip}{ip}{ip}': more than 8 parts");
  EXPECT_EQ(Must("{ip}{ip}{ip}{ip}{ip}{ip}{ip}{ip}").parts.size(), 8u);
}

TEST(KeyTemplateTest, AtMost256Bytes) {
  const std::string at_bound = "{ip}" + std::string(kMaxTemplateBytes - 4, 'x');
  ASSERT_EQ(at_bound.size(), 256u);
  const KeyTemplate t = Must(at_bound);
  ASSERT_EQ(t.parts.size(), 2u);
  EXPECT_EQ(t.parts[1].text.size(), 252u);
  EXPECT_EQ(Error(at_bound + "x"), "a key template is at most 256 bytes");
  EXPECT_EQ(Error(std::string(257, 'x')), "a key template is at most 256 bytes");
}

TEST(KeyTemplateTest, EmptyIsRefused) { EXPECT_EQ(Error(""), "a key template is not empty"); }

TEST(KeyTemplateTest, ControlBytesInMessagesAreEscaped) {
  EXPECT_EQ(Error("{no\npe}"), std::string("'{no\\x0ape}': ") + kUnknownPart);
  EXPECT_EQ(Error("{it's}"), std::string("'{it\\'s}': ") + kUnknownPart);
}

}  // namespace
}  // namespace floodgate
