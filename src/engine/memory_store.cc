// MemoryStore: sharded entry tables, the live-entry bound, lazy and swept
// expiry, and the sweep thread.
//
// Memory: an entry is one malloc'd blob (see entry.h) referenced by an 8-byte
// slot in its shard's swiss table. With 16-byte keys and 2-word states that
// is a 48-byte chunk plus 9 bytes per table slot at the table's load factor,
// about 60-70 bytes per entry in all (measured in bench/engine_bench.cc).
#include "engine/memory_store.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <utility>

#include "engine/entry.h"
#include "engine/shard.h"
#include "floodgate/rule.h"

namespace floodgate::engine {
namespace {

static_assert(sizeof(size_t) == 8, "shard selection takes the top bits of a 64-bit hash");

// The largest state a variant may have; the temporary state of a new subject
// lives on the stack at this size.
constexpr int kMaxStateWords = 64;

// Variant ids are stored in 16 bits.
constexpr uint32_t kMaxVariants = 65536;

// Past this the sweep thread's condition-variable deadline could overflow;
// a day between sweeps is "never" for any sensible configuration anyway.
constexpr int64_t kMaxSweepIntervalMs = 86'400'000;

// A shrink leaves the table at least 7/16 full (Abseil's growth bound halved),
// so shrinking below 1/4 full cannot oscillate with growth.
bool ShouldShrink(size_t size, size_t capacity) { return capacity > 64 && size * 4 < capacity; }

int ShardBits(int shards) {
  // EngineConfig says a power of two; round anything else up so a bad value
  // cannot break the shard arithmetic. At most 2^16 shards.
  int bits = 0;
  while (bits < 16 && (int64_t{1} << bits) < shards) ++bits;
  return bits;
}

}  // namespace

// Thread-safe: each shard's table and entries are guarded by the shard's
// mutex (see shard.h), the counters are atomics, the sweep thread's stop flag
// is guarded by sweep_mu, and everything else is immutable after construction.
// Lock order: a thread holds at most one shard mutex, and never a shard mutex
// together with sweep_mu.
struct MemoryStore::Impl {
  Impl(const EngineConfig& config, std::vector<VariantLayout> layouts_in, const Clock& clock_in)
      : layouts(std::move(layouts_in)),
        clock(clock_in),
        max_entries(config.max_entries),
        shard_bits(ShardBits(config.shards)),
        shards(new Shard[size_t{1} << shard_bits]) {}

  size_t num_shards() const { return size_t{1} << shard_bits; }

  // The shard comes from the hash's high bits: the table inside the shard
  // uses the low bits (control byte and probe start), so the two stay
  // independent and every shard's table still sees well-spread hashes.
  Shard& ShardFor(size_t hash) {
    return shard_bits == 0 ? shards[0] : shards[hash >> (64 - shard_bits)];
  }

  // Claims room for one more live entry. Reserving before creating (rather
  // than checking and then adding) keeps max_entries a hard bound when
  // several shards create their last entries at the same time.
  bool TryReserveEntry() {
    if (entries.fetch_add(1, std::memory_order_relaxed) < max_entries) return true;
    entries.fetch_sub(1, std::memory_order_relaxed);
    return false;
  }
  void UnreserveEntry() { entries.fetch_sub(1, std::memory_order_relaxed); }

  void ReleaseState(const VariantLayout& layout, int64_t* state) {
    if (layout.release != nullptr) layout.release(state);
  }

  // Releases, unlinks and frees one entry; `it` points at it.
  void FreeEntryLocked(Shard& shard, EntrySet::iterator it)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(shard.mu) {
    Entry* e = *it;
    const VariantLayout& layout = layouts[e->variant()];
    ReleaseState(layout, e->state());
    shard.entry_bytes -=
        Entry::MallocChunkSize(Entry::AllocSize(e->key().size(), layout.state_words));
    shard.entries.erase(it);
    Entry::Destroy(e);
    entries.fetch_sub(1, std::memory_order_relaxed);
  }

  // Frees every entry of `shard` expired at `now_ms`. Returns how many.
  int64_t FreeExpiredLocked(Shard& shard, int64_t now_ms) ABSL_EXCLUSIVE_LOCKS_REQUIRED(shard.mu) {
    int64_t freed = 0;
    // Erasing from a flat_hash_set invalidates only the erased iterator, and
    // never rehashes, so `erase(it++)` walks the table safely.
    for (auto it = shard.entries.begin(); it != shard.entries.end();) {
      if ((*it)->ExpiredAt(now_ms)) {
        FreeEntryLocked(shard, it++);
        ++freed;
      } else {
        ++it;
      }
    }
    expired_freed.fetch_add(freed, std::memory_order_relaxed);
    return freed;
  }

