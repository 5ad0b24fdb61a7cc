// BlockEntries: the blocks of one subject (BlockTable) or one network
// (NetworkBlockTable), at most one per rule ("" : every rule), and the
// question both tables ask of them: which block running now holds on this
// rule and ends last?
//
// Not thread-safe: each table guards its entries with its own mutex.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace floodgate::service {

struct BlockEntry {
  std::string rule;  // "" : every rule
  int64_t until_ms = 0;
  // Shared so that an answer's reason outlives a Replace (BlockAnswer).
  std::shared_ptr<const std::string> reason;
};

class BlockEntries {
 public:
  // The block of `rule` ends at until_ms, for `reason`: the entry of that
  // rule changed, or a new one.
  void Set(std::string_view rule, int64_t until_ms, const std::string& reason) {
    auto shared = std::make_shared<const std::string>(reason);
    for (BlockEntry& e : entries_) {
      if (e.rule == rule) {
        e.until_ms = until_ms;
        e.reason = std::move(shared);
        return;
      }
    }
    entries_.push_back(BlockEntry{std::string(rule), until_ms, std::move(shared)});
  }

  // *best becomes the entry running at now_ms that holds on `rule` and
  // ends after *best (any, when null), if there is one.
  void Latest(std::string_view rule, int64_t now_ms, const BlockEntry** best) const {
    for (const BlockEntry& e : entries_) {
      if (e.until_ms <= now_ms || (!e.rule.empty() && e.rule != rule)) continue;
      if (*best == nullptr || e.until_ms > (*best)->until_ms) *best = &e;
    }
  }

 private:
  std::vector<BlockEntry> entries_;
};

// The answer of a table's Until for `best` (null: none): its end and, in
// *reason, its reason, whose text stays valid until this thread's next
// call (the table may replace the entry meanwhile); 0 when none.
inline int64_t BlockAnswer(const BlockEntry* best, std::string_view* reason) {
  if (best == nullptr) return 0;
  thread_local std::shared_ptr<const std::string> held;
  held = best->reason;
  *reason = *held;
  return best->until_ms;
}

}  // namespace floodgate::service
