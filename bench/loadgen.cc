// loadgen: an open-loop (fixed-rate) load generator for RESP and HTTP/1.1.
//
//   loadgen --proto resp|http --port P [--host 127.0.0.1] --rate R --duration S
//           --connections C [--keys K] [--depth D] --request TEMPLATE
//
// Request i is due at start + i/R. Due requests are handed to the connections
// round-robin; a connection keeps at most D (default 16) requests in flight,
// pipelined, and queues the rest. Latency runs from a request's SCHEDULED
// time to the end of its reply, so a stalled server is charged for every
// request that should have gone out meanwhile (coordinated omission corrected,
// as in wrk2), not only for the one that was stuck.
//
// TEMPLATE is, for resp, a command line whose words become a RESP multibulk
// ("FG.CHECK bench {key}", "EVALSHA <sha> 1 {key} 60"; quotes group words:
// '...' literally, "..." with \" and \\ escapes); for http, a path
// ("/v1/check?rule=bench&key={key}") sent as a GET.
// Every {key} becomes key:<n>, n uniform in [0, K), one n per request.
//
// Single-threaded epoll; the C++ standard library and POSIX (Linux) only.
// Bounded: scheduling stops after --duration seconds (at most 120); then at
// most 2 s more are spent collecting outstanding replies. Connecting takes
// at most 5 s more. If the server falls so far behind that more than
// max(100000, 2 s x R) requests are queued, scheduling stops early.
//
// Output (stdout), one line:
//   achieved_rps=... sent=... errors=... p50_us=... p90_us=... p99_us=...
//   p999_us=... max_us=... target_rps=... completed=... unanswered=...
//   send_lag_p99_us=...
// achieved_rps is replies received / duration; unanswered counts scheduled
// requests never sent or never answered. send_lag is how late
// loadgen itself wrote requests (its own scheduling error; latency includes
// it). Details of errors go to stderr. Exit status: 0 on success; 1 when
// errors occurred, a request went unanswered, or achieved_rps < 95% of the
// target (the reason is printed on stderr); 2 on bad usage.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cinttypes>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace {

constexpr int64_t kNsPerSec = 1'000'000'000;
constexpr int64_t kGraceNs = 2 * kNsPerSec;
constexpr int64_t kConnectTimeoutNs = 5 * kNsPerSec;
constexpr int64_t kReconnectDelayNs = 50'000'000;
constexpr double kMaxDurationS = 120;
constexpr size_t kMaxReplyBytes = 16 << 20;  // a reply bigger than this is a protocol error

int64_t NowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * kNsPerSec + ts.tv_nsec;
}

[[noreturn]] void Usage(const char* why) {
  if (why != nullptr) std::fprintf(stderr, "loadgen: %s\n", why);
  std::fprintf(stderr,
               "usage: loadgen --proto resp|http --port P [--host 127.0.0.1] --rate R\n"
               "               --duration S --connections C [--keys K] [--depth D]\n"
               "               --request TEMPLATE\n"
               "  TEMPLATE: resp: a command line, e.g. 'FG.CHECK bench {key}'\n"
               "            http: a path, e.g. '/v1/check?rule=bench&key={key}'\n"
               "  {key} becomes key:<0..K-1> (K default 100000); D: max in flight\n"
               "  per connection (default 16); S at most 120.\n");
  std::exit(2);
}

// ---------------------------------------------------------------------------
// Log-linear histogram of microseconds: exact (1 us buckets) below 1024 us,
// then 128 buckets per power of two (< 0.8% relative error).
class Histogram {
 public:
  Histogram() : buckets_(kLinear + kSub * (kMaxExp - kLinearExp + 1), 0) {}

  void Record(int64_t us) {
    if (us < 0) us = 0;
    ++buckets_[Index(us)];
    ++count_;
    max_ = std::max(max_, us);
  }
  int64_t count() const { return count_; }
  int64_t max() const { return max_; }

  // The upper bound of the bucket holding the q-quantile (q in [0,1]).
  int64_t Quantile(double q) const {
    if (count_ == 0) return 0;
    int64_t rank = static_cast<int64_t>(std::ceil(q * static_cast<double>(count_)));
    rank = std::clamp<int64_t>(rank, 1, count_);
    int64_t seen = 0;
    for (size_t i = 0; i < buckets_.size(); ++i) {
      seen += buckets_[i];
      if (seen >= rank) return std::min(UpperBound(i), max_);
    }
    return max_;
  }

 private:
  static constexpr int kLinearExp = 10;  // 2^10 = 1024
  static constexpr int64_t kLinear = int64_t{1} << kLinearExp;
  static constexpr int kSubBits = 7;
  static constexpr int64_t kSub = int64_t{1} << kSubBits;
  static constexpr int kMaxExp = 40;  // ~12 days in us; larger values are clamped

