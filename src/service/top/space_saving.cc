// SpaceSaving: see space_saving.h.
//
// Counters live in slots_, found by key through index_ and ordered by count
// in a binary min-heap (heap_), so that the counter a new key takes over is
// at the root. The stream-summary of the paper would make an update O(1),
// but only for unit increments: decisions weigh units, and a heap of a few
// hundred counters costs a handful of comparisons (bench/top_subjects_bench).
//
// Why the bounds hold (every sketch keeps these, and Parse checks them):
//  (1) every count >= floor >= every error;
//  (2) the counts sum to at most total;
//  (3) floor > 0 only when size == capacity.
// Add: a free counter while not full (floor is then 0, by 3), else the
// smallest count m takes the new key: the sum grows by the units added (2),
// and floor becomes m <= sum / capacity <= total / capacity. Merge into the
// smaller capacity K: each side gives the K kept entries at most its own
// sum, since a key it lacks takes its floor, no more than any of its unused
// counters (it has K of them or more when its floor is not 0, by 3); so the
// kept sum is at most the two totals (2), the largest count dropped is at
// most the smallest kept, at most total / K, and so is the floors' sum.
#include "service/top/space_saving.h"

#include <algorithm>
#include <limits>
#include <utility>

namespace floodgate::service {
namespace {

constexpr int64_t kMaxCount = std::numeric_limits<int64_t>::max();

// Counts saturate: a hostile or absurd stream must not overflow.
int64_t SatAdd(int64_t a, int64_t b) { return a > kMaxCount - b ? kMaxCount : a + b; }

absl::string_view View(std::string_view s) { return absl::string_view(s.data(), s.size()); }

// Top() order: count descending, then key ascending.
bool Before(const TopEntry& a, const TopEntry& b) {
  return a.count != b.count ? a.count > b.count : a.key < b.key;
}

// libstdc++ keeps strings up to this many bytes inside the object.
const size_t kInlineKeyBytes = std::string().capacity();
// What the allocator may add to each block it hands out (glibc: a size word
// and rounding to 16).
constexpr size_t kAllocOverhead = 32;
// A flat_hash_map's buckets for `n` entries: reserve(n) gives at most twice
// n + n / 7, and churn (erase then insert at full load) may double that
// once before its tombstones are dropped in place.
size_t IndexBucketsBound(size_t n) { return 4 * (n + n / 7 + 1) + 32; }
// Bytes per index bucket: the (view, slot) pair and its control byte.
constexpr size_t kIndexBucketBytes = sizeof(std::pair<const absl::string_view, uint32_t>) + 1;

// Format version 1 (all integers unsigned LEB128 varints, at most 63 bits):
//   "FGSK" | version byte (1) | capacity | total | floor | n |
//   n x (key length | key bytes | count | error) | FNV-1a 64 of all the
//   preceding bytes, 8 bytes little-endian.
// Entries come in Top() order, strictly, so equal sketches give equal bytes
// and a repeated key cannot pass.
constexpr std::string_view kMagic = "FGSK";
constexpr uint8_t kVersion = 1;
constexpr size_t kChecksumBytes = 8;

uint64_t Fnv1a64(std::string_view bytes) {
  uint64_t h = 14695981039346656037ull;
  for (unsigned char c : bytes) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

void PutVarint(std::string* out, uint64_t v) {
  while (v >= 0x80) {
    out->push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<char>(v));
}

// Reads a varint of at most 63 bits from the front of *in.
bool GetVarint(std::string_view* in, int64_t* value) {
  uint64_t v = 0;
  for (int shift = 0; shift < 63; shift += 7) {
    if (in->empty()) return false;
    const uint8_t b = static_cast<uint8_t>(in->front());
    in->remove_prefix(1);
    v |= static_cast<uint64_t>(b & 0x7f) << shift;
    if ((b & 0x80) == 0) {
      if (v > static_cast<uint64_t>(kMaxCount)) return false;
      *value = static_cast<int64_t>(v);
      return true;
    }
  }
  return false;  // more than 9 bytes: above 63 bits
}

Status Bad(std::string what) {
  return InvalidArgumentError("top-subjects sketch: " + std::move(what));
}

}  // namespace

SpaceSaving::SpaceSaving(size_t capacity)
    : capacity_(std::clamp<size_t>(capacity, 1, kMaxSketchCapacity)) {}

SpaceSaving::SpaceSaving(const SpaceSaving& other)
    : capacity_(other.capacity_),
      total_(other.total_),
      floor_(other.floor_),
      slots_(other.slots_),
      indexed_(false) {}

SpaceSaving& SpaceSaving::operator=(const SpaceSaving& other) {
  if (this != &other) *this = SpaceSaving(other);
  return *this;
}

void SpaceSaving::Reindex() {
  index_.clear();
  index_.reserve(slots_.capacity());
  heap_.clear();
  heap_.reserve(slots_.capacity());
  for (uint32_t i = 0; i < slots_.size(); ++i) {
    index_.emplace(View(slots_[i].key), i);
    heap_.push_back(i);
    slots_[i].heap_pos = i;
  }
  for (size_t i = heap_.size() / 2; i-- > 0;) SiftDown(i);
  indexed_ = true;
}

void SpaceSaving::Swap(size_t a, size_t b) {
  std::swap(heap_[a], heap_[b]);
  slots_[heap_[a]].heap_pos = static_cast<uint32_t>(a);
  slots_[heap_[b]].heap_pos = static_cast<uint32_t>(b);
}

void SpaceSaving::SiftDown(size_t pos) {
  const size_t n = heap_.size();
  while (true) {
    size_t least = pos;
    const size_t l = 2 * pos + 1;
    const size_t r = l + 1;
    if (l < n && slots_[heap_[l]].count < slots_[heap_[least]].count) least = l;
    if (r < n && slots_[heap_[r]].count < slots_[heap_[least]].count) least = r;
    if (least == pos) return;
    Swap(pos, least);
    pos = least;
  }
}

void SpaceSaving::SiftUp(size_t pos) {
  while (pos > 0) {
    const size_t parent = (pos - 1) / 2;
    if (slots_[heap_[parent]].count <= slots_[heap_[pos]].count) return;
    Swap(pos, parent);
    pos = parent;
  }
}

void SpaceSaving::Add(std::string_view key, int64_t count) {
  if (count <= 0) return;
  if (key.size() > kMaxSketchKeyBytes) key = key.substr(0, kMaxSketchKeyBytes);
  if (!indexed_) Reindex();
  total_ = SatAdd(total_, count);
  if (auto it = index_.find(View(key)); it != index_.end()) {
    Slot& s = slots_[it->second];
    s.count = SatAdd(s.count, count);
    SiftDown(s.heap_pos);  // a larger count sinks in a min-heap
    return;
  }
  if (slots_.size() < capacity_) {
    if (slots_.size() == slots_.capacity()) {
      // Growing moves the slots, and short keys with them: the index's
      // views must be rebuilt. Doubling keeps that amortised O(1).
      slots_.reserve(std::min(capacity_, std::max<size_t>(8, 2 * slots_.capacity())));
      Reindex();
    }
    const uint32_t i = static_cast<uint32_t>(slots_.size());
    // floor_ is 0 here (invariant 3); kept general for clarity of meaning.
    slots_.push_back(Slot{std::string(key), SatAdd(floor_, count), floor_, 0});
    slots_[i].heap_pos = static_cast<uint32_t>(heap_.size());
    heap_.push_back(i);
    index_.emplace(View(slots_[i].key), i);
    SiftUp(heap_.size() - 1);
    return;
  }
  // Full: the smallest counter is handed to the new key, which inherits its
  // count as the error it may carry. Any counter at the minimum will do: a
  // leaf at the minimum, if one of a few looked at is, needs no sift (its
  // parent is at the minimum too, and it has no children), where the root
  // would sift to the bottom through every tie (a stream of distinct keys
  // leaves most counters tied at the minimum: then this saves most of an
  // eviction's work).
  const int64_t min = slots_[heap_[0]].count;
  size_t victim = 0;
  const size_t n = heap_.size();
  if (n > 1) {
    const size_t first_leaf = n / 2;
    for (int probe = 0; probe < 4; ++probe) {
      const size_t pos = first_leaf + (leaf_cursor_++ % (n - first_leaf));
      if (slots_[heap_[pos]].count == min) {
        victim = pos;
        break;
      }
    }
  }
  const uint32_t i = heap_[victim];
  Slot& s = slots_[i];
  index_.erase(View(s.key));
  if (key.size() > s.key.capacity()) {
    s.key = std::string(key);  // exact: assign() would grow it geometrically
  } else {
    s.key.assign(key);
  }
  s.count = SatAdd(min, count);
  s.error = min;
  floor_ = std::max(floor_, min);
  index_.emplace(View(s.key), i);
  if (victim == 0) SiftDown(0);
}

void SpaceSaving::Assign(std::vector<TopEntry> entries) {
  std::vector<Slot> slots;
  slots.reserve(entries.size());
  for (TopEntry& e : entries) slots.push_back(Slot{std::move(e.key), e.count, e.error, 0});
  slots_ = std::move(slots);
  // A merged or compacted sketch is mostly only read: it keeps no lookup
  // structures until an Add needs them.
  index_ = {};
  heap_ = {};
  indexed_ = false;
}

void SpaceSaving::Merge(const SpaceSaving& other) {
  const int64_t f1 = floor_;
  const int64_t f2 = other.floor_;
  const size_t n1 = slots_.size();
  std::vector<TopEntry> merged;
  merged.reserve(n1 + other.slots_.size());
  // Views into both sides' keys, which stay put until Assign below (this
  // holds even when `other` is this sketch).
  absl::flat_hash_map<absl::string_view, size_t> pos;
  pos.reserve(n1);
  for (size_t i = 0; i < n1; ++i) {
    merged.push_back(TopEntry{slots_[i].key, slots_[i].count, slots_[i].error});
    pos.emplace(View(slots_[i].key), i);
  }
  std::vector<char> in_other(n1, 0);
  for (const Slot& s : other.slots_) {
    if (auto it = pos.find(View(s.key)); it != pos.end()) {
      TopEntry& e = merged[it->second];
      e.count = SatAdd(e.count, s.count);
      e.error = SatAdd(e.error, s.error);
      in_other[it->second] = 1;
    } else {
      merged.push_back(TopEntry{s.key, SatAdd(f1, s.count), SatAdd(f1, s.error)});
    }
  }
  for (size_t i = 0; i < n1; ++i) {
    if (in_other[i]) continue;
    merged[i].count = SatAdd(merged[i].count, f2);
    merged[i].error = SatAdd(merged[i].error, f2);
  }
  capacity_ = std::min(capacity_, other.capacity_);
  total_ = SatAdd(total_, other.total_);
  int64_t floor = SatAdd(f1, f2);
  if (merged.size() > capacity_) {
    std::nth_element(merged.begin(), merged.begin() + capacity_, merged.end(), Before);
    // The largest dropped count is the one nth_element put at capacity_.
    floor = std::max(floor, merged[capacity_].count);
    merged.resize(capacity_);
  }
  floor_ = floor;
  Assign(std::move(merged));
}

SpaceSaving SpaceSaving::Compacted(size_t capacity) const {
  SpaceSaving out(capacity);
  out.Merge(*this);  // an empty side adds nothing but the cut
  return out;
}

std::vector<TopEntry> SpaceSaving::Top(size_t n) const {
  std::vector<TopEntry> all;
  all.reserve(slots_.size());
  for (const Slot& s : slots_) all.push_back(TopEntry{s.key, s.count, s.error});
  n = std::min(n, all.size());
  std::partial_sort(all.begin(), all.begin() + n, all.end(), Before);
  all.resize(n);
  return all;
}

void SpaceSaving::Clear() {
  slots_.clear();
  index_.clear();
  heap_.clear();
  total_ = 0;
  floor_ = 0;
  // An empty sketch's index is trivially in step; slots_ keeps its
  // allocation, so the views the next Adds make stay valid.
  indexed_ = true;
}

size_t SpaceSaving::MemoryBytes() const {
  size_t bytes = sizeof(*this);
  if (slots_.capacity() > 0) bytes += slots_.capacity() * sizeof(Slot) + kAllocOverhead;
  if (heap_.capacity() > 0) bytes += heap_.capacity() * sizeof(uint32_t) + kAllocOverhead;
  if (index_.capacity() > 0) {
    bytes += index_.capacity() * kIndexBucketBytes + 32 + kAllocOverhead;
  }
  for (const Slot& s : slots_) {
    if (s.key.capacity() > kInlineKeyBytes) bytes += s.key.capacity() + 1 + kAllocOverhead;
  }
  return bytes;
}

size_t SpaceSaving::MemoryBound(size_t capacity, bool indexed) {
  capacity = std::clamp<size_t>(capacity, 1, kMaxSketchCapacity);
  size_t bytes = sizeof(SpaceSaving) + capacity * sizeof(Slot) + kAllocOverhead +
                 capacity * (kMaxSketchKeyBytes + 1 + kAllocOverhead);
  if (indexed) {
    bytes += capacity * sizeof(uint32_t) + kAllocOverhead +
             IndexBucketsBound(capacity) * kIndexBucketBytes + 32 + kAllocOverhead;
  }
  return bytes;
}

std::string SpaceSaving::Serialize() const {
  std::vector<TopEntry> entries = Top(slots_.size());
  std::string out(kMagic);
  out.push_back(static_cast<char>(kVersion));
  PutVarint(&out, capacity_);
  PutVarint(&out, static_cast<uint64_t>(total_));
  PutVarint(&out, static_cast<uint64_t>(floor_));
  PutVarint(&out, entries.size());
  for (const TopEntry& e : entries) {
    PutVarint(&out, e.key.size());
    out += e.key;
    PutVarint(&out, static_cast<uint64_t>(e.count));
    PutVarint(&out, static_cast<uint64_t>(e.error));
  }
  uint64_t sum = Fnv1a64(out);
  for (size_t i = 0; i < kChecksumBytes; ++i, sum >>= 8) out.push_back(static_cast<char>(sum));
  return out;
}

Result<SpaceSaving> SpaceSaving::Parse(std::string_view bytes) {
  if (bytes.size() < kMagic.size() + 1 + kChecksumBytes) {
    return Bad("too short (" + std::to_string(bytes.size()) + " bytes)");
  }
  if (bytes.substr(0, kMagic.size()) != kMagic) return Bad("not a sketch (bad magic)");
  const uint8_t version = static_cast<uint8_t>(bytes[kMagic.size()]);
  if (version != kVersion) {
    return Bad("format version " + std::to_string(version) + " (this server reads version " +
               std::to_string(kVersion) + ")");
  }
  // The checksum first: a cut or damaged sketch is reported as such, not by
  // whichever field happens to look wrong.
  std::string_view body = bytes.substr(0, bytes.size() - kChecksumBytes);
  uint64_t stored = 0;
  for (size_t i = 0; i < kChecksumBytes; ++i) {
    stored |= static_cast<uint64_t>(static_cast<uint8_t>(bytes[body.size() + i])) << (8 * i);
  }
  if (stored != Fnv1a64(body)) return Bad("checksum mismatch (truncated or corrupted)");

  // From here on the bytes are as written; a sketch that breaks the
  // invariants was written by something else, and is refused all the same.
  body.remove_prefix(kMagic.size() + 1);
  int64_t capacity = 0, total = 0, floor = 0, n = 0;
  if (!GetVarint(&body, &capacity) || !GetVarint(&body, &total) || !GetVarint(&body, &floor) ||
      !GetVarint(&body, &n)) {
    return Bad("truncated header");
  }
  if (capacity < 1 || capacity > static_cast<int64_t>(kMaxSketchCapacity)) {
    return Bad("capacity " + std::to_string(capacity) + " out of [1, " +
               std::to_string(kMaxSketchCapacity) + "]");
  }
  if (n > capacity) {
    return Bad(std::to_string(n) + " entries for capacity " + std::to_string(capacity));
  }
  // Each entry takes at least 3 bytes: this bounds what is allocated below.
  if (static_cast<size_t>(n) > body.size() / 3) return Bad("truncated entries");
  if (floor > total / capacity) return Bad("floor above total / capacity");
  if (floor > 0 && n != capacity) return Bad("a floor above 0 with free counters");

  std::vector<TopEntry> entries;
  entries.reserve(static_cast<size_t>(n));
  int64_t sum = 0;
  for (int64_t i = 0; i < n; ++i) {
    const std::string where = "entry " + std::to_string(i) + ": ";
    int64_t len = 0;
    if (!GetVarint(&body, &len)) return Bad(where + "truncated");
    if (len > static_cast<int64_t>(kMaxSketchKeyBytes)) {
      return Bad(where + "key of " + std::to_string(len) + " bytes (at most " +
                 std::to_string(kMaxSketchKeyBytes) + ")");
    }
    if (static_cast<size_t>(len) > body.size()) return Bad(where + "truncated");
    TopEntry e{std::string(body.substr(0, len)), 0, 0};
    body.remove_prefix(len);
    if (!GetVarint(&body, &e.count) || !GetVarint(&body, &e.error)) {
      return Bad(where + "truncated");
    }
    if (e.count < floor || e.error > floor) return Bad(where + "count or error off the floor");
    if (!entries.empty() && !Before(entries.back(), e)) {
      return Bad(where + "out of order or repeated");
    }
    if (e.count > total - sum) return Bad(where + "counts sum above the total");
    sum += e.count;
    entries.push_back(std::move(e));
  }
  if (!body.empty()) return Bad(std::to_string(body.size()) + " bytes after the entries");

  SpaceSaving out(static_cast<size_t>(capacity));
  out.total_ = total;
  out.floor_ = floor;
  out.Assign(std::move(entries));
  return out;
}

}  // namespace floodgate::service
