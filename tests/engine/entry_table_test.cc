// Unit tests of the shard table (engine/entry_table.h), probed directly:
// slot placement and wrap-around, tag collisions, backward-shift deletion,
// bulk removal, growth and shrinking, binary keys, and a randomised run
// against a std::map model.
//
// The table hashes with the real HashEntryKey (it rehashes entries when it
// grows or shifts), so collisions are not injected: the helpers search for
// real keys whose hashes have the wanted home slot and tag.
#include "engine/entry_table.h"

#include <cstdint>
#include <cstdio>
#include <functional>
#include <map>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "engine/entry.h"
#include "gtest/gtest.h"

namespace floodgate::engine {
namespace {

// A table plus the entries it points to, which the test owns.
class TableFixture : public ::testing::Test {
 protected:
  ~TableFixture() override {
    table_.Clear();
    for (Entry* e : owned_) Entry::Destroy(e);
  }

  static size_t Hash(std::string_view key, uint16_t variant = 0) {
    return HashEntryKey(variant, key);
  }
  static size_t Home(std::string_view key, size_t capacity) { return Hash(key) & (capacity - 1); }
  // The slot tag, per the layout in entry_table.h.
  static uint64_t Tag(std::string_view key) { return (Hash(key) >> 32) & 0xFFFF; }

  // Creates an entry for (variant, key), with state word 0 = `value`.
  Entry* Make(std::string_view key, uint16_t variant = 0, int64_t value = 0) {
    const int64_t state[1] = {value};
    Entry* e = Entry::Create(variant, key, 1, 100, state);
    EXPECT_NE(e, nullptr);
    EXPECT_TRUE(EntryTable::Storable(e));
    owned_.insert(e);
    return e;
  }

  // Inserts a new entry for (variant, key) and returns it.
  Entry* Add(std::string_view key, uint16_t variant = 0) {
    Entry* e = Make(key, variant);
    EXPECT_TRUE(table_.Insert(e, Hash(key, variant)));
    return e;
  }

  size_t SlotOf(std::string_view key, uint16_t variant = 0) const {
    return table_.Find(EntryKey{variant, key, HashEntryKey(variant, key)});
  }
  Entry* Lookup(std::string_view key, uint16_t variant = 0) const {
    const size_t slot = SlotOf(key, variant);
    return slot == EntryTable::kNotFound ? nullptr : table_.EntryAt(slot);
  }

  // Unlinks and frees the entry of `key`, which must be present.
  void Remove(std::string_view key, uint16_t variant = 0) {
    const size_t slot = SlotOf(key, variant);
    ASSERT_NE(slot, EntryTable::kNotFound) << key;
    Entry* e = table_.EntryAt(slot);
    table_.EraseAt(slot);
    owned_.erase(e);
    Entry::Destroy(e);
  }

  // `count` distinct keys "<prefix><n>" whose hashes satisfy `want`.
  static std::vector<std::string> KeysWhere(const std::string& prefix, size_t count,
                                            const std::function<bool(const std::string&)>& want) {
    std::vector<std::string> keys;
    for (int n = 0; keys.size() < count; ++n) {
      std::string key = prefix + std::to_string(n);
      if (want(key)) keys.push_back(std::move(key));
    }
    return keys;
  }

