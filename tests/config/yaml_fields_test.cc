// The shared readers (config/yaml_fields.h) on their own: each reader's
// exact edges and messages, on one "key: value" entry.
#include "config/yaml_fields.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

namespace floodgate::config {
namespace {

using ::testing::ElementsAre;

// The one entry of a one-line map, as a section's ForEachEntry hands it over.
struct Entry {
  YAML::Node key, value;
};
Entry One(const std::string& yaml) {
  const YAML::Node root = YAML::Load(yaml);
  for (const auto& e : root) return {e.first, e.second};
  return {};
}

// The reader's error message, or "(accepted)".
template <typename T>
std::string Message(const Result<T>& r) {
  return r.ok() ? "(accepted)" : r.status().message();
}

const Fields kFields("f.yaml");

TEST(YamlFieldsTest, PositionAndFail) {
  EXPECT_EQ(kFields.Position(YAML::Mark()), "f.yaml:1:1");
  const Entry e = One("a:\n  b: c\n");
  EXPECT_EQ(kFields.Position(e.value.Mark()), "f.yaml:2:3");
  EXPECT_EQ(kFields.Fail(e.key.Mark(), "what", "text").message(), "f.yaml:1:1: what (near 'text')");
  // An empty value's mark points past it: the error points at the key.
  const Entry empty = One("\nk:\n");
  EXPECT_EQ(kFields.FailAt(empty.key, empty.value, "w", "n").message(), "f.yaml:2:1: w (near 'n')");
  // Near cuts long text at 64 bytes.
  EXPECT_EQ(Near(std::string(100, 'x')).size(), Near(std::string(64, 'x')).size() + 3);
}

TEST(YamlFieldsTest, ParseIntEdges) {
  EXPECT_EQ(ParseInt("9223372036854775807"), INT64_MAX);
  EXPECT_EQ(ParseInt("9223372036854775808"), std::nullopt);
  EXPECT_EQ(ParseInt("-9223372036854775807"), -INT64_MAX);
  EXPECT_EQ(ParseInt("+5"), 5);
  for (const char* bad : {"", "-", "+", "1.5", "1e3", " 1", "0x10"}) {
    EXPECT_EQ(ParseInt(bad), std::nullopt) << bad;
  }
}

TEST(YamlFieldsTest, DurationText) {
  EXPECT_EQ(DurationText(366 * kDayMs), "366d");
  EXPECT_EQ(DurationText(3'600'000), "1h");
  EXPECT_EQ(DurationText(90'000), "90s");
  EXPECT_EQ(DurationText(1500), "1500ms");
  EXPECT_EQ(DurationText(0), "0ms");
}

TEST(YamlFieldsTest, IntBounds) {
  EXPECT_EQ(*kFields.Int(One("n: 4").key, One("n: 4").value, "n", 4, 10), 4);
  EXPECT_EQ(*kFields.Int(One("n: 10").key, One("n: 10").value, "n", 4, 10), 10);
  const Entry low = One("n: 3");
  EXPECT_EQ(Message(kFields.Int(low.key, low.value, "s.n", 4, 10)),
            "f.yaml:1:4: 's.n' must be an integer between 4 and 10 (near '3')");
  const Entry big = One("n: -1");
  EXPECT_EQ(Message(kFields.Int(big.key, big.value, "n", 0, INT64_MAX)),
            "f.yaml:1:4: 'n' must be an integer >= 0 (near '-1')");
  const Entry list = One("n: [1]");
  EXPECT_EQ(Message(kFields.Int(list.key, list.value, "n", 0, 1)),
            "f.yaml:1:4: 'n' must be an integer, not a list (near 'n')");
}

TEST(YamlFieldsTest, DurationEdges) {
  const Entry ms999 = One("t: 999ms");
  EXPECT_EQ(Message(kFields.Duration(ms999.key, ms999.value, "t", 1000, kDayMs)),
            "f.yaml:1:4: 't' must be from 1s to 1d (near '999ms')");
  const Entry s1 = One("t: 1000ms");
  EXPECT_EQ(*kFields.Duration(s1.key, s1.value, "t", 1000, kDayMs), 1000);
  const Entry day = One("t: 1d");
  EXPECT_EQ(*kFields.Duration(day.key, day.value, "t", 1000, kDayMs), kDayMs);
  const Entry over = One("t: 86400001ms");
  EXPECT_EQ(Message(kFields.Duration(over.key, over.value, "t", 1000, kDayMs)),
            "f.yaml:1:4: 't' must be from 1s to 1d (near '86400001ms')");
  // Out of a limit's range but spelled right: the range is what is wrong.
  const Entry zero = One("t: 0s");
  EXPECT_EQ(Message(kFields.Duration(zero.key, zero.value, "t", 1, kDayMs)),
            "f.yaml:1:4: 't' must be from 1ms to 1d (near '0s')");
  const Entry bare = One("t: 30");
  EXPECT_EQ(Message(kFields.Duration(bare.key, bare.value, "t", 1, kDayMs)),
            "f.yaml:1:4: 't' must be a number and a unit, e.g. 500ms, 30s, 5m, 1h or 7d "
            "(near '30')");
  // 0 and off are "none" only where the field allows it.
  for (const char* off : {"t: 0", "t: off"}) {
    const Entry e = One(off);
    EXPECT_EQ(*kFields.DurationOrOff(e.key, e.value, "t", kDayMs), 0) << off;
  }
  const Entry on = One("t: 1ms");
  EXPECT_EQ(*kFields.DurationOrOff(on.key, on.value, "t", kDayMs), 1);
}

TEST(YamlFieldsTest, SizeEdges) {
  const Entry kb = One("s: 1kb");
  EXPECT_EQ(*kFields.Size(kb.key, kb.value, "s", 1, 1024), 1024);
  const Entry over = One("s: 1025");
  EXPECT_EQ(Message(kFields.Size(over.key, over.value, "s", 1, 1024)),
            "f.yaml:1:4: 's' must be a size between 1 and 1024 bytes: an integer, or one with a "
            "unit k, kb, m, mb, g or gb (e.g. 512mb, 1gb) (near '1025')");
  // off is 0 only when 0 is allowed.
  const Entry off = One("s: off");
  EXPECT_EQ(*kFields.Size(off.key, off.value, "s", 0, 1024), 0);
  EXPECT_FALSE(kFields.Size(off.key, off.value, "s", 1, 1024).ok());
}

TEST(YamlFieldsTest, BoolStringsAndNames) {
  const Entry yes = One("b: YES");
  EXPECT_TRUE(*kFields.Bool(yes.key, yes.value, "b"));
  const Entry maybe = One("b: maybe");
  EXPECT_EQ(Message(kFields.Bool(maybe.key, maybe.value, "x.b")),
            "f.yaml:1:4: 'x.b' must be true or false (near 'maybe')");
  const Entry map = One("s: {a: 1}");
  EXPECT_EQ(Message(kFields.String(map.key, map.value, "s")),
            "f.yaml:1:4: 's' must be a string, not a map (near 's')");
  const Entry var = One("e: _OK9");
  EXPECT_EQ(*kFields.EnvironmentVariable(var.key, var.value, "e"), "_OK9");
  const Entry bad_var = One("e: 9NO");
  EXPECT_EQ(Message(kFields.EnvironmentVariable(bad_var.key, bad_var.value, "e")),
            "f.yaml:1:4: 'e' must name an environment variable ([A-Za-z_][A-Za-z0-9_]*) "
            "(near '9NO')");
  const Entry url = One("u: http://h:80/p");
  EXPECT_EQ(*kFields.HttpUrl(url.key, url.value, "u"), "http://h:80/p");
  const Entry tls = One("u: https://h/");
  EXPECT_EQ(Message(kFields.HttpUrl(tls.key, tls.value, "u")),
            "f.yaml:1:4: 'u': URL \"https://h/\": https is not supported; deliver through a "
            "local relay on http:// (near 'https://h/')");
}

TEST(YamlFieldsTest, AlgorithmAndFallbacks) {
  const Entry gcra = One("a: gcra");
  EXPECT_EQ(*kFields.AlgorithmValue(gcra.key, gcra.value, "a"), Algorithm::kGcra);
  const Entry deny = One("f: deny");
  EXPECT_EQ(*kFields.OnBackendErrorValue(deny.key, deny.value, "f"), OnBackendError::kDeny);
  EXPECT_EQ(*kFields.OnStoreFullValue(deny.key, deny.value, "f"), OnStoreFull::kDeny);
  const Entry allow = One("f: allow");
  EXPECT_EQ(*kFields.OnStoreFullValue(allow.key, allow.value, "f"), OnStoreFull::kAllow);
  const Entry other = One("f: Allow");
  EXPECT_EQ(Message(kFields.OnBackendErrorValue(other.key, other.value, "f")),
            "f.yaml:1:4: 'f' must be allow or deny (near 'Allow')");
}

TEST(YamlFieldsTest, ForEachEntryKeepsOrderAndRefusesDuplicates) {
  std::vector<std::string> names;
  const auto collect = [&](const std::string& name, const YAML::Node&, const YAML::Node&) {
    names.push_back(name);
    return Status::Ok();
  };
  EXPECT_TRUE(kFields.ForEachEntry(YAML::Load("z: 1\na: 2\nm: 3\n"), "key", collect).ok());
  EXPECT_THAT(names, ElementsAre("z", "a", "m"));
  EXPECT_EQ(kFields.ForEachEntry(YAML::Load("a: 1\nb: 2\na: 3\n"), "tier", collect).message(),
            "f.yaml:3:1: duplicate tier 'a' (first defined on line 1) (near 'a')");
  EXPECT_EQ(kFields.ForEachEntry(YAML::Load("? [x]\n: 1\n"), "key", collect).message(),
            "f.yaml:1:3: keys must be plain strings, not a list (near '')");
  // The first error of the callback ends the walk.
  int calls = 0;
  const Status s =
      kFields.ForEachEntry(YAML::Load("a: 1\nb: 2\n"), "key",
                           [&](const std::string&, const YAML::Node& k, const YAML::Node&) {
                             ++calls;
                             return kFields.Fail(k.Mark(), "stop", k.Scalar());
                           });
  EXPECT_EQ(s.message(), "f.yaml:1:1: stop (near 'a')");
  EXPECT_EQ(calls, 1);
}

TEST(YamlFieldsTest, ForEachInSectionTakesEmptyAsDefaults) {
  int calls = 0;
  const auto count = [&](const std::string&, const YAML::Node&, const YAML::Node&) {
    ++calls;
    return Status::Ok();
  };
  const Entry empty = One("s:\n");
  EXPECT_TRUE(kFields.ForEachInSection(empty.key, empty.value, "s", count).ok());
  EXPECT_EQ(calls, 0);
  const Entry map = One("s: {a: 1, b: 2}\n");
  EXPECT_TRUE(kFields.ForEachInSection(map.key, map.value, "s", count).ok());
  EXPECT_EQ(calls, 2);
  const Entry list = One("s: [a]\n");
  EXPECT_EQ(kFields.ForEachInSection(list.key, list.value, "x.s", count).message(),
            "f.yaml:1:4: 'x.s' must be a map, not a list (near 's')");
}

}  // namespace
}  // namespace floodgate::config
