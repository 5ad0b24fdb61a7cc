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
    const Entry* best = nullptr;
    for (const Entry& e : it->second) {
      if (e.until_ms <= now_ms || (!e.rule.empty() && e.rule != rule)) continue;
      if (best == nullptr || e.until_ms > best->until_ms) best = &e;
    }
    if (best == nullptr) return 0;
    thread_local std::shared_ptr<const std::string> held;
    held = best->reason;
    *reason = *held;
    return best->until_ms;
  }

  void Replace(const std::vector<BlockRecord>& blocks) {
    absl::flat_hash_map<std::string, std::vector<Entry>> fresh;
    for (const BlockRecord& b : blocks) {
      if (!b.cidr.empty()) continue;  // a network's: NetworkBlockTable
      fresh[b.key].push_back(
          Entry{b.rule, b.expires_at_ms, std::make_shared<const std::string>(b.reason)});
    }
    std::unique_lock<std::shared_mutex> lock(mu_);
    by_subject_.swap(fresh);
    count_.store(by_subject_.size(), std::memory_order_relaxed);
  }

  void Add(std::string_view rule, std::string_view subject, int64_t until_ms,
           const std::string& reason) {
    std::unique_lock<std::shared_mutex> lock(mu_);
    std::vector<Entry>& entries = by_subject_[Key(subject)];
    for (Entry& e : entries) {
      if (e.rule == rule) {
        e.until_ms = until_ms;
        e.reason = std::make_shared<const std::string>(reason);
        return;
      }
    }
    entries.push_back(
        Entry{std::string(rule), until_ms, std::make_shared<const std::string>(reason)});
    count_.store(by_subject_.size(), std::memory_order_relaxed);
  }

 private:
  struct Entry {
    std::string rule;  // "" : every rule
    int64_t until_ms = 0;
    std::shared_ptr<const std::string> reason;
  };
  // Debian's abseil has its own string_view type.
  static absl::string_view Key(std::string_view s) { return absl::string_view(s.data(), s.size()); }

  mutable std::shared_mutex mu_;
  absl::flat_hash_map<std::string, std::vector<Entry>> by_subject_;  // guarded by mu_
  std::atomic<size_t> count_{0};
};

}  // namespace floodgate::service