  EntryTable table_;
  std::set<Entry*> owned_;
};

TEST_F(TableFixture, EmptyTableFindsNothingAndOwnsNoMemory) {
  EXPECT_EQ(table_.size(), 0u);
  EXPECT_EQ(table_.capacity(), 0u);
  EXPECT_EQ(table_.HeapBytes(), 0u);
  EXPECT_EQ(SlotOf("k"), EntryTable::kNotFound);
  table_.Prefetch(Hash("k"));  // no array: must not touch memory
  table_.Shrink();
  EXPECT_EQ(table_.RemoveIf([](Entry*) { return true; }), 0u);
  EXPECT_EQ(table_.capacity(), 0u);
}

TEST_F(TableFixture, InsertFindAndEraseOneEntry) {
  Entry* e = Add("user:1");
  EXPECT_EQ(table_.size(), 1u);
  EXPECT_EQ(table_.capacity(), EntryTable::kMinCapacity);
  EXPECT_EQ(SlotOf("user:1"), Home("user:1", 8));
  EXPECT_EQ(Lookup("user:1"), e);
  EXPECT_EQ(Lookup("user:2"), nullptr);
  EXPECT_EQ(Lookup("user:1", /*variant=*/1), nullptr);  // same bytes, other variant
  table_.Prefetch(Hash("user:1"));
  Remove("user:1");
  EXPECT_EQ(table_.size(), 0u);
  EXPECT_EQ(Lookup("user:1"), nullptr);
}

// Three keys whose home is the last slot of an 8-slot table: the run wraps
// to slots 0 and 1, and erasing its head shifts the others back across the
// end of the array.
TEST_F(TableFixture, ProbeRunWrapsAroundTheEndOfTheArray) {
  const auto keys = KeysWhere("wrap", 3, [](const std::string& k) { return Home(k, 8) == 7; });
  for (const auto& k : keys) Add(k);
  ASSERT_EQ(table_.capacity(), 8u);
  EXPECT_EQ(SlotOf(keys[0]), 7u);
  EXPECT_EQ(SlotOf(keys[1]), 0u);
  EXPECT_EQ(SlotOf(keys[2]), 1u);

  Remove(keys[0]);
  EXPECT_EQ(SlotOf(keys[1]), 7u);
  EXPECT_EQ(SlotOf(keys[2]), 0u);
  EXPECT_EQ(Lookup(keys[0]), nullptr);

  // A key whose home is slot 0 sits behind the wrapped run and must not be
  // pulled back past its home by a later erase.
  const auto zero = KeysWhere("zero", 1, [](const std::string& k) { return Home(k, 8) == 0; });
  Add(zero[0]);
  EXPECT_EQ(SlotOf(zero[0]), 1u);
  Remove(keys[1]);
  EXPECT_EQ(SlotOf(keys[2]), 7u);
  EXPECT_EQ(SlotOf(zero[0]), 0u);
  Remove(keys[2]);
  EXPECT_EQ(SlotOf(zero[0]), 0u);
  EXPECT_EQ(table_.size(), 1u);
}

// Backward shift must leave an entry in place when its home lies between
// the hole and itself.
TEST_F(TableFixture, EraseKeepsEntriesThatWouldPassTheirHome) {
  const auto at2 = KeysWhere("a", 2, [](const std::string& k) { return Home(k, 8) == 2; });
  const auto at3 = KeysWhere("b", 1, [](const std::string& k) { return Home(k, 8) == 3; });
  Add(at2[0]);  // slot 2
  Add(at3[0]);  // slot 3
  Add(at2[1]);  // slot 4 (2 and 3 are taken)
  ASSERT_EQ(SlotOf(at2[1]), 4u);
  Remove(at3[0]);  // hole at 3: at2[1] (home 2) moves into it
  EXPECT_EQ(SlotOf(at2[1]), 3u);
  EXPECT_EQ(SlotOf(at2[0]), 2u);

  Add(at3[0]);  // slot 4 now
  ASSERT_EQ(SlotOf(at3[0]), 4u);
  Remove(at2[0]);  // hole at 2: at2[1] moves to 2, then at3[0] (home 3) to 3
  EXPECT_EQ(SlotOf(at2[1]), 2u);
  EXPECT_EQ(SlotOf(at3[0]), 3u);
}

// Keys with the same home slot and the same 16-bit tag: only the full
// (variant, key) comparison tells them apart.
TEST_F(TableFixture, CollidingTagsAreToldApartByTheKey) {
  // Group candidate keys by (home in 8 slots, tag) until one group has 3.
  std::map<std::pair<size_t, uint64_t>, std::vector<std::string>> groups;
  std::vector<std::string> same;
  for (int n = 0; same.empty(); ++n) {
    std::string key = "tag" + std::to_string(n);
    auto& group = groups[{Home(key, 8), Tag(key)}];
    group.push_back(key);
    if (group.size() == 3) same = group;
  }
  Entry* a = Add(same[0]);
  Entry* b = Add(same[1]);
  Entry* c = Add(same[2]);
  EXPECT_EQ(Lookup(same[0]), a);
  EXPECT_EQ(Lookup(same[1]), b);
  EXPECT_EQ(Lookup(same[2]), c);
  Remove(same[1]);
  EXPECT_EQ(Lookup(same[0]), a);
  EXPECT_EQ(Lookup(same[1]), nullptr);
  EXPECT_EQ(Lookup(same[2]), c);
}

// Two 16-byte keys differing only in their last byte, chosen so that they
// also share home slot and tag: the comparison must reach the last byte.
TEST_F(TableFixture, KeysDifferingOnlyInTheLastByte) {
  std::string first, second;
  for (int prefix = 0; first.empty(); ++prefix) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "user:%010d", prefix);  // 15 bytes
    std::map<std::pair<size_t, uint64_t>, std::string> seen;
    for (int last = 0; last < 256 && first.empty(); ++last) {
      const std::string key = std::string(buf) + static_cast<char>(last);
      auto [it, inserted] = seen.emplace(std::make_pair(Home(key, 8), Tag(key)), key);
      if (!inserted) {
        first = it->second;
        second = key;
      }
    }
  }
  ASSERT_EQ(first.size(), 16u);
  ASSERT_EQ(first.substr(0, 15), second.substr(0, 15));
  ASSERT_NE(first.back(), second.back());
  Entry* a = Add(first);
  EXPECT_EQ(Lookup(second), nullptr);
  Entry* b = Add(second);
  EXPECT_EQ(Lookup(first), a);
  EXPECT_EQ(Lookup(second), b);
  // And without a forced collision: every last byte is its own key.
  for (int last = 0; last < 256; ++last) Add(std::string("0123456789abcde") + char(last));
  for (int last = 0; last < 256; ++last) {
    Entry* e = Lookup(std::string("0123456789abcde") + char(last));
    ASSERT_NE(e, nullptr) << last;
    EXPECT_EQ(static_cast<unsigned char>(e->key().back()), last);
  }
}

