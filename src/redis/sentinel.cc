#include "redis/sentinel.h"

#include <hiredis/hiredis.h>
#include <poll.h>

#include <cerrno>
#include <memory>
#include <utility>
#include <vector>

#include "common/log.h"
#include "redis/wire.h"

namespace floodgate::redis::internal {
namespace {

struct ContextFree {
  void operator()(redisContext* c) const { redisFree(c); }
};
using ContextPtr = std::unique_ptr<redisContext, ContextFree>;

// Replies come from the client's own bounded reader (wire.h), set on every
// context: a sentinel's reply can no more make floodgate abort than a
// master's can.
using ReplyPtr = OwnedReply;

std::string_view Text(const redisReply* r) { return {r->str, r->len}; }

ReplyPtr Command(redisContext* c, std::initializer_list<std::string_view> args) {
  std::vector<const char*> argv;
  std::vector<size_t> lens;
  for (std::string_view a : args) {
    argv.push_back(a.data());
    lens.push_back(a.size());
  }
  return ReplyPtr(static_cast<redisReply*>(
      redisCommandArgv(c, static_cast<int>(argv.size()), argv.data(), lens.data())));
}

// A blocking connection to one sentinel, authenticated when the URL says
// so; null with `error` set when it cannot be had within `timeout_ms`.
ContextPtr Connect(const StoreUrl& url, const HostPort& sentinel, int64_t timeout_ms,
                   std::string* error) {
  const timeval tv{static_cast<time_t>(timeout_ms / 1000),
                   static_cast<suseconds_t>((timeout_ms % 1000) * 1000)};
  ContextPtr c(redisConnectWithTimeout(sentinel.host.c_str(), sentinel.port, tv));
  if (c == nullptr) {
    *error = "cannot allocate a connection";
    return nullptr;
  }
  if (c->err != 0) {
    *error = c->errstr;
    return nullptr;
  }
  ReaderPtr reader = NewReplyReader();
  if (reader == nullptr) {
    *error = "cannot allocate a reply reader";
    return nullptr;
  }
  redisReaderFree(c->reader);
  c->reader = reader.release();
  redisSetTimeout(c.get(), tv);
  if (!url.sentinel_password.empty()) {
    ReplyPtr r = url.sentinel_user.empty()
                     ? Command(c.get(), {"AUTH", url.sentinel_password})
                     : Command(c.get(), {"AUTH", url.sentinel_user, url.sentinel_password});
    if (r == nullptr) {
      *error = c->errstr;
      return nullptr;
    }
    if (r->type == REDIS_REPLY_ERROR) {
      // The server's message never holds the password.
      *error = "AUTH failed: " + std::string(Text(r.get()));
      return nullptr;
    }
  }
  return c;
}

// A host and a port as the sentinels give them apart ("::1", "6380"), read
// as any address in a store URL is.
std::optional<HostPort> AddressOf(std::string_view host, std::string_view port) {
  const bool v6 = host.find(':') != std::string_view::npos;
  Result<HostPort> hp = ParseHostPort((v6 ? "[" + std::string(host) + "]" : std::string(host)) +
                                      ":" + std::string(port));
  if (!hp.ok()) return std::nullopt;
  return *std::move(hp);
}

}  // namespace

std::optional<HostPort> ParseSwitchMaster(std::string_view message, std::string_view name) {
  std::string_view words[5];
  size_t n = 0;
  while (!message.empty() && n < 5) {
    const size_t sp = message.find(' ');
    words[n++] = message.substr(0, sp);
    message = sp == std::string_view::npos ? std::string_view() : message.substr(sp + 1);
  }
  if (n != 5 || !message.empty() || words[0] != name) return std::nullopt;
  return AddressOf(words[3], words[4]);
}

Result<HostPort> AskSentinels(const StoreUrl& url, int64_t timeout_ms) {
  std::string said;
  bool answered = false;  // some sentinel answered, without a master of that name
  auto note = [&](const HostPort& sentinel, std::string_view what) {
    if (!said.empty()) said += "; ";
    said += sentinel.ToString();
    said += ": ";
    said += what;
  };
  for (const HostPort& sentinel : url.nodes) {
    std::string error;
    ContextPtr c = Connect(url, sentinel, timeout_ms, &error);
    if (c == nullptr) {
      note(sentinel, error);
      continue;
    }
    ReplyPtr r = Command(c.get(), {"SENTINEL", "get-master-addr-by-name", url.master_name});
    if (r == nullptr) {
      note(sentinel, c->errstr);
      continue;
    }
    if (r->type == REDIS_REPLY_ERROR) {  // not a sentinel, say
      note(sentinel, Text(r.get()));
      continue;
    }
    if (r->type == REDIS_REPLY_NIL) {
      answered = true;
      note(sentinel, "no such master");
      continue;
    }
    std::optional<HostPort> master;
    if (r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
        r->element[0]->type == REDIS_REPLY_STRING && r->element[1]->type == REDIS_REPLY_STRING) {
      master = AddressOf(Text(r->element[0]), Text(r->element[1]));
    }
    if (!master.has_value()) {
      note(sentinel, "an unexpected reply to SENTINEL get-master-addr-by-name");
      continue;
    }
    return *std::move(master);
  }
  if (answered) {
    return NotFoundError("redis sentinel: no sentinel knows a master named '" + url.master_name +
                         "' (" + said + ")");
  }
  return UnavailableError("redis sentinel: no sentinel answered for master '" + url.master_name +
                          "' (" + said + ")");
}

SentinelWatcher::SentinelWatcher(StoreUrl url, int64_t timeout_ms, const Clock& clock,
                                 Publish publish)
    : url_(std::move(url)), timeout_ms_(timeout_ms), clock_(clock), publish_(std::move(publish)) {}

SentinelWatcher::~SentinelWatcher() { Stop(); }

void SentinelWatcher::Stop() { thread_.Stop(); }

void SentinelWatcher::Start(const HostPort& known) {
  master_ = known;
  last_ask_ns_ = clock_.MonotonicNs();
  thread_.Start([this] { Run(); });
}

void SentinelWatcher::RequestRefresh() {
  if (!refresh_.exchange(true)) thread_.Wake();
}

void SentinelWatcher::Ask() {
  refresh_.store(false);
  last_ask_ns_ = clock_.MonotonicNs();
  Result<HostPort> master = AskSentinels(url_, timeout_ms_);
  if (!master.ok()) {
    // Asked up to every kMinAskMs while the master is away: one line a second.
    int64_t suppressed = 0;
    if (no_master_log_.Allow(last_ask_ns_ / 1'000'000, &suppressed)) {
      Log(LogLevel::kWarn, "redis sentinel: no master",
          {{"master", url_.master_name},
           {"error", master.status().message()},
           {"suppressed", std::to_string(suppressed)}});
    }
    return;
  }
  Follow(*std::move(master));
}

void SentinelWatcher::Follow(HostPort master) {
  if (master == master_) return;
  Log(LogLevel::kInfo, "redis sentinel: following a new master",
      {{"master", url_.master_name}, {"from", master_.ToString()}, {"to", master.ToString()}});
  master_ = std::move(master);
  publish_(master_);
}

void SentinelWatcher::Run() {
  constexpr int64_t kRetryNs = 200'000'000;  // between sentinels that fail
  constexpr int kPollMs = 50;                // how soon a stop or a request is seen
  size_t next = 0;
  bool warned = false;
  while (!thread_.stopping()) {
    const HostPort& sentinel = url_.nodes[next++ % url_.nodes.size()];
    std::string error;
    ContextPtr c = Connect(url_, sentinel, timeout_ms_, &error);
    ReplyPtr subscribed;
    if (c != nullptr) {
      subscribed = Command(c.get(), {"SUBSCRIBE", "+switch-master"});
      if (subscribed == nullptr)
        error = c->errstr;
      else if (subscribed->type == REDIS_REPLY_ERROR)
        error = Text(subscribed.get());
    }
    if (c == nullptr || subscribed == nullptr || subscribed->type == REDIS_REPLY_ERROR) {
      if (!warned) {
        Log(LogLevel::kWarn, "redis sentinel: cannot subscribe",
            {{"sentinel", sentinel.ToString()}, {"error", error}});
        warned = true;
      }
      if (refresh_.load()) Ask();
      thread_.SleepFor(kRetryNs);  // less when asked to refresh; the loop sees a stop
      continue;
    }
    warned = false;
    // A failover may have ended while nobody listened.
    Ask();
    while (!thread_.stopping()) {
      const int64_t now = clock_.MonotonicNs();
      const int64_t since = now - last_ask_ns_;
      if ((refresh_.load() && since >= kMinAskMs * 1'000'000) ||
          since >= kSafetyAskMs * 1'000'000) {
        Ask();
      }
      void* raw = nullptr;
      if (redisGetReplyFromReader(c.get(), &raw) != REDIS_OK) break;
      if (raw != nullptr) {
        ReplyPtr m(static_cast<redisReply*>(raw));
        // ["message", "+switch-master", "<name> <old ip> <old port> <new ip> <new port>"]
        if (m->type != REDIS_REPLY_ARRAY || m->elements != 3 ||
            m->element[2]->type != REDIS_REPLY_STRING) {
          continue;
        }
        if (std::optional<HostPort> master =
                ParseSwitchMaster(Text(m->element[2]), url_.master_name);
            master.has_value()) {
          Follow(*std::move(master));
        }
        continue;
      }
      pollfd pfd{c->fd, POLLIN, 0};
      const int ready = poll(&pfd, 1, kPollMs);
      if (ready < 0 && errno != EINTR) break;
      if (ready > 0 && redisBufferRead(c.get()) != REDIS_OK) break;  // the sentinel went away
    }
  }
}

}  // namespace floodgate::redis::internal
