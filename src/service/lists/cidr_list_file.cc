// Network list files and inline lists: see cidr_list_file.h. A file and
// its text in memory go through one reader, a line at a time, so the
// tests and the fuzzer drive the very code a reload runs.
#include "service/lists/cidr_list_file.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <utility>

namespace floodgate::service {
namespace {

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f'; }

std::string_view Trim(std::string_view text) {
  while (!text.empty() && IsSpace(text.front())) text.remove_prefix(1);
  while (!text.empty() && IsSpace(text.back())) text.remove_suffix(1);
  return text;
}

Status TooManyLines(std::string_view name, size_t max_lines, const char* what) {
  return ResourceExhaustedError(std::string(name) + ": more than " + std::to_string(max_lines) +
                                " " + what + " (a network list's bound)");
}

Status TooManyBytes(std::string_view name, uint64_t max_bytes) {
  return ResourceExhaustedError(std::string(name) + ": more than " + std::to_string(max_bytes) +
                                " bytes (a network list's bound)");
}

// Takes a file's lines one by one, counting them, and keeps their networks.
class LineReader {
 public:
  LineReader(std::string_view name, const CidrListBounds& bounds) : name_(name), bounds_(bounds) {}

  // One line, without its '\n'.
  Status Line(std::string_view line) {
    if (++line_number_ > bounds_.max_lines) return TooManyLines(name_, bounds_.max_lines, "lines");
    if (line.size() > bounds_.max_line_bytes) return LineTooLong();
    const size_t hash = line.find('#');
    if (hash != std::string_view::npos) line = line.substr(0, hash);
    line = Trim(line);
    if (line.empty()) return Status::Ok();
    Result<Cidr> network = ParseCidr(line);
    if (!network.ok()) {
      return InvalidArgumentError(Where() + ": " + network.status().message());
    }
    networks_.push_back(*network);
    return Status::Ok();
  }

  // The next line has grown past the bound before its end arrived.
  Status NextLineTooLong() {
    ++line_number_;
    return LineTooLong();
  }

  Result<CidrSet> Finish() { return CidrSet::Build(std::move(networks_)); }

 private:
  std::string Where() const { return name_ + ":" + std::to_string(line_number_); }
  Status LineTooLong() const {
    return ResourceExhaustedError(Where() + ": longer than " +
                                  std::to_string(bounds_.max_line_bytes) +
                                  " bytes (a line's bound)");
  }

  const std::string name_;
  const CidrListBounds bounds_;
  size_t line_number_ = 0;
  std::vector<Cidr> networks_;
};

// Feeds the complete lines of `text` to `reader`; returns what follows the
// last '\n' (the start of a line whose end has not arrived yet).
Result<std::string_view> FeedLines(std::string_view text, LineReader& reader) {
  for (size_t newline; (newline = text.find('\n')) != std::string_view::npos;) {
    Status status = reader.Line(text.substr(0, newline));
    if (!status.ok()) return status;
    text.remove_prefix(newline + 1);
  }
  return text;
}

}  // namespace

Result<CidrSet> ParseCidrListText(std::string_view text, std::string_view name,
                                  const CidrListBounds& bounds) {
  if (text.size() > bounds.max_file_bytes) return TooManyBytes(name, bounds.max_file_bytes);
  LineReader reader(name, bounds);
  Result<std::string_view> tail = FeedLines(text, reader);
  if (!tail.ok()) return tail.status();
  if (!tail->empty()) {
    Status status = reader.Line(*tail);
    if (!status.ok()) return status;
  }
  return reader.Finish();
}

Result<CidrSet> LoadCidrListFile(const std::string& path, const CidrListBounds& bounds) {
  std::FILE* file = std::fopen(path.c_str(), "rb");
  if (file == nullptr) {
    return InvalidArgumentError(path + ": cannot open network list: " + std::strerror(errno));
  }
  struct FileCloser {
    std::FILE* file;
    ~FileCloser() { std::fclose(file); }
  } closer{file};
  // Refused before a byte is read when the size is known; counted while
  // reading too, for a file that grows (or a pipe, whose size is 0).
  struct stat info;
  if (fstat(fileno(file), &info) == 0 && S_ISREG(info.st_mode) &&
      static_cast<uint64_t>(info.st_size) > bounds.max_file_bytes) {
    return TooManyBytes(path, bounds.max_file_bytes);
  }

  LineReader reader(path, bounds);
  std::string pending;  // a line whose '\n' has not been read yet
  uint64_t total = 0;
  char buffer[1 << 16];
  for (;;) {
    const size_t n = std::fread(buffer, 1, sizeof(buffer), file);
    if (n == 0) break;
    total += n;
    if (total > bounds.max_file_bytes) return TooManyBytes(path, bounds.max_file_bytes);
    std::string_view chunk(buffer, n);
    const size_t newline = chunk.find('\n');
    if (!pending.empty() && newline != std::string_view::npos) {
      // The pending line ends in this chunk: read it whole, then the rest.
      pending.append(chunk.substr(0, newline));
      Status status = reader.Line(pending);
      if (!status.ok()) return status;
      pending.clear();
      chunk.remove_prefix(newline + 1);
    }
    Result<std::string_view> tail =
        pending.empty() ? FeedLines(chunk, reader) : Result<std::string_view>(chunk);
    if (!tail.ok()) return tail.status();
    pending.append(*tail);
    // A line past the bound is refused before its end arrives: the one
    // buffer that grows with the input stays bounded.
    if (pending.size() > bounds.max_line_bytes) return reader.NextLineTooLong();
  }
  if (std::ferror(file) != 0) {
    return InvalidArgumentError(path + ": cannot read network list: " + std::strerror(errno));
  }
  if (!pending.empty()) {
    Status status = reader.Line(pending);
    if (!status.ok()) return status;
  }
  return reader.Finish();
}

Result<CidrSet> BuildCidrList(const std::vector<std::string>& entries, std::string_view name,
                              const CidrListBounds& bounds) {
  if (entries.size() > bounds.max_lines) return TooManyLines(name, bounds.max_lines, "entries");
  std::vector<Cidr> networks;
  networks.reserve(entries.size());
  for (size_t i = 0; i < entries.size(); ++i) {
    Result<Cidr> network = ParseCidr(Trim(entries[i]));
    if (!network.ok()) {
      return InvalidArgumentError(std::string(name) + "[" + std::to_string(i) +
                                  "]: " + network.status().message());
    }
    networks.push_back(*network);
  }
  return CidrSet::Build(std::move(networks));
}

}  // namespace floodgate::service
