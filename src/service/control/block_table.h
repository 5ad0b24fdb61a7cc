// BlockTable: the subjects blocked now (service/control/control_plane.h), as every
// check asks: is this subject blocked on this rule, until when, and why?
// Blocked networks are NetworkBlockTable's (network_block_table.h).
//
// Replaced whole when the control plane loads its records, added to by a
// rule's block_for. any() is one relaxed load: while nothing is blocked a
// check pays only that.
//
// Thread-safe.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "service/control/block_entries.h"
#include "service/control/control_plane.h"

namespace floodgate::service {

class BlockTable {
 public:
  bool any() const { return count_.load(std::memory_order_relaxed) != 0; }

  // The end of the latest block of `subject` on `rule` (or on every rule)
  // still running at now_ms, and its reason; 0 when none. The reason's
  // text stays valid until this thread's next call.
  int64_t Until(std::string_view rule, std::string_view subject, int64_t now_ms,
                std::string_view* reason) const {
    std::shared_lock<std::shared_mutex> lock(mu_);
    auto it = by_subject_.find(Key(subject));
    if (it == by_subject_.end()) return 0;
    const BlockEntry* best = nullptr;
    it->second.Latest(rule, now_ms, &best);
    return BlockAnswer(best, reason);
  }

  void Replace(const std::vector<BlockRecord>& blocks) {
    absl::flat_hash_map<std::string, BlockEntries> fresh;
    for (const BlockRecord& b : blocks) {
      if (!b.cidr.empty()) continue;  // a network's: NetworkBlockTable
      fresh[b.key].Set(b.rule, b.expires_at_ms, b.reason);
    }
    std::unique_lock<std::shared_mutex> lock(mu_);
    by_subject_.swap(fresh);
    count_.store(by_subject_.size(), std::memory_order_relaxed);
  }

  void Add(std::string_view rule, std::string_view subject, int64_t until_ms,
           const std::string& reason) {
    std::unique_lock<std::shared_mutex> lock(mu_);
    by_subject_[Key(subject)].Set(rule, until_ms, reason);
    count_.store(by_subject_.size(), std::memory_order_relaxed);
  }

 private:
  // Debian's abseil has its own string_view type.
  static absl::string_view Key(std::string_view s) { return absl::string_view(s.data(), s.size()); }

  mutable std::shared_mutex mu_;
  absl::flat_hash_map<std::string, BlockEntries> by_subject_;  // guarded by mu_
  std::atomic<size_t> count_{0};
};

}  // namespace floodgate::service
