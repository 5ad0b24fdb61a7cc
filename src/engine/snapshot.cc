// Snapshot: see snapshot.h.
#include "engine/snapshot.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <map>
#include <string_view>

#include "common/file_replacement.h"
#include "common/fixed_fields.h"
#include "engine/entry.h"

namespace floodgate::engine {
namespace {

constexpr char kMagic[8] = {'F', 'G', 'S', 'T', 'A', 'T', 'E', '\n'};
constexpr uint32_t kFormatVersion = 1;
constexpr uint32_t kByteOrderMark = 0x01020304;
constexpr uint32_t kEndMarker = 0xffffffff;
constexpr size_t kHeaderBytes = sizeof(kMagic) + 4 + 4 + 8;
constexpr size_t kTrailerBytes = 4 + 8 + 4;
// Written out whenever the buffer passes this: a large store does not need
// its whole snapshot in memory.
constexpr size_t kFlushBytes = 1 << 20;
constexpr int kMaxWords = 64;

constexpr std::array<uint32_t, 256> MakeCrcTable() {
  std::array<uint32_t, 256> table{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) != 0 ? (c >> 1) ^ 0x82f63b78u : c >> 1;
    table[i] = c;
  }
  return table;
}
constexpr std::array<uint32_t, 256> kCrcTable = MakeCrcTable();

int64_t ElapsedMs(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                               since)
      .count();
}

// Appends to a file's replacement through a buffer, keeping the running
// checksum of what it wrote.
class FileWriter {
 public:
  explicit FileWriter(FileReplacement& file) : file_(file) {}

  std::string& buffer() { return buffer_; }
  // Writes the buffer out once it is large (or always, with `all`).
  bool Flush(bool all) {
    if (buffer_.size() < kFlushBytes && !all) return true;
    crc_ = Crc32c(crc_, buffer_.data(), buffer_.size());
    if (!file_.Append(buffer_)) return false;
    written_ += static_cast<int64_t>(buffer_.size());
    buffer_.clear();
    return true;
  }
  uint32_t crc() const { return crc_; }
  int64_t written() const { return written_; }

 private:
  FileReplacement& file_;
  std::string buffer_;
  uint32_t crc_ = 0;
  int64_t written_ = 0;
};

// What a failed write says: the step that failed ("open" naming the
// temporary file) and why.
Status WriteError(const FileReplacement& file) {
  const std::string step = file.failed_step();
  const std::string what = step == "open" ? "open " + file.tmp_path() : step;
  return UnavailableError("cannot write the state snapshot " + file.path() + ": " + what + ": " +
                          std::strerror(file.error()));
}

struct EntryRecord {
  uint32_t id = 0;
  std::string_view key;
  uint32_t expiry_s = 0;
  std::string_view state;
};

// Decodes `state` bytes into a zeroed state of `layout`. The caller
// releases what the state then owns.
bool DecodeState(const VariantLayout& layout, std::string_view state, int64_t now_ms,
                 int64_t* words) {
  if (layout.decode != nullptr) return layout.decode(state, layout.state_words, now_ms, words);
  if (state.size() != static_cast<size_t>(layout.state_words) * sizeof(int64_t)) return false;
  std::memcpy(words, state.data(), state.size());
  return true;
}

void Release(const VariantLayout& layout, int64_t* words) {
  if (layout.release != nullptr) layout.release(words);
}

}  // namespace

uint32_t Crc32c(uint32_t crc, const void* data, size_t n) {
  const auto* p = static_cast<const unsigned char*>(data);
  crc = ~crc;
  for (size_t i = 0; i < n; ++i) crc = kCrcTable[(crc ^ p[i]) & 0xff] ^ (crc >> 8);
  return ~crc;
}

