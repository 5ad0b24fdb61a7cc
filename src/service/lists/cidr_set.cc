// CidrSet: see cidr_set.h.
//
// Each family is a path-compressed binary trie (a PATRICIA trie that keeps
// every node's prefix): a node stands for the prefix its whole subtree
// shares, so a chain of single-child bits costs one node, and a set of n
// networks has at most 2n - 1 nodes (a node that is not a network has two
// children). A lookup compares the address with a node's prefix, notes the
// node when it is a network, and follows the address's next bit; the first
// node whose prefix differs ends it, as nothing below can match either.
//
// The nodes are one array in depth-first order, built in one pass from the
// sorted networks: no pointers to chase beyond an index, 12 or 24 bytes a
// node, the 0 child beside its parent, and nothing for many readers to
// contend on. The sorted build needs no insertion and no rebalancing: a
// range of networks sharing a prefix is a subtree, split at the first
// network whose next bit is 1.
//
// A walk from the root is a chain of dependent loads, one per level, and
// the top levels of 100,000 networks are ~17 deep, each load a cache miss
// once the trie outgrows L2: 150-180 ns a lookup, measured. So the first
// `stride` bits after the root's prefix index a table of where the walk
// would be after them (the level-compressed root of Nilsson and Karlsson's
// LC-trie, or the first level of a DIR-16 route table): one load replaces
// the top levels, and a few nodes remain. The stride grows with the trie
// (2^stride <= nodes, so the table costs at most 8 bytes a node), up to
// kMaxStride. Bits after the root's prefix rather than the address's first
// bits: every IPv6 network of a real list starts with 2000::/3, and a table
// on the first bits would spend 7/8 of its slots on nothing.
#include "service/lists/cidr_set.h"

#include <algorithm>
#include <bit>
#include <compare>
#include <span>
#include <string>
#include <type_traits>

namespace floodgate::service {
namespace {

constexpr uint8_t kNetwork = 1;  // the node's prefix is a network of the set
constexpr uint8_t kChild0 = 2;   // the next node is its 0 child
constexpr uint8_t kChild1 = 4;   // child1 is its 1 child
constexpr uint32_t kNoNode = ~uint32_t{0};
// 2^20 slots (8 MiB) at most: reached past a million nodes.
constexpr int kMaxStride = 20;

struct V4Family {
  using Key = uint32_t;
  static constexpr int kBits = 32;

  static Key KeyOf(const IpAddress& address) { return address.v4(); }
  static IpAddress AddressOf(Key key) { return IpAddress::FromV4(key); }
  // Bit `i` of `key`, from the most significant (0) on. i < kBits.
  static bool Bit(Key key, int i) { return (key >> (kBits - 1 - i)) & 1; }
  // The `count` bits of `key` from bit `from` on, as a number. count in
  // 1..kMaxStride, from + count <= kBits.
  static uint32_t Bits(Key key, int from, int count) {
    return static_cast<uint32_t>((key << from) >> (kBits - count));
  }
  static Key Mask(Key key, int len) { return len == 0 ? 0 : key & (~Key{0} << (kBits - len)); }
  static bool SharePrefix(Key a, Key b, int len) {
    return len == 0 || ((a ^ b) >> (kBits - len)) == 0;
  }
  static int CommonPrefixLen(Key a, Key b) { return a == b ? kBits : std::countl_zero(a ^ b); }
};

// 128 bits as two words, the first 64 bits in `high`: shifts of 64 or
// more are undefined on a word, so each operation picks its word first.
struct U128 {
  uint64_t high;
  uint64_t low;
  friend bool operator==(const U128&, const U128&) = default;
  friend auto operator<=>(const U128&, const U128&) = default;
};

struct V6Family {
  using Key = U128;
  static constexpr int kBits = 128;

