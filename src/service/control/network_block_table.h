// NetworkBlockTable: the networks blocked now (CIDR blocks, BlockRecord::cidr
// in service/control/control_plane.h), as a check about an address asks: is
// this address inside a network blocked on this rule, until when, and why?
//
// Every blocked network holding the address counts, not only the most
// specific one: a /16 blocked on every rule and a /24 blocked on one rule
// both block an address of the /24 on that rule, and the later end wins.
// A CidrSet names the longest match only, so the table is a hash table by
// network instead, probed once per prefix length that some blocked network
// of the address's family has: blocks are an operator's few, so a lookup
// is a few probes (one per distinct length), whatever the networks' count.
//
// IPv4 and IPv6 are apart as in service/lists/cidr.h: an IPv4 address,
// mapped form (::ffff:a.b.c.d) included, is inside IPv4 networks only.
//
// Replaced whole when the control plane loads its records. any() is one
// relaxed load: while no network is blocked, a check pays only that.
//
// Thread-safe.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "common/cidr.h"
#include "common/ip_address.h"
#include "service/control/block_entries.h"
#include "service/control/control_plane.h"

namespace floodgate::service {

class NetworkBlockTable {
 public:
  // Whether any network is blocked (expired blocks included, until the next
  // Replace drops them).
  bool any() const { return count_.load(std::memory_order_relaxed) != 0; }

  // The end of the latest block running at now_ms, on `rule` or on every
  // rule, of any blocked network holding `address`, and its reason; 0 when
  // none. The reason's text stays valid until this thread's next call.
  int64_t Until(const IpAddress& address, std::string_view rule, int64_t now_ms,
                std::string_view* reason) const;

  // The network blocks of `blocks` (those whose `cidr` is set; key blocks
  // are BlockTable's) in force from now, in place of all before. A `cidr`
  // that is not a network's text is skipped.
  void Replace(const std::vector<BlockRecord>& blocks);
  // One network block in force at once, replacing the one of the same
  // network and rule. Ignored unless `block.cidr` is a network's text.
  void Add(const BlockRecord& block);

 private:
  // A network as the table keys it: its address's two words and its
  // length (an IPv4 network's address is in the mapped form, so the two
  // families never share a key).
  struct NetworkKey {
    uint64_t high = 0;
    uint64_t low = 0;
    int prefix_len = 0;

    friend bool operator==(const NetworkKey&, const NetworkKey&) = default;
    template <typename H>
    friend H AbslHashValue(H h, const NetworkKey& k) {
      return H::combine(std::move(h), k.high, k.low, k.prefix_len);
    }
  };
  using Map = absl::flat_hash_map<NetworkKey, BlockEntries>;

  static NetworkKey KeyOf(const Cidr& network);
  // Puts `block` into `map`, replacing the entry of its rule; `lengths`
  // (of its family) gets its prefix length if new.
  static void Put(const Cidr& network, const BlockRecord& block, Map* map,
                  std::vector<int>* lengths);

  mutable std::shared_mutex mu_;
  Map by_network_;               // guarded by mu_
  std::vector<int> v4_lengths_;  // guarded by mu_: the prefix lengths in by_network_, IPv4's
  std::vector<int> v6_lengths_;  // guarded by mu_: IPv6's
  std::atomic<size_t> count_{0};
};

}  // namespace floodgate::service
