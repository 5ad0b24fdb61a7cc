// Snapshot: a MemoryStore's live entries written to one file, and read back
// at start, so that a restart keeps today's quotas (data_dir,
// docs/operations.md "State across restarts").
//
// Private to src/engine/ (EmbeddedStore::Save and Load use it).
//
// Variant ids are given out in the order rules are registered, which another
// config (or the same one edited) changes. So the file names each variant it
// holds entries of by an identity (what the entries' state means: the rule,
// its tier, its algorithm and limits), and loading puts entries under the
// current variants of the same identity; an entry whose variant no longer
// exists (a rule removed, a limit changed) is skipped and counted, as the
// Redis store starts such a rule's subjects afresh.
//
// The file (host byte order; the header says which, so a file from another
// kind of machine is refused rather than misread):
//
//   "FGSTATE\n"  u32 format version  u32 0x01020304  i64 written_at_ms
//   u32 variants, each: u32 id, u32 length, identity bytes
//   entries, each: u32 id (< 65536), u32 key length, key, u32 expiry_s,
//                  u32 length, state bytes (VariantLayout::encode's)
//   u32 0xffffffff  u64 entries  u32 CRC-32C of every byte before it
//
// Written to <path>.tmp, flushed to disk, then renamed over <path> (and the
// directory flushed): a crash mid-write leaves the previous snapshot whole.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/memory_store.h"
#include "floodgate/status.h"
#include "store/snapshots.h"

namespace floodgate::engine {

using SnapshotFigures = store::StateFigures;

// `identities[id]` names variant `id`; an empty identity's entries are not
// written. Returns the figures, or an error naming the file and what failed
// (the previous snapshot, if any, is then untouched).
Result<SnapshotFigures> WriteSnapshot(const MemoryStore& store,
                                      const std::vector<std::string>& identities,
                                      const std::string& path, int64_t now_ms);

// Loads the snapshot at `path` into `store` (whose variants are named by
// `identities`), skipping what has expired by now_ms. NOT_FOUND when there
// is no file. A file that is not a floodgate snapshot, of another format
// version or byte order, or damaged (checksum, truncation, a state its
// variant cannot read) is refused with INVALID_ARGUMENT naming the file
// and the fault, and then nothing is loaded.
Result<SnapshotFigures> LoadSnapshot(MemoryStore& store, const std::vector<std::string>& identities,
                                     const std::string& path, int64_t now_ms);

// CRC-32C (Castagnoli) of `n` bytes, continuing from `crc` (0 to start).
uint32_t Crc32c(uint32_t crc, const void* data, size_t n);

}  // namespace floodgate::engine
