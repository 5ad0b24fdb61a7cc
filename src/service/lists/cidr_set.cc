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
// node, the 0 child beside its parent (often in its cache line), and
// nothing for many readers to contend on. The sorted build needs no
// insertion and no rebalancing: a range of networks sharing a prefix is a
// subtree, split at the first network whose next bit is 1.
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

struct V4Family {
  using Key = uint32_t;
  static constexpr int kBits = 32;

  static Key KeyOf(const IpAddress& address) { return address.v4(); }
  static IpAddress AddressOf(Key key) { return IpAddress::FromV4(key); }
  // Bit `i` of `key`, from the most significant (0) on. i < kBits.
  static bool Bit(Key key, int i) { return (key >> (kBits - 1 - i)) & 1; }
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
  static IpAddress AddressOf(Key key) {
    std::array<uint8_t, 16> bytes;
    for (int i = 0; i < 8; ++i) {
      bytes[i] = static_cast<uint8_t>(key.high >> (56 - 8 * i));
      bytes[8 + i] = static_cast<uint8_t>(key.low >> (56 - 8 * i));
    }
    return IpAddress::FromV6Bytes(bytes);
  }
  static bool Bit(Key key, int i) {
    return i < 64 ? (key.high >> (63 - i)) & 1 : (key.low >> (127 - i)) & 1;
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

template <typename Family>
class CidrTrie {
 public:
  using Key = typename Family::Key;
  using Node =
      std::conditional_t<std::is_same_v<Family, V4Family>, CidrSet::V4Node, CidrSet::V6Node>;

  struct Entry {
    Key key;
    uint8_t len;
    friend bool operator==(const Entry&, const Entry&) = default;
    friend auto operator<=>(const Entry&, const Entry&) = default;
  };

  static std::vector<Node>& NodesOf(CidrSet& set) {
    if constexpr (std::is_same_v<Family, V4Family>) {
      return set.v4_;
    } else {
      return set.v6_;
    }
  }
  static const std::vector<Node>& NodesOf(const CidrSet& set) {
    return NodesOf(const_cast<CidrSet&>(set));
  }

  static Key KeyOf(const Node& node) {
    if constexpr (std::is_same_v<Family, V4Family>) {
      return node.key;
    } else {
      return {node.key_high, node.key_low};
    }
  }

  // Sorts and dedupes `entries` and lays out their trie in `nodes`.
  static void Build(std::vector<Entry>& entries, std::vector<Node>& nodes) {
    std::sort(entries.begin(), entries.end());
    entries.erase(std::unique(entries.begin(), entries.end()), entries.end());
    if (entries.empty()) return;
    nodes.reserve(2 * entries.size() - 1);
    Add(entries, nodes);
    nodes.shrink_to_fit();  // nested networks leave part of the bound unused
  }

  // The node of the last network on `key`'s path (the longest match), or
  // with kFirst of the first one; nullptr when none holds `key`.
  template <bool kFirst>
  static const Node* Find(const std::vector<Node>& nodes, Key key) {
    if (nodes.empty()) return nullptr;
    const Node* found = nullptr;
    uint32_t i = 0;
    for (;;) {
      const Node& node = nodes[i];
      if (!Family::SharePrefix(key, KeyOf(node), node.len)) break;
      if (node.flags & kNetwork) {
        found = &node;
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
    if constexpr (std::is_same_v<Family, V4Family>) {
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
  if (address.is_v4()) {
    return V4Trie::Find<true>(v4_, V4Family::KeyOf(address)) != nullptr;
  }
  return V6Trie::Find<true>(v6_, V6Family::KeyOf(address)) != nullptr;
}

std::optional<Cidr> CidrSet::LongestMatch(const IpAddress& address) const {
  if (address.is_v4()) {
    const V4Node* node = V4Trie::Find<false>(v4_, V4Family::KeyOf(address));
    if (node == nullptr) return std::nullopt;
    return V4Trie::NetworkOf(*node);
  }
  const V6Node* node = V6Trie::Find<false>(v6_, V6Family::KeyOf(address));
  if (node == nullptr) return std::nullopt;
  return V6Trie::NetworkOf(*node);
}

std::vector<Cidr> CidrSet::Networks() const {
  std::vector<Cidr> out;
  out.reserve(size_);
  // Depth-first order is address order: a node's prefix (zeros past it)
  // precedes its 0 subtree, which precedes its 1 subtree.
  for (const V4Node& node : v4_) {
    if (node.flags & kNetwork) out.push_back(V4Trie::NetworkOf(node));
  }
  for (const V6Node& node : v6_) {
    if (node.flags & kNetwork) out.push_back(V6Trie::NetworkOf(node));
  }
  return out;
}

size_t CidrSet::MemoryBytes() const {
  return sizeof(*this) + v4_.capacity() * sizeof(V4Node) + v6_.capacity() * sizeof(V6Node);
}

}  // namespace floodgate::service
