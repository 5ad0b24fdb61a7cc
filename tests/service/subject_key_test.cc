// OriginalOf and BuildKey (service/subjects/subject_key.h) on a fake
// request: each part's value, the client's networks of both families (the
// IPv4-mapped form as IPv4), percent-decoding, the original request behind
// a trusted proxy only, and every way a part is missing.
#include "service/subjects/subject_key.h"

#include <gtest/gtest.h>

#include <string>
#include <string_view>

#include "testing/fake_request.h"

namespace floodgate::service {
namespace {

using testing::FakeRequest;

struct KeyOptions {
  bool trusted = false;
  const JwtClaims* claims = nullptr;
};

// The key `text` builds from `request` (its peer the client), or
// "missing {part}" naming the part as written.
std::string Key(std::string_view text, const FakeRequest& request, KeyOptions options = {}) {
  Result<KeyTemplate> t = ParseKeyTemplate(text);
  EXPECT_TRUE(t.ok()) << text << ": " << t.status().ToString();
  if (!t.ok()) return "(bad template)";
  const IpAddress client = request.peer();
  const OriginalRequest original = OriginalOf(request, options.trusted);
  std::string key;
  const KeyPart* missing = BuildKey(*t, {request, client, original, options.claims}, &key);
  if (missing == nullptr) return key;
  // The part is one of the template's own, not a copy.
  EXPECT_GE(missing, t->parts.data());
  EXPECT_LT(missing, t->parts.data() + t->parts.size());
  return "missing " + missing->written;
}

std::string Ip(std::string_view text, std::string_view peer) {
  return Key(text, FakeRequest().Peer(peer));
}

TEST(SubjectKeyTest, IpIsTheClientAddressAsText) {
  EXPECT_EQ(Ip("{ip}", "203.0.113.7"), "203.0.113.7");
  // RFC 5952: lower case, no leading zeros, the longest zero run as "::".
  EXPECT_EQ(Ip("{ip}", "2001:0DB8:0000:0000:0001:0000:0000:0001"), "2001:db8::1:0:0:1");
  EXPECT_EQ(Ip("{ip}", "2001:db8::1"), "2001:db8::1");
  EXPECT_EQ(Ip("{ip}", "::1"), "::1");
  EXPECT_EQ(Ip("ip:{ip}", "198.51.100.23"), "ip:198.51.100.23");
}

TEST(SubjectKeyTest, AnIpv4MappedClientIsIpv4) {
  EXPECT_EQ(Ip("{ip}", "::ffff:203.0.113.7"), "203.0.113.7");
  EXPECT_EQ(Ip("{ip}", "::ffff:cb00:7107"), "203.0.113.7");
  EXPECT_EQ(Ip("{ip/24}", "::ffff:203.0.113.7"), "203.0.113.0/24");
  // express-rate-limit's CVE-2026-30827: mapped clients keyed as IPv6 by a
  // /56 or /64 all fall in ::ffff:0:0/96's first network, one subject for
  // every IPv4 client. Here two /24s stay two subjects under every prefix.
  for (const char* t : {"{ip}", "{ip/24}", "{ip/64}", "{ip/56}", "{ip/24,48}"}) {
    SCOPED_TRACE(t);
    const std::string a = Ip(t, "::ffff:203.0.113.7");
    const std::string b = Ip(t, "::ffff:198.51.100.7");
    EXPECT_NE(a, b);
    EXPECT_EQ(a, Ip(t, "203.0.113.7"));
    EXPECT_EQ(b, Ip(t, "198.51.100.7"));
  }
  EXPECT_EQ(Ip("{ip/64}", "::ffff:203.0.113.7"), "203.0.113.7/32");
}

TEST(SubjectKeyTest, IpPrefixesRenderTheNetwork) {
  EXPECT_EQ(Ip("{ip/24}", "203.0.113.7"), "203.0.113.0/24");
  EXPECT_EQ(Ip("{ip/16}", "203.0.113.7"), "203.0.0.0/16");
  EXPECT_EQ(Ip("{ip/1}", "203.0.113.7"), "128.0.0.0/1");
  EXPECT_EQ(Ip("{ip/32}", "203.0.113.7"), "203.0.113.7/32");
  // An IPv4 prefix keys IPv6 clients by their /64.
  EXPECT_EQ(Ip("{ip/24}", "2001:db8:1:2:3:4:5:6"), "2001:db8:1:2::/64");
  // An IPv6 prefix keys IPv4 clients by their whole address.
  EXPECT_EQ(Ip("{ip/64}", "203.0.113.7"), "203.0.113.7/32");
  EXPECT_EQ(Ip("{ip/64}", "2001:db8:1:2:3:4:5:6"), "2001:db8:1:2::/64");
  EXPECT_EQ(Ip("{ip/48}", "2001:db8:1:2:3:4:5:6"), "2001:db8:1::/48");
  EXPECT_EQ(Ip("{ip/128}", "2001:db8:1:2:3:4:5:6"), "2001:db8:1:2:3:4:5:6/128");
  // Both named.
  EXPECT_EQ(Ip("{ip/24,56}", "203.0.113.7"), "203.0.113.0/24");
  EXPECT_EQ(Ip("{ip/24,56}", "2001:db8:1:2ff:3:4:5:6"), "2001:db8:1:200::/56");
  // Two hosts of one /64 are one subject; of two /64s, two.
  EXPECT_EQ(Ip("{ip/24}", "2001:db8:1:2::1"), Ip("{ip/24}", "2001:db8:1:2:ffff::9"));
  EXPECT_NE(Ip("{ip/24}", "2001:db8:1:2::1"), Ip("{ip/24}", "2001:db8:1:3::1"));
}

TEST(SubjectKeyTest, HeaderIsTheFirstFieldOfThatNameWithoutCase) {
  FakeRequest r;
  r.Add("X-API-Key", "k1").Add("x-api-key", "k2").Add("Other", "o");
  EXPECT_EQ(Key("{header:x-api-key}", r), "k1");
  EXPECT_EQ(Key("{header:X-Api-KEY}", r), "k1");
  EXPECT_EQ(Key("key:{header:other}", r), "key:o");
  EXPECT_EQ(Key("{header:x-missing}", r), "missing {header:x-missing}");
  // An empty first field is missing: the second is not read.
  EXPECT_EQ(Key("{header:x}", FakeRequest().Add("X", "").Add("X", "v")), "missing {header:x}");
}

TEST(SubjectKeyTest, CookieAmongSeveralCookiesAndFields) {
  FakeRequest r;
  r.Add("Cookie", "theme=dark; sidx=1;sid=abc ; lang=en").Add("Cookie", "sid=later");
  EXPECT_EQ(Key("{cookie:sid}", r), "abc");
  EXPECT_EQ(Key("{cookie:theme}", r), "dark");
  EXPECT_EQ(Key("{cookie:lang}", r), "en");
  EXPECT_EQ(Key("{cookie:sidx}", r), "1");
  // Names compare with case (RFC 6265).
  EXPECT_EQ(Key("{cookie:SID}", r), "missing {cookie:SID}");
  EXPECT_EQ(Key("{cookie:nope}", r), "missing {cookie:nope}");
  // In a later field when the first has none.
  EXPECT_EQ(Key("{cookie:sid}", FakeRequest().Add("Cookie", "a=1").Add("cookie", "b=2; sid=s2")),
            "s2");
  // A quoted value loses its quotes; a value may hold '='.
  EXPECT_EQ(Key("{cookie:sid}", FakeRequest().Add("Cookie", "sid=\"q v\"")), "q v");
  EXPECT_EQ(Key("{cookie:sid}", FakeRequest().Add("Cookie", "sid=a=b")), "a=b");
  // Empty, or quotes around nothing: missing.
  EXPECT_EQ(Key("{cookie:sid}", FakeRequest().Add("Cookie", "sid=; sid=x")),
            "missing {cookie:sid}");
  EXPECT_EQ(Key("{cookie:sid}", FakeRequest().Add("Cookie", "sid=\"\"")), "missing {cookie:sid}");
  EXPECT_EQ(Key("{cookie:sid}", FakeRequest().Add("Cookie", "sid")), "missing {cookie:sid}");
  EXPECT_EQ(Key("{cookie:sid}", FakeRequest()), "missing {cookie:sid}");
}

FakeRequest Target(std::string target) { return FakeRequest().Target(std::move(target)); }

TEST(SubjectKeyTest, QueryIsPercentDecoded) {
  EXPECT_EQ(Key("{query:q}", Target("/s?q=a%20b+c%2Bd")), "a b c+d");
  EXPECT_EQ(Key("{query:q}", Target("/s?x=1&q=two&q=three")), "two");  // the first
  EXPECT_EQ(Key("{query:q}", Target("/s?qq=1&q=2")), "2");
  EXPECT_EQ(Key("{query:q}", Target("/s?%71=named")), "named");  // the name decoded too
  EXPECT_EQ(Key("{query:q}", Target("/s?q=%E2%82%AC")), "\xe2\x82\xac");
  EXPECT_EQ(Key("{query:q}", Target("/s?q=%e2%82%ac")), "\xe2\x82\xac");
  EXPECT_EQ(Key("{query:q}", Target("/s?q=a=b")), "a=b");
  EXPECT_EQ(Key("{query:q}", Target("/s?x=1")), "missing {query:q}");
  EXPECT_EQ(Key("{query:q}", Target("/s")), "missing {query:q}");
  EXPECT_EQ(Key("{query:q}", Target("/s?")), "missing {query:q}");
  EXPECT_EQ(Key("{query:q}", Target("/s?q")), "missing {query:q}");
  EXPECT_EQ(Key("{query:q}", Target("/s?q=")), "missing {query:q}");
  EXPECT_EQ(Key("{query:q}", Target("/s?q=&q=x")), "missing {query:q}");
}

TEST(SubjectKeyTest, ABadEscapeIsMissing) {
  for (const char* target : {"/s?q=%zz", "/s?q=%2", "/s?q=%", "/s?q=a%2", "/s?q=%g0"}) {
    EXPECT_EQ(Key("{query:q}", Target(target)), "missing {query:q}") << target;
  }
  EXPECT_EQ(Key("{query:q}", Target("/s?q=%41")), "A");  // an escape at the very end
  EXPECT_EQ(Key("{path:1}", Target("/%zz")), "missing {path:1}");
  EXPECT_EQ(Key("{path:1}", Target("/a%4")), "missing {path:1}");
  EXPECT_EQ(Key("{path:1}", Target("/a%41")), "aA");
}

TEST(SubjectKeyTest, PathSegments) {
  const FakeRequest r = Target("//users///ana%20b/orders/?x=/a/b");
  EXPECT_EQ(Key("{path:1}", r), "users");
  EXPECT_EQ(Key("{path:2}", r), "ana b");
  EXPECT_EQ(Key("{path:3}", r), "orders");
  EXPECT_EQ(Key("{path:4}", r), "missing {path:4}");  // the query is not the path
  EXPECT_EQ(Key("{path:32}", r), "missing {path:32}");
  // '+' is a space in a query only; an encoded '/' is part of its segment.
  EXPECT_EQ(Key("{path:1}", Target("/a+b")), "a+b");
  EXPECT_EQ(Key("{path:1}", Target("/a%2Fb/c")), "a/b");
  EXPECT_EQ(Key("{path:2}", Target("/a%2Fb/c")), "c");
  EXPECT_EQ(Key("{path:1}", Target("/")), "missing {path:1}");
  EXPECT_EQ(Key("{path:1}", Target("")), "missing {path:1}");
  EXPECT_EQ(Key("{path:2}", Target("/a")), "missing {path:2}");
  EXPECT_EQ(Key("{path:1}-{path:2}", Target("/v1/check")), "v1-check");
}

TEST(SubjectKeyTest, Method) {
  EXPECT_EQ(Key("{method}", FakeRequest().Method("POST")), "POST");
  EXPECT_EQ(Key("m:{method}", FakeRequest()), "m:GET");
  EXPECT_EQ(Key("{method}", FakeRequest().Method("")), "missing {method}");
}

FakeRequest Host(std::string host) { return FakeRequest().Add("Host", std::move(host)); }

TEST(SubjectKeyTest, HostIsLowerCasedWithoutItsPort) {
  EXPECT_EQ(Key("{host}", Host("Example.COM")), "example.com");
  EXPECT_EQ(Key("{host}", Host("Example.COM:8080")), "example.com");
  EXPECT_EQ(Key("{host}", Host("203.0.113.7:80")), "203.0.113.7");
  // An IPv6 literal keeps its brackets and loses its port.
  EXPECT_EQ(Key("{host}", Host("[2001:DB8::1]:443")), "[2001:db8::1]");
  EXPECT_EQ(Key("{host}", Host("[2001:db8::1]")), "[2001:db8::1]");
  EXPECT_EQ(Key("{host}", Host("[2001:db8::1")), "missing {host}");
  EXPECT_EQ(Key("{host}", Host(":8080")), "missing {host}");
  EXPECT_EQ(Key("{host}", Host("")), "missing {host}");
  EXPECT_EQ(Key("{host}", FakeRequest()), "missing {host}");
}

TEST(SubjectKeyTest, ControlBytesAreMissing) {
  EXPECT_EQ(Key("{query:q}", Target("/s?q=a%00b")), "missing {query:q}");
  EXPECT_EQ(Key("{query:q}", Target("/s?q=a%0ab")), "missing {query:q}");
  EXPECT_EQ(Key("{query:q}", Target("/s?q=a%0Db")), "missing {query:q}");
  EXPECT_EQ(Key("{query:q}", Target("/s?q=%7f")), "missing {query:q}");
  EXPECT_EQ(Key("{query:q}", Target("/s?q=%1f")), "missing {query:q}");
  EXPECT_EQ(Key("{query:q}", Target("/s?q=%20")), " ");  // a space is no control byte
  EXPECT_EQ(Key("{path:1}", Target("/a%00")), "missing {path:1}");
  EXPECT_EQ(Key("{path:1}", Target("/a%0a")), "missing {path:1}");
  EXPECT_EQ(Key("{header:x}", FakeRequest().Add("X", std::string("a\0b", 3))),
            "missing {header:x}");
  EXPECT_EQ(Key("{header:x}", FakeRequest().Add("X", "a\tb")), "missing {header:x}");
  EXPECT_EQ(Key("{header:x}", FakeRequest().Add("X", "a\x7f")), "missing {header:x}");
  EXPECT_EQ(Key("{cookie:c}", FakeRequest().Add("Cookie", "c=a\x01")), "missing {cookie:c}");
  // Bytes past 0x7f are not control bytes: a key is opaque.
  EXPECT_EQ(Key("{header:x}", FakeRequest().Add("X", "caf\xc3\xa9")), "caf\xc3\xa9");
}

TEST(SubjectKeyTest, TheFirstMissingPartIsNamed) {
  FakeRequest r;
  r.Add("X-A", "a");
  EXPECT_EQ(Key("{header:x-a}:{header:x-b}:{header:x-c}", r), "missing {header:x-b}");
  EXPECT_EQ(Key("{header:x-c}:{header:x-a}", r), "missing {header:x-c}");
  // The template names the header as written, the lookup lower-cased.
  EXPECT_EQ(Key("{header:X-B}", r), "missing {header:X-B}");
}

FakeRequest Proxied() {
  FakeRequest r;
  r.Method("POST")
      .Target("/v1/check?rule=api")
      .Add("Host", "floodgate.internal:8080")
      .Add("X-Original-Method", "DELETE")
      .Add("X-Original-URI", "/users/ana/posts?page=3")
      .Add("X-Original-Host", "Api.Example.com");
  return r;
}

TEST(SubjectKeyTest, OriginalOfATrustedProxyIsItsXOriginalFields) {
  const FakeRequest r = Proxied();
  const OriginalRequest original = OriginalOf(r, true);
  EXPECT_EQ(original.method, "DELETE");
  EXPECT_EQ(original.path, "/users/ana/posts");
  EXPECT_EQ(original.query, "page=3");
  EXPECT_EQ(original.host, "Api.Example.com");
  EXPECT_EQ(Key("{method} {host} {path:2} {query:page}", r, {.trusted = true}),
            "DELETE api.example.com ana 3");
}

TEST(SubjectKeyTest, XOriginalFieldsOfAnyoneElseAreNotRead) {
  const FakeRequest r = Proxied();
  const OriginalRequest original = OriginalOf(r, false);
  EXPECT_EQ(original.method, "POST");
  EXPECT_EQ(original.path, "/v1/check");
  EXPECT_EQ(original.query, "rule=api");
  EXPECT_EQ(original.host, "floodgate.internal:8080");
  EXPECT_EQ(Key("{method} {host} {path:2} {query:rule}", r), "POST floodgate.internal check api");
  EXPECT_EQ(Key("{query:page}", r), "missing {query:page}");
}

TEST(SubjectKeyTest, EachXOriginalFieldStandsInWhenPresent) {
  FakeRequest r;
  r.Method("GET")
      .Target("/own/path?a=1")
      .Add("Host", "own.example")
      .Add("X-Original-URI", "/o?b=2");
  const OriginalRequest original = OriginalOf(r, true);
  EXPECT_EQ(original.method, "GET");
  EXPECT_EQ(original.path, "/o");
  EXPECT_EQ(original.query, "b=2");
  EXPECT_EQ(original.host, "own.example");
  // An empty field stands for nothing.
  FakeRequest empty;
  empty.Method("PUT").Add("X-Original-Method", "").Add("X-Original-Host", "");
  empty.Add("Host", "h");
  EXPECT_EQ(OriginalOf(empty, true).method, "PUT");
  EXPECT_EQ(OriginalOf(empty, true).host, "h");
}

// The original path and query of a request with `target`, as "path ? query"
// (OriginalOf's views die with the request).
std::string PathAndQuery(std::string target) {
  const FakeRequest r = Target(std::move(target));
  const OriginalRequest o = OriginalOf(r, false);
  return std::string(o.path) + " ? " + std::string(o.query);
}

TEST(SubjectKeyTest, AnAbsoluteFormTargetIsReadFromItsPath) {
  EXPECT_EQ(PathAndQuery("http://api.example.com:8080/a/b?q=1"), "/a/b ? q=1");
  EXPECT_EQ(PathAndQuery("https://api.example.com"), "/ ? ");
  EXPECT_EQ(PathAndQuery("https://api.example.com/"), "/ ? ");
  // Behind a proxy that passes the request line on as it came.
  FakeRequest r;
  r.Add("X-Original-URI", "https://api.example.com/users/ana?page=2");
  EXPECT_EQ(Key("{path:1}/{path:2}/{query:page}", r, {.trusted = true}), "users/ana/2");
  // "://" in a query of an origin-form target is not a scheme.
  EXPECT_EQ(PathAndQuery("/go?to=http://x.example/y"), "/go ? to=http://x.example/y");
  EXPECT_EQ(PathAndQuery("/a/b"), "/a/b ? ");
}

// An absolute URI's path may be empty with a query after the authority
// (RFC 3986 section 3): the query is the query, and a '/' in it is no path.
TEST(SubjectKeyTest, AnAbsoluteFormTargetWithAnEmptyPathKeepsItsQuery) {
  EXPECT_EQ(PathAndQuery("http://api.example.com?q=1"), "/ ? q=1");
  EXPECT_EQ(PathAndQuery("http://api.example.com?next=/a/b"), "/ ? next=/a/b");
  EXPECT_EQ(Key("{path:1}", Target("http://h?next=/admin")), "missing {path:1}");
  EXPECT_EQ(Key("{query:next}", Target("http://h?next=/admin")), "/admin");
  // A "://" after a '?' is in a query, not after a scheme.
  EXPECT_EQ(PathAndQuery("?to=http://x.example/y"), " ? to=http://x.example/y");
}

TEST(SubjectKeyTest, JwtClaims) {
  const JwtClaims claims = {{"sub", "ana"},
                            {"tenant", "acme"},
                            {"n", "7"},
                            {"empty", ""},
                            {"nul", std::string("a\0b", 3)}};
  const FakeRequest r;
  EXPECT_EQ(Key("{jwt:sub}", r, {.claims = &claims}), "ana");
  EXPECT_EQ(Key("{jwt:tenant}/{jwt:sub}/{jwt:n}", r, {.claims = &claims}), "acme/ana/7");
  EXPECT_EQ(Key("{jwt:role}", r, {.claims = &claims}), "missing {jwt:role}");
  EXPECT_EQ(Key("{jwt:empty}", r, {.claims = &claims}), "missing {jwt:empty}");
  EXPECT_EQ(Key("{jwt:nul}", r, {.claims = &claims}), "missing {jwt:nul}");
  EXPECT_EQ(Key("{jwt:Sub}", r, {.claims = &claims}), "missing {jwt:Sub}");  // with case
  // No verified token: every claim is missing.
  EXPECT_EQ(Key("{jwt:sub}", r), "missing {jwt:sub}");
  EXPECT_EQ(Key("{ip}:{jwt:sub}", r), "missing {jwt:sub}");
}

TEST(SubjectKeyTest, KeysAreAppended) {
  const KeyTemplate t = ParseKeyTemplate("{method}:{path:1}").value();
  const FakeRequest r = Target("/a");
  const IpAddress client = r.peer();
  const OriginalRequest original = OriginalOf(r, false);
  std::string key = "prefix|";
  EXPECT_EQ(BuildKey(t, {r, client, original, nullptr}, &key), nullptr);
  EXPECT_EQ(key, "prefix|GET:a");
  // Missing: the key so far stays, and the answer is the part.
  const KeyTemplate m = ParseKeyTemplate("{method}:{path:2}").value();
  key.clear();
  EXPECT_EQ(BuildKey(m, {r, client, original, nullptr}, &key), &m.parts[2]);
  EXPECT_EQ(key, "GET:");
}

TEST(SubjectKeyTest, TheClientIsTheOneGivenNotThePeer) {
  const KeyTemplate t = ParseKeyTemplate("{ip}|{ip/24}").value();
  const FakeRequest r = FakeRequest().Peer("10.0.0.1");
  const IpAddress client = IpAddress::Parse("198.51.100.9").value();
  const OriginalRequest original = OriginalOf(r, true);
  std::string key;
  EXPECT_EQ(BuildKey(t, {r, client, original, nullptr}, &key), nullptr);
  EXPECT_EQ(key, "198.51.100.9|198.51.100.0/24");
}

}  // namespace
}  // namespace floodgate::service
