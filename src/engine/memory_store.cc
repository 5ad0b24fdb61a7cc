// MemoryStore: sharded entry tables, the live-entry and memory bounds, lazy
// and swept expiry, and the sweep thread.
//
// Memory: an entry is one malloc'd blob (see entry.h) referenced by an 8-byte
// slot in its shard's EntryTable (entry_table.h). With 16-byte keys and
// 2-word states that is a 48-byte chunk plus 8 bytes per slot at the table's
// load factor (3/8 to 3/4 while growing), about 59-70 bytes per entry in all
// (measured in bench/engine_bench.cc).
//
// The memory bound counts those same bytes in one atomic: an entry's chunk
// (Entry::MallocChunkSize) when it is created and freed, a slot array's
// when a table grows or shrinks, and what a state owns beside its entry
// (VariantLayout::owned_bytes: a sliding_log's log, a set's members) when
// a step changes it. A new entry reserves its chunk, and the growth of the
// slot array its insertion would cause, before it is made, as it reserves
// its place under max_entries; a step that gives a state more to own claims
// it from the same counter first (core::MemoryRoom). Both bounds are hard
// even when shards create entries at once, and a decision on a known
// subject that does not grow its state touches neither counter.
//
// What a state owns is counted by measuring, not by adding up claims: the
// store reads owned_bytes before and after each step and adds the
// difference less what the step claimed, so a step that frees (a set's
// member expires, a refund trims a log) gives its bytes back, and the
// counter stays the sum of what the entries hold whatever the step did.
//
// Speed: a lookup costs at most two cache misses, the slot line and the
// entry. Update prefetches the slot line before taking the shard lock: a
// prefetch is not ordered by the lock's fence, so the miss starts as soon as
// the hash is known. That only overlaps it with the lock, though; a caller
// whose path to Update serialises the core (a clock read's rdtscp or lfence)
// gains more by calling Prefetch before that work.
#include "engine/memory_store.h"

#include <cstdlib>

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

// Adds `n` to `counter` unless that would take it past `max`. A
// compare-and-swap rather than add-then-undo: the counter never shows a
// refused reservation, even for an instant (GetStats stays within the
// bounds).
bool TryAdd(std::atomic<int64_t>& counter, int64_t n, int64_t max) {
  int64_t seen = counter.load(std::memory_order_relaxed);
  do {
    if (seen > max - n) return false;
  } while (!counter.compare_exchange_weak(seen, seen + n, std::memory_order_relaxed));
  return true;
}

// The room one Update gives its step: a claim takes its bytes from the
// max_memory counter as a new entry's reservation does. Closed (a new
// entry that has no room itself), it refuses every claim without touching
// the counter. Not thread-safe: one step's.
class StepRoom final : public core::MemoryRoom {
 public:
  StepRoom(std::atomic<int64_t>& bytes, int64_t max_bytes, bool open)
      : bytes_(open ? &bytes : nullptr), max_bytes_(max_bytes) {}

  // What the step's granted claims took.
  int64_t claimed() const { return claimed_; }
  // What the refused claim asked for.
  int64_t wanted() const { return wanted_; }

 private:
  bool Grant(size_t bytes) override {
    const auto n = static_cast<int64_t>(bytes);
    if (bytes_ != nullptr && TryAdd(*bytes_, n, max_bytes_)) {
      claimed_ += n;
      return true;
    }
    wanted_ = n;
    return false;
  }

