// MemoryStore: the embedded store. Sharded tables of small fixed-size states,
// one entry per (rule variant, subject key), each with its own expiry.
//
// Thread-safe. Each shard has its own mutex; a key's shard is chosen by hash,
// so threads touching different subjects rarely contend.
//
// Bounded: at most EngineConfig::max_entries live entries, and at most
// EngineConfig::max_memory bytes of entries, of what their states own
// beside them (a sliding_log's log, a set's members) and of slot arrays
// (counted where they are allocated and freed, so the check is one atomic
// add per new entry or per growth of a state). Past either, creating a new
// entry, or growing a state, fails with RESOURCE_EXHAUSTED (counted in
// Stats::rejected_full); existing entries keep working as long as they do
// not grow. Expired entries are freed by a background sweep thread (every
// EngineConfig::sweep_interval_ms), and those of the shard concerned before
// a new entry is refused.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/functional/function_ref.h"
#include "core/memory_room.h"
#include "floodgate/clock.h"
#include "floodgate/config.h"
#include "floodgate/status.h"

namespace floodgate::engine {

// What a store needs to know about one rule variant (a rule, or a rule's tier).
struct VariantLayout {
  int state_words = 0;  // size of the state, in int64 words (1..64)
  // Called with the state before an entry's memory is freed (expiry, sweep,
  // reset, destruction). Null when the state owns nothing. Must not block.
  void (*release)(int64_t* state) = nullptr;
  // The heap bytes the state owns beside its entry (what `release` frees),
  // as core::MallocChunkSize counts them; 0 for a zero state. Null when the
  // state owns nothing. The store measures it before and after every step
  // on such a state and counts the difference against max_memory, so it
  // must be a function of the state alone, and cheap.
  size_t (*owned_bytes)(const int64_t* state) = nullptr;
  // The state judges its own staleness: an expired one decides exactly as a
  // zeroed one would (the rules' algorithms: their expiry is the instant the
  // state holds nothing any more, and they read time from the state). Update
  // then does not look at an existing entry's expiry: `fn` gets the state as
  // it is, with fresh == false. The expiry still frees the entry (sweep, a
  // full store). Why: on distinct subjects the expiry test is a branch on
  // the entry's cache miss, and skipping it made a gcra decision ~25 ns
  // faster in limiter_bench (its entries expire a second after last use).
  bool ages_itself = false;
  // How a snapshot (engine/snapshot.h) writes and reads the state. Null:
  // the words as they are, which is right for every state that holds only
  // numbers. A state that owns memory (a pointer in its words) says how to
  // write what it points at. `decode` fills a zeroed state of `words` words
  // from what `encode` wrote (dropping what has expired by `now_ms`) and
  // returns false for bytes it cannot read; what it allocated is released
  // by `release` either way.
  void (*encode)(const int64_t* state, int words, std::string* out) = nullptr;
  bool (*decode)(std::string_view in, int words, int64_t now_ms, int64_t* state) = nullptr;
};

// Runs under the shard lock with the entry's state. `fresh` is true when the
// entry did not exist or had expired (unless its variant ages_itself): the
// state is then all zeros. Returns
// the entry's new expiry in ms since the epoch; a value <= now_ms means "keep
// nothing": the entry is removed (or never created). Must not call the store.
//
// `room` (core/memory_room.h) is max_memory's: a step that gives its state
// more memory to own claims it first; when a claim is refused the step
// leaves the state as it was and Update answers RESOURCE_EXHAUSTED, whatever
// fn returns. Null for a variant whose states own nothing (no
// VariantLayout::owned_bytes): such a step has nothing to claim, and its
// decision pays for no room.
//
// Expiry is kept in whole seconds, rounded up: an entry given expiry T ms
// expires at ceil(T / 1000) * 1000 ms, up to 999 ms later, and until then `fn`
// sees its old state with fresh == false. Expiry only frees memory: the
// algorithms judge staleness from their own timestamps in the state.
using UpdateFn = absl::FunctionRef<int64_t(int64_t* state, bool fresh, core::MemoryRoom* room)>;

class MemoryStore {
 public:
  struct Stats {
    int64_t entries = 0;        // live entries (including not yet swept expired ones)
    int64_t rejected_full = 0;  // steps refused at max_entries or max_memory: creations,
                                // and growths of a state's memory
    int64_t expired_freed = 0;  // entries freed because they expired (an expired entry
                                // found by Update is reset in place, not counted)
    int64_t bytes = 0;          // what max_memory bounds: entries, what their states
                                // own, and slot arrays
  };