  // Sweeps shard by shard so that no lock is held for more than one shard's
  // walk. `stoppable`: give up between shards once the store is stopping.
  int64_t SweepShards(int64_t now_ms, bool stoppable) {
    int64_t freed = 0;
    for (size_t i = 0; i < num_shards(); ++i) {
      if (stoppable && stopping.load(std::memory_order_relaxed)) break;
      Shard& shard = shards[i];
      std::lock_guard<std::mutex> lock(shard.mu);
      freed += FreeExpiredLocked(shard, now_ms);
      // Tables never shrink by themselves; after a flood of short-lived keys
      // expires, give the memory back.
      if (ShouldShrink(shard.entries.size(), shard.entries.capacity())) shard.entries.rehash(0);
    }
    return freed;
  }

  void SweepLoop(int64_t interval_ms) {
    const auto interval = std::chrono::milliseconds(std::min(interval_ms, kMaxSweepIntervalMs));
    std::unique_lock<std::mutex> lock(sweep_mu);
    while (true) {
      // A condition variable rather than a sleep: the destructor wakes the
      // thread at once instead of waiting out the interval.
      sweep_cv.wait_for(lock, interval, [this] { return stop_requested; });
      if (stop_requested) return;
      lock.unlock();
      SweepShards(clock.NowMs(), /*stoppable=*/true);
      lock.lock();
    }
  }

  const std::vector<VariantLayout> layouts;
  const Clock& clock;
  const int64_t max_entries;
  const int shard_bits;  // log2 of the number of shards
  const std::unique_ptr<Shard[]> shards;

  // Counters are relaxed: they order nothing, they only count.
  std::atomic<int64_t> entries{0};  // live entries plus in-flight reservations
  std::atomic<int64_t> rejected_full{0};
  std::atomic<int64_t> expired_freed{0};