  std::atomic<int64_t>* const bytes_;  // null: closed
  const int64_t max_bytes_;
  int64_t claimed_ = 0;
  int64_t wanted_ = 0;
};

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
  Impl(const EngineConfig& config, const std::vector<VariantLayout>& layouts_in,
       const Clock& clock_in)
      : layouts(static_cast<VariantLayout*>(std::calloc(kMaxVariants, sizeof(VariantLayout)))),
        clock(clock_in),
        max_entries(config.max_entries),
        max_bytes(config.max_memory),
        shard_bits(ShardBits(config.shards)),
        shards(new Shard[size_t{1} << shard_bits]) {}

  size_t num_shards() const { return size_t{1} << shard_bits; }

  // The shard comes from the hash's high bits: the table inside the shard
  // uses the low bits and bits 47..32 (probe start and tag), so the uses stay
  // independent and every shard's table still sees well-spread hashes.
  Shard& ShardFor(size_t hash) {
    return shard_bits == 0 ? shards[0] : shards[hash >> (64 - shard_bits)];
  }

  // Which bound a reservation met, if any.
  enum class Room { kOk, kNoEntries, kNoBytes };

  // Claims room for one more live entry of `entry_bytes` bytes (its chunk,
  // plus the slot array's growth its insertion causes). Reserving before
  // creating (rather than checking and then adding) keeps max_entries and
  // max_memory hard bounds when several shards create their last entries at
  // the same time.
  Room TryReserveEntry(int64_t entry_bytes) {
    if (!TryAdd(entries, 1, max_entries)) return Room::kNoEntries;
    if (!TryAdd(bytes, entry_bytes, max_bytes)) {
      entries.fetch_sub(1, std::memory_order_relaxed);
      return Room::kNoBytes;
    }
    return Room::kOk;
  }
  void UnreserveEntry(int64_t entry_bytes) {
    bytes.fetch_sub(entry_bytes, std::memory_order_relaxed);
    entries.fetch_sub(1, std::memory_order_relaxed);
  }

  // Charges (or credits) a change of a slot array's size.
  void CountTableBytes(size_t before, size_t after) {
    if (after != before) {
      bytes.fetch_add(static_cast<int64_t>(after) - static_cast<int64_t>(before),
                      std::memory_order_relaxed);
    }
  }

  // What a state of `layout` owns beside its entry (0 for layouts that own
  // nothing).
  static int64_t OwnedBytes(const VariantLayout& layout, const int64_t* state) {
    return layout.owned_bytes != nullptr ? static_cast<int64_t>(layout.owned_bytes(state)) : 0;
  }

  // Counts what a step changed in what its state owns: `before` and `after`
  // as OwnedBytes measured them, less what the step's claims already took.
  // A step that neither changed its state's memory nor claimed touches no
  // counter.
  void SettleOwned(int64_t before, int64_t after, const StepRoom& room) {
    const int64_t change = after - before - room.claimed();
    if (change != 0) bytes.fetch_add(change, std::memory_order_relaxed);
  }

  // A step whose claim the room refused: counted, and said.
  Status GrowthRefused(const StepRoom& room) {
    rejected_full.fetch_add(1, std::memory_order_relaxed);
    return ResourceExhaustedError(
        "store is full (engine.max_memory: " + std::to_string(max_bytes) + " bytes; " +
        std::to_string(bytes.load(std::memory_order_relaxed)) + " in use, the state needs " +
        std::to_string(room.wanted()) + " more)");
  }

  Status FullError(Room room, int64_t entry_bytes) const {
    if (room == Room::kNoEntries) {
      return ResourceExhaustedError(
          "store is full (engine.max_entries: " + std::to_string(max_entries) + ")");
    }
    return ResourceExhaustedError(
        "store is full (engine.max_memory: " + std::to_string(max_bytes) + " bytes; " +
        std::to_string(bytes.load(std::memory_order_relaxed)) + " in use, a new entry needs " +
        std::to_string(entry_bytes) + ")");
  }

  void ReleaseState(const VariantLayout& layout, int64_t* state) {
    if (layout.release != nullptr) layout.release(state);
  }

  // Releases and frees an entry already unlinked from `shard`'s table, and
  // gives back its chunk and what its state owned.
  void DestroyEntryLocked(Shard& shard, Entry* e) ABSL_EXCLUSIVE_LOCKS_REQUIRED(shard.mu) {
    const VariantLayout& layout = layouts.get()[e->variant()];
    const int64_t owned = OwnedBytes(layout, e->state());
    ReleaseState(layout, e->state());
    UnreserveEntry(owned + static_cast<int64_t>(Entry::MallocChunkSize(
                               Entry::AllocSize(e->key().size(), layout.state_words))));
    Entry::Destroy(e);
  }

  // Unlinks, releases and frees the entry in `slot` of `shard`'s table.
  void FreeEntryLocked(Shard& shard, size_t slot) ABSL_EXCLUSIVE_LOCKS_REQUIRED(shard.mu) {
    Entry* e = shard.table.EntryAt(slot);
    shard.table.EraseAt(slot);
    DestroyEntryLocked(shard, e);
  }

  // Before a step on `e`: a state that does not judge its own staleness
  // (not ages_itself) and has expired is released and zeroed, and the step
  // sees it as fresh (returns true). The blob is reused (same key, same
  // size): it was not freed, so it does not count in expired_freed.
  bool ResetIfExpiredLocked(Shard& shard, const VariantLayout& layout, Entry* e, int64_t now_ms)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(shard.mu) {
    if (layout.ages_itself || !e->ExpiredAt(now_ms)) return false;
    ReleaseState(layout, e->state());
    std::memset(e->state(), 0, static_cast<size_t>(layout.state_words) * sizeof(int64_t));
    return true;
  }

  // After a step on `e`, the entry in `slot`: keeps it until `expiry_ms`,
  // or frees it when that is not after now_ms.
  void KeepOrFreeLocked(Shard& shard, size_t slot, Entry* e, int64_t expiry_ms, int64_t now_ms)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(shard.mu) {
    if (expiry_ms <= now_ms) {
      FreeEntryLocked(shard, slot);
    } else {
      e->set_expiry_s(ExpiryMsToStoredSeconds(expiry_ms));
    }
  }

  // Update's step on a known entry whose state owns memory: what the state
  // owns is measured before and after, the difference counted, and what the
  // step means to add is claimed from a room first. Inlined into Update:
  // a call of its own cost a sliding_log decision some 25 instructions of
  // saved registers.
  [[gnu::always_inline]] Status StepOwningLocked(Shard& shard, size_t slot,
                                                 const VariantLayout& layout, int64_t now_ms,
                                                 UpdateFn fn)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(shard.mu) {
    Entry* e = shard.table.EntryAt(slot);
    int64_t* state = e->state();
    const int64_t before = OwnedBytes(layout, state);
    const bool fresh = ResetIfExpiredLocked(shard, layout, e, now_ms);
    StepRoom room(bytes, max_bytes, /*open=*/true);
    const int64_t expiry_ms = fn(state, fresh, &room);
    SettleOwned(before, OwnedBytes(layout, state), room);
    KeepOrFreeLocked(shard, slot, e, expiry_ms, now_ms);
    if (room.refused()) return GrowthRefused(room);
    return Status::Ok();
  }

  // Frees every entry of `shard` expired at `now_ms`. Returns how many.
  int64_t FreeExpiredLocked(Shard& shard, int64_t now_ms) ABSL_EXCLUSIVE_LOCKS_REQUIRED(shard.mu) {
    // Runs within RemoveIf, so under shard.mu (which the analysis cannot see
    // through the callback).
    auto free_if_expired = [&](Entry* e) ABSL_NO_THREAD_SAFETY_ANALYSIS {
      if (!e->ExpiredAt(now_ms)) return false;
      DestroyEntryLocked(shard, e);
      return true;
    };
    // One pass that unlinks in bulk: cheaper than a backward shift per entry
    // when a whole generation of keys expires at once.
    const auto freed = static_cast<int64_t>(shard.table.RemoveIf(free_if_expired));
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
      const size_t table_bytes = shard.table.HeapBytes();
      shard.table.Shrink();
      CountTableBytes(table_bytes, shard.table.HeapBytes());
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

  // Variant layouts, append-only: slots below num_variants never change, so
  // readers need no lock. A fixed array (calloc: untouched pages cost no
  // memory) so that AddVariant never moves what readers are reading.
  struct FreeLayouts {
    void operator()(VariantLayout* p) const { std::free(p); }
  };
  const std::unique_ptr<VariantLayout, FreeLayouts> layouts;
  std::atomic<uint32_t> num_variants{0};
  std::mutex add_variant_mu;  // serialises AddVariant
  const Clock& clock;
  const int64_t max_entries;
  const int64_t max_bytes;
  const int shard_bits;  // log2 of the number of shards
  const std::unique_ptr<Shard[]> shards;

  // Counters are relaxed: they order nothing, they only count.
  std::atomic<int64_t> entries{0};  // live entries plus in-flight reservations
  std::atomic<int64_t> bytes{0};    // their chunks and the slot arrays, plus reservations
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
    : impl_(new Impl(config, layouts, clock)) {
  // Stored as given, so ids match indexes (Update checks each layout's size).
  const size_t n = std::min<size_t>(layouts.size(), kMaxVariants);
  for (size_t i = 0; i < n; ++i) impl_->layouts.get()[i] = layouts[i];
  impl_->num_variants.store(static_cast<uint32_t>(n), std::memory_order_release);
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
    shard.table.ForEach([&](Entry* e) {
      impl_->ReleaseState(impl_->layouts.get()[e->variant()], e->state());
      Entry::Destroy(e);
    });
    shard.table.Clear();
  }
  delete impl_;
}