  static Key KeyOf(const IpAddress& address) { return {address.high64(), address.low64()}; }
  static IpAddress AddressOf(Key key) { return IpAddress::FromV6Words(key.high, key.low); }
  static bool Bit(Key key, int i) {
    return i < 64 ? (key.high >> (63 - i)) & 1 : (key.low >> (127 - i)) & 1;
  }
  static uint32_t Bits(Key key, int from, int count) {
    // The 64 bits from `from` on (zeros past the end), then their top `count`.
    uint64_t word;
    if (from == 0) {
      word = key.high;
    } else if (from < 64) {
      word = key.high << from | key.low >> (64 - from);
    } else {
      word = key.low << (from - 64);
    }
    return static_cast<uint32_t>(word >> (64 - count));
  }
  static Key Mask(Key key, int len) {
    if (len <= 64) return {len == 0 ? 0 : key.high & (~uint64_t{0} << (64 - len)), 0};
    return {key.high, key.low & (~uint64_t{0} << (128 - len))};
  }
  static bool SharePrefix(Key a, Key b, int len) {
    if (len <= 64) return len == 0 || ((a.high ^ b.high) >> (64 - len)) == 0;
    return a.high == b.high && ((a.low ^ b.low) >> (128 - len)) == 0;
  }
  static int CommonPrefixLen(Key a, Key b) {
    if (a.high != b.high) return std::countl_zero(a.high ^ b.high);
    return a.low == b.low ? kBits : 64 + std::countl_zero(a.low ^ b.low);
  }
};

}  // namespace

// One family's trie: its build and its walk. A friend of CidrSet, whose
// nodes it lays out; static, as the set holds all the state.
template <typename Family>
class CidrTrie {
 public:
  using Key = typename Family::Key;
  static constexpr bool kV4 = std::is_same_v<Family, V4Family>;
  using Node = std::conditional_t<kV4, CidrSet::V4Node, CidrSet::V6Node>;
  using Trie = CidrSet::Trie<Node>;
  using Slot = CidrSet::Slot;

  struct Entry {
    Key key;
    uint8_t len;
    friend bool operator==(const Entry&, const Entry&) = default;
    friend auto operator<=>(const Entry&, const Entry&) = default;
  };

  static Key KeyOf(const Node& node) {
    if constexpr (kV4) {
      return node.key;
    } else {
      return {node.key_high, node.key_low};
    }
  }

  // Sorts and dedupes `entries` and lays out their trie and its table.
  static void Build(std::vector<Entry>& entries, Trie& trie) {
    std::sort(entries.begin(), entries.end());
    entries.erase(std::unique(entries.begin(), entries.end()), entries.end());
    if (entries.empty()) return;
    trie.nodes.reserve(2 * entries.size() - 1);
    Add(entries, trie.nodes);
    trie.nodes.shrink_to_fit();  // nested networks leave part of the bound unused

    const int root_len = trie.nodes[0].len;
    trie.stride = std::min({static_cast<int>(std::bit_width(trie.nodes.size())) - 1, kMaxStride,
                            Family::kBits - root_len});
    trie.slots.assign(size_t{1} << trie.stride, Slot{kNoNode, kNoNode});
    Fill(trie, 0, kNoNode);
  }

  // The index of the last network node on `key`'s path (the longest
  // match), or with kFirst of any network on it (what Contains needs, found
  // sooner); kNoNode when none holds `key`.
  template <bool kFirst>
  static uint32_t Find(const Trie& trie, Key key) {
    if (trie.nodes.empty()) return kNoNode;
    const Node& root = trie.nodes[0];
    if (!Family::SharePrefix(key, KeyOf(root), root.len)) return kNoNode;
    const Slot& slot = trie.slots[trie.stride == 0 ? 0 : Family::Bits(key, root.len, trie.stride)];
    uint32_t found = slot.best;
    if (kFirst && found != kNoNode) return found;
    uint32_t i = slot.start;
    while (i != kNoNode) {
      const Node& node = trie.nodes[i];
      if (!Family::SharePrefix(key, KeyOf(node), node.len)) break;
      if (node.flags & kNetwork) {
        found = i;
        if (kFirst) break;
      }
      if ((node.flags & (kChild0 | kChild1)) == 0) break;  // a leaf (every /32 and /128)
      const bool one = Family::Bit(key, node.len);
      if ((node.flags & (one ? kChild1 : kChild0)) == 0) break;
      i = one ? node.child1 : i + 1;
    }
    return found;
  }

  static Cidr NetworkOf(const Node& node) {
    return *Cidr::Of(Family::AddressOf(KeyOf(node)), node.len);
  }

 private:
  // Lays out the subtree of `entries`: sorted, distinct, non-empty, and
  // sharing at least their parent's prefix and next bit. Recursion depth
  // is at most kBits + 1, as each level's prefix is longer than the last.
  static void Add(std::span<const Entry> entries, std::vector<Node>& nodes) {
    const Entry& front = entries.front();
    // The subtree's prefix: what the smallest and largest keys share (so
    // all do), cut to the shortest network. That network sorts first: its
    // key has zeros past its length, and every key shares its prefix.
    const int len =
        std::min<int>(front.len, Family::CommonPrefixLen(front.key, entries.back().key));
    const size_t at = nodes.size();
    Node node{};
    const Key key = Family::Mask(front.key, len);
    if constexpr (kV4) {
      node.key = key;
    } else {
      node.key_high = key.high;
      node.key_low = key.low;
    }
    node.len = static_cast<uint8_t>(len);
    const bool is_network = front.len == len;
    node.flags = is_network ? kNetwork : 0;
    nodes.push_back(node);

    const std::span<const Entry> rest = entries.subspan(is_network ? 1 : 0);
    if (rest.empty()) return;
    // Every network left is longer than `len` (so len < kBits), and those
    // whose next bit is 0 sort before those whose next bit is 1.
    const auto split = std::partition_point(
        rest.begin(), rest.end(), [len](const Entry& e) { return !Family::Bit(e.key, len); });
    const size_t zeros = static_cast<size_t>(split - rest.begin());
    if (zeros > 0) {
      nodes[at].flags |= kChild0;
      Add(rest.first(zeros), nodes);
    }
    if (zeros < rest.size()) {
      nodes[at].flags |= kChild1;
      nodes[at].child1 = static_cast<uint32_t>(nodes.size());
      Add(rest.subspan(zeros), nodes);
    }
  }

