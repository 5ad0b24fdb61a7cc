// One Redis connection's socket work: non-blocking connect, TLS, the AUTH /
// SELECT handshake, reads into the reply reader and batched writes. See
// connection.h; routing and answers are the IoThread's.
#include "redis/connection.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <string_view>

#include "redis/io_thread.h"

namespace floodgate::redis::internal {
namespace {

constexpr size_t kReadChunk = 64 * 1024;
// Plain sockets: at most this many reads per readiness event, so one busy
// connection cannot starve the others (epoll is level-triggered: the rest
// is read next round).
constexpr int kMaxReadsPerEvent = 16;
// An output buffer grown past this is released once drained.
constexpr size_t kKeepOutputCapacity = 1 << 20;

std::string Errno(int err) { return std::strerror(err); }

// ROLE's first element: "master", "slave" or "sentinel".
std::string RoleName(const redisReply* reply) {
  if (reply->type != REDIS_REPLY_ARRAY || reply->elements == 0 ||
      reply->element[0]->type != REDIS_REPLY_STRING) {
    return "an unexpected reply";
  }
  return std::string(reply->element[0]->str, reply->element[0]->len);
}

bool IsMasterRole(const redisReply* reply) { return RoleName(reply) == "master"; }

}  // namespace

Connection::Connection(IoThread& loop, Node& node) : loop_(loop), node_(node) {
  backoff_ns_ = loop.state().options.reconnect_backoff_initial_ms * 1'000'000;
}

Connection::~Connection() { CloseSocket(); }

void Connection::CloseSocket() {
  tls_.reset();
  if (fd_ >= 0) {
    epoll_ctl(loop_.epoll_fd(), EPOLL_CTL_DEL, fd_, nullptr);
    ::close(fd_);
    fd_ = -1;
  }
  reader_.reset();
  out_.clear();
  if (out_.capacity() > kKeepOutputCapacity) std::string().swap(out_);
  out_pos_ = 0;
  unflushed_commands_ = 0;
  watching_output_ = false;
  tls_read_wants_write_ = false;
  handshake_.clear();
  stale_ = 0;
}

void Connection::Open(int64_t now_ns) {
  if (state_ != State::kScheduled) return;
  const ClientOptions& options = loop_.state().options;
  state_ = State::kConnecting;
  connect_deadline_ns_ = now_ns + options.connect_timeout_ms * 1'000'000;
  reader_ = NewReplyReader();
  if (reader_ == nullptr) {
    Fail("out of memory creating a reply reader", now_ns);
    return;
  }

  // Numeric addresses (what Redis Cluster announces) resolve without DNS;
  // names are resolved here, on the I/O thread, at each connect.
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* addrs = nullptr;
  const std::string port = std::to_string(node_.address.port);
  const int gai = getaddrinfo(node_.address.host.c_str(), port.c_str(), &hints, &addrs);
  if (gai != 0 || addrs == nullptr) {
    Fail("cannot resolve '" + node_.address.host + "': " + gai_strerror(gai), now_ns);
    return;
  }
  fd_ = ::socket(addrs->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd_ < 0) {
    const int err = errno;
    freeaddrinfo(addrs);
    Fail("socket: " + Errno(err), now_ns);
    return;
  }
  const int one = 1;
  setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  const int rc = ::connect(fd_, addrs->ai_addr, addrs->ai_addrlen);
  const int err = errno;
  freeaddrinfo(addrs);
  if (rc != 0 && err != EINPROGRESS) {
    Fail("connect: " + Errno(err), now_ns);
    return;
  }
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLOUT;
  ev.data.ptr = this;
  if (epoll_ctl(loop_.epoll_fd(), EPOLL_CTL_ADD, fd_, &ev) != 0) {
    Fail("epoll_ctl: " + Errno(errno), now_ns);
    return;
  }
  watching_output_ = true;
  if (rc == 0) OnConnected(now_ns);
}

void Connection::WatchOutput(bool want) {
  if (fd_ < 0 || want == watching_output_) return;
  epoll_event ev{};
  ev.events = want ? (EPOLLIN | EPOLLOUT) : EPOLLIN;
  ev.data.ptr = this;
  epoll_ctl(loop_.epoll_fd(), EPOLL_CTL_MOD, fd_, &ev);
  watching_output_ = want;
}

void Connection::HandleEvents(uint32_t events, int64_t now_ns) {
  // A socket closed earlier in this event batch: its events are stale.
  if (fd_ < 0) return;
  switch (state_) {
    case State::kIdle:
    case State::kScheduled:
      return;
    case State::kConnecting: {
      if ((events & (EPOLLOUT | EPOLLERR | EPOLLHUP)) == 0) return;
      int err = 0;
      socklen_t len = sizeof(err);
      if (getsockopt(fd_, SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
      if (err != 0) {
        Fail("connect: " + Errno(err), now_ns);
        return;
      }
      OnConnected(now_ns);
      return;
    }
    case State::kTlsHandshake:
      OnConnected(now_ns);
      return;
    case State::kHandshake:
    case State::kReady:
      if ((events & (EPOLLIN | EPOLLHUP | EPOLLERR)) != 0 ||
          (tls_read_wants_write_ && (events & EPOLLOUT) != 0)) {
        ReadAll(now_ns);
      }
      if (fd_ >= 0 && has_output()) Flush(now_ns);
      return;
  }
}

// TCP is up (or the TLS handshake made progress): drive TLS, then the
// Redis handshake.
void Connection::OnConnected(int64_t now_ns) {
  const std::shared_ptr<TlsContext>& tls = loop_.state().tls;
  if (tls != nullptr) {
    if (tls_ == nullptr) {
      Result<std::unique_ptr<TlsSession>> session =
          TlsSession::Create(*tls, fd_, node_.address.host);
      if (!session.ok()) {
        Fail(session.status().message(), now_ns);
        return;
      }
      tls_ = std::move(session).value();
      state_ = State::kTlsHandshake;
    }
    switch (tls_->Handshake()) {
      case TlsSession::Io::kOk:
        break;
      case TlsSession::Io::kWantRead:
        WatchOutput(false);
        return;
      case TlsSession::Io::kWantWrite:
        WatchOutput(true);
        return;
      case TlsSession::Io::kClosed:
      case TlsSession::Io::kError:
        Fail(tls_->error(), now_ns);
        return;
    }
  }
  StartHandshake(now_ns);
}

void Connection::StartHandshake(int64_t now_ns) {
  const StoreUrl& url = loop_.state().options.url;
  if (!url.password.empty()) {
    if (url.user.empty()) {
      const std::string_view args[] = {"AUTH", url.password};
      AppendCommand(out_, args);
    } else {
      const std::string_view args[] = {"AUTH", url.user, url.password};
      AppendCommand(out_, args);
    }
    handshake_.push_back("AUTH");
  }
  // Proxies and clusters have only database 0 (the URL parser refuses a db
  // for them; checked again here because SELECT would break a proxy).
  const bool sentinel = url.mode == StoreMode::kSentinel;
  if ((url.mode == StoreMode::kStandalone || sentinel) && url.db >= 0) {
    const std::string db = std::to_string(url.db);
    const std::string_view args[] = {"SELECT", db};
    AppendCommand(out_, args);
    handshake_.push_back("SELECT " + db);
  }
  // A sentinel's master may have become a replica since the sentinels said
  // so (a failover this client has not heard of yet): it must not be
  // written to, so its ROLE is asked before anything else is sent.
  if (sentinel) {
    const std::string_view args[] = {"ROLE"};
    AppendCommand(out_, args);
    handshake_.push_back("ROLE");
  }
  if (url.mode != StoreMode::kProxy) {
    for (const std::string& script : loop_.state().options.preload_scripts) {
      const std::string_view args[] = {"SCRIPT", "LOAD", script};
      AppendCommand(out_, args);
      handshake_.push_back("SCRIPT LOAD");
    }
  }
  if (handshake_.empty()) {
    BecomeReady(now_ns);
    return;
  }
  state_ = State::kHandshake;
  unflushed_commands_ += handshake_.size();
  Flush(now_ns);
}

void Connection::HandleHandshakeReply(const redisReply* reply, int64_t now_ns) {
  const std::string what = std::move(handshake_.front());
  handshake_.pop_front();
  if (reply->type == REDIS_REPLY_ERROR) {
    // The server's message ("WRONGPASS invalid username-password pair ...")
    // never holds the password.
    Fail(what + " failed: " + std::string(reply->str, reply->len), now_ns);
    return;
  }
  if (what == "ROLE" && !IsMasterRole(reply)) {
    // As any failed connection of a sentinel's master, this asks the
    // sentinels again (IoThread::OnConnectionFailed).
    Fail("not the master (ROLE: " + RoleName(reply) + "); asking the sentinels again", now_ns);
    return;
  }
  if (handshake_.empty()) BecomeReady(now_ns);
}

void Connection::BecomeReady(int64_t now_ns) {
  Counters& counters = loop_.state().counters;
  state_ = State::kReady;
  backoff_ns_ = loop_.state().options.reconnect_backoff_initial_ms * 1'000'000;
  Bump(counters.connects);
  if (failed_since_ready_ || ever_ready_) Bump(counters.reconnects);
  counters.connections.fetch_add(1, std::memory_order_relaxed);
  ever_ready_ = true;
  failed_since_ready_ = false;
  WatchOutput(has_output());
  loop_.OnConnectionReady(*this, now_ns);
}

void Connection::ReadAll(int64_t now_ns) {
  char buf[kReadChunk];
  for (int round = 0; fd_ >= 0; ++round) {
    size_t n = 0;
    if (tls_ != nullptr) {
      // TLS: read until OpenSSL wants the socket again (records it has
      // already taken from the socket would not wake epoll).
      switch (tls_->Read(buf, sizeof(buf), &n)) {
        case TlsSession::Io::kOk:
          break;
        case TlsSession::Io::kWantRead:
          tls_read_wants_write_ = false;
          return;
        case TlsSession::Io::kWantWrite:
          tls_read_wants_write_ = true;
          WatchOutput(true);
          return;
        case TlsSession::Io::kClosed:
          Fail(tls_->error().empty() ? "connection closed by the server" : tls_->error(), now_ns);
          return;
        case TlsSession::Io::kError:
          Fail(tls_->error(), now_ns);
          return;
      }
    } else {
      if (round >= kMaxReadsPerEvent) return;
      const ssize_t r = ::recv(fd_, buf, sizeof(buf), 0);
      if (r == 0) {
        Fail("connection closed by the server", now_ns);
        return;
      }
      if (r < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK) return;
        if (errno == EINTR) continue;
        Fail("read: " + Errno(errno), now_ns);
        return;
      }
      n = static_cast<size_t>(r);
    }
    if (redisReaderFeed(reader_.get(), buf, n) != REDIS_OK) {
      Fail("out of memory reading replies", now_ns);
      return;
    }
    ProcessReplies(now_ns);
    // A short plain read emptied the socket.
    if (tls_ == nullptr && n < sizeof(buf)) return;
  }
}

void Connection::ProcessReplies(int64_t now_ns) {
  while (fd_ >= 0) {
    void* raw = nullptr;
    if (redisReaderGetReply(reader_.get(), &raw) != REDIS_OK) {
      const std::string why = reader_->errstr;
      Fail("protocol error in a reply: " + why, now_ns);
      return;
    }
    if (raw == nullptr) return;
    const OwnedReply reply(static_cast<redisReply*>(raw));
    if (!handshake_.empty()) {
      HandleHandshakeReply(reply.get(), now_ns);
      continue;
    }
    if (in_flight_.empty()) {
      Fail("unexpected reply from the server: " + DescribeReply(reply.get()), now_ns);
      return;
    }
    std::unique_ptr<Pending> p = std::move(in_flight_.front());
    in_flight_.pop_front();
    loop_.OnReply(*this, std::move(p), reply.get(), now_ns);
  }
}

void Connection::Enqueue(std::unique_ptr<Pending> p) {
  if (p->asking) {
    static constexpr std::string_view kAsking[] = {"ASKING"};
    AppendCommand(out_, kAsking);
    auto asking = std::make_unique<Pending>();
    asking->kind = PendingKind::kAsking;
    asking->answered = true;
    in_flight_.push_back(std::move(asking));
    ++unflushed_commands_;
  }
  out_ += p->command;
  ++unflushed_commands_;
  p->conn = this;
  in_flight_.push_back(std::move(p));
  loop_.MarkDirty(*this);
}

void Connection::Flush(int64_t now_ns) {
  if (fd_ < 0 || (state_ != State::kReady && state_ != State::kHandshake)) return;
  Counters& counters = loop_.state().counters;
  while (out_pos_ < out_.size()) {
    const char* data = out_.data() + out_pos_;
    const size_t len = out_.size() - out_pos_;
    size_t n = 0;
    if (tls_ != nullptr) {
      switch (tls_->Write(data, len, &n)) {
        case TlsSession::Io::kOk:
          break;
        case TlsSession::Io::kWantWrite:
          WatchOutput(true);
          return;
        case TlsSession::Io::kWantRead:
          // Retried after the next read (EPOLLIN is always watched).
          return;
        case TlsSession::Io::kClosed:
        case TlsSession::Io::kError:
          Fail(tls_->error(), now_ns);
          return;
      }
    } else {
      const ssize_t w = ::send(fd_, data, len, MSG_NOSIGNAL);
      if (w < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK) {
          WatchOutput(true);
          return;
        }
        if (errno == EINTR) continue;
        Fail("write: " + Errno(errno), now_ns);
        return;
      }
      n = static_cast<size_t>(w);
    }
    out_pos_ += n;
    Bump(counters.writes);
    if (unflushed_commands_ > 0) {
      Bump(counters.commands_written, unflushed_commands_);
      unflushed_commands_ = 0;
    }
  }
  out_.clear();
  if (out_.capacity() > kKeepOutputCapacity) std::string().swap(out_);
  out_pos_ = 0;
  WatchOutput(false);
}

bool Connection::CheckTimers(int64_t now_ns) {
  if (state_ == State::kConnecting || state_ == State::kTlsHandshake ||
      state_ == State::kHandshake) {
    if (now_ns >= connect_deadline_ns_) {
      const int64_t ms = loop_.state().options.connect_timeout_ms;
      Fail("connect, TLS and AUTH did not finish within " + std::to_string(ms) + " ms", now_ns);
      return false;
    }
    return true;
  }
  if (state_ != State::kReady || stale_ == 0) return false;
  const ClientOptions& options = loop_.state().options;
  bool reset = stale_ > options.max_stale_per_connection;
  if (!reset) {
    // The oldest request still awaiting its reply: if it timed out long
    // ago, the server is not answering this connection.
    for (const auto& p : in_flight_) {
      if (p->kind == PendingKind::kAsking) continue;
      reset = p->answered && now_ns - p->deadline_ns > options.stale_reset_ms * 1'000'000;
      break;
    }
  }
  if (reset) {
    loop_.OnStaleReset(*this);
    Fail("no reply to " + std::to_string(stale_) + " timed-out requests; connection reset", now_ns);
    return false;
  }
  return true;
}

void Connection::Fail(std::string why, int64_t now_ns) {
  if (state_ == State::kIdle) return;
  const bool was_ready = state_ == State::kReady;
  if (was_ready) loop_.state().counters.connections.fetch_sub(1, std::memory_order_relaxed);
  CloseSocket();
  state_ = State::kIdle;
  failed_since_ready_ = true;
  // Full jitter over the upper half, so that many clients that lost the
  // same server do not come back in lockstep.
  const int64_t half = backoff_ns_ / 2;
  retry_at_ns_ = now_ns + half + static_cast<int64_t>(loop_.NextRandom() % (half + 1));
  const int64_t max_ns = loop_.state().options.reconnect_backoff_max_ms * 1'000'000;
  backoff_ns_ = std::min(backoff_ns_ * 2, max_ns);
  std::deque<std::unique_ptr<Pending>> in_flight;
  in_flight.swap(in_flight_);
  loop_.OnConnectionFailed(*this, was_ready, why, std::move(in_flight), now_ns);
}

std::deque<std::unique_ptr<Pending>> Connection::Shutdown() {
  if (state_ == State::kReady) {
    loop_.state().counters.connections.fetch_sub(1, std::memory_order_relaxed);
  }
  CloseSocket();
  state_ = State::kIdle;
  std::deque<std::unique_ptr<Pending>> in_flight;
  in_flight.swap(in_flight_);
  return in_flight;
}

}  // namespace floodgate::redis::internal