  static size_t Index(int64_t us) {
    if (us < kLinear) return static_cast<size_t>(us);
    int e = 63 - __builtin_clzll(static_cast<uint64_t>(us));
    if (e > kMaxExp) {
      e = kMaxExp;
      us = (int64_t{2} << kMaxExp) - 1;
    }
    const int64_t sub = (us >> (e - kSubBits)) & (kSub - 1);
    return static_cast<size_t>(kLinear + (e - kLinearExp) * kSub + sub);
  }
  static int64_t UpperBound(size_t index) {
    const int64_t i = static_cast<int64_t>(index);
    if (i < kLinear) return i;
    const int e = static_cast<int>((i - kLinear) / kSub) + kLinearExp;
    const int64_t sub = (i - kLinear) % kSub;
    return ((kSub + sub + 1) << (e - kSubBits)) - 1;
  }

  std::vector<int64_t> buckets_;
  int64_t count_ = 0;
  int64_t max_ = 0;
};

// ---------------------------------------------------------------------------
// Reply parsers. Each looks at the unconsumed input and says whether one
// whole reply is there (and how long it is), more bytes are needed, or the
// stream is malformed.
enum class Parse { kDone, kNeedMore, kError };

struct Reply {
  size_t length = 0;       // bytes of the reply
  bool error = false;      // RESP error reply, or an HTTP status not 2xx/429
  bool close = false;      // HTTP: the server will close after this reply
  int status = 0;          // HTTP status
  std::string error_text;  // first bytes of an error reply / malformation
};

// Reads a CRLF-terminated line starting at *pos; *line excludes the CRLF.
Parse Line(std::string_view in, size_t* pos, std::string_view* line) {
  const size_t eol = in.find("\r\n", *pos);
  if (eol == std::string_view::npos) {
    return in.size() - *pos > 64 * 1024 ? Parse::kError : Parse::kNeedMore;
  }
  *line = in.substr(*pos, eol - *pos);
  *pos = eol + 2;
  return Parse::kDone;
}

bool ToInt(std::string_view s, int64_t* out) {
  if (s.empty()) return false;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && p == s.data() + s.size();
}

// One RESP2 value of any type, arrays nested up to 32 deep.
Parse RespValue(std::string_view in, size_t* pos, int depth, Reply* r) {
  if (depth > 32) {
    r->error_text = "arrays nested too deep";
    return Parse::kError;
  }
  if (*pos >= in.size()) return Parse::kNeedMore;
  const char type = in[*pos];
  size_t p = *pos + 1;
  std::string_view line;
  if (Parse s = Line(in, &p, &line); s != Parse::kDone) {
    if (s == Parse::kError) r->error_text = "line too long";
    return s;
  }
  int64_t n = 0;
  switch (type) {
    case '+':
      break;
    case '-':
      if (depth == 0) {
        r->error = true;
        r->error_text = std::string(line.substr(0, 200));
      }
      break;
    case ':':
      if (!ToInt(line, &n)) {
        r->error_text = "bad integer '" + std::string(line.substr(0, 40)) + "'";
        return Parse::kError;
      }
      break;
    case '$':
      if (!ToInt(line, &n) || n < -1 || n > static_cast<int64_t>(kMaxReplyBytes)) {
        r->error_text = "bad bulk length '" + std::string(line.substr(0, 40)) + "'";
        return Parse::kError;
      }
      if (n >= 0) {
        if (in.size() < p + static_cast<size_t>(n) + 2) return Parse::kNeedMore;
        if (in[p + n] != '\r' || in[p + n + 1] != '\n') {
          r->error_text = "bulk string not followed by CRLF";
          return Parse::kError;
        }
        p += static_cast<size_t>(n) + 2;
      }
      break;
    case '*':
      if (!ToInt(line, &n) || n < -1 || n > 1'000'000) {
        r->error_text = "bad array length '" + std::string(line.substr(0, 40)) + "'";
        return Parse::kError;
      }
      for (int64_t i = 0; i < n; ++i) {
        if (Parse s = RespValue(in, &p, depth + 1, r); s != Parse::kDone) return s;
      }
      break;
    default:
      r->error_text =
          "unexpected RESP type byte 0x" + std::to_string(static_cast<unsigned char>(type));
      return Parse::kError;
  }
  *pos = p;
  return Parse::kDone;
}

Parse RespReply(std::string_view in, Reply* r) {
  size_t pos = 0;
  Parse s = RespValue(in, &pos, 0, r);
  if (s == Parse::kDone) r->length = pos;
  return s;
}

