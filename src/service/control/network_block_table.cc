// NetworkBlockTable: see network_block_table.h.
#include "service/control/network_block_table.h"

#include <algorithm>
#include <mutex>
#include <optional>

namespace floodgate::service {

NetworkBlockTable::NetworkKey NetworkBlockTable::KeyOf(const Cidr& network) {
  return NetworkKey{network.address().high64(), network.address().low64(), network.prefix_len()};
}

void NetworkBlockTable::Put(const Cidr& network, const BlockRecord& block, Map* map,
                            std::vector<int>* lengths) {
  (*map)[KeyOf(network)].Set(block.rule, block.expires_at_ms, block.reason);
  if (std::find(lengths->begin(), lengths->end(), network.prefix_len()) == lengths->end()) {
    lengths->push_back(network.prefix_len());
  }
}

int64_t NetworkBlockTable::Until(const IpAddress& address, std::string_view rule, int64_t now_ms,
                                 std::string_view* reason) const {
  std::shared_lock<std::shared_mutex> lock(mu_);
  const BlockEntry* best = nullptr;
  // One probe per length a blocked network of the family has: the network
  // of that length holding the address is the only one it could be.
  for (int len : address.is_v4() ? v4_lengths_ : v6_lengths_) {
    const std::optional<Cidr> network = Cidr::Of(address, len);
    if (!network) continue;
    auto it = by_network_.find(KeyOf(*network));
    if (it != by_network_.end()) it->second.Latest(rule, now_ms, &best);
  }
  return BlockAnswer(best, reason);
}

void NetworkBlockTable::Replace(const std::vector<BlockRecord>& blocks) {
  Map fresh;
  std::vector<int> v4, v6;
  for (const BlockRecord& b : blocks) {
    if (b.cidr.empty()) continue;
    const Result<Cidr> network = ParseCidr(b.cidr);
    if (!network.ok()) continue;
    Put(*network, b, &fresh, network->is_v4() ? &v4 : &v6);
  }
  std::unique_lock<std::shared_mutex> lock(mu_);
  by_network_.swap(fresh);
  v4_lengths_.swap(v4);
  v6_lengths_.swap(v6);
  count_.store(by_network_.size(), std::memory_order_relaxed);
}

void NetworkBlockTable::Add(const BlockRecord& block) {
  if (block.cidr.empty()) return;
  const Result<Cidr> network = ParseCidr(block.cidr);
  if (!network.ok()) return;
  std::unique_lock<std::shared_mutex> lock(mu_);
  Put(*network, block, &by_network_, network->is_v4() ? &v4_lengths_ : &v6_lengths_);
  count_.store(by_network_.size(), std::memory_order_relaxed);
}

}  // namespace floodgate::service