MemoryStore::PreparedKey MemoryStore::Prepare(uint32_t variant, std::string_view key) const {
  PreparedKey prepared{variant, key, HashEntryKey(static_cast<uint16_t>(variant), key)};
  impl_->ShardFor(prepared.hash).PrefetchSlot(prepared.hash);
  return prepared;
}

Status MemoryStore::Update(uint32_t variant, std::string_view key, int64_t now_ms, UpdateFn fn) {
  return Update(Prepare(variant, key), now_ms, fn);
}

Status MemoryStore::Update(const PreparedKey& prepared, int64_t now_ms, UpdateFn fn) {
  const uint32_t variant = prepared.variant;
  const std::string_view key = prepared.key;
  if (key.size() > kMaxKeyBytes) {
    return InvalidArgumentError("key is " + std::to_string(key.size()) + " bytes; the limit is " +
                                std::to_string(kMaxKeyBytes));
  }
  const uint32_t known = impl_->num_variants.load(std::memory_order_acquire);
  if (variant >= known) {
    return InvalidArgumentError("unknown variant " + std::to_string(variant) + " (the store has " +
                                std::to_string(known) + ")");
  }
  const VariantLayout& layout = impl_->layouts.get()[variant];
  if (layout.state_words < 0 || layout.state_words > kMaxStateWords) {
    return InternalError("variant " + std::to_string(variant) + " has " +
                         std::to_string(layout.state_words) + " state words; the limit is " +
                         std::to_string(kMaxStateWords));
  }
  const size_t state_bytes = static_cast<size_t>(layout.state_words) * sizeof(int64_t);
  // The slot was prefetched by Prepare, before the lock: see the file comment.
  const EntryKey lookup{static_cast<uint16_t>(variant), key, prepared.hash};
  Shard& shard = impl_->ShardFor(lookup.hash);

  std::lock_guard<std::mutex> lock(shard.mu);
  if (const size_t slot = shard.table.Find(lookup); slot != EntryTable::kNotFound) {
    // A state that owns memory is measured around its step, out of line:
    // the fixed-size states of the rules pay one branch for it.
    if (layout.owned_bytes != nullptr) {
      return impl_->StepOwningLocked(shard, slot, layout, now_ms, fn);
    }
    Entry* e = shard.table.EntryAt(slot);
    const bool fresh = impl_->ResetIfExpiredLocked(shard, layout, e, now_ms);
    impl_->KeepOrFreeLocked(shard, slot, e, fn(e->state(), fresh, /*room=*/nullptr), now_ms);
    return Status::Ok();
  }

  // A new subject. Reserve its place (and bytes) first, so that the bounds
  // hold whatever other shards do meanwhile. A full store first frees this
  // shard's expired entries (the sweep thread frees the others').
  const auto chunk_bytes = static_cast<int64_t>(
      Entry::MallocChunkSize(Entry::AllocSize(key.size(), layout.state_words)));
  int64_t reserved = chunk_bytes + static_cast<int64_t>(shard.table.InsertGrowthBytes());
  Impl::Room room = impl_->TryReserveEntry(reserved);
  if (room != Impl::Room::kOk) {
    const int64_t now_s = now_ms / 1000;
    if (now_s != shard.last_full_scan_s) {
      shard.last_full_scan_s = now_s;
      impl_->FreeExpiredLocked(shard, now_ms);
    }
    // Again even without a scan: other shards may have freed room meanwhile.
    reserved = chunk_bytes + static_cast<int64_t>(shard.table.InsertGrowthBytes());
    room = impl_->TryReserveEntry(reserved);
  }

  // fn runs on a zeroed stack copy; only a state worth keeping is allocated,
  // so peeks and denials on unknown subjects cost no memory, and need no
  // room in a full store. Without room for the entry, there is none for
  // what its state would own either.
  alignas(8) int64_t temp[kMaxStateWords];
  std::memset(temp, 0, state_bytes);
  StepRoom state_room(impl_->bytes, impl_->max_bytes, /*open=*/room == Impl::Room::kOk);
  const int64_t expiry_ms =
      fn(temp, /*fresh=*/true, layout.owned_bytes != nullptr ? &state_room : nullptr);
  if (expiry_ms <= now_ms || room != Impl::Room::kOk || state_room.refused()) {
    impl_->ReleaseState(layout, temp);     // fn may have given the state something to own
    impl_->SettleOwned(0, 0, state_room);  // gives back what it claimed
    if (room == Impl::Room::kOk) impl_->UnreserveEntry(reserved);
    if (room != Impl::Room::kOk && (expiry_ms > now_ms || state_room.refused())) {
      impl_->rejected_full.fetch_add(1, std::memory_order_relaxed);
      return impl_->FullError(room, reserved);
    }
    if (state_room.refused()) return impl_->GrowthRefused(state_room);
    return Status::Ok();
  }
  Entry* e = Entry::Create(lookup.variant, key, layout.state_words,
                           ExpiryMsToStoredSeconds(expiry_ms), temp);
  const size_t table_bytes = shard.table.HeapBytes();
  if (e == nullptr || !EntryTable::Storable(e) || !shard.table.Insert(e, lookup.hash)) {
    if (e != nullptr) Entry::Destroy(e);
    impl_->ReleaseState(layout, temp);
    impl_->SettleOwned(0, 0, state_room);
    impl_->UnreserveEntry(reserved);
    return ResourceExhaustedError("out of memory for a new store entry");
  }
  impl_->SettleOwned(0, Impl::OwnedBytes(layout, e->state()), state_room);
  // The reservation already holds the growth InsertGrowthBytes predicted;
  // count only a difference (none, unless the two ever disagree).
  impl_->CountTableBytes(table_bytes + static_cast<size_t>(reserved - chunk_bytes),
                         shard.table.HeapBytes());
  return Status::Ok();
}