bool IEquals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if ((a[i] | 0x20) != (b[i] | 0x20)) return false;
  }
  return true;
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// One HTTP/1.x response to a GET: status line, headers, then a body framed
// by Content-Length or chunked coding (1xx, 204 and 304 have none).
Parse HttpReply(std::string_view in, Reply* r) {
  const size_t head_end = in.find("\r\n\r\n");
  if (head_end == std::string_view::npos) {
    if (in.size() > 64 * 1024) {
      r->error_text = "response head over 64 KiB";
      return Parse::kError;
    }
    return Parse::kNeedMore;
  }
  size_t pos = 0;
  std::string_view line;
  Line(in, &pos, &line);
  // HTTP/1.1 200 OK
  int64_t status = 0;
  if (line.size() < 12 || line.substr(0, 7) != "HTTP/1." || line[8] != ' ' ||
      !ToInt(line.substr(9, 3), &status) || status < 100 || status > 999) {
    r->error_text = "bad status line '" + std::string(line.substr(0, 80)) + "'";
    return Parse::kError;
  }
  const bool http10 = line[7] == '0';
  r->status = static_cast<int>(status);
  int64_t content_length = -1;
  bool chunked = false, close = http10, keep_alive = false;
  while (pos < head_end + 2) {
    Line(in, &pos, &line);
    if (line.empty()) break;
    const size_t colon = line.find(':');
    if (colon == std::string_view::npos) {
      r->error_text = "bad header line '" + std::string(line.substr(0, 80)) + "'";
      return Parse::kError;
    }
    const std::string_view name = Trim(line.substr(0, colon));
    const std::string_view value = Trim(line.substr(colon + 1));
    if (IEquals(name, "content-length")) {
      int64_t n = 0;
      if (!ToInt(value, &n) || n < 0 || static_cast<size_t>(n) > kMaxReplyBytes ||
          (content_length >= 0 && n != content_length)) {
        r->error_text = "bad Content-Length '" + std::string(value.substr(0, 40)) + "'";
        return Parse::kError;
      }
      content_length = n;
    } else if (IEquals(name, "transfer-encoding")) {
      chunked = value.size() >= 7 && IEquals(value.substr(value.size() - 7), "chunked");
      if (!chunked) {
        r->error_text = "unsupported Transfer-Encoding '" + std::string(value.substr(0, 40)) + "'";
        return Parse::kError;
      }
    } else if (IEquals(name, "connection")) {
      if (IEquals(value, "close")) close = true;
      if (IEquals(value, "keep-alive")) keep_alive = true;
    }
  }
  pos = head_end + 4;
  if (http10 && keep_alive) close = false;
  r->close = close;
  r->error = !(status >= 200 && status < 300) && status != 429;
  if (r->error) r->error_text = "HTTP status " + std::to_string(status);
  const bool no_body = (status >= 100 && status < 200) || status == 204 || status == 304;
  if (no_body) {
    r->length = pos;
    return Parse::kDone;
  }
  if (chunked) {
    for (;;) {
      std::string_view size_line;
      if (Parse s = Line(in, &pos, &size_line); s != Parse::kDone) return s;
      const size_t semi = size_line.find(';');
      if (semi != std::string_view::npos) size_line = size_line.substr(0, semi);
      size_line = Trim(size_line);
      uint64_t n = 0;
      auto [p, ec] = std::from_chars(size_line.data(), size_line.data() + size_line.size(), n, 16);
      if (size_line.empty() || ec != std::errc() || p != size_line.data() + size_line.size() ||
          n > kMaxReplyBytes) {
        r->error_text = "bad chunk size";
        return Parse::kError;
      }
      if (n == 0) {  // trailers until an empty line
        for (;;) {
          std::string_view trailer;
          if (Parse s = Line(in, &pos, &trailer); s != Parse::kDone) return s;
          if (trailer.empty()) break;
        }
        r->length = pos;
        return Parse::kDone;
      }
      if (in.size() < pos + n + 2) return Parse::kNeedMore;
      if (in.substr(pos + n, 2) != "\r\n") {
        r->error_text = "chunk not followed by CRLF";
        return Parse::kError;
      }
      pos += n + 2;
    }
  }
  if (content_length < 0) {
    // Framed by the end of the connection: not usable with keep-alive.
    r->error_text = "response without Content-Length or chunked coding";
    return Parse::kError;
  }
  if (in.size() < pos + static_cast<size_t>(content_length)) return Parse::kNeedMore;
  r->length = pos + static_cast<size_t>(content_length);
  return Parse::kDone;
}