Result<SnapshotFigures> WriteSnapshot(const MemoryStore& store,
                                      const std::vector<std::string>& identities,
                                      const std::string& path, int64_t now_ms) {
  const auto start = std::chrono::steady_clock::now();
  FileReplacement file(path);
  if (file.failed_step() != nullptr) return WriteError(file);

  // What each variant id needs to be written, read once.
  const size_t n = std::min<size_t>(identities.size(), 65536);
  std::vector<VariantLayout> layouts(n);
  FileWriter out(file);
  std::string& buf = out.buffer();
  buf.append(kMagic, sizeof(kMagic));
  fixed::Put<uint32_t>(&buf, kFormatVersion);
  fixed::Put<uint32_t>(&buf, kByteOrderMark);
  fixed::Put<int64_t>(&buf, now_ms);
  uint32_t named = 0;
  for (size_t id = 0; id < n; ++id) named += identities[id].empty() ? 0 : 1;
  fixed::Put<uint32_t>(&buf, named);
  for (size_t id = 0; id < n; ++id) {
    if (identities[id].empty()) continue;
    layouts[id] = store.Layout(static_cast<uint32_t>(id));
    fixed::Put<uint32_t>(&buf, static_cast<uint32_t>(id));
    fixed::Put<uint32_t>(&buf, static_cast<uint32_t>(identities[id].size()));
    buf += identities[id];
  }

  uint64_t entries = 0;
  bool ok = true;
  std::string state;
  store.ForEachEntry(
      now_ms, [&](uint32_t id, std::string_view key, uint32_t expiry_s, const int64_t* words) {
        if (!ok || id >= n || identities[id].empty()) return;
        const VariantLayout& layout = layouts[id];
        state.clear();
        if (layout.encode != nullptr) {
          layout.encode(words, layout.state_words, &state);
        } else {
          state.assign(reinterpret_cast<const char*>(words),
                       static_cast<size_t>(layout.state_words) * sizeof(int64_t));
        }
        fixed::Put<uint32_t>(&buf, id);
        fixed::Put<uint32_t>(&buf, static_cast<uint32_t>(key.size()));
        buf.append(key);
        fixed::Put<uint32_t>(&buf, expiry_s);
        fixed::Put<uint32_t>(&buf, static_cast<uint32_t>(state.size()));
        buf += state;
        ++entries;
        ok = out.Flush(false);
      });
  if (!ok) return WriteError(file);
  fixed::Put<uint32_t>(&buf, kEndMarker);
  fixed::Put<uint64_t>(&buf, entries);
  if (!out.Flush(true)) return WriteError(file);
  // The checksum covers every byte before it.
  std::string crc;
  fixed::Put<uint32_t>(&crc, out.crc());
  if (!file.Append(crc) || !file.Commit()) return WriteError(file);
  SnapshotFigures figures;
  figures.entries = static_cast<int64_t>(entries);
  figures.bytes = out.written() + static_cast<int64_t>(crc.size());
  figures.duration_ms = ElapsedMs(start);
  figures.written_at_ms = now_ms;
  return figures;
}

