// The alert spool: see alert_spool.h.
#include "service/alerts/alert_spool.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string_view>

#include "common/file_replacement.h"

namespace floodgate::service {
namespace {

constexpr std::string_view kHeader = "floodgate-alert-spool 1\n";
// Bounds a damaged length field: no event field comes near it.
constexpr uint64_t kMaxFieldBytes = uint64_t{1} << 24;

std::string Errno(const std::string& what, const std::string& path) {
  return what + " " + path + ": " + std::strerror(errno);
}

std::string DirectoryOf(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

// mkdir -p, the new directories 0700 (events name subjects).
bool MakeDirectories(const std::string& dir) {
  if (dir.empty() || dir == "." || dir == "/") return true;
  struct stat st;
  if (::stat(dir.c_str(), &st) == 0) return S_ISDIR(st.st_mode);
  if (!MakeDirectories(DirectoryOf(dir))) return false;
  return ::mkdir(dir.c_str(), 0700) == 0 || errno == EEXIST;
}

// fsync of the directory, so that a rename or unlink survives a crash.
void SyncDirectory(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  ::fsync(fd);
  ::close(fd);
}

bool ParseU64(std::string_view s, uint64_t* out) {
  if (s.empty()) return false;
  const auto r = std::from_chars(s.data(), s.data() + s.size(), *out);
  return r.ec == std::errc() && r.ptr == s.data() + s.size();
}

bool ParseI64(std::string_view s, int64_t* out) {
  if (s.empty()) return false;
  const auto r = std::from_chars(s.data(), s.data() + s.size(), *out);
  return r.ec == std::errc() && r.ptr == s.data() + s.size();
}

}  // namespace

std::string DefaultAlertSpoolPath() {
  const char* state = std::getenv("STATE_DIRECTORY");
  std::string dir = state != nullptr && *state != '\0' ? state : "/var/lib/floodgate";
  if (const size_t colon = dir.find(':'); colon != std::string::npos) dir.resize(colon);
  return dir + "/alerts.spool";
}

Status PrepareAlertSpool(const std::string& path) {
  const std::string dir = DirectoryOf(path);
  if (!MakeDirectories(dir)) {
    return InvalidArgumentError("alert_delivery.spool: cannot create the directory " + dir + ": " +
                                std::strerror(errno) +
                                " (set alert_delivery.spool to a writable path)");
  }
  const std::string probe = path + ".probe";
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) {
    return InvalidArgumentError("alert_delivery.spool: " + Errno("cannot write in", dir) +
                                " (set alert_delivery.spool to a writable path)");
  }
  ::close(fd);
  ::unlink(probe.c_str());
  return Status::Ok();
}

Status WriteAlertSpool(const std::string& path, const std::vector<PendingAlert>& alerts) {
  if (alerts.empty()) {
    if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
      return UnavailableError(Errno("cannot remove the alert spool", path));
    }
    SyncDirectory(DirectoryOf(path));
    return Status::Ok();
  }
  std::string data(kHeader);
  for (const PendingAlert& a : alerts) {
    data += std::to_string(a.event_id.size()) + ' ' + std::to_string(a.url.size()) + ' ' +
            std::to_string(a.body.size()) + ' ' + std::to_string(a.signature.size()) + ' ' +
            std::to_string(a.created_ms) + ' ' + std::to_string(a.attempts) + '\n';
    data += a.event_id;
    data += a.url;
    data += a.body;
    data += a.signature;
    data += '\n';
  }
  FileReplacement file(path);
  if (!file.Append(data) || !file.Commit()) {
    errno = file.error();
    if (std::string_view(file.failed_step()) == "rename") {
      return UnavailableError(Errno("cannot replace the alert spool", path));
    }
    return UnavailableError(Errno("cannot write the alert spool", file.tmp_path()));
  }
  return Status::Ok();
}

Result<std::vector<PendingAlert>> ReadAlertSpool(const std::string& path, std::string* warning) {
  std::vector<PendingAlert> out;
  std::ifstream in(path, std::ios::binary);
  if (!in.is_open()) {
    if (errno == ENOENT) return out;
    return UnavailableError(Errno("cannot read the alert spool", path));
  }
  std::stringstream buffer;
  buffer << in.rdbuf();
  const std::string data = buffer.str();
  std::string_view rest(data);
  if (!rest.starts_with(kHeader)) {
    *warning = "not an alert spool (no header); ignored";
    return out;
  }
  rest.remove_prefix(kHeader.size());
  while (!rest.empty()) {
    const size_t eol = rest.find('\n');
    if (eol == std::string_view::npos) break;
    std::string_view line = rest.substr(0, eol);
    std::string_view fields[6];
    int n = 0;
    while (n < 6) {
      const size_t space = line.find(' ');
      fields[n++] = line.substr(0, space);
      if (space == std::string_view::npos) break;
      line.remove_prefix(space + 1);
    }
    uint64_t len[4];
    PendingAlert a;
    int64_t attempts = 0;
    bool ok = n == 6;
    for (int i = 0; ok && i < 4; ++i) ok = ParseU64(fields[i], &len[i]) && len[i] <= kMaxFieldBytes;
    ok = ok && ParseI64(fields[4], &a.created_ms) && ParseI64(fields[5], &attempts) &&
         attempts >= 0 && attempts < (int64_t{1} << 30);
    const uint64_t total = ok ? len[0] + len[1] + len[2] + len[3] : 0;
    if (!ok || rest.size() < eol + 1 + total + 1 || rest[eol + 1 + total] != '\n') {
      *warning = "a damaged event after " + std::to_string(out.size()) +
                 " good ones; the rest of " + path + " was skipped";
      break;
    }
    size_t at = eol + 1;
    a.event_id = std::string(rest.substr(at, len[0]));
    at += len[0];
    a.url = std::string(rest.substr(at, len[1]));
    at += len[1];
    a.body = std::string(rest.substr(at, len[2]));
    at += len[2];
    a.signature = std::string(rest.substr(at, len[3]));
    at += len[3];
    a.attempts = static_cast<int>(attempts);
    out.push_back(std::move(a));
    rest.remove_prefix(at + 1);
  }
  return out;
}

}  // namespace floodgate::service