  // The sweep thread. `stopping` mirrors `stop_requested` for the lock-free
  // check between shards.
  std::mutex sweep_mu;
  std::condition_variable sweep_cv;
  bool stop_requested ABSL_GUARDED_BY(sweep_mu) = false;
  std::atomic<bool> stopping{false};
  std::thread sweeper;
};

MemoryStore::MemoryStore(const EngineConfig& config, std::vector<VariantLayout> layouts,
                         const Clock& clock)
    : impl_(new Impl(config, std::move(layouts), clock)) {
  if (config.sweep_interval_ms > 0) {
    impl_->sweeper =
        std::thread([impl = impl_, ms = config.sweep_interval_ms] { impl->SweepLoop(ms); });
  }
}

MemoryStore::~MemoryStore() {
  if (impl_->sweeper.joinable()) {
    {
      std::lock_guard<std::mutex> lock(impl_->sweep_mu);
      impl_->stop_requested = true;
    }
    impl_->stopping.store(true, std::memory_order_relaxed);
    impl_->sweep_cv.notify_all();
    impl_->sweeper.join();
  }
  for (size_t i = 0; i < impl_->num_shards(); ++i) {
    Shard& shard = impl_->shards[i];
    std::lock_guard<std::mutex> lock(shard.mu);
    for (Entry* e : shard.entries) {
      impl_->ReleaseState(impl_->layouts[e->variant()], e->state());
      Entry::Destroy(e);
    }
    shard.entries.clear();
  }
  delete impl_;
}

Status MemoryStore::Update(uint32_t variant, std::string_view key, int64_t now_ms, UpdateFn fn) {
  if (key.size() > kMaxKeyBytes) {
    return InvalidArgumentError("key is " + std::to_string(key.size()) + " bytes; the limit is " +
                                std::to_string(kMaxKeyBytes));
  }
  if (variant >= impl_->layouts.size() || variant >= kMaxVariants) {
    return InvalidArgumentError("unknown variant " + std::to_string(variant) + " (the store has " +
                                std::to_string(impl_->layouts.size()) + ")");
  }
  const VariantLayout& layout = impl_->layouts[variant];
  if (layout.state_words < 0 || layout.state_words > kMaxStateWords) {
    return InternalError("variant " + std::to_string(variant) + " has " +
                         std::to_string(layout.state_words) + " state words; the limit is " +
                         std::to_string(kMaxStateWords));
  }
  const size_t state_bytes = static_cast<size_t>(layout.state_words) * sizeof(int64_t);
  const EntryKey lookup{static_cast<uint16_t>(variant), key,
                        HashEntryKey(static_cast<uint16_t>(variant), key)};
  Shard& shard = impl_->ShardFor(lookup.hash);

  std::lock_guard<std::mutex> lock(shard.mu);
  if (auto it = shard.entries.find(lookup); it != shard.entries.end()) {
    Entry* e = *it;
    int64_t* state = e->state();
    bool fresh = false;
    if (e->ExpiredAt(now_ms)) {
      // Reuse the blob: same key, same size. It was not freed, so it does
      // not count in expired_freed.
      impl_->ReleaseState(layout, state);
      std::memset(state, 0, state_bytes);
      fresh = true;
    }
    const int64_t expiry_ms = fn(state, fresh);
    if (expiry_ms <= now_ms) {
      impl_->FreeEntryLocked(shard, it);
    } else {
      e->set_expiry_s(ExpiryMsToStoredSeconds(expiry_ms));
    }
    return Status::Ok();
  }

  // A new subject. Reserve its place first: when the store is full, fn must
  // not run (its decision could not be kept).
  if (!impl_->TryReserveEntry()) {
    const int64_t now_s = now_ms / 1000;
    if (now_s != shard.last_full_scan_s) {
      shard.last_full_scan_s = now_s;
      impl_->FreeExpiredLocked(shard, now_ms);
    }
    if (!impl_->TryReserveEntry()) {
      impl_->rejected_full.fetch_add(1, std::memory_order_relaxed);
      return ResourceExhaustedError("store is full: " + std::to_string(impl_->max_entries) +
                                    " entries (engine.max_entries)");
    }
  }

  // fn runs on a zeroed stack copy; only a state worth keeping is allocated,
  // so peeks and denials on unknown subjects cost no memory.
  alignas(8) int64_t temp[kMaxStateWords];
  std::memset(temp, 0, state_bytes);
  const int64_t expiry_ms = fn(temp, /*fresh=*/true);
  if (expiry_ms <= now_ms) {
    impl_->ReleaseState(layout, temp);  // fn may have given the state something to own
    impl_->UnreserveEntry();
    return Status::Ok();
  }
  Entry* e = Entry::Create(lookup.variant, key, layout.state_words,
                           ExpiryMsToStoredSeconds(expiry_ms), temp);
  if (e == nullptr) {
    impl_->ReleaseState(layout, temp);
    impl_->UnreserveEntry();
    return ResourceExhaustedError("out of memory for a new store entry");
  }
  shard.entries.insert(e);
  shard.entry_bytes += Entry::MallocChunkSize(Entry::AllocSize(key.size(), layout.state_words));
  return Status::Ok();
}

bool MemoryStore::Erase(uint32_t variant, std::string_view key) {
  if (key.size() > kMaxKeyBytes || variant >= impl_->layouts.size() || variant >= kMaxVariants) {
    return false;  // no such entry can exist
  }
  const EntryKey lookup{static_cast<uint16_t>(variant), key,
                        HashEntryKey(static_cast<uint16_t>(variant), key)};
  Shard& shard = impl_->ShardFor(lookup.hash);
  std::lock_guard<std::mutex> lock(shard.mu);
  auto it = shard.entries.find(lookup);
  if (it == shard.entries.end()) return false;
  impl_->FreeEntryLocked(shard, it);
  return true;
}

int64_t MemoryStore::SweepExpired(int64_t now_ms) {
  return impl_->SweepShards(now_ms, /*stoppable=*/false);
}

MemoryStore::Stats MemoryStore::GetStats() const {
  Stats stats;
  // May include a reservation in flight for a subject being created.
  stats.entries = impl_->entries.load(std::memory_order_relaxed);
  stats.rejected_full = impl_->rejected_full.load(std::memory_order_relaxed);
  stats.expired_freed = impl_->expired_freed.load(std::memory_order_relaxed);
  return stats;
}

size_t MemoryStore::ApproximateMemoryBytes() const {
  size_t bytes = 0;
  for (size_t i = 0; i < impl_->num_shards(); ++i) {
    Shard& shard = impl_->shards[i];
    std::lock_guard<std::mutex> lock(shard.mu);
    bytes += shard.entry_bytes + EntrySetHeapBytes(shard.entries.capacity());
  }
  return bytes;
}

}  // namespace floodgate::engine
