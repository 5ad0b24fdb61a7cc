// SpaceSaving on its own: exact counts until full, eviction, key cuts, the
// error bound on a Zipf stream (one sketch and two merged), merging sides
// full or not, and the binary form: round trips, and a table of broken
// inputs that Parse must refuse by name.
#include "service/top/space_saving.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "testing/zipf.h"

namespace floodgate::service {
namespace {

std::string Key(uint32_t rank) { return "subject:" + std::to_string(rank * 7919 % 100'003); }

using Counts = absl::flat_hash_map<std::string, int64_t>;

// The exact top `n` keys, by count descending then key.
std::vector<std::string> TrueTop(const Counts& counts, size_t n) {
  std::vector<std::pair<std::string, int64_t>> all(counts.begin(), counts.end());
  std::sort(all.begin(), all.end(), [](const auto& a, const auto& b) {
    return a.second != b.second ? a.second > b.second : a.first < b.first;
  });
  std::vector<std::string> keys;
  for (size_t i = 0; i < n && i < all.size(); ++i) keys.push_back(all[i].first);
  return keys;
}

int64_t TrueCount(const Counts& counts, const std::string& key) {
  auto it = counts.find(key);
  return it == counts.end() ? 0 : it->second;
}

// Every listed entry brackets its true count and has error <= floor <=
// total / capacity; every key not listed has a true count <= floor.
void ExpectWithinBounds(const SpaceSaving& sketch, const Counts& truth) {
  const std::vector<TopEntry> all = sketch.Top(sketch.size());
  EXPECT_LE(sketch.floor(), sketch.total() / static_cast<int64_t>(sketch.capacity()));
  absl::flat_hash_set<std::string> listed;
  for (const TopEntry& e : all) {
    const int64_t t = TrueCount(truth, e.key);
    EXPECT_LE(e.count - e.error, t) << e.key;
    EXPECT_GE(e.count, t) << e.key;
    EXPECT_LE(e.error, sketch.floor()) << e.key;
    listed.insert(e.key);
  }
  for (const auto& [key, count] : truth) {
    if (!listed.contains(key)) {
      EXPECT_LE(count, sketch.floor()) << key;
    }
  }
}

TEST(SpaceSavingTest, ExactUntilFullThenTopByCountThenKey) {
  SpaceSaving s(4);
  s.Add("b", 3);
  s.Add("a", 3);
  s.Add("c", 5);
  s.Add("b", 1);
  s.Add("d", 0);   // ignored
  s.Add("d", -2);  // ignored
  EXPECT_EQ(s.total(), 12);
  EXPECT_EQ(s.size(), 3u);
  EXPECT_EQ(s.capacity(), 4u);
  EXPECT_EQ(s.floor(), 0);
  EXPECT_EQ(s.Top(10), (std::vector<TopEntry>{{"c", 5, 0}, {"b", 4, 0}, {"a", 3, 0}}));
  EXPECT_EQ(s.Top(2), (std::vector<TopEntry>{{"c", 5, 0}, {"b", 4, 0}}));
  EXPECT_TRUE(s.Top(0).empty());
}

TEST(SpaceSavingTest, NewKeyTakesTheSmallestCounterAndItsCountAsError) {
  SpaceSaving s(2);
  s.Add("a", 10);
  s.Add("b", 4);
  EXPECT_EQ(s.floor(), 0);  // full, but nothing lost yet
  s.Add("c", 1);            // takes b's counter: 4 + 1, error 4
  EXPECT_EQ(s.Top(2), (std::vector<TopEntry>{{"a", 10, 0}, {"c", 5, 4}}));
  EXPECT_EQ(s.floor(), 4);
  s.Add("b", 2);  // takes c's: 5 + 2, error 5
  EXPECT_EQ(s.Top(2), (std::vector<TopEntry>{{"a", 10, 0}, {"b", 7, 5}}));
  EXPECT_EQ(s.floor(), 5);
  EXPECT_EQ(s.total(), 17);
}

TEST(SpaceSavingTest, LongKeysAreCutToTheLimit) {
  SpaceSaving s(4);
  const std::string prefix(kMaxSketchKeyBytes, 'k');
  s.Add(prefix + "one", 1);
  s.Add(prefix + "two", 2);  // same first 256 bytes: the same key
  s.Add(std::string(kMaxSketchKeyBytes, 'k'), 4);
  EXPECT_EQ(s.Top(4), (std::vector<TopEntry>{{prefix, 7, 0}}));
}

TEST(SpaceSavingTest, CountsSaturate) {
  SpaceSaving s(1);
  s.Add("a", INT64_MAX);
  s.Add("a", 5);
  s.Add("b", INT64_MAX);
  EXPECT_EQ(s.total(), INT64_MAX);
  EXPECT_EQ(s.Top(1), (std::vector<TopEntry>{{"b", INT64_MAX, INT64_MAX}}));
}

TEST(SpaceSavingTest, ClearForgetsKeysAndCountsAgain) {
  SpaceSaving s(2);
  for (int i = 0; i < 10; ++i) s.Add("k" + std::to_string(i), i + 1);
  s.Clear();
  EXPECT_EQ(s.size(), 0u);
  EXPECT_EQ(s.total(), 0);
  EXPECT_EQ(s.floor(), 0);
  s.Add("x", 3);
  s.Add("y", 2);
  s.Add("x", 1);
  EXPECT_EQ(s.Top(2), (std::vector<TopEntry>{{"x", 4, 0}, {"y", 2, 0}}));
}

TEST(SpaceSavingTest, CopiesAreIndependentAndKeepCounting) {
  SpaceSaving s(3);
  s.Add("a", 1);
  s.Add("b", 2);
  SpaceSaving copy = s;
  copy.Add("a", 5);
  copy.Add("c", 1);
  copy.Add("d", 1);  // full: evicts the smallest (c, 1)
  EXPECT_EQ(s.Top(3), (std::vector<TopEntry>{{"b", 2, 0}, {"a", 1, 0}}));
  EXPECT_EQ(copy.Top(3), (std::vector<TopEntry>{{"a", 6, 0}, {"b", 2, 0}, {"d", 2, 1}}));
  SpaceSaving moved = std::move(copy);
  moved.Add("b", 10);
  EXPECT_EQ(moved.Top(1), (std::vector<TopEntry>{{"b", 12, 0}}));
}

// The merge of Agarwal et al.: a key missing from a side takes that side's
// floor (0 for a side that never evicted), then the largest are kept.
TEST(SpaceSavingTest, MergeSumsAndChargesMissingKeysTheOtherSidesFloor) {
  SpaceSaving a(2);
  a.Add("x", 10);
  a.Add("y", 3);
  a.Add("z", 1);  // evicts y: z = 4 (error 3), floor 3
  SpaceSaving b(2);
  b.Add("x", 2);
  b.Add("w", 6);  // b never evicted: floor 0
  a.Merge(b);
  // x: 10 + 2; z: 4 + 0 (b lacks it, floor 0); w: 6 + 3 (a lacks it, floor 3).
  // Keep 2: x 12, w 9; z (4) dropped, so floor = max(3 + 0, 4) = 4.
  EXPECT_EQ(a.Top(3), (std::vector<TopEntry>{{"x", 12, 0}, {"w", 9, 3}}));
  EXPECT_EQ(a.floor(), 4);
  EXPECT_EQ(a.total(), 22);
  EXPECT_EQ(a.capacity(), 2u);
}

TEST(SpaceSavingTest, MergeKeepsTheSmallerCapacityAndMergesItself) {
  SpaceSaving big(8);
  for (int i = 0; i < 6; ++i) big.Add("k" + std::to_string(i), 10 - i);
  SpaceSaving small(3);
  small.Add("k5", 1);
  big.Merge(small);
  EXPECT_EQ(big.capacity(), 3u);
  EXPECT_EQ(big.size(), 3u);
  EXPECT_EQ(big.floor(), 7);  // the largest dropped: k3, 7
  EXPECT_EQ(big.Top(3), (std::vector<TopEntry>{{"k0", 10, 0}, {"k1", 9, 0}, {"k2", 8, 0}}));
  big.Merge(big);
  EXPECT_EQ(big.Top(3), (std::vector<TopEntry>{{"k0", 20, 0}, {"k1", 18, 0}, {"k2", 16, 0}}));
  EXPECT_EQ(big.floor(), 14);
  big.Add("k9", 1);  // a merged sketch counts on
  EXPECT_EQ(big.Top(3), (std::vector<TopEntry>{{"k0", 20, 0}, {"k1", 18, 0}, {"k9", 17, 16}}));
}

TEST(SpaceSavingTest, CompactedKeepsTheLargestAndRaisesTheFloor) {
  SpaceSaving s(8);
  for (int i = 0; i < 8; ++i) s.Add("k" + std::to_string(i), 20 - i);
  const SpaceSaving c = s.Compacted(3);
  EXPECT_EQ(c.capacity(), 3u);
  EXPECT_EQ(c.total(), s.total());
  EXPECT_EQ(c.floor(), 17);
  EXPECT_EQ(c.Top(5), s.Top(3));
}

class ZipfTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    stream_ = new std::vector<uint32_t>(testing::ZipfStream(1'000'000, 100'000, 1.1, 20240601));
  }
  static void TearDownTestSuite() {
    delete stream_;
    stream_ = nullptr;
  }
  static std::vector<uint32_t>* stream_;
};
std::vector<uint32_t>* ZipfTest::stream_ = nullptr;

TEST_F(ZipfTest, TrueTopTenReportedWithinTheBound) {
  constexpr size_t kCapacity = 1024;
  SpaceSaving s(kCapacity);
  Counts truth;
  for (uint32_t rank : *stream_) {
    const std::string key = Key(rank);
    s.Add(key, 1);
    ++truth[key];
  }
  EXPECT_EQ(s.total(), 1'000'000);
  EXPECT_EQ(s.size(), kCapacity);
  EXPECT_GT(s.floor(), 0);
  std::vector<std::string> reported;
  for (const TopEntry& e : s.Top(10)) reported.push_back(e.key);
  std::vector<std::string> expected = TrueTop(truth, 10);
  std::sort(reported.begin(), reported.end());
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(reported, expected);
  ExpectWithinBounds(s, truth);
  EXPECT_LE(s.MemoryBytes(), SpaceSaving::MemoryBound(kCapacity));
  const SpaceSaving compact = s.Compacted(128);
  EXPECT_LE(compact.MemoryBytes(), SpaceSaving::MemoryBound(128, false));
  ExpectWithinBounds(compact, truth);
}

TEST_F(ZipfTest, TwoMergedSketchesFindTheSameTopTen) {
  constexpr size_t kCapacity = 512;
  SpaceSaving one(kCapacity), a(kCapacity), b(kCapacity);
  Counts truth;
  std::mt19937_64 split(7);
  for (uint32_t rank : *stream_) {
    const std::string key = Key(rank);
    one.Add(key, 1);
    (split() & 1 ? a : b).Add(key, 1);
    ++truth[key];
  }
  Result<SpaceSaving> pa = SpaceSaving::Parse(a.Serialize());
  Result<SpaceSaving> pb = SpaceSaving::Parse(b.Serialize());
  ASSERT_TRUE(pa.ok()) << pa.status().ToString();
  ASSERT_TRUE(pb.ok()) << pb.status().ToString();
  pa->Merge(*pb);
  EXPECT_EQ(pa->total(), 1'000'000);
  auto keys = [](const std::vector<TopEntry>& top) {
    std::vector<std::string> k;
    for (const TopEntry& e : top) k.push_back(e.key);
    std::sort(k.begin(), k.end());
    return k;
  };
  std::vector<std::string> expected = TrueTop(truth, 10);
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(keys(pa->Top(10)), keys(one.Top(10)));
  EXPECT_EQ(keys(pa->Top(10)), expected);
  ExpectWithinBounds(*pa, truth);
}

TEST(SpaceSavingTest, MemoryStaysWithinTheBoundUnderChurn) {
  for (size_t capacity : {1u, 7u, 64u, 300u}) {
    SpaceSaving s(capacity);
    std::mt19937_64 rng(capacity);
    for (int i = 0; i < 200'000; ++i) {
      // Long keys, all distinct: the worst for key bytes and the index.
      s.Add(std::string(200, 'x') + std::to_string(rng()), 1 + static_cast<int64_t>(rng() % 3));
      if (i % 50'000 == 0) s.Clear();
    }
    EXPECT_LE(s.MemoryBytes(), SpaceSaving::MemoryBound(capacity)) << capacity;
  }
}

TEST(SpaceSavingTest, SerializeRoundTrips) {
  SpaceSaving s(3);
  s.Add("a", 5);
  s.Add(std::string("\0\xff\n", 3), 2);
  s.Add("c", 1);
  s.Add("d", 1);
  const std::string bytes = s.Serialize();
  Result<SpaceSaving> back = SpaceSaving::Parse(bytes);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->Top(3), s.Top(3));
  EXPECT_EQ(back->total(), s.total());
  EXPECT_EQ(back->floor(), s.floor());
  EXPECT_EQ(back->capacity(), s.capacity());
  EXPECT_EQ(back->Serialize(), bytes);
  back->Add("a", 1);  // a parsed sketch counts on
  EXPECT_EQ(back->Top(1), (std::vector<TopEntry>{{"a", 6, 0}}));

  Result<SpaceSaving> empty = SpaceSaving::Parse(SpaceSaving(9).Serialize());
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(empty->capacity(), 9u);
  EXPECT_EQ(empty->size(), 0u);
}

// Writers of version-1 bytes that the real writer never makes: for the
// checks behind the checksum.
void PutVarint(std::string* out, uint64_t v) {
  while (v >= 0x80) {
    out->push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<char>(v));
}

std::string Seal(std::string body) {
  uint64_t h = 14695981039346656037ull;
  for (unsigned char c : body) {
    h ^= c;
    h *= 1099511628211ull;
  }
  for (int i = 0; i < 8; ++i, h >>= 8) body.push_back(static_cast<char>(h));
  return body;
}

struct Raw {
  uint64_t capacity = 4, total = 10, floor = 0;
  std::vector<std::tuple<std::string, uint64_t, uint64_t>> entries;
  std::string Bytes(int64_t n = -1) const {
    std::string b = "FGSK";
    b.push_back(1);
    PutVarint(&b, capacity);
    PutVarint(&b, total);
    PutVarint(&b, floor);
    PutVarint(&b, n < 0 ? entries.size() : static_cast<uint64_t>(n));
    for (const auto& [key, count, error] : entries) {
      PutVarint(&b, key.size());
      b += key;
      PutVarint(&b, count);
      PutVarint(&b, error);
    }
    return Seal(b);
  }
};

TEST(SpaceSavingTest, ParseRefusesBrokenInput) {
  SpaceSaving s(2);
  s.Add("alpha", 5);
  s.Add("beta", 3);
  s.Add("gamma", 1);
  const std::string good = s.Serialize();
  ASSERT_TRUE(SpaceSaving::Parse(good).ok());
  auto flip = [&](size_t at) {
    std::string b = good;
    b[at] ^= 0x20;
    return b;
  };
  std::string version2 = good;
  version2[4] = 2;
  const std::string huge_varint = Seal(std::string("FGSK\x01", 5) + std::string(10, '\xff'));
  Raw ok_raw{4, 10, 0, {{"a", 6, 0}, {"b", 4, 0}}};
  ASSERT_TRUE(SpaceSaving::Parse(ok_raw.Bytes()).ok());

  const struct {
    const char* name;
    std::string bytes;
    const char* error;  // a part of the message
  } kCases[] = {
      {"empty", "", "too short (0 bytes)"},
      {"a few bytes", "FGSK\x01", "too short"},
      {"no magic", "GET / HTTP/1.1\r\n\r\n", "bad magic"},
      {"other version", version2, "format version 2 (this server reads version 1)"},
      {"last byte cut", good.substr(0, good.size() - 1), "checksum mismatch"},
      {"cut in half", good.substr(0, good.size() / 2), "checksum mismatch"},
      {"key byte flipped", flip(12), "checksum mismatch"},
      {"checksum flipped", flip(good.size() - 1), "checksum mismatch"},
      {"trailing byte", good + "x", "checksum mismatch"},
      {"varint over 63 bits", huge_varint, "truncated header"},
      {"capacity 0", Raw{0, 0, 0, {}}.Bytes(), "capacity 0 out of [1, 65536]"},
      {"capacity too large", Raw{1 << 20, 0, 0, {}}.Bytes(), "capacity 1048576"},
      {"more entries than capacity", Raw{1, 10, 0, {{"a", 6, 0}, {"b", 4, 0}}}.Bytes(),
       "2 entries for capacity 1"},
      {"entry count past the end", Raw{4, 10, 0, {{"a", 6, 0}}}.Bytes(4), "truncated entries"},
      {"entry cut", Raw{4, 10, 0, {{"abcdefgh", 6, 0}}}.Bytes(2), "entry 1: truncated"},
      {"key too long", Raw{4, 10, 0, {{std::string(257, 'k'), 6, 0}}}.Bytes(),
       "entry 0: key of 257 bytes (at most 256)"},
      {"out of order", Raw{4, 10, 0, {{"b", 4, 0}, {"a", 6, 0}}}.Bytes(),
       "entry 1: out of order or repeated"},
      {"repeated key", Raw{4, 10, 0, {{"a", 5, 0}, {"a", 5, 0}}}.Bytes(),
       "entry 1: out of order or repeated"},
      {"counts above total", Raw{4, 10, 0, {{"a", 6, 0}, {"b", 5, 0}}}.Bytes(),
       "entry 1: counts sum above the total"},
      {"floor above total / capacity", Raw{2, 10, 6, {{"a", 6, 0}, {"b", 6, 0}}}.Bytes(),
       "floor above total / capacity"},
      {"floor with free counters", Raw{4, 40, 2, {{"a", 6, 0}}}.Bytes(),
       "a floor above 0 with free counters"},
      {"count under the floor", Raw{2, 40, 3, {{"a", 6, 0}, {"b", 2, 0}}}.Bytes(),
       "entry 1: count or error off the floor"},
      {"error above the floor", Raw{2, 40, 3, {{"a", 6, 4}, {"b", 3, 0}}}.Bytes(),
       "entry 0: count or error off the floor"},
      {"bytes after the entries", Seal(ok_raw.Bytes().substr(0, ok_raw.Bytes().size() - 8) + "z"),
       "1 bytes after the entries"},
  };
  for (const auto& c : kCases) {
    Result<SpaceSaving> r = SpaceSaving::Parse(c.bytes);
    ASSERT_FALSE(r.ok()) << c.name;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << c.name;
    EXPECT_NE(r.status().message().find(c.error), std::string::npos)
        << c.name << ": " << r.status().message();
    EXPECT_EQ(r.status().message().rfind("top-subjects sketch: ", 0), 0u) << c.name;
  }
}

// Hostile bytes: every single-byte change of a real sketch, and random
// strings, are refused or parsed into a sketch that keeps its bounds.
TEST(SpaceSavingTest, ParseNeverTrustsMutatedOrRandomBytes) {
  SpaceSaving s(16);
  for (int i = 0; i < 100; ++i) s.Add("key" + std::to_string(i % 37), 1 + i % 5);
  const std::string good = s.Serialize();
  std::mt19937_64 rng(99);
  for (size_t at = 0; at < good.size(); ++at) {
    for (int bit = 0; bit < 8; ++bit) {
      std::string b = good;
      b[at] ^= static_cast<char>(1 << bit);
      EXPECT_FALSE(SpaceSaving::Parse(b).ok()) << at << ":" << bit;
    }
  }
  for (int i = 0; i < 20'000; ++i) {
    std::string b(rng() % 64, '\0');
    for (char& c : b) c = static_cast<char>(rng());
    if (i % 2 == 0 && b.size() >= 5) b.replace(0, 5, std::string("FGSK\x01", 5));
    Result<SpaceSaving> r = SpaceSaving::Parse(i % 4 == 1 ? Seal(b) : b);
    if (r.ok()) {
      EXPECT_LE(r->floor(), r->total() / static_cast<int64_t>(r->capacity()));
    }
  }
}

}  // namespace
}  // namespace floodgate::service
