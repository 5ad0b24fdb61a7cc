// CidrSet: an immutable set of IPv4 and IPv6 networks that answers, for an
// address, whether any network holds it and which one the longest match is.
// What a deny list, an allow list and the trusted proxies are read into.
//
// Contract:
//  - Built once, from networks in any order; a network given twice is held
//    once. Nested and overlapping networks are all kept: LongestMatch names
//    the most specific one holding the address.
//  - IPv4 and IPv6 are apart (cidr.h): an IPv4 address, mapped form
//    included, is matched against the IPv4 networks only.
//  - A lookup reads one slot of a table indexed by the address's bits that
//    follow the prefix all networks share, then the nodes of a
//    path-compressed binary trie below it: a few on the typical path (at
//    most 33 for IPv4, 129 for IPv6). It allocates nothing and takes no
//    lock.
//  - Memory: 12 bytes a node for IPv4, 24 for IPv6, at most two nodes per
//    network, and the table at most 8 bytes per node.
//  - At most kMaxCidrSetNetworks networks: Build refuses more with
//    RESOURCE_EXHAUSTED.
//
// Thread-safe: const after Build, so any number of threads may look up at
// once. Replacing the set a server uses (a reload) is its owner's business.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "common/cidr.h"
#include "common/ip_address.h"
#include "floodgate/status.h"

namespace floodgate::service {

// A bound above the list files' (cidr_list_file.h), and far below what the
// trie's 32-bit node indices could hold (two nodes per network at most).
inline constexpr size_t kMaxCidrSetNetworks = size_t{1} << 24;

class CidrSet {
 public:
  // The empty set: nothing matches.
  CidrSet() = default;

  static Result<CidrSet> Build(std::vector<Cidr> networks);

  // Whether some network holds `address`. Stops at the first one it meets.
  bool Contains(const IpAddress& address) const;
  // The longest network holding `address`, or nullopt.
  std::optional<Cidr> LongestMatch(const IpAddress& address) const;

  // Distinct networks held.
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  // Every network held, IPv4 first, each family in address order and,
  // for one address, shortest prefix first.
  std::vector<Cidr> Networks() const;
  // Bytes the set holds on the heap and in itself: what it costs to keep.
  size_t MemoryBytes() const;

 private:
  template <typename Family>
  friend class CidrTrie;  // cidr_set.cc: the trie's build and walk, for either family

  // One node of a family's trie: the prefix its subtree shares (`key`, its
  // first `len` bits), whether that prefix is itself a network of the set,
  // and its children by the next bit. Nodes lie in depth-first order, so
  // the 0 child, when there is one, is the next node.
  struct V4Node {
    uint32_t key;
    uint32_t child1;
    uint8_t len;
    uint8_t flags;
  };
  struct V6Node {
    uint64_t key_high;
    uint64_t key_low;
    uint32_t child1;
    uint8_t len;
    uint8_t flags;
  };
  // Where a lookup goes on from, by the `stride` bits that follow the
  // root's prefix: the first node it has yet to compare, and the longest
  // network it has passed on the way there (node indices, kNoNode if none).
  struct Slot {
    uint32_t start;
    uint32_t best;
  };
  template <typename Node>
  struct Trie {
    std::vector<Node> nodes;
    std::vector<Slot> slots;  // 2^stride of them; empty when nodes is
    int stride = 0;
  };

  Trie<V4Node> v4_;
  Trie<V6Node> v6_;
  size_t size_ = 0;
};

}  // namespace floodgate::service