Result<SnapshotFigures> LoadSnapshot(MemoryStore& store, const std::vector<std::string>& identities,
                                     const std::string& path, int64_t now_ms) {
  const auto start = std::chrono::steady_clock::now();
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return NotFoundError("no state snapshot at " + path);
    return UnavailableError("cannot read the state snapshot " + path + ": " + std::strerror(errno));
  }
  std::string file;
  struct stat st {};
  if (::fstat(fd, &st) == 0 && st.st_size > 0) file.reserve(static_cast<size_t>(st.st_size));
  char chunk[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fd, chunk, sizeof(chunk));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      ::close(fd);
      return UnavailableError("cannot read the state snapshot " + path + ": " + std::strerror(err));
    }
    if (n == 0) break;
    file.append(chunk, static_cast<size_t>(n));
  }
  ::close(fd);

  auto refuse = [&](const std::string& why) {
    return InvalidArgumentError(
        "refusing the state snapshot " + path + ": " + why +
        " (move it away, or start with --start-empty to begin with no saved state)");
  };
  if (file.size() < sizeof(kMagic) || std::memcmp(file.data(), kMagic, sizeof(kMagic)) != 0) {
    return refuse("not a floodgate state snapshot");
  }
  if (file.size() < kHeaderBytes + 4 + kTrailerBytes) return refuse("damaged (truncated)");
  std::string_view header = std::string_view(file).substr(sizeof(kMagic));
  uint32_t version = 0, bom = 0;
  SnapshotFigures figures;
  // The size was checked above: these three are there.
  fixed::Get(&header, &version);
  fixed::Get(&header, &bom);
  fixed::Get(&header, &figures.written_at_ms);
  if (bom == __builtin_bswap32(kByteOrderMark)) {
    return refuse("written on a machine of another byte order");
  }
  if (bom != kByteOrderMark) return refuse("damaged (header)");
  if (version != kFormatVersion) {
    return refuse("format version " + std::to_string(version) + "; this floodgate reads version " +
                  std::to_string(kFormatVersion));
  }
  uint32_t stored_crc = 0;
  std::memcpy(&stored_crc, file.data() + file.size() - 4, 4);
  if (Crc32c(0, file.data(), file.size() - 4) != stored_crc) {
    return refuse("damaged (checksum mismatch)");
  }

  // Each stored variant's current ids: every variant of this config with
  // the same identity (two override variants may share one).
  std::map<std::string_view, std::vector<uint32_t>> current;
  for (size_t id = 0; id < identities.size() && id < 65536; ++id) {
    if (!identities[id].empty()) current[identities[id]].push_back(static_cast<uint32_t>(id));
  }
  std::string_view in = std::string_view(file).substr(kHeaderBytes, file.size() - kHeaderBytes - 4);
  uint32_t variants = 0;
  if (!fixed::Get(&in, &variants)) return refuse("damaged (truncated)");
  std::vector<const std::vector<uint32_t>*> targets(65536, nullptr);
  for (uint32_t i = 0; i < variants; ++i) {
    uint32_t id = 0, len = 0;
    std::string_view identity;
    if (!fixed::Get(&in, &id) || !fixed::Get(&in, &len) || !fixed::Bytes(&in, len, &identity) ||
        id >= 65536) {
      return refuse("damaged (variant table)");
    }
    if (auto it = current.find(identity); it != current.end()) targets[id] = &it->second;
  }

  // Two passes: every record is read and every state decoded first, so a
  // damaged file loads nothing; then the entries go in.
  std::vector<EntryRecord> records;
  alignas(8) int64_t words[kMaxWords];
  for (;;) {
    EntryRecord r;
    uint32_t key_len = 0, state_len = 0;
    if (!fixed::Get(&in, &r.id)) return refuse("damaged (truncated)");
    if (r.id == kEndMarker) break;
    if (r.id >= 65536 || !fixed::Get(&in, &key_len) || !fixed::Bytes(&in, key_len, &r.key) ||
        !fixed::Get(&in, &r.expiry_s) || !fixed::Get(&in, &state_len) ||
        !fixed::Bytes(&in, state_len, &r.state)) {
      return refuse("damaged (entry " + std::to_string(records.size()) + ")");
    }
    records.push_back(r);
    const std::vector<uint32_t>* to = targets[r.id];
    if (to == nullptr || StoredSecondsExpired(r.expiry_s, now_ms)) continue;
    const VariantLayout layout = store.Layout(to->front());
    if (layout.state_words <= 0 || layout.state_words > kMaxWords) continue;
    std::memset(words, 0, sizeof(words));
    const bool decoded = DecodeState(layout, r.state, now_ms, words);
    Release(layout, words);
    if (!decoded) {
      return refuse("damaged (entry " + std::to_string(records.size() - 1) +
                    ": a state its rule cannot read)");
    }
  }
  uint64_t count = 0;
  if (!fixed::Get(&in, &count) || count != records.size() || !in.empty()) {
    return refuse("damaged (entry count)");
  }

  for (const EntryRecord& r : records) {
    const std::vector<uint32_t>* to = targets[r.id];
    if (to == nullptr) {
      ++figures.skipped_unknown;
      continue;
    }
    if (StoredSecondsExpired(r.expiry_s, now_ms)) {
      ++figures.skipped_expired;
      continue;
    }
    for (uint32_t id : *to) {
      const VariantLayout layout = store.Layout(id);
      const Status s = store.Update(
          id, r.key, now_ms, [&](int64_t* state, bool fresh, core::MemoryRoom* room) -> int64_t {
            const auto clear = [&] {
              Release(layout, state);
              std::memset(state, 0, static_cast<size_t>(layout.state_words) * sizeof(int64_t));
            };
            if (!fresh) clear();
            if (!DecodeState(layout, r.state, now_ms, state)) return 0;  // checked above
            // What the decoded state owns counts against max_memory as a
            // decision's growth would: past it, the entry is not loaded.
            if (layout.owned_bytes != nullptr && !core::Claim(room, layout.owned_bytes(state))) {
              clear();
              return 0;
            }
            return static_cast<int64_t>(r.expiry_s) * 1000;
          });
      if (s.ok()) {
        ++figures.entries;
      } else {
        ++figures.refused_full;
      }
    }
  }
  figures.bytes = static_cast<int64_t>(file.size());
  figures.duration_ms = ElapsedMs(start);
  return figures;
}

}  // namespace floodgate::engine