  // Fills the slots under node `i`, `best` being the longest network
  // passed above it. A node whose prefix ends within the table's bits
  // owns a range of slots: a walk through any of them has compared it, so
  // it ends there (best so far) unless a child claims part of the range.
  // A deeper node is where the walk of its one slot goes on.
  static void Fill(Trie& trie, uint32_t i, uint32_t best) {
    const Node& node = trie.nodes[i];
    const int from = trie.nodes[0].len;
    const int end = from + trie.stride;
    const uint32_t slot = trie.stride == 0 ? 0 : Family::Bits(KeyOf(node), from, trie.stride);
    if (node.len >= end) {
      trie.slots[slot] = Slot{i, best};
      return;
    }
    if (node.flags & kNetwork) best = i;
    std::fill_n(trie.slots.begin() + slot, size_t{1} << (end - node.len), Slot{kNoNode, best});
    if (node.flags & kChild0) Fill(trie, i + 1, best);
    if (node.flags & kChild1) Fill(trie, node.child1, best);
  }
};

namespace {
using V4Trie = CidrTrie<V4Family>;
using V6Trie = CidrTrie<V6Family>;
}  // namespace

Result<CidrSet> CidrSet::Build(std::vector<Cidr> networks) {
  if (networks.size() > kMaxCidrSetNetworks) {
    return ResourceExhaustedError(std::to_string(networks.size()) + " networks, more than the " +
                                  std::to_string(kMaxCidrSetNetworks) + " a set holds");
  }
  std::vector<V4Trie::Entry> v4;
  std::vector<V6Trie::Entry> v6;
  for (const Cidr& network : networks) {
    const auto len = static_cast<uint8_t>(network.prefix_len());
    if (network.is_v4()) {
      v4.push_back({V4Family::KeyOf(network.address()), len});
    } else {
      v6.push_back({V6Family::KeyOf(network.address()), len});
    }
  }
  networks.clear();
  networks.shrink_to_fit();
  CidrSet set;
  V4Trie::Build(v4, set.v4_);
  V6Trie::Build(v6, set.v6_);
  set.size_ = v4.size() + v6.size();
  return set;
}

bool CidrSet::Contains(const IpAddress& address) const {
  if (address.is_v4()) return V4Trie::Find<true>(v4_, V4Family::KeyOf(address)) != kNoNode;
  return V6Trie::Find<true>(v6_, V6Family::KeyOf(address)) != kNoNode;
}

std::optional<Cidr> CidrSet::LongestMatch(const IpAddress& address) const {
  if (address.is_v4()) {
    const uint32_t i = V4Trie::Find<false>(v4_, V4Family::KeyOf(address));
    if (i == kNoNode) return std::nullopt;
    return V4Trie::NetworkOf(v4_.nodes[i]);
  }
  const uint32_t i = V6Trie::Find<false>(v6_, V6Family::KeyOf(address));
  if (i == kNoNode) return std::nullopt;
  return V6Trie::NetworkOf(v6_.nodes[i]);
}

std::vector<Cidr> CidrSet::Networks() const {
  std::vector<Cidr> out;
  out.reserve(size_);
  // Depth-first order is address order: a node's prefix (zeros past it)
  // precedes its 0 subtree, which precedes its 1 subtree.
  for (const V4Node& node : v4_.nodes) {
    if (node.flags & kNetwork) out.push_back(V4Trie::NetworkOf(node));
  }
  for (const V6Node& node : v6_.nodes) {
    if (node.flags & kNetwork) out.push_back(V6Trie::NetworkOf(node));
  }
  return out;
}

size_t CidrSet::MemoryBytes() const {
  return sizeof(*this) + v4_.nodes.capacity() * sizeof(V4Node) +
         v6_.nodes.capacity() * sizeof(V6Node) +
         (v4_.slots.capacity() + v6_.slots.capacity()) * sizeof(Slot);
}

}  // namespace floodgate::service
