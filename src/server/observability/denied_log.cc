// One compare-and-swap per denial decides whether it is logged: the slot of
// its subject holds the time of that slot's last line. A denial on the hot
// path of a flood therefore costs a hash and an atomic, never a lock.
#include "server/observability/denied_log.h"

#include <string>

#include "absl/hash/hash.h"
#include "common/log.h"
#include "server/observability/redact_key.h"

namespace floodgate::server {
namespace {

constexpr uint64_t kTimeMask = (uint64_t{1} << 48) - 1;

}  // namespace

bool DeniedLog::Claim(uint64_t hash, int64_t now_ms, bool take) {
  std::atomic<uint64_t>& slot = slots_[hash % kSlots];
  uint64_t seen = slot.load(std::memory_order_relaxed);
  const uint64_t now = static_cast<uint64_t>(now_ms) & kTimeMask;
  if (seen != 0 && now >= seen && now - seen < static_cast<uint64_t>(interval_ms_)) return false;
  if (!take) return true;
  // Two loops denying the same subject at once: one line.
  return slot.compare_exchange_strong(seen, now == 0 ? 1 : now, std::memory_order_relaxed);
}

bool DeniedLog::TakeBudget(int64_t now_ms) {
  const uint64_t second = static_cast<uint64_t>(now_ms / 1000);
  uint64_t seen = budget_.load(std::memory_order_relaxed);
  for (;;) {
    const uint64_t count = (seen >> 48) == (second & 0xffff) ? (seen & 0xffff) : 0;
    if (count >= static_cast<uint64_t>(kMaxDeniedLinesPerSecond)) return false;
    const uint64_t next = ((second & 0xffff) << 48) | (count + 1);
    if (budget_.compare_exchange_weak(seen, next, std::memory_order_relaxed)) return true;
  }
}

void DeniedLog::Denied(std::string_view rule, std::string_view key, const Decision& d,
                       int64_t now_ms) {
  if (interval_ms_ <= 0) return;
  const uint64_t hash = absl::HashOf(rule, key);
  // The slot is taken only with a line to write: a denial the second's
  // budget holds back leaves its subject free to be logged next second.
  if (!Claim(hash, now_ms, /*take=*/false) || !TakeBudget(now_ms) ||
      !Claim(hash, now_ms, /*take=*/true)) {
    suppressed_.fetch_add(1, std::memory_order_relaxed);
    held_.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  written_.fetch_add(1, std::memory_order_relaxed);
  const int64_t held = held_.exchange(0, std::memory_order_relaxed);
  std::string limit = d.blocked                       ? "block"
                      : d.fallback != Fallback::kNone ? std::string(FallbackName(d.fallback))
                                                      : d.binding_limit.ToString();
  Log(LogLevel::kInfo, "denied",
      {{"rule", std::string(rule)},
       {"limit", std::move(limit)},
       {"key", ShownKey(key, redact_)},
       {"retry_after_ms", std::to_string(d.retry_after_ms)},
       {"shadow", d.shadow_denied ? "true" : "false"},
       {"suppressed", std::to_string(held)}});
}

}  // namespace floodgate::server