  // `layouts` is indexed by variant id (< 65536). Starts the sweep thread when
  // config.sweep_interval_ms > 0; it reads `clock` (which must outlive the store).
  MemoryStore(const EngineConfig& config, std::vector<VariantLayout> layouts, const Clock& clock);
  ~MemoryStore();  // stops the sweeper, releases every entry
  MemoryStore(const MemoryStore&) = delete;
  MemoryStore& operator=(const MemoryStore&) = delete;

  // A (variant, key) with its hash computed, from Prepare(): lets a caller
  // start the entry's cache miss early and hash the key only once. Valid
  // while `key`'s bytes are.
  struct PreparedKey {
    uint32_t variant = 0;
    std::string_view key;
    size_t hash = 0;
  };
  // Hashes (variant, key) and prefetches its table slot (see Prefetch).
  PreparedKey Prepare(uint32_t variant, std::string_view key) const;
  // Update() for a prepared key.
  Status Update(const PreparedKey& key, int64_t now_ms, UpdateFn fn);

  // Finds or creates the entry for (variant, key) and runs `fn` on its state
  // under the shard lock. INVALID_ARGUMENT for a key longer than kMaxKeyBytes
  // or an unknown variant. For a new key `fn` runs on a zeroed copy of the
  // state, and an entry is made only if it keeps something: when the store
  // is full (after freeing the shard's expired entries, at most once per
  // second per shard) and `fn` keeps something, nothing is kept, the copy is
  // released and the result is RESOURCE_EXHAUSTED; what `fn` wrote elsewhere
  // then describes a step that did not happen. A peek or a denial on a new
  // key keeps nothing and is OK even in a full store. The same holds for a
  // step whose claim on `room` was refused, on a new key or a known one: it
  // did not happen, and the result is RESOURCE_EXHAUSTED.
  Status Update(uint32_t variant, std::string_view key, int64_t now_ms, UpdateFn fn);

  // Registers one more variant and returns its id (the next free one, so ids
  // are 0, 1, 2, … in order of registration, constructor's layouts first).
  // Thread-safe with concurrent Update calls; variants are never removed.
  // RESOURCE_EXHAUSTED past 65536 variants; INVALID_ARGUMENT for a layout
  // with no state or more than 64 words.
  Result<uint32_t> AddVariant(const VariantLayout& layout);

  // Removes the entry if present. Returns whether one was removed.
  bool Erase(uint32_t variant, std::string_view key);

  // Optional hint: starts loading the table slot that an Update or Erase of
  // (variant, key) reads first, without locking, blocking or reading the
  // table. Worth calling before other work on the way to Update, above all
  // before reading a system clock: clock_gettime's rdtscp (or lfence) waits
  // for every earlier load, so a miss started after it is exposed whole, but
  // it does not wait for a prefetch, which then overlaps the clock read and
  // what follows. Thread-safe; does nothing for invalid arguments. Returns
  // the key's hash (PreparedKey::hash), 0 for invalid arguments.
  size_t Prefetch(uint32_t variant, std::string_view key) const;

  // Frees every entry whose expiry is <= now_ms. Returns how many were freed.
  // The sweep thread calls this; tests may call it directly.
  int64_t SweepExpired(int64_t now_ms);

  // Calls fn(variant, key, expiry_s, state) for every entry not expired at
  // now_ms, one shard at a time under that shard's lock (each entry is seen
  // whole; entries of different shards at slightly different instants). fn
  // must not call the store. For snapshots; it holds each shard's lock for
  // as long as fn takes over that shard's entries.
  void ForEachEntry(int64_t now_ms, absl::FunctionRef<void(uint32_t variant, std::string_view key,
                                                           uint32_t expiry_s, const int64_t* state)>
                                        fn) const;

  // The layout registered for `variant` (a copy); state_words 0 for an
  // unknown one.
  VariantLayout Layout(uint32_t variant) const;

  Stats GetStats() const;

  // Bytes allocated for entries (payload plus allocator rounding estimate),
  // for what their states own and for tables: Stats::bytes, what max_memory
  // bounds. For the memory benchmark and /metrics; reads one counter.
  size_t ApproximateMemoryBytes() const;

 private:
  struct Impl;
  Impl* impl_;
};

}  // namespace floodgate::engine
