// LocalDenyCache: see local_deny_cache.h.
#include "redis/local_deny_cache.h"

#include <algorithm>

#include "absl/hash/hash.h"

namespace floodgate::redis {

LocalDenyCache::LocalDenyCache(size_t max_entries)
    : max_per_shard_(std::max<size_t>(1, max_entries / kShards)) {}

LocalDenyCache::Shard& LocalDenyCache::ShardFor(std::string_view key) {
  return shards_[absl::HashOf(absl::string_view(key.data(), key.size())) % kShards];
}

void LocalDenyCache::Remember(std::string_view key, int64_t cost, int64_t sent_ms,
                              const Decision& d) {
  // Only waits the store named: -1 (never fits) depends on the cost alone
  // and 0 means no wait at all.
  if (d.allowed || d.retry_after_ms <= 0 || cost <= 0) return;
  Shard& shard = ShardFor(key);
  std::lock_guard<std::mutex> lock(shard.mu);
  if (shard.entries.size() >= max_per_shard_) {
    absl::erase_if(shard.entries, [&](const auto& kv) { return kv.second->until_ms <= sent_ms; });
    if (shard.entries.size() >= max_per_shard_) return;
  }
  auto& slot = shard.entries[absl::string_view(key.data(), key.size())];
  const int64_t hold = std::min(d.retry_after_ms, kMaxHoldMs);
  slot = std::make_unique<Entry>(Entry{sent_ms + hold, cost, sent_ms, d});
}

bool LocalDenyCache::Lookup(std::string_view key, int64_t cost, int64_t now_ms, Decision* d) {
  if (cost <= 0) return false;  // a peek always reaches the store
  Shard& shard = ShardFor(key);
  std::lock_guard<std::mutex> lock(shard.mu);
  auto it = shard.entries.find(absl::string_view(key.data(), key.size()));
  if (it == shard.entries.end()) return false;
  const Entry& e = *it->second;
  if (now_ms >= e.until_ms) {
    shard.entries.erase(it);
    return false;
  }
  if (cost < e.cost) return false;  // a cheaper request may still fit
  *d = e.decision;
  const int64_t elapsed = std::max<int64_t>(0, now_ms - e.sent_ms);
  auto shorten = [elapsed](int64_t& wait) {
    if (wait > 0) wait = std::max<int64_t>(1, wait - elapsed);
  };
  shorten(d->retry_after_ms);
  shorten(d->reset_after_ms);
  for (int i = 0; i < d->num_limits; ++i) {
    shorten(d->limits[i].retry_after_ms);
    shorten(d->limits[i].reset_after_ms);
  }
  return true;
}

void LocalDenyCache::Forget(std::string_view key) {
  Shard& shard = ShardFor(key);
  std::lock_guard<std::mutex> lock(shard.mu);
  shard.entries.erase(absl::string_view(key.data(), key.size()));
}

size_t LocalDenyCache::size() const {
  size_t n = 0;
  for (const Shard& s : shards_) {
    std::lock_guard<std::mutex> lock(s.mu);
    n += s.entries.size();
  }
  return n;
}

}  // namespace floodgate::redis