// ---------------------------------------------------------------------------
// Request templates.
class Template {
 public:
  // pieces_ alternate literal text and {key} holes; for RESP, per argument.
  static std::optional<Template> Make(bool resp, std::string_view text, std::string* error) {
    Template t;
    t.resp_ = resp;
    if (resp) {
      std::vector<std::string> words;
      std::string cur;
      bool in_word = false;
      char quoted = 0;  // the open quote: " or ', else 0
      for (size_t i = 0; i < text.size(); ++i) {
        const char c = text[i];
        if (quoted != 0) {
          if (c == quoted) {
            quoted = 0;
          } else if (quoted == '"' && c == '\\' && i + 1 < text.size()) {
            cur += text[++i];  // \" and \\ inside double quotes
          } else {
            cur += c;
          }
        } else if (c == '"' || c == '\'') {
          quoted = c;
          in_word = true;
        } else if (c == ' ' || c == '\t') {
          if (in_word) words.push_back(std::move(cur));
          cur.clear();
          in_word = false;
        } else {
          cur += c;
          in_word = true;
        }
      }
      if (quoted != 0) {
        *error = "unbalanced quote in --request";
        return std::nullopt;
      }
      if (in_word) words.push_back(std::move(cur));
      if (words.empty()) {
        *error = "--request is empty";
        return std::nullopt;
      }
      for (const std::string& w : words) t.args_.push_back(Split(w));
    } else {
      if (text.empty() || text[0] != '/') {
        *error = "--request for http must be a path starting with '/'";
        return std::nullopt;
      }
      for (char c : text) {
        if (c <= ' ' || c == 0x7f) {
          *error = "--request path must not contain spaces or control characters";
          return std::nullopt;
        }
      }
      t.args_.push_back(Split(text));
    }
    return t;
  }

  // Appends one request for key:<n> to out.
  void Append(std::string* out, uint64_t n, const std::string& host) const {
    char key[32];
    const int key_len = std::snprintf(key, sizeof key, "key:%" PRIu64, n);
    auto expand = [&](const std::vector<std::string>& pieces, std::string* to) {
      for (size_t i = 0; i < pieces.size(); ++i) {
        if (i % 2 == 0) {
          to->append(pieces[i]);
        } else {
          to->append(key, static_cast<size_t>(key_len));
        }
      }
    };
    if (resp_) {
      char num[32];
      out->append(num,
                  static_cast<size_t>(std::snprintf(num, sizeof num, "*%zu\r\n", args_.size())));
      for (const auto& pieces : args_) {
        size_t len = 0;
        for (size_t i = 0; i < pieces.size(); ++i) {
          len += i % 2 == 0 ? pieces[i].size() : static_cast<size_t>(key_len);
        }
        out->append(num, static_cast<size_t>(std::snprintf(num, sizeof num, "$%zu\r\n", len)));
        expand(pieces, out);
        out->append("\r\n");
      }
    } else {
      out->append("GET ");
      expand(args_[0], out);
      out->append(" HTTP/1.1\r\nHost: ");
      out->append(host);
      out->append("\r\nUser-Agent: floodgate-loadgen\r\n\r\n");
    }
  }

 private:
  // "a{key}b" -> {"a", <hole>, "b"}: even indexes literal, odd ones holes.
  static std::vector<std::string> Split(std::string_view s) {
    std::vector<std::string> pieces;
    constexpr std::string_view kHole = "{key}";
    for (;;) {
      const size_t at = s.find(kHole);
      if (at == std::string_view::npos) break;
      pieces.emplace_back(s.substr(0, at));
      pieces.emplace_back();
      s.remove_prefix(at + kHole.size());
    }
    pieces.emplace_back(s);
    return pieces;
  }

  bool resp_ = true;
  std::vector<std::vector<std::string>> args_;
};

// ---------------------------------------------------------------------------
struct Options {
  bool resp = true;
  std::string host = "127.0.0.1";
  int port = 0;
  double rate = 0;
  double duration = 0;
  int connections = 0;
  uint64_t keys = 100'000;
  int depth = 16;
  std::string request;
};

double Number(const char* flag, const char* value, double lo, double hi) {
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(value, &end);
  if (errno != 0 || end == value || *end != '\0' || !(v >= lo && v <= hi)) {
    std::string why = std::string(flag) + " must be a number in [" + std::to_string(lo) + ", " +
                      std::to_string(hi) + "], got '" + value + "'";
    Usage(why.c_str());
  }
  return v;
}