Result<uint32_t> MemoryStore::AddVariant(const VariantLayout& layout) {
  if (layout.state_words < 1 || layout.state_words > kMaxStateWords) {
    return InvalidArgumentError("a variant needs 1 to " + std::to_string(kMaxStateWords) +
                                " state words");
  }
  std::lock_guard<std::mutex> lock(impl_->add_variant_mu);
  const uint32_t id = impl_->num_variants.load(std::memory_order_relaxed);
  if (id >= kMaxVariants) {
    return ResourceExhaustedError("too many variants (" + std::to_string(kMaxVariants) + ")");
  }
  impl_->layouts.get()[id] = layout;
  impl_->num_variants.store(id + 1, std::memory_order_release);  // publishes the slot
  return id;
}

size_t MemoryStore::Prefetch(uint32_t variant, std::string_view key) const {
  if (key.size() > kMaxKeyBytes || variant >= kMaxVariants) return 0;
  const size_t hash = HashEntryKey(static_cast<uint16_t>(variant), key);
  impl_->ShardFor(hash).PrefetchSlot(hash);
  return hash;
}

bool MemoryStore::Erase(uint32_t variant, std::string_view key) {
  if (key.size() > kMaxKeyBytes || variant >= impl_->num_variants.load(std::memory_order_acquire)) {
    return false;  // no such entry can exist
  }
  const EntryKey lookup{static_cast<uint16_t>(variant), key,
                        HashEntryKey(static_cast<uint16_t>(variant), key)};
  Shard& shard = impl_->ShardFor(lookup.hash);
  std::lock_guard<std::mutex> lock(shard.mu);
  const size_t slot = shard.table.Find(lookup);
  if (slot == EntryTable::kNotFound) return false;
  impl_->FreeEntryLocked(shard, slot);
  return true;
}

void MemoryStore::ForEachEntry(
    int64_t now_ms,
    absl::FunctionRef<void(uint32_t, std::string_view, uint32_t, const int64_t*)> fn) const {
  for (size_t i = 0; i < impl_->num_shards(); ++i) {
    Shard& shard = impl_->shards[i];
    std::lock_guard<std::mutex> lock(shard.mu);
    shard.table.ForEach([&](Entry* e) {
      if (e->ExpiredAt(now_ms)) return;
      fn(e->variant(), e->key(), e->expiry_s(), e->state());
    });
  }
}

VariantLayout MemoryStore::Layout(uint32_t variant) const {
  if (variant >= impl_->num_variants.load(std::memory_order_acquire)) return VariantLayout{};
  return impl_->layouts.get()[variant];
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
  stats.bytes = impl_->bytes.load(std::memory_order_relaxed);
  return stats;
}

size_t MemoryStore::ApproximateMemoryBytes() const {
  return static_cast<size_t>(std::max<int64_t>(0, impl_->bytes.load(std::memory_order_relaxed)));
}

}  // namespace floodgate::engine