TEST_F(TableFixture, BinaryKeysAndVariantsAreDistinct) {
  const std::vector<std::string> keys = {std::string(),          std::string("\0", 1),
                                         std::string("\0\0", 2), std::string("a"),
                                         std::string("a\0", 2),  std::string("a\0b", 3),
                                         std::string("a\0c", 3), std::string("\xff\xfe\x00", 3),
                                         std::string(512, '\0'), std::string(512, '\xff')};
  std::map<std::pair<uint16_t, std::string>, Entry*> added;
  for (uint16_t variant : {0, 1, 65535}) {
    for (const auto& k : keys) added[{variant, k}] = Add(k, variant);
  }
  EXPECT_EQ(table_.size(), added.size());
  for (const auto& [id, e] : added) {
    EXPECT_EQ(Lookup(id.second, id.first), e) << id.first << " len " << id.second.size();
  }
  EXPECT_EQ(Lookup(std::string("\0\0\0", 3)), nullptr);
  EXPECT_EQ(Lookup("b"), nullptr);
  EXPECT_EQ(Lookup("a", 2), nullptr);
}

TEST_F(TableFixture, GrowsPastThreeQuartersAndKeepsEveryKey) {
  for (int i = 0; i < 6; ++i) Add("g" + std::to_string(i));
  EXPECT_EQ(table_.capacity(), 8u);  // 6 of 8 is the 3/4 bound
  Add("g6");
  EXPECT_EQ(table_.capacity(), 16u);
  for (int i = 7; i < 10'000; ++i) {
    Add("g" + std::to_string(i));
    ASSERT_LE(table_.size() * 4, table_.capacity() * 3) << i;
  }
  EXPECT_EQ(table_.capacity(), 16'384u);  // 10000 > 3/4 of 8192
  for (int i = 0; i < 10'000; ++i) ASSERT_NE(Lookup("g" + std::to_string(i)), nullptr) << i;
  EXPECT_EQ(Lookup("g10000"), nullptr);
  EXPECT_EQ(table_.HeapBytes(), Entry::MallocChunkSize(16'384 * 8));
}

TEST_F(TableFixture, ShrinksBelowAQuarterAndFreesWhenEmpty) {
  for (int i = 0; i < 3'000; ++i) Add("s" + std::to_string(i));
  ASSERT_EQ(table_.capacity(), 4'096u);
  table_.Shrink();  // 3000 of 4096: keeps its size
  EXPECT_EQ(table_.capacity(), 4'096u);

  // Remove all but 100: below 1/4, so it shrinks to the smallest array at
  // most half full: 100 entries -> 256 slots.
  int kept = 0;
  const size_t removed = table_.RemoveIf([&](Entry* e) {
    if (kept < 100) {
      ++kept;
      return false;
    }
    owned_.erase(e);
    Entry::Destroy(e);
    return true;
  });
  EXPECT_EQ(removed, 2'900u);
  EXPECT_EQ(table_.capacity(), 4'096u);  // RemoveIf never reallocates
  table_.Shrink();
  EXPECT_EQ(table_.capacity(), 256u);
  EXPECT_EQ(table_.size(), 100u);
  for (Entry* e : owned_) EXPECT_EQ(Lookup(e->key()), e);
  table_.Shrink();  // 100 of 256 is not below 1/4
  EXPECT_EQ(table_.capacity(), 256u);

  // Small tables shrink down to the minimum, and an empty one frees its array.
  std::vector<Entry*> left(owned_.begin(), owned_.end());
  for (size_t i = 0; i + 1 < left.size(); ++i) Remove(left[i]->key());
  table_.Shrink();
  EXPECT_EQ(table_.capacity(), EntryTable::kMinCapacity);
  EXPECT_EQ(table_.size(), 1u);
  EXPECT_EQ(Lookup(left.back()->key()), left.back());
  Remove(left.back()->key());
  table_.Shrink();
  EXPECT_EQ(table_.capacity(), 0u);
  EXPECT_EQ(table_.HeapBytes(), 0u);
  table_.Prefetch(Hash("anything"));  // freed array: still harmless

  // And it grows again from nothing.
  Entry* e = Add("again");
  EXPECT_EQ(Lookup("again"), e);
  EXPECT_EQ(table_.capacity(), EntryTable::kMinCapacity);
}

TEST_F(TableFixture, RemoveIfVisitsEveryEntryOnceAndKeepsTheRestFindable) {
  for (int i = 0; i < 5'000; ++i) Add("r" + std::to_string(i));
  std::set<Entry*> visited;
  const size_t removed = table_.RemoveIf([&](Entry* e) {
    EXPECT_TRUE(visited.insert(e).second) << "visited twice: " << e->key();
    if (e->key().back() % 3 != 0) return false;
    owned_.erase(e);
    Entry::Destroy(e);
    return true;
  });
  EXPECT_EQ(visited.size(), 5'000u);
  EXPECT_EQ(table_.size() + removed, 5'000u);
  for (int i = 0; i < 5'000; ++i) {
    const std::string key = "r" + std::to_string(i);
    if (key.back() % 3 == 0) {
      EXPECT_EQ(Lookup(key), nullptr) << key;
    } else {
      EXPECT_NE(Lookup(key), nullptr) << key;
    }
  }
}

// A wrapped run whose entries are removed in bulk: the survivors behind the
// holes are pulled back across the end of the array.
TEST_F(TableFixture, RemoveIfRepairsARunThatWraps) {
  const auto keys = KeysWhere("bulk", 4, [](const std::string& k) { return Home(k, 8) == 6; });
  for (const auto& k : keys) Add(k);  // slots 6, 7, 0, 1
  ASSERT_EQ(SlotOf(keys[3]), 1u);
  const size_t removed = table_.RemoveIf([&](Entry* e) {
    if (e->key() != keys[0] && e->key() != keys[2]) return false;
    owned_.erase(e);
    Entry::Destroy(e);
    return true;
  });
  EXPECT_EQ(removed, 2u);
  EXPECT_EQ(SlotOf(keys[1]), 6u);
  EXPECT_EQ(SlotOf(keys[3]), 7u);
  EXPECT_EQ(Lookup(keys[0]), nullptr);
  EXPECT_EQ(Lookup(keys[2]), nullptr);
}

TEST_F(TableFixture, ForEachVisitsEveryEntry) {
  std::set<Entry*> added;
  for (int i = 0; i < 300; ++i) added.insert(Add("f" + std::to_string(i)));
  std::set<Entry*> seen;
  table_.ForEach([&](Entry* e) { EXPECT_TRUE(seen.insert(e).second); });
  EXPECT_EQ(seen, added);
}

// 100k random inserts, lookups, erases, bulk removals and shrinks over a
// universe of 3000 (variant, key) pairs, checked against a std::map. The
// universe is small enough that the table keeps growing, emptying and
// shrinking, and every erase is followed by a full check often enough to
// catch an entry cut off from its home.
TEST_F(TableFixture, RandomOperationsMatchAMapModel) {
  std::mt19937_64 rng(20'240'601);
  std::map<std::pair<uint16_t, std::string>, Entry*> model;
  auto random_id = [&]() -> std::pair<uint16_t, std::string> {
    const uint64_t n = rng() % 3'000;
    // Short and binary keys, 16-byte keys, and two variants.
    std::string key =
        n % 3 == 0   ? std::string(1, static_cast<char>(n % 251))
        : n % 3 == 1 ? "user:" + std::string(11 - std::to_string(n).size(), '0') + std::to_string(n)
                     : std::string("bin\0", 4) + std::to_string(n);
    return {static_cast<uint16_t>(n % 2), key};
  };
  auto check_all = [&] {
    ASSERT_EQ(table_.size(), model.size());
    for (const auto& [id, e] : model) ASSERT_EQ(Lookup(id.second, id.first), e) << id.second;
  };
  for (int op = 0; op < 100'000; ++op) {
    const auto id = random_id();
    const int kind = static_cast<int>(rng() % 100);
    auto it = model.find(id);
    if (kind < 45) {  // insert if absent
      if (it == model.end()) {
        Entry* e = Make(id.second, id.first);
        ASSERT_TRUE(table_.Insert(e, Hash(id.second, id.first)));
        model.emplace(id, e);
      }
    } else if (kind < 90) {  // erase if present
      if (it != model.end()) {
        Remove(id.second, id.first);
        model.erase(it);
      } else {
        ASSERT_EQ(Lookup(id.second, id.first), nullptr);
      }
    } else if (kind < 95) {  // find
      ASSERT_EQ(Lookup(id.second, id.first), it == model.end() ? nullptr : it->second);
    } else if (kind < 97) {  // bulk removal of a random fraction, then maybe shrink
      const uint64_t mod = 2 + rng() % 5;
      const size_t before = model.size();
      const size_t removed = table_.RemoveIf([&](Entry* e) {
        if (reinterpret_cast<uintptr_t>(e) / 16 % mod != 0) return false;
        model.erase({e->variant(), std::string(e->key())});
        owned_.erase(e);
        Entry::Destroy(e);
        return true;
      });
      ASSERT_EQ(before - removed, model.size());
      table_.Shrink();
    } else {
      table_.Shrink();
    }
    ASSERT_LE(table_.size() * 4, table_.capacity() * 3);
    if (op % 997 == 0 || kind >= 95) check_all();
  }
  check_all();
}

}  // namespace
}  // namespace floodgate::engine