Options ParseArgs(int argc, char** argv) {
  Options o;
  bool have_proto = false;
  for (int i = 1; i < argc; ++i) {
    const std::string_view flag = argv[i];
    if (flag == "-h" || flag == "--help") Usage(nullptr);
    if (i + 1 >= argc) Usage(("missing value for " + std::string(flag)).c_str());
    const char* v = argv[++i];
    if (flag == "--proto") {
      if (std::string_view(v) != "resp" && std::string_view(v) != "http") {
        Usage("--proto must be resp or http");
      }
      o.resp = std::string_view(v) == "resp";
      have_proto = true;
    } else if (flag == "--host") {
      o.host = v;
    } else if (flag == "--port") {
      o.port = static_cast<int>(Number("--port", v, 1, 65535));
    } else if (flag == "--rate") {
      o.rate = Number("--rate", v, 1, 10'000'000);
    } else if (flag == "--duration") {
      o.duration = Number("--duration", v, 0.1, kMaxDurationS);
    } else if (flag == "--connections") {
      o.connections = static_cast<int>(Number("--connections", v, 1, 10'000));
    } else if (flag == "--keys") {
      o.keys = static_cast<uint64_t>(Number("--keys", v, 1, 1e15));
    } else if (flag == "--depth") {
      o.depth = static_cast<int>(Number("--depth", v, 1, 1024));
    } else if (flag == "--request") {
      o.request = v;
    } else {
      Usage(("unknown flag " + std::string(flag)).c_str());
    }
  }
  if (!have_proto) Usage("--proto is required");
  if (o.port == 0) Usage("--port is required");
  if (o.rate == 0) Usage("--rate is required");
  if (o.duration == 0) Usage("--duration is required");
  if (o.connections == 0) Usage("--connections is required");
  if (o.request.empty()) Usage("--request is required");
  return o;
}

// splitmix64: a fast, decent generator for key numbers.
struct Rng {
  uint64_t s;
  uint64_t Next() {
    uint64_t z = (s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  uint64_t Below(uint64_t n) {
    return static_cast<uint64_t>((static_cast<__uint128_t>(Next()) * n) >> 64);
  }
};

struct Errors {
  int64_t connect = 0;      // connect() failed or timed out
  int64_t closed = 0;       // the server closed a connection / socket error
  int64_t protocol = 0;     // malformed reply stream
  int64_t error_reply = 0;  // RESP error reply / HTTP status other than 2xx, 429
  int64_t lost = 0;         // requests in flight on a connection that broke
  int64_t total() const { return connect + closed + protocol + error_reply + lost; }
};

struct Conn {
  int fd = -1;
  bool connecting = false;
  bool connected = false;
  bool want_write = false;   // EPOLLOUT registered
  int64_t reconnect_at = 0;  // when > 0: reconnect at this time
  std::string out;
  size_t out_off = 0;
  std::string in;
  std::deque<int64_t> inflight;  // scheduled times of requests sent, in order
  std::deque<int64_t> backlog;   // scheduled times of requests not yet sent
  bool close_after_reply = false;
  bool dirty = false;  // has unsent output; listed in dirty_
};

class LoadGen {
 public:
  explicit LoadGen(const Options& o, Template t) : o_(o), t_(std::move(t)) {
    host_header_ = o_.host + ":" + std::to_string(o_.port);
    rng_.s = static_cast<uint64_t>(NowNs()) ^ (static_cast<uint64_t>(getpid()) << 32);
  }

  int Run() {
    epfd_ = epoll_create1(EPOLL_CLOEXEC);
    if (epfd_ < 0) return Fail("epoll_create1");
    std::memset(&addr_, 0, sizeof addr_);
    addr_.sin_family = AF_INET;
    addr_.sin_port = htons(static_cast<uint16_t>(o_.port));
    if (inet_pton(AF_INET, o_.host.c_str(), &addr_.sin_addr) != 1) {
      std::fprintf(stderr, "loadgen: --host must be an IPv4 address, got '%s'\n", o_.host.c_str());
      return 2;
    }
    conns_.resize(static_cast<size_t>(o_.connections));

    // Open every connection before the clock starts.
    const int64_t connect_deadline = NowNs() + kConnectTimeoutNs;
    for (size_t i = 0; i < conns_.size(); ++i) StartConnect(i);
    while (NowNs() < connect_deadline && !AllConnected() && !AnyDead()) Poll(connect_deadline);
    if (!AllConnected()) {
      int ok = 0;
      for (const Conn& c : conns_) ok += c.connected ? 1 : 0;
      std::fprintf(stderr, "loadgen: only %d of %d connections to %s opened; giving up\n", ok,
                   o_.connections, host_header_.c_str());
      int pending = 0;
      for (const Conn& c : conns_) pending += c.connecting ? 1 : 0;
      errors_.connect += pending;  // timed out; refused ones are counted already
      PrintResult(0);
      return 1;
    }

    const double interval_ns = 1e9 / o_.rate;
    const int64_t total = static_cast<int64_t>(std::llround(o_.rate * o_.duration));
    running_ = true;
    // Queued (due but unsent) requests allowed: 2 s worth, at least 100000.
    const int64_t max_queued = std::max<int64_t>(100'000, static_cast<int64_t>(2 * o_.rate));
    const int64_t start = NowNs();
    auto due_at = [&](int64_t k) {
      return start + static_cast<int64_t>(std::llround(static_cast<double>(k) * interval_ns));
    };
    const int64_t end = start + static_cast<int64_t>(std::llround(o_.duration * 1e9));
    const int64_t hard_end = end + kGraceNs;
    int64_t next = 0;  // index of the next request to schedule
    size_t rr = 0;
    for (;;) {
      const int64_t now = NowNs();
      // Schedule every request that is due.
      while (next < total && !overloaded_) {
        const int64_t due = due_at(next);
        if (due > now || due >= end) break;
        Conn& c = conns_[rr];
        c.backlog.push_back(due);
        ++queued_;
        Pump(rr, now);
        rr = (rr + 1) % conns_.size();
        ++next;
      }
      if (queued_ > max_queued && !overloaded_) {
        // The server has fallen this far behind: the rate cannot be held,
        // and queueing more would only use memory. Stop scheduling.
        overloaded_ = true;
        std::fprintf(stderr,
                     "loadgen: %" PRId64
                     " requests queued behind full connections after %.1f s; "
                     "stopping early\n",
                     queued_, static_cast<double>(now - start) / 1e9);
      }
      for (size_t i = 0; i < conns_.size(); ++i) {
        if (conns_[i].reconnect_at > 0 && conns_[i].reconnect_at <= now) StartConnect(i);
      }
      FlushDirty();
      const bool scheduling = !overloaded_ && next < total && due_at(next) < end;
      if (!scheduling && Outstanding() == 0) break;
      if (now >= hard_end) break;
      int64_t wake = hard_end;
      if (scheduling) wake = std::min(wake, due_at(next));
      for (const Conn& c : conns_) {
        if (c.reconnect_at > 0) wake = std::min(wake, c.reconnect_at);
      }
      Poll(wake);
    }
    const double elapsed_s = o_.duration;
    unanswered_ = Outstanding();
    scheduled_ = next;
    PrintResult(static_cast<double>(completed_) / elapsed_s);
    return Verdict(static_cast<double>(completed_) / elapsed_s);
  }

 private:
  int Fail(const char* what) {
    std::fprintf(stderr, "loadgen: %s: %s\n", what, std::strerror(errno));
    return 1;
  }

  bool AllConnected() const {
    for (const Conn& c : conns_) {
      if (!c.connected) return false;
    }
    return true;
  }
  bool AnyDead() const {
    for (const Conn& c : conns_) {
      if (!c.connected && !c.connecting) return true;
    }
    return false;
  }
  int64_t Outstanding() const {
    int64_t n = 0;
    for (const Conn& c : conns_) n += static_cast<int64_t>(c.inflight.size() + c.backlog.size());
    return n;
  }

  void StartConnect(size_t i) {
    Conn& c = conns_[i];
    c.reconnect_at = 0;
    c.fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (c.fd < 0) {
      ++errors_.connect;
      LogOnce("socket", std::strerror(errno));
      c.reconnect_at = running_ ? NowNs() + kReconnectDelayNs : 0;
      return;
    }
    const int one = 1;
    setsockopt(c.fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    const int rc = connect(c.fd, reinterpret_cast<const sockaddr*>(&addr_), sizeof addr_);
    if (rc != 0 && errno != EINPROGRESS) {
      ++errors_.connect;
      LogOnce("connect", std::strerror(errno));
      CloseConn(i, /*reconnect=*/true);
      return;
    }
    c.connecting = rc != 0;
    c.connected = rc == 0;
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLRDHUP | (c.connecting ? static_cast<uint32_t>(EPOLLOUT) : 0u);
    c.want_write = c.connecting;
    ev.data.u32 = static_cast<uint32_t>(i);
    epoll_ctl(epfd_, EPOLL_CTL_ADD, c.fd, &ev);
  }

  // Closes connection i; its in-flight requests are lost. Queued ones stay
  // queued for the next connection when reconnecting during the run.
  void CloseConn(size_t i, bool reconnect) {
    Conn& c = conns_[i];
    if (c.fd >= 0) {
      epoll_ctl(epfd_, EPOLL_CTL_DEL, c.fd, nullptr);
      close(c.fd);
    }
    c.fd = -1;
    errors_.lost += static_cast<int64_t>(c.inflight.size());
    c.inflight.clear();
    c.out.clear();
    c.out_off = 0;
    c.in.clear();
    c.connected = c.connecting = c.want_write = c.close_after_reply = false;
    c.reconnect_at = reconnect && running_ ? NowNs() + kReconnectDelayNs : 0;
  }

  // Moves queued requests onto the wire while the connection has room.
  void Pump(size_t i, int64_t now) {
    Conn& c = conns_[i];
    if (!c.connected || c.close_after_reply) return;
    while (!c.backlog.empty() && c.inflight.size() < static_cast<size_t>(o_.depth)) {
      const int64_t due = c.backlog.front();
      c.backlog.pop_front();
      --queued_;
      t_.Append(&c.out, rng_.Below(o_.keys), host_header_);
      c.inflight.push_back(due);
      ++sent_;
      send_lag_.Record((now - due) / 1000);
      if (!c.dirty) {
        c.dirty = true;
        dirty_.push_back(i);
      }
    }
  }

  void FlushDirty() {
    for (size_t i : dirty_) {
      conns_[i].dirty = false;
      Flush(i);
    }
    dirty_.clear();
  }

  void Flush(size_t i) {
    Conn& c = conns_[i];
    while (c.fd >= 0 && c.connected && c.out_off < c.out.size()) {
      const ssize_t n =
          send(c.fd, c.out.data() + c.out_off, c.out.size() - c.out_off, MSG_NOSIGNAL);
      if (n > 0) {
        c.out_off += static_cast<size_t>(n);
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
      ++errors_.closed;
      LogOnce("send", std::strerror(errno));
      CloseConn(i, true);
      return;
    }
    if (c.fd < 0 || !c.connected) return;
    if (c.out_off == c.out.size()) {
      c.out.clear();
      c.out_off = 0;
    }
    const bool need = c.out_off < c.out.size();
    if (need != c.want_write) {
      epoll_event ev{};
      ev.events = EPOLLIN | EPOLLRDHUP | (need ? static_cast<uint32_t>(EPOLLOUT) : 0u);
      ev.data.u32 = static_cast<uint32_t>(i);
      epoll_ctl(epfd_, EPOLL_CTL_MOD, c.fd, &ev);
      c.want_write = need;
    }
  }

  void Poll(int64_t wake_ns) {
    epoll_event events[256];
    int64_t wait = wake_ns - NowNs();
    if (wait < 0) wait = 0;
    timespec ts{static_cast<time_t>(wait / kNsPerSec), static_cast<long>(wait % kNsPerSec)};
    int n = -1;
    (void)ts;
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 35))
    // Nanosecond timeouts (Linux 5.11+, glibc 2.35+).
    if (have_pwait2_) {
      n = epoll_pwait2(epfd_, events, 256, &ts, nullptr);
      if (n < 0 && errno == ENOSYS) {
        have_pwait2_ = false;
        return;
      }
    } else
#endif
    {
      // Millisecond timeouts only: round down and spin the last millisecond.
      n = epoll_wait(epfd_, events, 256, static_cast<int>(wait / 1'000'000));
    }
    if (n < 0) {
      if (errno != EINTR) LogOnce("epoll_wait", std::strerror(errno));
      return;
    }
    for (int k = 0; k < n; ++k) {
      const size_t i = events[k].data.u32;
      Conn& c = conns_[i];
      if (c.fd < 0) continue;
      const uint32_t e = events[k].events;
      if (c.connecting) {
        if (e & (EPOLLOUT | EPOLLERR | EPOLLHUP)) {
          int err = 0;
          socklen_t len = sizeof err;
          getsockopt(c.fd, SOL_SOCKET, SO_ERROR, &err, &len);
          if (err != 0) {
            ++errors_.connect;
            LogOnce("connect", std::strerror(err));
            CloseConn(i, true);
            continue;
          }
          c.connecting = false;
          c.connected = true;
          Pump(i, NowNs());
          Flush(i);
        }
        continue;
      }
      if (e & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) {
        if (!Read(i)) continue;
      }
      if ((e & EPOLLOUT) && conns_[i].fd >= 0) Flush(i);
    }
    FlushDirty();
  }

  // Reads and handles replies; false when the connection was closed.
  bool Read(size_t i) {
    Conn& c = conns_[i];
    char buf[64 * 1024];
    bool eof = false;
    for (;;) {
      const ssize_t n = recv(c.fd, buf, sizeof buf, 0);
      if (n > 0) {
        c.in.append(buf, static_cast<size_t>(n));
        if (static_cast<size_t>(n) < sizeof buf) break;
        continue;
      }
      if (n == 0) {
        eof = true;
        break;
      }
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) break;
      ++errors_.closed;
      LogOnce("recv", std::strerror(errno));
      CloseConn(i, true);
      return false;
    }
    const int64_t now = NowNs();
    size_t used = 0;
    while (used < c.in.size()) {
      Reply r;
      const std::string_view rest = std::string_view(c.in).substr(used);
      const Parse s = o_.resp ? RespReply(rest, &r) : HttpReply(rest, &r);
      if (s == Parse::kNeedMore) break;
      if (s == Parse::kError || c.inflight.empty()) {
        ++errors_.protocol;
        LogOnce("protocol error",
                s == Parse::kError ? r.error_text.c_str() : "a reply nobody asked for");
        CloseConn(i, true);
        return false;
      }
      used += r.length;
      latency_.Record((now - c.inflight.front()) / 1000);
      c.inflight.pop_front();
      ++completed_;
      if (r.error) {
        ++errors_.error_reply;
        LogOnce("error reply", r.error_text.c_str());
      }
      if (r.close) c.close_after_reply = true;
    }
    c.in.erase(0, used);
    if (c.close_after_reply && c.inflight.empty()) {
      // The server said Connection: close: open a new one, no error.
      const int64_t reopen = NowNs();
      CloseConn(i, false);
      c.reconnect_at = reopen;
      return false;
    }
    if (eof) {
      ++errors_.closed;
      LogOnce("connection closed by the server",
              c.inflight.empty() ? "while idle" : "with requests in flight");
      CloseConn(i, true);
      return false;
    }
    Pump(i, now);
    return true;
  }

  void LogOnce(const char* what, const char* detail) {
    // Print the first few occurrences; a summary follows at the end.
    if (logged_ < 10) {
      std::fprintf(stderr, "loadgen: %s: %s\n", what, detail);
    } else if (logged_ == 10) {
      std::fprintf(stderr, "loadgen: (further error messages suppressed)\n");
    }
    ++logged_;
  }

  void PrintResult(double achieved) {
    std::printf("achieved_rps=%.1f sent=%" PRId64 " errors=%" PRId64 " p50_us=%" PRId64
                " p90_us=%" PRId64 " p99_us=%" PRId64 " p999_us=%" PRId64 " max_us=%" PRId64
                " target_rps=%.1f completed=%" PRId64 " unanswered=%" PRId64
                " send_lag_p99_us=%" PRId64 "\n",
                achieved, sent_, errors_.total(), latency_.Quantile(0.50), latency_.Quantile(0.90),
                latency_.Quantile(0.99), latency_.Quantile(0.999), latency_.max(), o_.rate,
                completed_, unanswered_, send_lag_.Quantile(0.99));
    std::fflush(stdout);
    if (errors_.total() > 0) {
      std::fprintf(stderr,
                   "loadgen: errors: connect=%" PRId64 " closed=%" PRId64 " protocol=%" PRId64
                   " error_replies=%" PRId64 " lost_in_flight=%" PRId64 "\n",
                   errors_.connect, errors_.closed, errors_.protocol, errors_.error_reply,
                   errors_.lost);
    }
  }

  int Verdict(double achieved) {
    int rc = 0;
    if (errors_.total() > 0) {
      std::fprintf(stderr, "loadgen: FAIL: %" PRId64 " errors (see above)\n", errors_.total());
      rc = 1;
    }
    if (unanswered_ > 0) {
      std::fprintf(stderr,
                   "loadgen: FAIL: %" PRId64
                   " scheduled requests never sent or never answered "
                   "(waited %.0f s after the end): the server did not keep up with %.0f/s, or "
                   "connections failed\n",
                   unanswered_, kGraceNs / 1e9, o_.rate);
      rc = 1;
    }
    if (achieved < 0.95 * o_.rate) {
      std::fprintf(stderr,
                   "loadgen: FAIL: achieved %.1f replies/s, below 95%% of the target %.1f/s "
                   "(%" PRId64 " of %" PRId64 " scheduled requests answered)\n",
                   achieved, o_.rate, completed_, scheduled_);
      rc = 1;
    }
    return rc;
  }

  const Options o_;
  const Template t_;
  std::string host_header_;
  sockaddr_in addr_{};
  int epfd_ = -1;
  bool have_pwait2_ = true;
  bool running_ = false;  // past the connect phase: broken connections are reopened
  std::vector<Conn> conns_;
  std::vector<size_t> dirty_;
  Rng rng_{};
  Histogram latency_, send_lag_;
  Errors errors_;
  int64_t sent_ = 0, completed_ = 0, unanswered_ = 0, scheduled_ = 0, queued_ = 0;
  bool overloaded_ = false;  // scheduling stopped early: too many requests queued
  int logged_ = 0;
};

}  // namespace

int main(int argc, char** argv) {
  signal(SIGPIPE, SIG_IGN);
  // Sleep precisely: the default 50 us timer slack would delay sends.
  prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
  const Options o = ParseArgs(argc, argv);
  std::string error;
  auto t = Template::Make(o.resp, o.request, &error);
  if (!t) Usage(error.c_str());
  LoadGen gen(o, std::move(*t));
  return gen.Run();
}
